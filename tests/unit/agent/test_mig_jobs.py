"""A training job over several MIG instances (Flex-MIG's one-to-many): one process per
instance, each on its own instance's UUID, with the rank variables of torch.distributed's
env:// rendezvous; checked whole at submit, stopped whole by the job's name."""

from __future__ import annotations

from pathlib import Path

import pytest

from cotenant.agent.backends import FakeNode, ManualClock
from cotenant.agent.mig import MigManager
from cotenant.agent.mig_workloads import PORT_BASE, PORT_SPAN, rank_specs
from cotenant.agent.service import AgentService
from cotenant.agent.spec import WorkloadSpec
from cotenant.agent.state import Status
from cotenant.errors import InputError

from .harness import fixed


def job(**extra: object) -> dict[str, object]:
    return {"name": "train", "argv": ["fake-workload", "--mem-mib", "1000"],
            "role": "offline", "gpu": 0, **extra}


def two_mig_gpus(tmp_path: Path) -> tuple[AgentService, FakeNode, ManualClock]:
    clock = ManualClock()
    node = FakeNode.build("A100-40GB", 2, clock=clock, mig=True)
    MigManager(node).apply(0, "3g.20gb,2g.10gb,1g.5gb,1g.5gb")
    MigManager(node).apply(1, "4g.20gb,3g.20gb")
    return AgentService(node, tmp_path, fixed(70), clock=clock), node, clock


def test_a_job_spec_names_instances_on_this_or_other_gpus() -> None:
    spec = WorkloadSpec.from_dict(job(mig_instances=["3g.20gb@4", "1:4g.20gb@0"],
                                      master_port=29411))
    assert spec.mig_instances == ((0, "3g.20gb@4"), (1, "4g.20gb@0"))
    assert WorkloadSpec.from_dict(spec.to_dict()) == spec
    for bad, rule in (([], "list of 1-64"), (["3g.20gb"], "is not"),
                      (["3g.20gb@4", "0:3g.20gb@4"], "named twice")):
        with pytest.raises(InputError, match=rule):
            WorkloadSpec.from_dict(job(mig_instances=bad))
    with pytest.raises(InputError, match="not both"):
        WorkloadSpec.from_dict(job(mig_instances=["3g.20gb@4"], mig_instance="2g.10gb@0"))
    with pytest.raises(InputError, match="sm_share"):
        WorkloadSpec.from_dict(job(mig_instances=["3g.20gb@4"], sm_share=50))
    with pytest.raises(InputError, match="master_port"):
        WorkloadSpec.from_dict(job(mig_instances=["3g.20gb@4"], master_port=80))


def test_each_rank_runs_on_its_own_instance_with_the_rendezvous_variables(
        tmp_path: Path) -> None:
    agent, node, clock = two_mig_gpus(tmp_path)
    agent.submit(job(mig_instances=["3g.20gb@4", "2g.10gb@0", "1:4g.20gb@0"],
                     env={"EPOCHS": "3"}))
    clock.advance(1.0)
    agent.tick()
    uuids = {(g, str(d.placement)): d.uuid for g in (0, 1) for d in node.mig_devices(g)}
    port = set()
    for rank, (gpu, instance) in enumerate(((0, "3g.20gb@4"), (0, "2g.10gb@0"),
                                            (1, "4g.20gb@0"))):
        record = agent.store.get(f"train.r{rank}")
        assert record is not None
        assert record.status is Status.RUNNING
        assert record.pid is not None
        env = node.env_of(record.pid)
        assert env["CUDA_VISIBLE_DEVICES"] == uuids[(gpu, instance)]
        assert (env["RANK"], env["WORLD_SIZE"]) == (str(rank), "3")
        # one visible device per rank, its instance as cuda:0: cuda:LOCAL_RANK must be it
        assert (env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"]) == ("0", "1")
        assert "," not in env["CUDA_VISIBLE_DEVICES"]
        assert env["MASTER_ADDR"] == "127.0.0.1"
        assert env["EPOCHS"] == "3"
        assert not [k for k in env if k.startswith("CUDA_MPS_")]
        port.add(env["MASTER_PORT"])
        assert record.spec.job == "train"
    assert len(port) == 1
    assert PORT_BASE <= int(port.pop()) < PORT_BASE + PORT_SPAN
    assert len({uuids[k] for k in uuids}) == len(uuids)
    agent.stop("train")  # the job's name stops every rank
    for _ in range(3):
        clock.advance(5.0)
        agent.tick()
    for rank in range(3):
        record = agent.store.get(f"train.r{rank}")
        assert record is not None
        assert record.status.final


def test_a_job_is_checked_whole_before_any_rank_is_added(tmp_path: Path) -> None:
    agent, _, _ = two_mig_gpus(tmp_path)
    with pytest.raises(InputError, match=r"GPU 1 has no MIG instance 2g\.10gb@0"):
        agent.submit(job(mig_instances=["3g.20gb@4", "1:2g.10gb@0"]))
    assert agent.store.all() == []  # rank 0 was not added either
    with pytest.raises(InputError, match="no GPU 2"):
        agent.submit(job(mig_instances=["2:3g.20gb@4"]))


def test_ranks_are_named_and_numbered_in_order() -> None:
    spec = WorkloadSpec.from_dict(job(mig_instances=["1g.5gb@2", "1g.5gb@3"],
                                      master_port=30000))
    ranks = rank_specs(spec)
    assert [r.name for r in ranks] == ["train.r0", "train.r1"]
    assert [r.mig_instance for r in ranks] == ["1g.5gb@2", "1g.5gb@3"]
    assert all(dict(r.env)["MASTER_PORT"] == "30000" for r in ranks)
    with pytest.raises(InputError, match="too long"):
        rank_specs(WorkloadSpec.from_dict(job(name="x" * 62, mig_instances=["1g.5gb@2"])))
