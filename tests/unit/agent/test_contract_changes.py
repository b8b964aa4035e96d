"""The fake node's MIG and MPS rules, run the same way against NVML so the fake cannot drift.

Each case runs on the fake (always, in CI) and on NVML (marker ``gpu``). Against NVML these
cases *change* the GPU: they create and destroy MIG instances on GPU 0 and crash a CUDA client
of an MPS daemon, so they also need ``COTENANT_GPU_WRITE=1`` and, for MIG, a GPU 0 in MIG mode
with no instances (they leave it so). What each case checks:

* MIG read-back: the instances created are the layout read back (a non-empty one);
* MIG creation order (NVIDIA's MIG user guide): on a 7-slice GPU, 1g, 1g, 2g created first
  leave no room for a 3g, while 3g first leaves room for all four;
* a start the profile does not allow is refused, a permanent error;
* the "in use" rule: an instance with a process on it is not destroyed (a temporary error);
* where NVML samples an MPS client's SM use: on its server's pid, not the client's (the
  agent's downtime meter reads a client as busy as its daemon for this);
* MPS fault semantics: a client's fatal fault reaches the daemon's other clients, a process
  outside the daemon is not touched, and once the faulted clients have exited the daemon
  takes new ones. (The fake also refuses a new client at spawn while faulted ones remain;
  real MPS holds it inside CUDA, which this suite does not observe.)
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cotenant.agent.backends import (
    BackendFeature,
    DaemonConfig,
    FakeNode,
    ManualClock,
    NodeBackend,
    ProcState,
    open_backend,
)
from cotenant.errors import CotenantError, PermanentError, TemporaryError
from cotenant.model.gpu import CATALOG
from cotenant.model.mig import MigGeometry, MigProfile

from .conftest import nvml_gpu_count

BACKENDS = [
    pytest.param("fake", id="fake"),
    pytest.param("nvml", id="nvml", marks=pytest.mark.gpu),
]

HOLD_PY = """
import sys, time, torch
torch.ones(1, device="cuda")
open(sys.argv[1], "w").close()  # the CUDA context is up
time.sleep(600)
"""
LOOP_PY = """
import time, torch
x = torch.ones(1, device="cuda")
while True:  # a client notices a fault at its next CUDA call
    x.add_(1)
    torch.cuda.synchronize()
    time.sleep(0.1)
"""
BUSY_PY = """
import torch
x = torch.randn(4096, 4096, device="cuda")
while True:
    (x @ x).sum().item()
"""
CRASH_PY = """
import time, torch, triton, triton.language as tl
@triton.jit
def poke(p):
    tl.store(p + (1 << 40), 1.0)  # far outside any allocation: an illegal address
x = torch.ones(1, device="cuda")
time.sleep(2)
poke[(1,)](x)
torch.cuda.synchronize()
"""


class Node:
    """A backend and how to let time pass on it (the fake's clock, or real seconds)."""

    def __init__(self, backend: NodeBackend, tmp: Path) -> None:
        self.backend, self.tmp = backend, tmp
        self.fake = isinstance(backend, FakeNode)

    def wait(self, seconds: float) -> None:
        if isinstance(self.backend, FakeNode):
            assert isinstance(self.backend.clock, ManualClock)
            self.backend.clock.advance(seconds)
        else:
            time.sleep(seconds)

    def until(self, done: Callable[[], bool], seconds: float) -> bool:
        for _ in range(int(seconds / 0.5)):
            if done():
                return True
            self.wait(0.5)
        return done()

    def kill_all(self) -> None:
        """SIGKILL every process started here and wait until each has exited (reaped)."""
        pids = self.backend.pids()
        for pid in pids:
            self.backend.send_signal(pid, 9)
        assert self.until(lambda: all(self.backend.poll(pid).state is not ProcState.RUNNING
                                      for pid in pids), 30)

    def argv(self, fake: list[str], real: str, *args: str) -> list[str]:
        return fake if self.fake else [sys.executable, "-c", real, *args]


@pytest.fixture(params=BACKENDS)
def node(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Node]:
    if request.param == "nvml":
        if nvml_gpu_count() == 0:
            pytest.skip("no NVIDIA GPU/NVML here")
        if os.environ.get("COTENANT_GPU_WRITE") != "1":
            pytest.skip("changes GPU 0: set COTENANT_GPU_WRITE=1 to run")
        backend = open_backend("nvml", state_dir=tmp_path)
    else:
        backend = open_backend("fake", gpus="A100-40GB:1", state_dir=tmp_path,
                               clock=ManualClock(1000.0), fake_mig=True)
    node = Node(backend, tmp_path)
    yield node
    node.kill_all()


def mig_geometry(node: Node) -> MigGeometry:
    if BackendFeature.MIG not in node.backend.features():
        pytest.skip("GPU 0 is not in MIG mode")
    geometry = CATALOG.get(node.backend.gpu(0).model).mig
    assert geometry is not None
    if node.backend.mig_layout(0).placements:
        pytest.skip("GPU 0 has MIG instances; these cases need it empty")
    return geometry


def by_slices(geometry: MigGeometry, slices: int) -> MigProfile:
    """The plain profile (no media extensions, single memory) of ``slices`` compute slices."""
    return min((p for p in geometry.profiles if p.compute_slices == slices
                and not p.media_extensions), key=lambda p: p.memory_slices)


@pytest.fixture
def clean_mig(node: Node) -> Iterator[MigGeometry]:
    geometry = mig_geometry(node)
    yield geometry
    node.kill_all()
    for placement in node.backend.mig_layout(0).placements:
        node.backend.destroy_instance(0, placement)


def test_mig_layout_reads_back_what_was_created(node: Node, clean_mig: MigGeometry) -> None:
    big = by_slices(clean_mig, clean_mig.compute_slices // 2)  # 3g on A100/H100, 2g on A30
    one = by_slices(clean_mig, 1)
    made = [node.backend.create_instance(0, big.name, big.starts[0]),
            node.backend.create_instance(0, one.name, one.starts[-1])]
    layout = node.backend.mig_layout(0)
    assert sorted(map(str, layout.placements)) == sorted(map(str, made))
    assert len(layout.placements) == 2
    clean_mig.check(layout.placements)
    devices = node.backend.mig_devices(0)
    assert sorted(str(d.placement) for d in devices) == sorted(map(str, made))
    assert len({d.uuid for d in devices}) == 2


def test_mig_creation_order_matters(node: Node, clean_mig: MigGeometry) -> None:
    if clean_mig.compute_slices != 7:
        pytest.skip("the guide's example is for 7-slice GPUs")
    small, two, three = by_slices(clean_mig, 1), by_slices(clean_mig, 2), by_slices(clean_mig, 3)
    for profile in (small, small, two):
        node.backend.create_instance(0, profile.name)
    with pytest.raises(PermanentError, match="Insufficient Resources"):
        node.backend.create_instance(0, three.name)
    for placement in node.backend.mig_layout(0).placements:
        node.backend.destroy_instance(0, placement)
    for profile in (three, small, two, small):
        node.backend.create_instance(0, profile.name)
    assert sorted(node.backend.mig_layout(0).compute_slices()) == [1, 1, 2, 3]


def test_a_start_the_profile_does_not_allow_is_refused(
    node: Node, clean_mig: MigGeometry
) -> None:
    two = by_slices(clean_mig, 2)
    bad = next(s for s in range(clean_mig.compute_slices) if s not in two.starts)
    with pytest.raises(PermanentError):
        node.backend.create_instance(0, two.name, bad)
    assert not node.backend.mig_layout(0).placements


def test_an_instance_in_use_is_not_destroyed(node: Node, clean_mig: MigGeometry) -> None:
    if not node.fake and importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed")
    whole = by_slices(clean_mig, clean_mig.compute_slices)
    placement = node.backend.create_instance(0, whole.name)
    [device] = node.backend.mig_devices(0)
    ready = node.tmp / "ready"
    pid = node.backend.spawn(node.argv(["fake-workload"], HOLD_PY, str(ready)),
                             {"CUDA_VISIBLE_DEVICES": device.uuid}, 0)
    assert node.until(lambda: node.fake or ready.exists(), 120)
    with pytest.raises(TemporaryError, match="In use"):
        node.backend.destroy_instance(0, placement)
    node.backend.send_signal(pid, 9)
    assert node.until(lambda: node.backend.poll(pid).state is not ProcState.RUNNING, 30)
    node.wait(1.0)
    node.backend.destroy_instance(0, placement)
    assert not node.backend.mig_layout(0).placements


def test_an_mps_clients_fault_reaches_its_daemons_other_clients(node: Node) -> None:
    mps_ready(node)
    if not node.fake and importlib.util.find_spec("triton") is None:
        pytest.skip("torch with triton is needed to make a GPU fault")
    with mps_daemon(node) as env:
        online = node.backend.spawn(node.argv(["fake-workload"], LOOP_PY), env, 0)
        outsider = node.backend.spawn(node.argv(["fake-workload"], LOOP_PY), {}, 0)
        crash = node.tmp / "crash.py"  # triton reads a kernel's source from its file
        crash.write_text(CRASH_PY)
        bad = node.backend.spawn(["fake-workload", "--crash-at-s", "2"] if node.fake
                                 else [sys.executable, str(crash)], env, 0)
        assert node.until(lambda: node.backend.poll(bad).state is ProcState.EXITED, 120)
        assert node.backend.poll(bad).returncode != 0
        if not node.fake:  # of the GPU fault, not of something else (its output says)
            said = "".join(f.read_text(errors="replace") for f in node.tmp.glob("logs/*.log"))
            assert "illegal" in said.lower(), said[-3000:]
        if node.fake:  # the fake refuses at spawn; real MPS holds a new client inside CUDA
            with pytest.raises(CotenantError, match="refuses new clients"):
                node.backend.spawn(node.argv(["fake-workload"], LOOP_PY), env, 0)
        assert node.until(lambda: node.backend.poll(online).state is ProcState.EXITED, 60)
        assert node.backend.poll(online).returncode != 0
        assert node.backend.poll(outsider).state is ProcState.RUNNING
        accepted = node.backend.spawn(node.argv(["fake-workload"], LOOP_PY), env, 0)
        node.wait(1.0)
        assert node.backend.poll(accepted).state is ProcState.RUNNING


@contextlib.contextmanager
def mps_daemon(node: Node) -> Iterator[dict[str, str]]:
    """An MPS daemon on GPU 0 under the test's directory; its clients' environment. Every
    process started here is killed and reaped, and the daemon stopped, however it ends."""
    pipe, log = node.tmp / "pipe", node.tmp / "log"
    pipe.mkdir()
    log.mkdir()
    config = DaemonConfig(0, pipe, log)
    node.backend.start_daemon(config)
    try:
        yield {"CUDA_MPS_PIPE_DIRECTORY": str(pipe), "CUDA_MPS_LOG_DIRECTORY": str(log)}
    finally:
        try:
            node.kill_all()
        finally:
            node.backend.stop_daemon(config)


def mps_ready(node: Node) -> None:
    """Skip where this node cannot run the MPS cases."""
    if not node.fake:
        if shutil.which("nvidia-cuda-mps-control") is None:
            pytest.skip("nvidia-cuda-mps-control is not installed")
        if importlib.util.find_spec("torch") is None:
            pytest.skip("torch is not installed")
        if BackendFeature.MIG in node.backend.features():
            pytest.skip("GPU 0 is in MIG mode")


def test_an_mps_clients_sm_use_is_sampled_on_its_server(node: Node) -> None:
    mps_ready(node)
    with mps_daemon(node) as env:
        client = node.backend.spawn(
            node.argv(["fake-workload", "--util-pct", "60"], BUSY_PY), env, 0)

        def served() -> float:
            return max((p.sm_util_pct or 0.0 for p in node.backend.gpu(0).processes
                        if p.mps_server), default=0.0)

        assert node.until(lambda: served() >= 10.0, 120)
        info = node.backend.gpu(0)
        members = set(node.backend.members(client))
        mine = [p for p in info.processes if p.pid in members]
        assert mine
        assert all(p.mps_client and not p.mps_server and p.sm_util_pct is None for p in mine)
        assert [p.pid for p in info.processes if p.mps_server and p.pid in members] == []
