"""A small agent on a fake node, for the supervisor, fault and co-location tests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cotenant.agent.backends import FakeNode, ManualClock
from cotenant.agent.colocation import (
    ColocationController,
    Enforcer,
    GpuAction,
    NodeObserver,
    Rows,
)
from cotenant.agent.mps import MpsManager
from cotenant.agent.spec import WorkloadSpec
from cotenant.agent.state import StateStore, Status, WorkloadRecord
from cotenant.agent.supervisor import Supervisor
from cotenant.perf.interference import interference
from cotenant.policies.colocation import COLOCATION, ColocationPolicy, GuardSettings
from cotenant.policies.colocation.recovery import Recovery

ONLINE = {"name": "web", "argv": ["fake-workload", "--mem-mib", "4000", "--util-pct", "30",
                                  "--model", "resnet50"],
          "role": "online", "gpu": 0, "model": "resnet50", "slo_ms": 50}
OFFLINE = {"name": "train", "argv": ["fake-workload", "--mem-mib", "8000", "--util-pct", "60"],
           "role": "offline", "gpu": 0, "mem_limit_mib": 10000, "sm_share": 50}


class WallClock(ManualClock):
    """The wall clock of a test agent, and (``monotonic``) its monotonic clock: both move
    with ``advance``; ``step`` moves the wall clock alone, as NTP does."""

    def __init__(self, start: float = 0.0) -> None:
        super().__init__(start)
        self.stepped = 0.0

    def step(self, seconds: float) -> float:
        self.stepped += seconds
        return self.advance(seconds)

    def monotonic(self) -> float:
        return self.now - self.stepped


@dataclass
class Agent:
    node: FakeNode
    clock: WallClock
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

    def run_until_running(self, name: str, seconds: float) -> bool:
        """Tick until workload ``name`` runs, at most ``seconds``."""
        for _ in range(round(seconds / 0.5)):
            if self.status(name) is Status.RUNNING:
                return True
            self.run(0.5)
        return self.status(name) is Status.RUNNING

    def status(self, name: str) -> Status:
        return self.record(name).status

    def restart_agent(self) -> None:
        """The agent process dies and comes back: new store connection, new supervisor."""
        self.store.close()
        self.store = StateStore(self.db, monotonic=monotonic_of(self.clock))
        self.sup = make_supervisor(self.node, self.store, self.db.parent)

    def kinds(self, name: str) -> list[str]:
        return [e.kind for e in self.store.events(name)]


RECOVERY = Recovery(backoff_base_s=1.0, backoff_factor=2.0, backoff_cap_s=30.0,
                    graceful_signals=True, quarantine_s=2.0)
"""Short waits for the tests: backoffs of 1, 2, 4 ... s, a 2 s quarantine after an XID."""


def monotonic_of(clock: Callable[[], float]) -> Callable[[], float]:
    """The monotonic clock that goes with the wall clock ``clock``."""
    return clock.monotonic if isinstance(clock, WallClock) else clock


def make_supervisor(node: FakeNode, store: StateStore, state_dir: Path) -> Supervisor:
    return Supervisor(node, store, MpsManager(node, state_dir), recovery=RECOVERY,
                      monotonic=monotonic_of(node.clock))


def make_agent(tmp_path: Path, gpus: int = 2, per_client_util: bool = True) -> Agent:
    """An agent on a fake node that samples each MPS client's SM use on its own pid (the
    logic under test reads it), unless ``per_client_util`` is False: then as NVML does."""
    clock = WallClock(1000.0)
    node = FakeNode.build("A100-40GB", gpus, clock, per_client_util=per_client_util)
    db = tmp_path / "agent.db"
    store = StateStore(db, monotonic=clock.monotonic)  # storage retries on the test's clock too
    return Agent(node, clock, store, make_supervisor(node, store, tmp_path), db)


def fixed(share: int = 50, *, guard: bool = True, **settings: Any) -> ColocationPolicy:
    """MPS with a fixed online ``share``, with the guard that pauses first (``settings``
    change it) unless ``guard`` is False."""
    return COLOCATION.create("mps-fixed", share=share,
                             guard=GuardSettings(**settings) if guard else False)


WEB = {**ONLINE, "slo_ms": 200}
"""resnet50 at 30 % load with an SLO the policy can keep beside a co-runner (at 50 ms no
share would: the guard would evict at once)."""


class Node:
    """An agent on a fake node: its supervisor and co-location controller, ticked together
    as the service ticks them; the workloads ``submit`` ted and started."""

    def __init__(self, tmp_path: Path, policy: ColocationPolicy,
                 *submit: dict[str, object], gpus: int = 2,
                 per_client_util: bool = True) -> None:
        self.agent = make_agent(tmp_path, gpus, per_client_util)
        self.policy = policy
        self.observer = NodeObserver(self.agent.sup, self.agent.node, policy, interference())
        self.ctl = ColocationController(policy, self.observer, Enforcer(self.agent.sup))
        self.actions: list[GpuAction] = []
        for spec in submit:
            self.agent.submit(spec)
        self.run(1.0)  # started, and their loads sampled once

    def run(self, seconds: float, step: float = 0.5) -> None:
        for _ in range(round(seconds / step)):
            now = self.agent.clock.advance(step)
            self.actions += self.ctl.decide(now)
            self.agent.sup.tick(now)

    def report(self, p99_ms: float, name: str = "web") -> None:
        """A pushed p99 report, decided on at the next tick."""
        self.observer.reports.report(name, p99_ms, self.agent.clock())

    def rows(self) -> Rows:
        """The rows of the last decision's samples, the reports as they are now."""
        return self.observer.rows(self.agent.clock())

    def share(self, gpu: int = 0) -> int | None:
        return self.ctl.shares.get(gpu)

    def train(self, name: str = "train") -> tuple[Status, int | None]:
        record = self.agent.record(name)
        return record.status, record.applied_pct

    def pid(self, name: str) -> int:
        pid = self.agent.record(name).pid
        assert pid is not None
        return pid

    def share_changes(self, name: str = "train") -> int:
        return self.agent.kinds(name).count("share change")
