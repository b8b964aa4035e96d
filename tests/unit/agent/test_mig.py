"""The MIG manager on the fake node: idempotent apply, read-back, refusal, drain, failed steps,
mig-parted export."""

from __future__ import annotations

import signal

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cotenant.agent.backends import FakeNode, ManualClock, ProcState
from cotenant.agent.mig import MigApplyError, MigManager, MigState
from cotenant.errors import InvalidLayoutError, NotSupportedError
from cotenant.model.gpu import CATALOG
from tests.strategies import valid_layouts


@pytest.mark.parametrize("model", ["A100-40GB", "H100-80GB"])
def test_every_maximal_layout_applies_and_reads_back(model: str) -> None:
    node = FakeNode.build(model, mig=True)
    manager = MigManager(node)
    geometry = CATALOG.get(model).mig
    assert geometry is not None
    layouts = geometry.enumerate_maximal()
    assert len(layouts) == 19
    for layout in layouts:  # each apply reconfigures from the previous layout
        status = manager.apply(0, layout)
        assert status.state is MigState.APPLIED
        assert set(node.mig_layout(0).placements) == set(layout.placements)
        again = manager.apply(0, layout)
        assert again.step == "no-op"
        assert not again.changed


def test_text_layout_and_bad_layout() -> None:
    manager = MigManager(FakeNode.build("A100-40GB", mig=True))
    assert manager.apply(0, "3g.20gb,2g.10gb,1g.5gb,1g.5gb").state is MigState.APPLIED
    with pytest.raises(InvalidLayoutError):
        manager.apply(0, "4g.20gb,4g.20gb")


def test_refuses_while_processes_run_unless_drain() -> None:
    node = FakeNode.build("A100-40GB", mig=True)
    manager = MigManager(node)
    manager.apply(0, "7g.40gb")
    pid = node.spawn(["fake-workload", "--mem-mib", "100"], {}, 0)
    with pytest.raises(MigApplyError, match="check processes") as info:
        manager.apply(0, "3g.20gb,3g.20gb")
    assert "--drain" in info.value.one_line()
    status = manager.status(0)
    assert status is not None
    assert status.state is MigState.FAILED
    assert node.poll(pid).state is ProcState.RUNNING
    assert manager.apply(0, "3g.20gb,3g.20gb", drain=True).state is MigState.APPLIED
    assert node.poll(pid).state is ProcState.EXITED


@pytest.mark.parametrize(("term_delay", "grace", "killed"), [(3.0, 10.0, False),
                                                              ("inf", 10.0, True)])
def test_drain_gives_processes_their_grace_before_sigkill(
    term_delay: float | str, grace: float, killed: bool
) -> None:
    """A drained training job that checkpoints on SIGTERM (3 s here) exits by the signal within
    the grace period; one that ignores SIGTERM is killed when the grace period ends."""
    node = FakeNode.build("A100-40GB", mig=True)
    clock = node.clock
    assert isinstance(clock, ManualClock)
    manager = MigManager(node, grace_s=grace, clock=clock, sleep=clock.advance)
    manager.apply(0, "7g.40gb")
    pid = node.spawn(["fake-workload", "--term-delay-s", str(term_delay)], {}, 0)
    start = clock()
    assert manager.apply(0, "3g.20gb,3g.20gb", drain=True).state is MigState.APPLIED
    status = node.poll(pid)
    assert status.state is ProcState.EXITED
    assert status.returncode == (-signal.SIGKILL if killed else -signal.SIGTERM)
    waited = clock() - start
    assert waited == pytest.approx(grace if killed else 3.0, abs=0.11)


def test_failing_step_is_named() -> None:
    node = FakeNode.build("A100-40GB", mig=True)
    manager = MigManager(node)
    node.inject_nvml_error("create_instance", times=1)
    with pytest.raises(MigApplyError, match=r"create 7g\.40gb@0"):
        manager.apply(0, "7g.40gb")
    status = manager.status(0)
    assert status is not None
    assert status.state is MigState.FAILED
    assert "TIMEOUT" in status.error
    assert manager.apply(0, "7g.40gb").state is MigState.APPLIED  # retry succeeds


def test_non_mig_gpu() -> None:
    with pytest.raises(NotSupportedError):
        MigManager(FakeNode.build("T4")).apply(0, "1g.5gb")


def test_export_is_mig_parted_yaml() -> None:
    node = FakeNode.build("A100-40GB", count=3, mig=True)
    manager = MigManager(node)
    manager.apply(0, "3g.20gb,3g.20gb")
    manager.apply(1, "3g.20gb,3g.20gb")
    manager.apply(2, "7g.40gb")
    doc = yaml.safe_load(yaml.safe_dump(manager.export()))
    assert doc["version"] == "v1"
    selections = doc["mig-configs"]["cotenant-current"]
    by_devices = {tuple(s["devices"]): s for s in selections}
    assert by_devices[(0, 1)]["mig-devices"] == {"3g.20gb": 2}
    assert by_devices[(2,)]["mig-devices"] == {"7g.40gb": 1}
    assert all(s["mig-enabled"] for s in selections)
    assert "0x20B010DE" in by_devices[(2,)]["device-filter"]


@settings(max_examples=60, deadline=None)
@given(data=st.data(), model=st.sampled_from(["A100-40GB", "H100-80GB", "A30"]))
def test_any_layout_to_any_layout_reads_back(data: st.DataObject, model: str) -> None:
    geometry = CATALOG.get(model).mig
    assert geometry is not None
    node = FakeNode.build(model, mig=True)
    manager = MigManager(node)
    for _ in range(3):
        layout = data.draw(valid_layouts(geometry))
        manager.apply(0, layout)
        assert set(node.mig_layout(0).placements) == set(layout.placements)
        assert manager.apply(0, layout).step == "no-op"
