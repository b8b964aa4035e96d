"""The nvml backend's own logic, over a stand-in ``pynvml`` (no GPU needed), and the MPS
control daemon's start-up over a stand-in ``nvidia-cuda-mps-control``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pynvml
import pytest

from cotenant.agent.backends import FakeNode, ManualClock, procfs
from cotenant.agent.backends.base import (
    BackendFeature,
    DaemonConfig,
    daemon_samples,
)
from cotenant.agent.backends.mpsctl import MpsControl
from cotenant.agent.backends.nvml import NvmlNode, map_nvml_error
from cotenant.agent.mps import MpsManager
from cotenant.agent.service import AgentService
from cotenant.agent.spec import WorkloadSpec
from cotenant.errors import InputError, PermanentError, TemporaryError

from .harness import fixed
from .stub_pynvml import NOT_SUPPORTED, UNKNOWN, StubGpu, StubNvml


def node(tmp_path: Path, *gpus: StubGpu) -> tuple[NvmlNode, StubNvml]:
    nv = StubNvml(list(gpus))
    return NvmlNode(tmp_path, nv=nv), nv


def test_a_gpu_in_mig_mode_has_no_utilisation_but_is_listed(tmp_path: Path) -> None:
    nvml, _ = node(tmp_path, StubGpu(mig=True), StubGpu(mig=True))
    info = nvml.gpu(0)
    assert info.mig_enabled
    assert info.utilisation_pct is None
    assert info.model == "A100-40GB"
    assert BackendFeature.MIG in nvml.features()
    plain, _ = node(tmp_path, StubGpu())
    assert plain.gpu(0).utilisation_pct == 37.0
    assert BackendFeature.MIG not in plain.features()


def test_each_process_gets_its_newest_sample(tmp_path: Path) -> None:
    gpu = StubGpu(pids=(7, 8), samples=[(7, 300, 90), (8, 100, 5), (7, 100, 10), (8, 200, 50)])
    nvml, _ = node(tmp_path, gpu)
    assert {p.pid: p.sm_util_pct for p in nvml.gpu(0).processes} == {7: 90.0, 8: 50.0}


def test_mps_clients_and_their_server_are_marked(tmp_path: Path) -> None:
    """As on an H200 (driver 580): an MPS client is listed with no sample of its own, and its
    SM use is sampled on the server's pid, whose ``comm`` is the server's name cut to 15."""
    proc = tmp_path / "proc"
    for pid, comm in ((509, "nvidia-cuda-mps\n"), (470, "python3\n"), (471, "python3\n")):
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "comm").write_text(comm)
    gpu = StubGpu(pids=(509, 470, 471, 999), mps_clients=(471,),
                  samples=[(470, 1, 55), (509, 1, 41)])
    nvml = NvmlNode(tmp_path, nv=StubNvml([gpu]), proc=proc)
    info = nvml.gpu(0)
    assert {p.pid: (p.sm_util_pct, p.mps_client, p.mps_server) for p in info.processes} == {
        509: (41.0, False, True), 470: (55.0, False, False), 471: (None, True, False),
        999: (None, False, False)}  # 999: no comm to read, so not taken for a server
    assert daemon_samples([info]) == {471: 41.0}


def test_a_driver_that_cannot_list_mps_clients_marks_none(tmp_path: Path) -> None:
    nv = StubNvml([StubGpu(pids=(7,), mps_clients=(7,))])

    def unsupported(handle: int) -> list[object]:
        raise pynvml.NVMLError(NOT_SUPPORTED)

    nv.nvmlDeviceGetMPSComputeRunningProcesses = unsupported  # type: ignore[method-assign]
    nvml = NvmlNode(tmp_path, nv=nv, proc=tmp_path)
    assert [p.mps_client for p in nvml.gpu(0).processes] == [False]


def test_a_failed_xid_registration_is_redone_for_every_gpu(tmp_path: Path) -> None:
    nvml, nv = node(tmp_path, StubGpu(), StubGpu(register_error=[UNKNOWN]))
    with pytest.raises(PermanentError, match="nvmlDeviceRegisterEvents"):
        nvml.xid_events(0.0)
    assert len(nv.freed_sets) == 1  # the half-registered set is not kept
    assert nvml.xid_events(0.0) == []
    live = [s for s in nv.event_sets if s not in nv.freed_sets]
    assert nv.event_sets[live[0]] == [0, 1]
    # a GPU whose driver does not report XIDs is left out, not an error
    other, nv2 = node(tmp_path, StubGpu(register_error=[NOT_SUPPORTED]), StubGpu())
    assert other.xid_events(0.0) == []
    assert list(nv2.event_sets.values()) == [[1]]


def test_a_lost_gpu_is_permanent() -> None:
    assert isinstance(map_nvml_error(15, "nvmlDeviceGetName"), PermanentError)
    assert "reset" in map_nvml_error(15, "x").one_line()
    assert isinstance(map_nvml_error(10, "x"), TemporaryError)


def test_a_compute_instance_that_fails_takes_its_gpu_instance_with_it(tmp_path: Path) -> None:
    nvml, nv = node(tmp_path, StubGpu(mig=True))
    nv.ci_error = 23  # NVML_ERROR_INSUFFICIENT_RESOURCES
    with pytest.raises(PermanentError, match="nvmlGpuInstanceCreateComputeInstance"):
        nvml.create_instance(0, "3g.20gb", 4)
    assert nv.gpus[0].instances == {}  # nothing half-made for the next attempt to trip on
    nv.ci_error = None
    assert str(nvml.create_instance(0, "3g.20gb", 4)) == "3g.20gb@4"
    assert str(nvml.mig_layout(0)) == "3g.20gb@4"


def test_a_profile_the_driver_lacks_is_skipped_when_listing(tmp_path: Path) -> None:
    nvml, _ = node(tmp_path, StubGpu(mig=True, lacks=frozenset({20, 15})))
    nvml.create_instance(0, "2g.10gb", 0)
    assert str(nvml.mig_layout(0)) == "2g.10gb@0"


def test_the_supervisor_refuses_a_workload_on_a_gpu_in_mig_mode(tmp_path: Path) -> None:
    fake = FakeNode.build("A100-40GB", count=2, clock=ManualClock(), mig=True)
    service = AgentService(fake, tmp_path, fixed(70))
    spec = WorkloadSpec.from_dict({"name": "web", "argv": ["serve"], "gpu": 1,
                                   "role": "online", "slo_ms": 50})
    with pytest.raises(InputError, match="MIG mode"):
        service.supervisor.submit(spec, 0.0)


def test_workloads_do_not_inherit_the_agents_gpu_selection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", "/elsewhere")
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "FASTEST_FIRST")
    monkeypatch.setenv("KEEP_ME", "1")
    env = procfs.clean_environ()
    assert env["KEEP_ME"] == "1"
    assert not [k for k in env if k.startswith(("CUDA_VISIBLE", "CUDA_MPS", "CUDA_DEVICE"))]
    daemon = MpsControl.env(DaemonConfig(2, Path("p"), Path("l")))
    assert daemon["CUDA_VISIBLE_DEVICES"] == "2"
    assert daemon["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


# A control tool that, like the real one, returns from -d before the daemon answers.
STUB_CONTROL = r'''
import os, sys, time
pipe = os.environ["CUDA_MPS_PIPE_DIRECTORY"]
ready = os.path.join(pipe, "ready-at")
if sys.argv[1:] == ["-d"]:
    open(ready, "w").write(str(time.time() + 0.3))
    sys.exit(0)
command = sys.stdin.read().strip()
if not os.path.exists(ready) or time.time() < float(open(ready).read()):
    print("Cannot find MPS control daemon process", file=sys.stderr)
    sys.exit(1)
if command == "quit":
    os.remove(ready)
elif command != "get_server_list":
    with open(os.path.join(pipe, "commands"), "a") as log:
        log.write(command + "\n")
'''


@pytest.mark.skipif(sys.platform != "linux", reason="a shebang script as the control tool")
def test_the_daemon_is_waited_for_before_its_defaults_are_set(tmp_path: Path) -> None:
    tool = tmp_path / "mps-control"
    tool.write_text(f"#!{sys.executable}\n{STUB_CONTROL}")
    tool.chmod(0o755)
    config = DaemonConfig(0, tmp_path / "pipe", tmp_path / "log", default_thread_pct=60,
                          default_mem_limit_mib=2048)
    control = MpsControl(str(tool), timeout_s=5.0)
    control.start_daemon(config)
    log = config.pipe_dir / "commands"
    assert log.read_text().splitlines() == [
        "set_default_active_thread_percentage 60",
        "set_default_device_pinned_mem_limit 0 2048M",
    ]
    control.start_daemon(config)  # running, defaults already set by this agent: nothing more
    assert len(log.read_text().splitlines()) == 2
    # an agent restarted with other defaults sets them on the daemon it finds running
    again = MpsControl(str(tool), timeout_s=5.0)
    again.start_daemon(DaemonConfig(0, config.pipe_dir, config.log_dir, default_thread_pct=40))
    assert log.read_text().splitlines()[-1] == "set_default_active_thread_percentage 40"


def test_a_pipe_directory_too_long_for_a_socket_is_refused(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 120)
    control = MpsControl(os.devnull)
    with pytest.raises(InputError, match="Unix socket"):
        control.start_daemon(DaemonConfig(0, deep / "pipe", deep / "log"))


def test_an_agent_gives_its_defaults_to_a_daemon_it_finds_running(tmp_path: Path) -> None:
    fake = FakeNode.build("A100-40GB", clock=ManualClock())
    MpsManager(fake, tmp_path, default_thread_pct=100).ensure(0)
    later = MpsManager(fake, tmp_path, default_thread_pct=40)  # a restarted agent
    assert later.ensure(0) is False  # running: not restarted ...
    assert later.restarts == {}
    daemon = fake._gpu(0).daemon
    assert daemon is not None
    assert daemon.default_thread_pct == 40  # ... but given the new defaults
