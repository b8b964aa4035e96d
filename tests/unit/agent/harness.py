"""A small agent on a fake node, for the supervisor, fault and share tests."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cotenant.agent.backends import FakeNode, ManualClock
from cotenant.agent.mps import MpsManager
from cotenant.agent.spec import WorkloadSpec
from cotenant.agent.state import StateStore, Status, WorkloadRecord
from cotenant.agent.supervisor import Supervisor
from cotenant.policies.colocation.recovery import Recovery

ONLINE = {"name": "web", "argv": ["fake-workload", "--mem-mib", "4000", "--util-pct", "30",
                                  "--model", "resnet50"],
          "role": "online", "gpu": 0, "model": "resnet50", "slo_ms": 50}
OFFLINE = {"name": "train", "argv": ["fake-workload", "--mem-mib", "8000", "--util-pct", "60"],
           "role": "offline", "gpu": 0, "mem_limit_mib": 10000, "sm_share": 50}


@dataclass
class Agent:
    node: FakeNode
    clock: ManualClock
    store: StateStore
    sup: Supervisor
    db: Path

    def submit(self, data: dict[str, object]) -> WorkloadRecord:
        return self.sup.submit(WorkloadSpec.from_dict(data), self.clock())

    def run(self, seconds: float, step: float = 0.5) -> None:
        """Advance the clock by ``seconds`` in ``step`` s, ticking after each step."""
        self.sup.tick(self.clock())
        for _ in range(round(seconds / step)):
            self.clock.advance(step)
            self.sup.tick(self.clock())

    def record(self, name: str) -> WorkloadRecord:
        record = self.store.get(name)
        assert record is not None
        return record

    def status(self, name: str) -> Status:
        return self.record(name).status

    def restart_agent(self) -> None:
        """The agent process dies and comes back: new store connection, new supervisor."""
        self.store.close()
        self.store = StateStore(self.db)
        self.sup = make_supervisor(self.node, self.store, self.db.parent)

    def kinds(self, name: str) -> list[str]:
        return [e.kind for e in self.store.events(name)]


RECOVERY = Recovery(backoff_base_s=1.0, backoff_factor=2.0, backoff_cap_s=30.0,
                    graceful_signals=True, quarantine_s=2.0)
"""Short waits for the tests: backoffs of 1, 2, 4 ... s, a 2 s quarantine after an XID."""


def make_supervisor(node: FakeNode, store: StateStore, state_dir: Path) -> Supervisor:
    return Supervisor(node, store, MpsManager(node, state_dir), recovery=RECOVERY)


def make_agent(tmp_path: Path, gpus: int = 2) -> Agent:
    clock = ManualClock(1000.0)
    node = FakeNode.build("A100-40GB", gpus, clock)
    db = tmp_path / "agent.db"
    store = StateStore(db)
    return Agent(node, clock, store, make_supervisor(node, store, tmp_path), db)
