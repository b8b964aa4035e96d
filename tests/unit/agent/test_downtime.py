"""The agent measures how long an offline job is down per start and per share change."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cotenant.agent.backends import FakeNode, ManualClock
from cotenant.agent.backends.base import GpuInfo, GpuProcess, daemon_samples
from cotenant.agent.downtime import SHARE_CHANGE, START, Downtime, DowntimeMeter
from cotenant.agent.latency import INLINE
from cotenant.agent.service import AgentService
from cotenant.errors import InputError
from cotenant.policies.colocation import COLOCATION

ONLINE = {"name": "web", "argv": ["fake-workload", "--mem-mib", "4000", "--util-pct", "30",
                                  "--model", "resnet50"],
          "role": "online", "gpu": 0, "model": "resnet50", "slo_ms": 200}
# checkpoints for 5 s on SIGTERM; shows no SM utilisation for 12 s after it starts
OFFLINE = {"name": "train", "role": "offline", "gpu": 0, "sm_share": 50,
           "argv": ["fake-workload", "--mem-mib", "8000", "--util-pct", "60",
                    "--term-delay-s", "5", "--warmup-s", "12"]}


def gpu_with(*procs: GpuProcess) -> GpuInfo:
    """GPU 0 of an A100 node running ``procs``."""
    return GpuInfo(0, "GPU-x", "A100-40GB", 40960, 8000, 50.0, None, False, procs)


POLICY = COLOCATION.create("cotenant-pause")
"""The agent's default: at 30 % load the service needs less than half the SMs, so the job
keeps its own 50 % until the load has been watched a minute; at 70 % it needs more at once."""


@dataclass
class Node:
    service: AgentService
    fake: FakeNode
    clock: ManualClock

    def run(self, seconds: float) -> None:
        for _ in range(round(seconds)):
            self.clock.advance(1.0)
            self.service.tick()

    def pid(self, name: str) -> int:
        record = self.service.store.get(name)
        assert record is not None
        assert record.pid is not None
        return record.pid

    def measured(self) -> list[str]:
        return [e.detail for e in self.service.store.events("train") if e.kind == "up again"]


def start_then_change_share(node: Node) -> None:
    """Both start (train is busy 12 s later); at 16 s the online load rises to 70 %, so the
    next tick restarts train with a smaller cap."""
    node.service.submit(ONLINE)
    node.service.submit(OFFLINE)
    node.service.tick()
    node.run(15)
    node.fake.set_util(node.pid("web"), 70.0)


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    clock = ManualClock(1000.0)
    fake = FakeNode.build("A100-40GB", 1, clock, per_client_util=True)
    service = AgentService(fake, tmp_path, POLICY, clock=clock, executor=INLINE)
    try:
        yield Node(service, fake, clock)
    finally:
        service.close()


def test_a_start_is_down_until_the_gpu_shows_the_job_busy(node: Node) -> None:
    node.service.submit(ONLINE)  # load 0.3: offline keeps its own 50 for now
    node.service.submit(OFFLINE)
    node.service.tick()  # both start
    node.run(11)
    assert node.measured() == []  # still warming up
    node.run(1)
    assert node.measured() == ["start: 12.0 s"]
    summary = node.service.downtime()
    assert summary["busy_pct"] == 10.0
    assert summary["kinds"] == {START: {"count": 1, "median_s": 12.0, "p90_s": 12.0,
                                        "max_s": 12.0, "simulator_option": "world.offlineStartS"}}


def test_a_share_change_is_down_from_the_sigterm_to_the_successor_busy(node: Node) -> None:
    node.service.submit(ONLINE)
    node.service.submit(OFFLINE)
    node.service.tick()
    node.run(15)
    first = node.pid("train")
    node.fake.set_util(node.pid("web"), 70.0)  # online needs more: offline restarted
    node.run(1)
    sigterm = node.clock()
    node.run(16)
    assert node.measured() == ["start: 12.0 s"]
    node.run(1)  # 5 s checkpoint + 12 s warm-up after the SIGTERM
    assert node.pid("train") != first
    assert node.measured() == ["start: 12.0 s", "share change: 17.0 s"]
    assert node.clock() - sigterm == 17.0
    kinds = node.service.downtime()["kinds"]
    assert kinds[SHARE_CHANGE]["median_s"] == 17.0
    assert kinds[SHARE_CHANGE]["simulator_option"] == "world.shareChangeS"
    text = node.service.metrics_text().decode()
    change = 'cotenant_offline_downtime_seconds_bucket{bound="exact",kind="share change",'
    assert change + 'le="20.0"} 1.0' in text
    assert change + 'le="15.0"} 0.0' in text
    assert 'cotenant_offline_downtime_seconds_count{bound="exact",kind="start"} 1.0' in text


def test_a_crash_while_warming_up_is_no_share_change_measurement(node: Node) -> None:
    node.service.submit(ONLINE)
    node.service.submit({**OFFLINE, "argv": [*OFFLINE["argv"], "--crash-at-s", "8"]})
    node.service.tick()
    node.run(40)  # crashes at 8 s every time, before it is ever busy
    assert node.measured() == []
    assert node.service.downtime()["kinds"] == {}


def test_a_paused_or_stopped_job_is_not_measured(node: Node) -> None:
    node.service.submit(ONLINE)
    node.service.submit(OFFLINE)
    node.service.tick()
    node.run(2)
    sup = node.service.supervisor
    assert sup.pause("train", node.clock(), node.clock() + 30.0)
    node.run(40)  # the pause would have stretched the start: dropped
    assert node.measured() == []
    node.service.stop("train")
    node.run(5)
    assert node.service.downtime()["kinds"] == {}


def test_a_job_without_utilisation_samples_is_given_up_and_logged(tmp_path: Path) -> None:
    meter = DowntimeMeter(timeout_s=30.0)
    meter.started("train", 7, 0.0)
    gpu = gpu_with(GpuProcess(7, 8000, None))
    assert meter.observe([gpu], {"train"}, (), 30.0) == ([], [])
    assert meter.observe([gpu], {"train"}, (), 31.0) == ([], ["train"])
    assert meter.observe([gpu], {"train"}, (), 32.0) == ([], [])  # logged once


def test_a_second_share_change_before_busy_is_measured_from_its_own_sigterm() -> None:
    """Each sample is one change's cost, as the simulator charges per change."""
    meter = DowntimeMeter()
    meter.stopped_for_share("train", 10.0)
    meter.started("train", 7, 15.0)
    meter.stopped_for_share("train", 18.0)  # changed again before it was busy
    meter.started("train", 8, 22.0)
    busy = gpu_with(GpuProcess(8, 8000, 55.0))
    done, _ = meter.observe([busy], {"train"}, (), 40.0)
    assert [(d.kind, d.seconds) for d in done] == [(SHARE_CHANGE, 22.0)]


def test_quantiles_over_many_measurements() -> None:
    meter = DowntimeMeter()
    for i, pid in enumerate(range(100, 111)):
        meter.started(f"job{i}", pid, 0.0)
    procs = tuple(GpuProcess(pid, 100, 50.0) for pid in range(100, 111))
    gpu = gpu_with(*procs)
    names = {f"job{i}" for i in range(11)}
    meter.observe([gpu], names, (), 10.0)
    for i, pid in enumerate(range(200, 211)):
        meter.started(f"job{i}", pid, 100.0)
    gpu2 = gpu_with(*(GpuProcess(pid, 100, 50.0) for pid in range(200, 211)))
    meter.observe([gpu2], names, (), 130.0)
    summary = meter.summary()[START]
    assert summary["count"] == 22
    assert summary["median_s"] == 20.0  # 11 of 10 s and 11 of 30 s
    assert summary["p90_s"] == 30.0
    assert summary["max_s"] == 30.0


@pytest.mark.parametrize("busy", [0.0, -1.0, 101.0, float("nan")])
def test_a_busy_threshold_outside_0_100_is_refused(busy: float) -> None:
    with pytest.raises(InputError, match="downtime busy_pct"):
        DowntimeMeter(busy_pct=busy)


def test_a_guard_hold_on_the_gpu_is_no_part_of_a_restart(node: Node) -> None:
    start_then_change_share(node)
    node.run(1)  # SIGTERM for the share change
    node.service.supervisor.hold_offline(0, node.clock() + 120.0)  # the guard evicts
    node.run(150)
    assert node.measured() == ["start: 12.0 s", "start: 12.0 s"]  # after the hold: a start


def test_a_job_whose_workers_do_the_gpu_work_is_busy_when_a_worker_is() -> None:
    """torchrun's leader runs no kernel; its workers (found by ``members``) do."""
    meter = DowntimeMeter()
    meter.started("train", 7, 0.0)
    gpu = gpu_with(GpuProcess(8, 8000, 70.0), GpuProcess(9, 100, 0.0))
    assert meter.observe([gpu], {"train"}, (), 5.0) == ([], [])  # 8 is nobody's worker
    done, _ = meter.observe([gpu], {"train"}, (), 6.0, lambda pid: [pid, 8] if pid == 7 else [])
    assert [(d.kind, d.seconds) for d in done] == [(START, 6.0)]


def test_an_agent_restart_during_a_share_change_measures_no_start(
    node: Node, tmp_path: Path
) -> None:
    """The successor of a share change a previous agent began is not a start sample."""
    start_then_change_share(node)
    node.run(1)  # SIGTERM for the share change; the agent dies during the checkpoint
    node.service.close()
    node.service = AgentService(node.fake, tmp_path, POLICY, clock=node.clock,
                                executor=INLINE)
    node.run(30)
    assert node.measured() == ["start: 12.0 s"]  # the first agent's; nothing after
    node.fake.set_util(node.pid("web"), 10.0)  # a change this agent makes is measured:
    node.run(100)  # more SMs for train once the low load has lasted a window
    assert node.measured()[-1] == "share change: 17.0 s"


def test_a_fault_during_the_checkpoint_is_no_share_change_sample(node: Node) -> None:
    start_then_change_share(node)
    node.run(2)  # SIGTERM, checkpointing
    node.fake.kill_daemon(0)  # its MPS server dies under it: a fault, not the change's cost
    node.run(30)
    assert "share change" not in " ".join(node.measured())
    assert node.measured() == ["start: 12.0 s", "start: 12.0 s"]  # the fault's restart


def test_a_wall_clock_step_back_keeps_an_open_downtime_as_long() -> None:
    meter = DowntimeMeter()
    meter.stopped_for_share("train", 100.0)
    meter.shift(60.0)  # the clock went back a minute after the SIGTERM
    meter.started("train", 7, 45.0)
    busy = gpu_with(GpuProcess(7, 8000, 55.0))
    done, _ = meter.observe([busy], {"train"}, (), 57.0)
    assert [(d.kind, d.seconds) for d in done] == [(SHARE_CHANGE, 17.0)]


def test_a_hold_on_another_gpu_leaves_a_start_measured(tmp_path: Path) -> None:
    clock = ManualClock(1000.0)
    fake = FakeNode.build("A100-40GB", 2, clock, per_client_util=True)
    service = AgentService(fake, tmp_path, POLICY, clock=clock, executor=INLINE)
    node = Node(service, fake, clock)
    try:
        service.submit(OFFLINE)
        service.tick()
        node.run(2)
        service.supervisor.hold_offline(1, clock() + 60.0)  # the other GPU
        node.run(12)
        assert node.measured() == ["start: 12.0 s"]
    finally:
        service.close()


def test_an_mps_client_without_a_sample_of_its_own_gets_its_daemons() -> None:
    server = GpuProcess(9, 66, 40.0, mps_server=True)
    sampled = GpuProcess(1, 100, 7.0, mps_client=True)
    unsampled = GpuProcess(2, 100, None, mps_client=True)
    outsider = GpuProcess(3, 100, None)  # no MPS client: nothing to borrow
    serverless = GpuInfo(1, "GPU-y", "A100-40GB", 40960, 100, 50.0, None, False,
                         (GpuProcess(4, 100, None, mps_client=True),))
    assert daemon_samples([gpu_with(server, sampled, unsampled, outsider), serverless]) == {
        2: 40.0}


def daemon_gpu(served: float, *clients: int) -> GpuInfo:
    """GPU 0 with an MPS server at ``served`` % and ``clients`` without samples."""
    return gpu_with(GpuProcess(9, 66, served, mps_server=True),
                    *(GpuProcess(pid, 100, None, mps_client=True) for pid in clients))


def test_a_jobs_daemon_sample_counts_once_and_is_a_lower_bound() -> None:
    """A job of three MPS clients (10-12) beside an online client (20), the daemon at 4 %:
    4 %, not three times 4 %, so the job is not yet busy; at 40 % it is, as a lower bound."""
    meter = DowntimeMeter()
    meter.started("train", 10, 0.0)
    group = {10: [10, 11, 12]}.__getitem__
    assert meter.observe([daemon_gpu(4.0, 10, 11, 12, 20)], {"train"}, [], 5.0, group) == (
        [], [])
    done, _ = meter.observe([daemon_gpu(40.0, 10, 11, 12, 20)], {"train"}, [], 7.0, group)
    assert done == [Downtime("train", START, 7.0, 7.0, lower_bound=True)]
    assert meter.summary() == {}
    assert meter.summary(lower_bounds=True)[START]["median_s"] == 7.0


def test_a_job_alone_on_its_daemon_is_still_a_lower_bound() -> None:
    """The server's newest sample can predate the job (NVML keeps it across its clients)."""
    meter = DowntimeMeter()
    meter.started("train", 10, 0.0)
    done, _ = meter.observe([daemon_gpu(40.0, 10, 11)], {"train"}, [], 3.0,
                            {10: [10, 11]}.__getitem__)
    assert done == [Downtime("train", START, 3.0, 3.0, lower_bound=True)]
    assert meter.summary() == {}


def test_a_job_on_two_gpus_is_as_busy_as_its_busiest_daemon() -> None:
    meter = DowntimeMeter()
    meter.started("train", 10, 0.0)
    other = GpuInfo(1, "GPU-y", "A100-40GB", 40960, 100, 50.0, None, False,
                    (GpuProcess(8, 66, 30.0, mps_server=True),
                     GpuProcess(11, 100, None, mps_client=True)))
    done, _ = meter.observe([daemon_gpu(5.0, 10), other], {"train"}, [], 2.0,
                            {10: [10, 11]}.__getitem__)
    assert done == [Downtime("train", START, 2.0, 2.0, lower_bound=True)]


@pytest.fixture
def nvml_like(tmp_path: Path) -> Iterator[Node]:
    """A node whose MPS clients' SM use is sampled on their server, as NVML does."""
    clock = ManualClock(1000.0)
    fake = FakeNode.build("A100-40GB", 1, clock)
    service = AgentService(fake, tmp_path, POLICY, clock=clock, executor=INLINE)
    try:
        yield Node(service, fake, clock)
    finally:
        service.close()


def test_under_mps_a_start_with_no_other_busy_client_ends_when_the_daemon_is_busy(
    nvml_like: Node,
) -> None:
    nvml_like.service.submit(OFFLINE)
    nvml_like.service.tick()
    nvml_like.run(11)
    assert nvml_like.measured() == []  # the daemon idle, the job warming up
    nvml_like.run(1)
    assert nvml_like.measured() == ["start: 12.0 s (a lower bound: read on its MPS daemon)"]


def test_under_mps_a_start_beside_a_busy_online_service_ends_when_the_job_is_listed(
    nvml_like: Node,
) -> None:
    """The lower bound: the daemon is busy with the online service's work (30 %) before the
    job has run a step, and the job is on NVML's list from its start."""
    nvml_like.service.submit(ONLINE)
    nvml_like.service.submit(OFFLINE)
    nvml_like.service.tick()
    nvml_like.run(1)
    assert nvml_like.measured() == [
        "start: 0.0 s (a lower bound: read on its MPS daemon)"]
    assert nvml_like.service.downtime()["kinds"] == {}
    assert nvml_like.service.downtime()["lower_bounds"][START]["count"] == 1
    text = nvml_like.service.metrics_text().decode()
    assert 'cotenant_offline_downtime_seconds_count{bound="lower",kind="start"} 1.0' in text
