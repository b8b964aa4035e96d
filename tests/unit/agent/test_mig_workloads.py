"""Workloads on MIG instances: a spec names the instance, the agent points CUDA at that
instance's UUID, the instance's own memory limits it, and neither the share policy nor the
compute guard touches a GPU in MIG mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from cotenant.agent.backends import FakeNode, ManualClock
from cotenant.agent.backends.nvml import NvmlNode
from cotenant.agent.mig import MigManager
from cotenant.agent.service import AgentService
from cotenant.agent.spec import WorkloadSpec
from cotenant.agent.state import Status
from cotenant.agent.supervisor import MIG_WAIT_S
from cotenant.errors import InputError

from .harness import fixed
from .stub_pynvml import StubGpu, StubNvml


def spec(name: str, role: str = "offline", **extra: object) -> WorkloadSpec:
    return WorkloadSpec.from_dict({"name": name, "argv": ["fake-workload", "--mem-mib", "1000"],
                                   "role": role, "gpu": 0, "slo_ms": 50, **extra})


def mig_agent(tmp_path: Path) -> tuple[AgentService, FakeNode, ManualClock]:
    clock = ManualClock()
    node = FakeNode.build("A100-40GB", clock=clock, mig=True)
    MigManager(node).apply(0, "3g.20gb,2g.10gb,1g.5gb,1g.5gb")
    return AgentService(node, tmp_path, fixed(70), clock=clock), node, clock


def test_a_spec_names_an_instance_and_takes_no_mps_limits() -> None:
    assert spec("a", mig_instance="3g.20gb@4").mig_instance == "3g.20gb@4"
    assert spec("a", mig_instance="1g.5gb+me@6").to_dict()["mig_instance"] == "1g.5gb+me@6"
    assert "mig_instance" not in spec("a").to_dict()  # an older agent reads the row
    for bad in ("3g.20gb", "3g@4", "x", 3):
        with pytest.raises(InputError, match="mig_instance"):
            spec("a", mig_instance=bad)
    with pytest.raises(InputError, match="sm_share"):
        spec("a", mig_instance="3g.20gb@4", sm_share=50)
    with pytest.raises(InputError, match="mem_limit_mib"):
        spec("a", mig_instance="3g.20gb@4", mem_limit_mib=100)


def test_a_workload_runs_on_its_instance_by_uuid(tmp_path: Path) -> None:
    agent, node, clock = mig_agent(tmp_path)
    agent.supervisor.submit(spec("web", "online", mig_instance="3g.20gb@4", model="resnet50"),
                            clock())
    agent.supervisor.submit(spec("train", mig_instance="2g.10gb@0"), clock())
    clock.advance(1.0)
    agent.tick()
    for name, instance in (("web", "3g.20gb@4"), ("train", "2g.10gb@0")):
        record = agent.store.get(name)
        assert record is not None
        assert record.status is Status.RUNNING
        assert record.pid is not None
        env = node.env_of(record.pid)
        uuid = {str(d.placement): d.uuid for d in node.mig_devices(0)}[instance]
        assert env["CUDA_VISIBLE_DEVICES"] == uuid
        assert not [k for k in env if k.startswith("CUDA_MPS_")]  # no MPS inside MIG
    for _ in range(5):  # the share policy and the guard leave a MIG GPU alone
        clock.advance(30.0)
        agent.tick()
    train = agent.store.get("train")
    assert train is not None
    assert train.restarts == 0
    assert agent.colocation.shares == {}


def test_an_instance_has_its_own_memory(tmp_path: Path) -> None:
    agent, _node, clock = mig_agent(tmp_path)
    big = WorkloadSpec.from_dict({"name": "big", "argv": ["fake-workload", "--mem-mib", "12000"],
                                  "role": "offline", "gpu": 0, "mig_instance": "2g.10gb@0"})
    agent.supervisor.submit(big, clock())
    for _ in range(2):  # started, then reaped
        clock.advance(1.0)
        agent.tick()
    record = agent.store.get("big")
    assert record is not None
    assert record.last_exit is not None
    assert "out of memory" in record.last_exit  # 12,000 MiB is more than 2g.10gb holds


def test_instances_are_checked_at_submit(tmp_path: Path) -> None:
    agent, _, clock = mig_agent(tmp_path)
    with pytest.raises(InputError, match=r"no MIG instance 4g\.20gb@0") as err:
        agent.supervisor.submit(spec("a", mig_instance="4g.20gb@0"), clock())
    assert "3g.20gb@4" in err.value.one_line()  # the hint lists what the GPU has
    with pytest.raises(InputError, match="MIG mode: name one of its instances"):
        agent.supervisor.submit(spec("b"), clock())
    plain = AgentService(FakeNode.build("A100-40GB", clock=clock), tmp_path / "p",
                         fixed(70), clock=clock)
    with pytest.raises(InputError, match="not in MIG mode"):
        plain.supervisor.submit(spec("c", mig_instance="3g.20gb@4"), clock())


def test_nvml_lists_mig_devices_with_their_uuids(tmp_path: Path) -> None:
    nvml = NvmlNode(tmp_path, nv=StubNvml([StubGpu(mig=True)]))
    made = [nvml.create_instance(0, "3g.20gb", 4), nvml.create_instance(0, "2g.10gb", 0)]
    devices = nvml.mig_devices(0)
    assert sorted(str(d.placement) for d in devices) == sorted(str(p) for p in made)
    assert all(d.uuid.startswith("MIG-") for d in devices)
    assert len({d.uuid for d in devices}) == 2


def test_an_instance_being_remade_defers_the_start(tmp_path: Path) -> None:
    agent, node, clock = mig_agent(tmp_path)
    agent.supervisor.submit(spec("web", "online", mig_instance="3g.20gb@4", model="resnet50"),
                            clock())
    three = next(d for d in node.mig_devices(0) if str(d.placement) == "3g.20gb@4")
    node.destroy_instance(0, three.placement)  # as mig-parted does, before creating it again
    clock.advance(1.0)
    agent.tick()
    record = agent.store.get("web")
    assert record is not None
    assert record.status is not Status.FAILED  # deferred, not failed for good
    assert record.pid is None
    node.create_instance(0, "3g.20gb", 4)
    for _ in range(3):
        clock.advance(MIG_WAIT_S)
        agent.tick()
    record = agent.store.get("web")
    assert record is not None
    assert record.status is Status.RUNNING
    assert record.pid is not None
    remade = next(d for d in node.mig_devices(0) if str(d.placement) == "3g.20gb@4")
    assert remade.uuid != three.uuid  # a remade instance has a new UUID, read at the start
    assert node.env_of(record.pid)["CUDA_VISIBLE_DEVICES"] == remade.uuid
