"""The MIG controller against the stateful fake on a manual clock: the planner's order, slack,
failures, timeouts, and what a rollout does with a node already applied."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cotenant.agent.backends import ManualClock
from cotenant.errors import InputError
from cotenant.integrations.k8s.mig.controller import RolloutReport, Settings, run_rollout
from cotenant.integrations.k8s.mig.fake import FakeMigNodes
from cotenant.integrations.k8s.mig.rollout import NodeChange, Rollout, plan_rollout
from cotenant.integrations.k8s.mig.steps import (
    CONFIG_LABEL,
    STATE_LABEL,
    Act,
    Cursor,
    lacks_slack,
)
from cotenant.model.deployment import parse_deployment
from cotenant.model.serving import parse_spec
from cotenant.perf.mig_profiles import default_table
from cotenant.policies.partition.reconfig import Reconfiguration, StepKind

EXAMPLES = Path(__file__).parents[4] / "examples"
NODES = ["gpu-a", "gpu-b", "gpu-c", "gpu-d"]


def example(nodes: list[str] = NODES, per_node: int = 1) -> tuple[Rollout, Reconfiguration]:
    spec = parse_spec(yaml.safe_load((EXAMPLES / "serving-plan.yaml").read_text()))
    current = parse_deployment(yaml.safe_load((EXAMPLES / "current-deployment.yaml").read_text()))
    return plan_rollout(spec, default_table(), nodes, per_node, current=current, solver="greedy",
                        time_limit=2.0)


DEFAULT = Settings(timeout_s=300, poll_s=5)


def roll(rollout: Rollout, fake: FakeMigNodes, clock: ManualClock,
         settings: Settings = DEFAULT) -> RolloutReport:
    return run_rollout(rollout, fake, clock, clock.advance, settings)


def labelled(fake: FakeMigNodes) -> list[str]:
    return [e.split()[1].split("=")[0] for e in fake.events if e.startswith("label")]


def test_nodes_change_in_the_order_of_the_planners_layout_steps() -> None:
    rollout, change = example()
    first: list[str] = []
    for step in change.steps:
        if step.kind in (StepKind.CREATE, StepKind.DESTROY, StepKind.REPARTITION):
            node = NODES[step.gpu]
            if node not in first:
                first.append(node)
    assert [c.node for c in rollout.changes] == first
    clock = ManualClock()
    fake = FakeMigNodes.for_rollout(rollout, clock)
    report = roll(rollout, fake, clock)
    done = labelled(fake)
    assert done == first[: len(done)]
    assert done
    for node in done:  # every node drained before its label, its new replicas back after
        events = [e for e in fake.events if e.split()[1].split("=")[0] == node]
        change_of = next(c for c in rollout.changes if c.node == node)
        expected = (["drain"] if change_of.drain else []) + ["label"] + (
            ["restore"] if change_of.restore else [])
        assert [e.split()[0] for e in events] == expected
    assert all(fake.labels[n][STATE_LABEL] == "success" for n in done)
    assert report.outcome is not None


def test_a_node_whose_services_lack_slack_is_never_drained() -> None:
    rollout, _ = example()
    clock = ManualClock()
    fake = FakeMigNodes.for_rollout(rollout, clock)
    report = roll(rollout, fake, clock)
    assert not report.ok
    assert report.outcome is not None
    assert report.outcome.act is Act.STOP
    assert "gpu-b cannot be drained: image-tagger" in report.outcome.reason
    assert "drain gpu-b" not in fake.events
    assert fake.rotation["gpu-b"]
    assert CONFIG_LABEL not in fake.labels["gpu-b"]


def test_all_nodes_of_a_fresh_pool_are_labelled_and_none_drained() -> None:
    spec = parse_spec(yaml.safe_load((EXAMPLES / "serving-plan.yaml").read_text()))
    rollout, _ = plan_rollout(spec, default_table(), ["n0", "n1"], 1, solver="greedy")
    clock = ManualClock()
    fake = FakeMigNodes.for_rollout(rollout, clock)
    report = roll(rollout, fake, clock)
    assert report.ok
    assert not any(e.startswith("drain") for e in fake.events)
    assert {fake.labels[n][CONFIG_LABEL] for n in ("n0", "n1")} == {
        c.config for c in rollout.changes}
    assert set(rollout.configs["mig-configs"]) == {c.config for c in rollout.changes}


def test_a_failed_state_stops_the_rollout_and_says_so() -> None:
    rollout, _ = example()
    clock = ManualClock()
    fake = FakeMigNodes.for_rollout(rollout, clock)
    fake.script["gpu-d"] = ("failed",)
    report = roll(rollout, fake, clock)
    assert report.outcome is not None
    assert report.outcome.act is Act.STOP
    assert report.outcome.node == "gpu-d"
    assert "=failed" in report.outcome.reason
    assert labelled(fake) == ["gpu-d"]  # nothing after the failure


def test_a_node_that_never_reports_success_times_out() -> None:
    rollout, _ = example()
    clock = ManualClock()
    fake = FakeMigNodes.for_rollout(rollout, clock)
    fake.script["gpu-d"] = ("pending",)
    report = roll(rollout, fake, clock, Settings(timeout_s=120, poll_s=10))
    assert report.outcome is not None
    assert report.outcome.act is Act.STOP
    assert "no success within 120 s (state pending)" in report.outcome.reason
    assert 120 <= clock.now <= 130
    assert labelled(fake) == ["gpu-d"]


def test_a_reboot_is_waited_for() -> None:
    rollout, _ = example()
    clock = ManualClock()
    fake = FakeMigNodes.for_rollout(rollout, clock)
    fake.script["gpu-d"] = ("rebooting", "rebooting", "success")
    roll(rollout, fake, clock)
    assert fake.labels["gpu-d"][STATE_LABEL] == "success"
    assert labelled(fake)[:2] == ["gpu-d", "gpu-a"]


def test_a_node_already_applied_is_skipped_without_a_drain() -> None:
    rollout, _ = example()
    clock = ManualClock()
    fake = FakeMigNodes.for_rollout(rollout, clock)
    first = rollout.changes[0]
    fake.labels[first.node].update({CONFIG_LABEL: first.config, STATE_LABEL: "success"})
    report = roll(rollout, fake, clock)
    assert report.actions[0][1].act is Act.SKIP
    assert first.node not in labelled(fake)


def test_a_label_changed_by_someone_else_stops_the_rollout() -> None:
    rollout, _ = example()
    clock = ManualClock()
    fake = FakeMigNodes.for_rollout(rollout, clock, apply_s=100)

    def meddle(seconds: float) -> None:
        clock.advance(seconds)
        fake.labels["gpu-d"][CONFIG_LABEL] = "all-disabled"

    report = run_rollout(rollout, fake, clock, meddle, Settings(timeout_s=300, poll_s=5))
    assert report.outcome is not None
    assert "someone else changed it" in report.outcome.reason


def test_the_fake_fails_a_node_relabelled_while_it_serves() -> None:
    clock = ManualClock()
    fake = FakeMigNodes(clock)
    fake.add_node("n", serving=True)
    fake.set_config("n", "cotenant-node-0")
    clock.advance(30)
    assert fake.node_labels("n")[STATE_LABEL] == "failed"
    with pytest.raises(InputError, match="not found"):
        fake.node_labels("other")


def test_slack_counts_what_earlier_nodes_took_out_and_put_back() -> None:
    rollout = Rollout(
        changes=(NodeChange("a", "c0", (), (("svc", 60.0),), True),
                 NodeChange("b", "c1", (("svc", 100.0),), (), True)),
        services=("svc",), capacity=(100.0,), floor=(50.0,), replicas=(1,), configs={})
    assert "svc would have 0.0 req/s" in str(lacks_slack(rollout, Cursor(), rollout.changes[1]))
    assert lacks_slack(rollout, Cursor(finished=(0,)), rollout.changes[1]) is None


@pytest.mark.parametrize(("nodes", "per_node", "message"), [
    (["a", "b"], 1, "2 node(s) of 1 GPUs hold 2 GPUs; the plan uses 4"),
    (["a", "a", "b", "c"], 1, "a node is named twice"),
    (NODES, 0, "0 must be at least 1"),
])
def test_bad_node_lists_are_one_line_errors(nodes: list[str], per_node: int,
                                            message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)):
        example(nodes, per_node)


class CheckedNodes(FakeMigNodes):
    """The fake, checking after every write that each service keeps its floor in rotation and,
    if it had one today, a replica."""

    rollout: Rollout
    restored: set[str]

    def _check(self) -> None:
        rate = dict.fromkeys(self.rollout.services, 0.0)
        count = dict.fromkeys(self.rollout.services, 0)
        for change in self.rollout.changes:
            if self.rotation[change.node]:
                replicas = change.restore if change.node in self.restored else change.drain
                for service, r in replicas:
                    rate[service] += r
                    count[service] += 1
        for s, name in enumerate(self.rollout.services):
            assert rate[name] >= self.rollout.floor[s] - 1e-6, (name, self.events)
            assert count[name] >= 1 or self.rollout.replicas[s] == 0, (name, self.events)

    def set_config(self, node: str, config: str) -> None:
        super().set_config(node, config)
        self._check()

    def set_rotation(self, node: str, serving: bool) -> int:
        if serving:
            self.restored.add(node)
        done = super().set_rotation(node, serving)
        self._check()
        return done


SERVICES = ("s0", "s1", "s2")
replica_lists = st.lists(st.tuples(st.sampled_from(SERVICES), st.integers(1, 100).map(float)),
                         max_size=3).map(tuple)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(replica_lists, replica_lists), min_size=1, max_size=5),
       st.lists(st.integers(0, 200).map(float), min_size=3, max_size=3))
def test_no_rollout_ever_takes_a_service_below_its_floor(
    nodes: list[tuple[tuple[tuple[str, float], ...], tuple[tuple[str, float], ...]]],
    demand: list[float],
) -> None:
    changes = tuple(NodeChange(f"n{i}", f"c{i}", drain, restore, True)
                    for i, (drain, restore) in enumerate(nodes))
    today = {s: sum(r for c in changes for t, r in c.drain if t == s) for s in SERVICES}
    count = {s: sum(1 for c in changes for t, _ in c.drain if t == s) for s in SERVICES}
    rollout = Rollout(changes, SERVICES, tuple(today[s] for s in SERVICES),
                      tuple(min(d, today[s]) for d, s in zip(demand, SERVICES, strict=True)),
                      tuple(count[s] if d > 0 else 0 for d, s in zip(demand, SERVICES,
                                                                      strict=True)), {})
    clock = ManualClock()
    fake = CheckedNodes(clock)
    fake.rollout, fake.restored = rollout, set()
    for change in changes:
        fake.add_node(change.node, serving=bool(change.drain))
    report = roll(rollout, fake, clock)
    assert report.outcome is not None
    if report.ok:
        assert set(labelled(fake)) == {c.node for c in changes}
    else:  # it stops only where every node left lacks slack
        assert "cannot be drained" in report.outcome.reason
        done = tuple(k for k, c in enumerate(changes) if c.node in fake.restored
                     or (c.node in labelled(fake) and not c.restore))
        for k, change in enumerate(changes):
            if k not in done:
                assert lacks_slack(rollout, Cursor(finished=done), change) is not None


def test_a_node_whose_layouts_do_not_change_is_relabelled_without_a_drain() -> None:
    same = NodeChange("a", "c0", (("svc", 100.0),), (("svc", 100.0),), False)
    rollout = Rollout((same,), ("svc",), (100.0,), (100.0,), (1,), {})
    clock = ManualClock()
    fake = FakeMigNodes.for_rollout(rollout, clock)
    report = roll(rollout, fake, clock)
    assert report.ok
    assert fake.events == ["label a=c0"]
    assert fake.labels["a"][STATE_LABEL] == "success"
