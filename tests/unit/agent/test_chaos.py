"""Chaos: the agent dies at every step boundary of submit, start, stop, restart and share
change, on the fake node and with real processes (laptop mode), and a new agent on the same
state carries on. After it settles: never two copies of a workload, never a lost one, every
answered submit present, a stop stopped, a share change applied, a crash counted once.

Each operation is first run without a fault to list the points it passes (the hand-written
:data:`~cotenant.agent.faultpoints.POINTS` must be among them); then, for every point passed,
a fresh agent dies there (an :class:`AgentCrash`: nothing after it runs, nothing is flushed
or closed), and once more with every point armed, so that it dies at each in turn."""

from __future__ import annotations

import os
import secrets
import signal
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import pytest

from cotenant.agent.backends import procfs
from cotenant.agent.faultpoints import POINTS, AgentCrash, FaultPoints
from cotenant.agent.state import StateStore, Status, WorkloadRecord

from .harness import ONLINE, Agent, make_agent, make_supervisor
from .test_laptop import Laptop, wait_for

OPS = tuple(POINTS)


class Driver(Protocol):
    points: FaultPoints

    def submit(self, spec: dict[str, Any]) -> None: ...
    def stop(self, name: str) -> None: ...
    def share(self, name: str, pct: int) -> None: ...
    def crash_workload(self, name: str) -> None: ...
    def tick(self) -> None: ...
    def restart_agent(self) -> None: ...
    def copies(self, name: str) -> list[int]: ...
    def record(self, name: str) -> WorkloadRecord | None: ...
    def faults(self, name: str) -> int: ...
    def close(self) -> None: ...


class FakeDriver:
    """The harness's agent on a fake node; processes live on the node across agents."""

    def __init__(self, tmp_path: Path) -> None:
        self.agent: Agent = make_agent(tmp_path)

    @property
    def points(self) -> FaultPoints:
        return self.agent.store.points

    def submit(self, spec: dict[str, Any]) -> None:
        self.agent.submit(spec)

    def stop(self, name: str) -> None:
        self.agent.sup.stop(name, self.agent.clock())

    def share(self, name: str, pct: int) -> None:
        self.agent.sup.restart_for_share(name, pct, self.agent.clock())

    def crash_workload(self, name: str) -> None:
        pid = self.agent.record(name).pid
        assert pid is not None
        self.agent.node.send_signal(pid, signal.SIGKILL)

    def tick(self) -> None:
        self.agent.run(0.5)

    def restart_agent(self) -> None:
        """A crash: the connection dropped, nothing flushed; a new agent on the file."""
        self.agent.store._db.close()
        self.agent.store = StateStore(self.agent.db, monotonic=self.agent.clock)
        self.agent.sup = make_supervisor(self.agent.node, self.agent.store, self.agent.db.parent)

    def copies(self, name: str) -> list[int]:
        return sorted(f.pid for f in self.agent.node.launched() if f.workload == name)

    def record(self, name: str) -> WorkloadRecord | None:
        return self.agent.store.get(name)

    def faults(self, name: str) -> int:
        return sum(n for (w, _), n in self.agent.store.fault_counts().items() if w == name)

    def close(self) -> None:
        self.agent.store.close()


class RealDriver:
    """Laptop mode: fake GPUs, real processes (``sleep``); copies are counted in ``/proc``
    by the launch ids in their environment."""

    def __init__(self, tmp_path: Path) -> None:
        self.laptop = Laptop(tmp_path / "state")

    @property
    def points(self) -> FaultPoints:
        return self.laptop.service.store.points

    def submit(self, spec: dict[str, Any]) -> None:
        self.laptop.service.submit({**spec, "argv": ["sleep", "60"]})

    def stop(self, name: str) -> None:
        self.laptop.service.stop(name)

    def share(self, name: str, pct: int) -> None:
        sup = self.laptop.service.supervisor
        sup.restart_for_share(name, pct, self.laptop.clock())

    def crash_workload(self, name: str) -> None:
        record = self.record(name)
        assert record is not None
        assert record.pid is not None
        node = self.laptop.node
        program = [m for m in node.real.members(record.pid) if m != record.pid]
        os.kill(program[0] if program else record.pid, signal.SIGKILL)
        wait_for(lambda: node.poll(record.pid or 0).state.value != "running", 5.0)

    def tick(self) -> None:
        """The supervisor's tick alone (no co-location controller to change shares)."""
        self.laptop.clock.advance(0.5)
        self.laptop.service.supervisor.tick(self.laptop.clock())
        time.sleep(0.01)

    def restart_agent(self) -> None:
        self.laptop.crash()

    def copies(self, name: str) -> list[int]:
        """The live launches of ``name`` (wrapper and program share one launch id)."""
        launches: dict[str, int] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or procfs.state(int(entry.name)) in (None, "Z"):
                continue
            env = procfs.environ(int(entry.name)) or {}
            if env.get("COTENANT_WORKLOAD") == name and "COTENANT_LAUNCH" in env:
                pid = int(entry.name)
                launch = env["COTENANT_LAUNCH"]
                launches[launch] = min(pid, launches.get(launch, pid))
        return sorted(launches.values())

    def record(self, name: str) -> WorkloadRecord | None:
        return self.laptop.service.store.get(name)

    def faults(self, name: str) -> int:
        counts = self.laptop.service.store.fault_counts()
        return sum(n for (w, _), n in counts.items() if w == name)

    def close(self) -> None:
        self.laptop.close()


DRIVERS: dict[str, Callable[[Path], Driver]] = {"fake": FakeDriver, "real": RealDriver}


class Scenario:
    """One operation on a node that runs an online service and an offline job."""

    def __init__(self, driver: Driver, op: str) -> None:
        self.d, self.op = driver, op
        suffix = secrets.token_hex(3)  # real processes of other tests never match
        self.web, self.train = f"web-{suffix}", f"train-{suffix}"
        self.specs = {
            self.web: {**ONLINE, "name": self.web},
            self.train: {"name": self.train, "role": "offline", "gpu": 0, "sm_share": 50,
                         "argv": ["fake-workload", "--util-pct", "60"]},
        }
        self.answered: set[str] = set()
        self.stopped = False  # asked to stop (set by act)
        self.share = 30 if op == "share change" else None

    def setup(self) -> None:
        self._submit(self.web)
        if self.op not in ("submit", "start"):
            self._submit(self.train)
        self.settle()

    def _submit(self, name: str) -> None:
        self.d.submit(self.specs[name])
        self.answered.add(name)

    def act(self) -> None:
        """The operation, up to the point where it is done (ticks included)."""
        if self.op in ("submit", "start"):
            self._submit(self.train)
        elif self.op == "stop":
            self.stopped = True  # the stop's intent is written before its first point
            self.d.stop(self.train)
        elif self.op == "restart":
            self.d.crash_workload(self.train)
        else:
            self.d.share(self.train, 30)
        for _ in range(6):
            self.tick()

    def tick(self) -> None:
        """One tick, then never two copies of a workload: also not for a moment (one that a
        later recovery kills fails the test too)."""
        self.d.tick()
        for name in self.specs:
            copies = self.d.copies(name)
            assert len(copies) <= 1, f"{name}: two copies {copies} during {self.op}"

    def settle(self) -> None:
        deadline = time.monotonic() + 15.0
        while time.monotonic() < deadline:
            self.tick()
            if self.settled():
                return

    def settled(self) -> bool:
        """Every workload with a row (its submit answered, or only recorded) runs, or is
        stopped as asked, or is reported failed; one without a row has no process."""
        for name in self.specs:
            record = self.d.record(name)
            if record is None:
                if name in self.answered or self.d.copies(name):
                    return False
                continue
            if record.status is Status.FAILED and record.last_exit:
                continue  # reported, with why
            want = Status.STOPPED if name == self.train and self.stopped else Status.RUNNING
            if record.status is not want:
                return False
            if len(self.d.copies(name)) != (0 if want is Status.STOPPED else 1):
                return False
        return True

    def check(self) -> None:
        """Never two copies, never a lost workload, every answered submit present, and every
        recorded one (answered or not) run or reported, never left pending."""
        self.settle()
        for name in self.specs:
            record = self.d.record(name)
            copies = self.d.copies(name)
            assert len(copies) <= 1, f"{name}: two copies {copies}"
            if name in self.answered:
                assert record is not None, f"{name}: submit answered, then lost"
            if record is None:
                assert copies == []  # an unrecorded submit: nothing runs for it
                continue
            if record.status is Status.FAILED:
                assert record.last_exit, record  # reported, with why
                assert copies == [], record
                continue
            if name == self.train and self.stopped:
                assert record.status is Status.STOPPED, record
                assert copies == [], record
                continue
            assert record.status is Status.RUNNING, record  # never pending for good
            assert copies == [record.pid], (record, copies)
        train = self.d.record(self.train)
        if self.share is not None and train is not None:
            assert train.applied_pct == self.share
        if self.op == "restart":
            assert self.d.faults(self.train) == 1  # the crash, counted once


def points_of(op: str, tmp_path: Path) -> list[str]:
    """The points ``op`` passes on the fake node, in order, without a fault."""
    driver = FakeDriver(tmp_path)
    scenario = Scenario(driver, op)
    scenario.setup()
    driver.points.passed.clear()
    scenario.act()
    scenario.check()
    passed = list(dict.fromkeys(driver.points.passed))
    driver.close()
    return [p for p in passed if p != "store.write"]


def run_crashes(mode: str, op: str, armed: list[str], tmp_path: Path,
                disk_full: bool = False) -> int:
    """Arm ``armed`` (each once), run ``op``; at each crash a new agent on the same state
    (with the points not yet hit armed again) carries on. With ``disk_full`` every write of
    the first agent fails from the operation on (its successors' succeed). The number of
    crashes."""
    driver = DRIVERS[mode](tmp_path)
    try:
        scenario = Scenario(driver, op)
        scenario.setup()
        if disk_full:
            scenario.share = None  # not made: its intent cannot be written
            driver.points.arm("store.write", lambda: sqlite3.OperationalError(
                "database or disk is full"), times=-1)
        left = list(armed)
        crashes = 0
        def first() -> None:
            scenario.act()
            scenario.settle()  # real processes: the restart may come after act's ticks

        step: Callable[[], None] = first
        while True:
            for point in left:
                driver.points.arm(point)
            try:
                step()
            except AgentCrash:
                crashes += 1
                left.remove(driver.points.passed[-1])  # the point it died at
                driver.restart_agent()
                step = scenario.settle
                continue
            break
        for point in left:  # not reached by this operation (another's exit may pass it)
            driver.points.disarm(point)
        scenario.check()
        return crashes
    finally:
        driver.close()


@pytest.fixture(scope="module")
def op_points(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    return {op: points_of(op, tmp_path_factory.mktemp(op.replace(" ", "-"))) for op in OPS}


@pytest.mark.parametrize("op", OPS)
def test_each_operation_passes_its_points(op: str, op_points: dict[str, list[str]]) -> None:
    assert set(POINTS[op]) <= set(op_points[op]), op_points[op]


@pytest.mark.parametrize("mode", ["fake", "real"])
@pytest.mark.parametrize("op", OPS)
def test_a_crash_at_each_point_loses_and_doubles_nothing(
        mode: str, op: str, op_points: dict[str, list[str]], tmp_path: Path) -> None:
    if mode == "real" and not procfs.available():
        pytest.skip("real processes need Linux /proc")
    for i, point in enumerate(op_points[op]):
        assert run_crashes(mode, op, [point], tmp_path / str(i)) == 1, point


@pytest.mark.parametrize("mode", ["fake", "real"])
@pytest.mark.parametrize("op", OPS)
def test_a_crash_at_every_point_in_turn_loses_and_doubles_nothing(
        mode: str, op: str, op_points: dict[str, list[str]], tmp_path: Path) -> None:
    """Every point armed once: the agent dies at each one it reaches, one after another."""
    if mode == "real" and not procfs.available():
        pytest.skip("real processes need Linux /proc")
    assert run_crashes(mode, op, op_points[op], tmp_path) >= 1


@pytest.mark.parametrize("op", ["restart", "share change"])
def test_a_crash_while_the_disk_is_full_loses_and_doubles_nothing(
        op: str, op_points: dict[str, list[str]], tmp_path: Path) -> None:
    """The agent runs from memory while every write fails (its starts go ahead: the launch
    id in the process's environment is the record; a share change does not, its intent
    unwritten), then dies at a step boundary; the next agent, whose disk has room again,
    finds the database behind what ran."""
    crashes = [run_crashes("fake", op, [point], tmp_path / str(i), disk_full=True)
               for i, point in enumerate(op_points[op])]
    # a restart after a crash goes through every step; a share change is not made at all
    assert crashes == [1 if op == "restart" else 0] * len(crashes)
