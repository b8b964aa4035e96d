"""The MIG controller against the stateful fake on a manual clock: the planner's order carried
out in node stages with temporary replicas, slack checked by the fake itself after every
write, failures, timeouts, resuming after a crash, and what a rollout does with a node
already applied."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import fields
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cotenant.agent.backends import ManualClock
from cotenant.errors import InfeasibleError, InputError, PermanentError
from cotenant.integrations.k8s.mig.controller import RolloutReport, run_rollout
from cotenant.integrations.k8s.mig.fake import FakeMigNodes
from cotenant.integrations.k8s.mig.rollout import (
    NodeChange,
    Rollout,
    TempReplica,
    build_rollout,
    plan_rollout,
)
from cotenant.integrations.k8s.mig.steps import (
    CONFIG_LABEL,
    STATE_LABEL,
    Act,
    Action,
    Cursor,
    Seen,
    Settings,
    lacks_slack,
)
from cotenant.model.deployment import parse_deployment
from cotenant.model.serving import parse_spec
from cotenant.perf.mig_profiles import default_table
from cotenant.policies.partition.reconfig import Reconfiguration, StepKind, plan_steps
from tests.unit.policies.reconfig_helpers import replan
from tests.unit.policies.test_reconfig_stages import idle_beside

EXAMPLES = Path(__file__).parents[4] / "examples"
NODES = ["gpu-a", "gpu-b", "gpu-c", "gpu-d"]


def example(nodes: list[str] = NODES, per_node: int = 1) -> tuple[Rollout, Reconfiguration]:
    spec = parse_spec(yaml.safe_load((EXAMPLES / "serving-plan.yaml").read_text()))
    current = parse_deployment(yaml.safe_load((EXAMPLES / "current-deployment.yaml").read_text()))
    return plan_rollout(spec, default_table(), nodes, per_node, current=current, solver="greedy",
                        time_limit=2.0)


DEFAULT = Settings(timeout_s=300, poll_s=5, ready_s=120)


class CheckedNodes(FakeMigNodes):
    """The fake, checking after every write, from its own state (which config each node has
    applied, which nodes' serving pods are Ready and in rotation, which temporary pods are),
    that each service keeps its floor in rotation and, if it had one today, a replica."""

    rollout: Rollout
    checks: int = 0

    def served(self, node: str) -> tuple[tuple[str, float], ...]:
        changes = [c for c in self.rollout.changes if c.node == node]
        for c in changes:
            if c.config == self.layouts.get(node):
                return c.restore
        return changes[0].drain

    def check(self) -> None:
        rate: Counter[str] = Counter()
        count: Counter[str] = Counter()
        for node in self.labels:
            room = Counter(p.service for p in self.serving_pods(node) if p.serving)
            for service, r in self.served(node):  # as far as its pods serve
                if room[service] > 0:
                    room[service] -= 1
                    rate[service] += r
                    count[service] += 1
        known = self.rollout.temporaries
        for name, pod in self.temporary_pods().items():
            if pod.ready and pod.serving:
                rate[pod.service] += known[name].rate
                count[pod.service] += 1
        for s, name in enumerate(self.rollout.services):
            assert rate[name] >= self.rollout.floor[s] - 1e-6, (name, self.events)
            assert count[name] >= 1 or self.rollout.replicas[s] == 0, (name, self.events)
        self.checks += 1

    def set_config(self, node: str, config: str) -> None:
        super().set_config(node, config)
        assert node not in self._busy, f"{node} relabelled while it serves: {self.events}"
        self.check()

    def set_rotation(self, node: str, serving: bool) -> int:
        done = super().set_rotation(node, serving)
        self.check()
        return done

    def create_temporary(self, temp: TempReplica) -> None:
        super().create_temporary(temp)
        self.check()

    def admit_temporary(self, name: str) -> None:
        super().admit_temporary(name)
        self.check()

    def remove_temporary(self, name: str) -> None:
        super().remove_temporary(name)
        self.check()


def checked(rollout: Rollout, clock: ManualClock) -> CheckedNodes:
    fake = FakeMigNodes.for_rollout(rollout, clock)
    out = CheckedNodes(**{f.name: getattr(fake, f.name) for f in fields(fake)})
    out.rollout = rollout
    return out


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
    assert list(dict.fromkeys(c.node for c in rollout.changes if c.final)) == first
    for change_of in rollout.changes:  # drained before the label, its replicas back after
        if change_of.final and change_of.drain:
            assert change_of.drains


def test_the_bundled_example_completes_with_every_floor_kept_at_every_step() -> None:
    rollout, _ = example()
    assert rollout.blocked is None
    lending = [c for c in rollout.changes if not c.final]
    assert [c.node for c in lending] == ["gpu-a"]  # empty at the end: it lends the room
    (temp,) = rollout.temporaries.values()
    assert (temp.service, temp.node) == ("image-tagger", "gpu-a")
    clock = ManualClock()
    fake = checked(rollout, clock)
    report = roll(rollout, fake, clock)
    assert report.ok, report.outcome
    assert fake.checks >= len(fake.events)  # every write was checked
    events = fake.events
    order = [events.index(e) for e in (f"create {temp.name}", f"admit {temp.name}",
                                       "drain gpu-b", "restore gpu-b", f"remove {temp.name}")]
    assert order == sorted(order)
    assert events.count(f"create {temp.name}") == 1
    assert fake.pods == {}  # no temporary pod left behind
    for node in NODES:  # every node ends at its final config, applied
        last = [c for c in rollout.changes if c.node == node][-1]
        assert last.final
        assert fake.labels[node][CONFIG_LABEL] == last.config
        assert fake.labels[node][STATE_LABEL] == "success"
    assert set(rollout.configs["mig-configs"]) == {c.config for c in rollout.changes}


@pytest.mark.parametrize("partial", [False, True])
def test_a_plan_with_no_safe_order_stops_naming_the_blocking_service(partial: bool) -> None:
    rollout, _ = example(["big"], 4)  # one node: it cannot drain, and nothing can lend room
    assert rollout.blocked is not None
    clock = ManualClock()
    fake = checked(rollout, clock)
    report = roll(rollout, fake, clock, Settings(300, 5, 120, partial))
    assert report.outcome is not None
    assert report.outcome.act is Act.STOP
    assert re.search(r"^big cannot be drained: \S+ would have 0\.0 req/s in rotation, below its "
                     r"floor of [0-9.]+; no safe node order was found", report.outcome.reason)
    assert ("nothing was changed" in report.outcome.reason) is not partial
    assert report.outcome.reason.startswith(rollout.blocked.replace(": ", " cannot be drained: ",
                                                                    1))
    assert fake.events == []  # nothing drained, nothing relabelled
    assert fake.rotation["big"]


def test_all_nodes_of_a_fresh_pool_are_labelled_and_none_drained() -> None:
    spec = parse_spec(yaml.safe_load((EXAMPLES / "serving-plan.yaml").read_text()))
    rollout, _ = plan_rollout(spec, default_table(), ["n0", "n1"], 1, solver="greedy")
    clock = ManualClock()
    fake = FakeMigNodes.for_rollout(rollout, clock)
    report = roll(rollout, fake, clock)
    assert report.ok
    assert not any(e.startswith(("drain", "create")) for e in fake.events)
    assert {fake.labels[n][CONFIG_LABEL] for n in ("n0", "n1")} == {
        c.config for c in rollout.changes}
    assert set(rollout.configs["mig-configs"]) == {c.config for c in rollout.changes}


def test_a_temporary_replica_on_an_idle_instance_needs_no_new_config() -> None:
    pb, current, plan = idle_beside()
    rollout = build_rollout(pb, "A100-40GB", current, plan_steps(pb, current, plan),
                            ["x", "y"], 1)
    clock = ManualClock()
    fake = checked(rollout, clock)
    report = roll(rollout, fake, clock)
    assert report.ok, report.outcome
    assert len(rollout.configs["mig-configs"]) == 2  # the two final layouts only
    (temp,) = rollout.temporaries.values()
    assert [e for e in fake.events if temp.name in e] == [
        f"create {temp.name}", f"admit {temp.name}", f"remove {temp.name}"]
    assert fake.events.index(f"admit {temp.name}") < fake.events.index("drain x")
    assert fake.pods == {}


class CrashError(Exception):
    pass


def test_a_rerun_after_a_crash_at_any_point_resumes_without_duplicates() -> None:
    rollout, _ = example()
    clock = ManualClock()
    total = len(roll(rollout, FakeMigNodes.for_rollout(rollout, clock), clock).actions)
    assert total > 10
    for crash_after in range(1, total):
        clock = ManualClock()
        fake = checked(rollout, clock)
        seen: list[Action] = []

        def crash(_: float, action: Action, seen: list[Action] = seen,
                  after: int = crash_after) -> None:
            seen.append(action)
            if len(seen) == after:
                raise CrashError

        with pytest.raises(CrashError):
            run_rollout(rollout, fake, clock, clock.advance, DEFAULT, crash)
        report = roll(rollout, fake, clock)  # a fresh controller: nothing kept but the cluster
        assert report.ok, (crash_after, report.outcome, fake.events)
        creates = [e for e in fake.events if e.startswith("create")]
        assert len(creates) == len(set(creates)) == 1, (crash_after, fake.events)
        assert fake.pods == {}
        labels = Counter(e for e in fake.events if e.startswith("label"))
        assert all(n <= 2 for n in labels.values()), (crash_after, fake.events)


def test_a_crash_while_the_temporary_pod_starts_waits_for_that_pod() -> None:
    rollout, _ = example()
    (temp,) = rollout.temporaries.values()
    clock = ManualClock()
    fake = checked(rollout, clock)

    def crash(_: float, action: Action) -> None:
        if action.act is Act.CREATE:
            raise CrashError

    with pytest.raises(CrashError):
        run_rollout(rollout, fake, clock, clock.advance, DEFAULT, crash)
    assert not fake.temporary_pods()[temp.name].ready
    report = roll(rollout, fake, clock)
    assert report.ok
    assert fake.events.count(f"create {temp.name}") == 1
    assert report.actions[0][1].act is Act.RESTORE  # gpu-d: already applied, put back again
    assert [a.act for _, a in report.actions].count(Act.LABEL) == 2  # gpu-b, then gpu-a back


def test_a_temporary_pod_that_never_becomes_ready_stops_before_any_drain_it_covers() -> None:
    rollout, _ = example()
    clock = ManualClock()
    fake = checked(rollout, clock)
    fake.ready_s = 10_000
    report = roll(rollout, fake, clock)
    assert report.outcome is not None
    assert report.outcome.act is Act.STOP
    assert report.outcome.pod is not None
    assert "not Ready within 120 s; gpu-b was not drained" in report.outcome.reason
    assert "drain gpu-b" not in fake.events
    assert fake.rotation["gpu-b"]


def test_a_refused_pod_stops_the_rollout_with_the_clusters_reason() -> None:
    rollout, _ = example()
    clock = ManualClock()
    fake = checked(rollout, clock)
    fake.refuse.add("image-tagger")
    report = roll(rollout, fake, clock)
    assert report.outcome is not None
    assert report.outcome.act is Act.STOP
    assert report.outcome.reason.startswith("the cluster refused: cannot create pod "
                                            "cotenant-temp-image-tagger-gpu-a")
    assert "drain gpu-b" not in fake.events


def test_a_lending_node_that_goes_down_stops_the_rollout_with_gpu_b_still_serving() -> None:
    rollout, _ = example()
    clock = ManualClock()
    fake = checked(rollout, clock)

    def sleep(seconds: float) -> None:
        clock.advance(seconds)
        if any(e.startswith("create") for e in fake.events):
            fake.down.add("gpu-a")

    report = run_rollout(rollout, fake, clock, sleep, DEFAULT)
    assert report.outcome is not None
    assert "not Ready within" in report.outcome.reason
    assert fake.rotation["gpu-b"]


def test_a_stale_temporary_pod_is_removed_at_the_end() -> None:
    rollout, _ = example()
    clock = ManualClock()
    fake = checked(rollout, clock)
    old = TempReplica("cotenant-temp-dedup-gpu-c-0-1g.5gb-0", "dedup", "gpu-d", "1g.5gb", 0.0)
    fake.create_temporary(old)
    report = roll(rollout, fake, clock)
    assert report.ok
    assert f"remove {old.name}" in fake.events
    assert fake.pods == {}


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


def test_a_node_already_applied_is_not_relabelled() -> None:
    rollout, _ = example()
    clock = ManualClock()
    fake = FakeMigNodes.for_rollout(rollout, clock)
    first = rollout.changes[0]
    fake.labels[first.node].update({CONFIG_LABEL: first.config, STATE_LABEL: "success"})
    fake.layouts[first.node] = first.config
    fake.serves[first.node] = [(s, p, 0.0) for s, p in fake.replicas[first.node, first.config]]
    report = roll(rollout, fake, clock)
    assert report.ok
    assert report.actions[0][1] == Action(Act.RESTORE, first.node, first.config,
                                          "already applied")
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


def test_slack_counts_what_earlier_changes_put_back_and_temporary_pods_in_rotation() -> None:
    temp = TempReplica("t", "svc", "c", "1g.5gb", 60.0)
    rollout = Rollout(
        changes=(NodeChange("a", "c0", (), (("svc", 60.0),), True),
                 NodeChange("b", "c1", (("svc", 100.0),), (), True, (temp,), (temp,))),
        services=("svc",), floor=(50.0,), replicas=(1,), configs={})
    from cotenant.integrations.k8s.mig.steps import TempPod  # noqa: PLC0415

    none = Seen({})
    assert "svc would have 0.0 req/s" in str(lacks_slack(rollout, Cursor(), none, "b"))
    assert lacks_slack(rollout, Cursor(stage=1), none, "b") is None
    ready = Seen({}, {"t": TempPod("c", "svc", True, True)})
    assert lacks_slack(rollout, Cursor(), ready, "b") is None
    pending = Seen({}, {"t": TempPod("c", "svc", False, False)})
    assert lacks_slack(rollout, Cursor(), pending, "b") is not None


@pytest.mark.parametrize(("nodes", "per_node", "message"), [
    (["a", "b"], 1, "2 node(s) of 1 GPUs hold 2 GPUs; the plan uses 4"),
    (["a", "a", "b", "c"], 1, "a node is named twice"),
    (NODES, 0, "0 must be at least 1"),
])
def test_bad_node_lists_are_one_line_errors(nodes: list[str], per_node: int,
                                            message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)):
        example(nodes, per_node)


def test_a_node_whose_layouts_do_not_change_is_relabelled_without_a_drain() -> None:
    same = NodeChange("a", "c0", (("svc", 100.0),), (("svc", 100.0),), False)
    rollout = Rollout((same,), ("svc",), (100.0,), (1,), {})
    clock = ManualClock()
    fake = FakeMigNodes.for_rollout(rollout, clock)
    report = roll(rollout, fake, clock)
    assert report.ok
    assert fake.events == ["label a=c0"]
    assert fake.labels["a"][STATE_LABEL] == "success"


PARTIAL: list[int] = []


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.lists(st.floats(0, 2000), min_size=2, max_size=2),
       st.lists(st.floats(0, 2000), min_size=2, max_size=2),
       st.integers(0, 3), st.sampled_from([1, 2]))
def test_random_rollouts_keep_every_floor_at_every_write(before: list[float],
                                                         after: list[float], spare: int,
                                                         per_node: int) -> None:
    """Random replans through the planner, the node stages and the controller, against the
    fake that checks the floors after each write: they complete where the stages do, leaving
    no temporary pod behind; where the stages are blocked the rollout is refused before any
    write, and with ``partial`` it carries out the changes that leave no temporary pod and no
    intermediate layout behind and stops naming the blocked node."""
    try:
        pb, current, change = replan(before, after, spare)
    except InfeasibleError:
        return
    count = -(-max(len(current), len(change.target)) // per_node)
    nodes = [f"n{i}" for i in range(count)]
    rollout = build_rollout(pb, "A100-40GB", current, change, nodes, per_node)
    clock = ManualClock()
    fake = checked(rollout, clock)
    report = roll(rollout, fake, clock)
    assert report.outcome is not None
    if rollout.blocked is None:
        assert report.ok, report.outcome
        assert fake.pods == {}
    else:
        node, why = rollout.blocked.split(": ", 1)
        assert report.outcome.reason.startswith(f"{node} cannot be drained: {why}")
        assert fake.events == []  # refused: nothing touched
        report = roll(rollout, fake, clock, Settings(300, 5, 120, partial=True))
        assert report.outcome is not None
        assert report.outcome.reason.startswith(f"{node} cannot be drained: {why}")
        assert fake.pods == {}  # partial: only the changes that leave nothing behind
        intermediate = {c.config for c in rollout.changes if not c.final}
        assert not intermediate & set(fake.layouts.values())
        PARTIAL.append(len(report.actions))


def test_the_fakes_temporary_pod_is_ready_only_where_its_instance_exists() -> None:
    clock = ManualClock()
    configs = {"mig-configs": {
        "big": [{"devices": [0], "mig-enabled": True, "mig-devices": {"7g.40gb": 1}}],
        "small": [{"devices": [0, 1], "mig-enabled": True, "mig-devices": {"1g.5gb": 1}}]}}
    fake = FakeMigNodes(clock, configs=configs, services={"svc"}, ready_s=10)
    fake.add_node("n", {CONFIG_LABEL: "big"}, serving=False)
    one, two, three = (TempReplica(f"t{i}", "svc", "n", "1g.5gb", 1.0) for i in range(3))
    fake.create_temporary(one)
    clock.advance(10)
    assert not fake.temporary_pods()["t0"].ready  # no 1g.5gb instance on "big": Pending
    fake.set_config("n", "small")
    clock.advance(30)
    fake.node_labels("n")
    assert not fake.temporary_pods()["t0"].ready  # its instance went with the old layout
    fake.remove_temporary("t0")
    fake.create_temporary(two)
    fake.create_temporary(three)
    clock.advance(10)
    assert fake.temporary_pods()["t1"].ready  # "small" has two 1g.5gb: one each
    assert fake.temporary_pods()["t2"].ready
    fake.refuse.add("svc")
    with pytest.raises(PermanentError, match="refused"):
        fake.create_temporary(TempReplica("t3", "svc", "n", "1g.5gb", 1.0))


def kill_on(rollout: Rollout, fake: FakeMigNodes, act: Act, node: str) -> Action | None:
    """Roll out, killing the temporary pod once ``act`` on ``node`` is carried out."""
    (temp,) = rollout.temporaries.values()

    def kill(_: float, action: Action) -> None:
        if action.act is act and action.node == node and temp.name in fake.pods:
            fake.pods[temp.name].dead = True

    assert isinstance(fake.clock, ManualClock)
    return run_rollout(rollout, fake, fake.clock, fake.clock.advance, DEFAULT, kill).outcome


def test_a_temporary_pod_dying_after_admission_stops_before_the_drain() -> None:
    rollout, _ = example()
    (temp,) = rollout.temporaries.values()
    fake = checked(rollout, ManualClock())
    outcome = kill_on(rollout, fake, Act.ADMIT, temp.node)
    assert outcome is not None
    assert outcome.act is Act.STOP
    assert "not Ready within 120 s; gpu-b was not drained" in outcome.reason
    assert "drain gpu-b" not in fake.events
    assert fake.rotation["gpu-b"]


def test_a_temporary_pod_dying_after_the_drain_puts_the_node_back_unchanged() -> None:
    rollout, _ = example()
    fake = checked(rollout, ManualClock())
    outcome = kill_on(rollout, fake, Act.DRAIN, "gpu-b")
    assert outcome is not None
    assert outcome.act is Act.STOP
    assert outcome.reason.startswith("gpu-b was put back in rotation unchanged: image-tagger "
                                     "would have 0.0 req/s in rotation")
    assert fake.events[-2:] == ["drain gpu-b", "restore gpu-b"]  # never relabelled
    assert "gpu-b" not in labelled(fake)
    assert fake.rotation["gpu-b"]


def test_a_temporary_pod_dying_while_the_node_applies_stops_and_says_so() -> None:
    rollout, _ = example()
    fake = checked(rollout, ManualClock())
    outcome = kill_on(rollout, fake, Act.LABEL, "gpu-b")
    assert outcome is not None
    assert outcome.act is Act.STOP
    assert outcome.node == "gpu-b"
    assert "while it applies, image-tagger would have 0.0 req/s" in outcome.reason
    assert "restore gpu-b" not in fake.events


def test_a_restored_nodes_new_pods_serve_before_the_next_drain_relies_on_them() -> None:
    rollout, _ = example()
    clock = ManualClock()
    fake = checked(rollout, clock)
    fake.serve_s = 40.0
    report = roll(rollout, fake, clock)
    assert report.ok, report.outcome
    at = {str(a): t for t, a in report.actions}
    restored = at["restore gpu-d nvidia.com/mig.config=" + rollout.changes[0].config]
    assert at["drain gpu-a"] >= restored + 40.0


def test_new_pods_that_never_serve_stop_the_rollout_before_the_next_drain() -> None:
    rollout, _ = example()
    clock = ManualClock()
    fake = checked(rollout, clock)
    fake.serve_s = 10_000.0
    report = roll(rollout, fake, clock)
    assert report.outcome is not None
    assert report.outcome.act is Act.STOP
    assert report.outcome.node == "gpu-d"
    assert re.search(r"its new replicas are not all Ready and in rotation within 120 s "
                     r"\(missing: .*search-ranker\); nothing else was drained",
                     report.outcome.reason)
    assert fake.events == [f"label gpu-d={rollout.changes[0].config}", "restore gpu-d"]


def test_serving_pods_out_of_rotation_the_rollout_did_not_take_out_refuse_the_start() -> None:
    rollout, _ = example()
    clock = ManualClock()
    fake = checked(rollout, clock)
    fake.rotation["gpu-c"] = False  # left out by a run of another plan
    report = roll(rollout, fake, clock)
    assert report.outcome is not None
    assert report.outcome.reason.startswith(
        "gpu-c has serving pods out of rotation that this rollout did not take out (dedup)")
    assert fake.events == []


def test_serving_pods_without_a_rotation_label_refuse_the_start_naming_the_label() -> None:
    """A pod template without cotenant.io/rotation: the controller could not count those
    pods as serving, so it says what to add instead of a misleading floor message later."""
    rollout, _ = example()
    clock = ManualClock()
    fake = checked(rollout, clock)
    fake.unlabelled.add("gpu-c")
    report = roll(rollout, fake, clock)
    assert report.outcome is not None
    assert report.outcome.act is Act.STOP
    assert report.outcome.reason == (
        "gpu-c has serving pods without the label cotenant.io/rotation (dedup): traffic "
        "moves by that label, so add 'cotenant.io/rotation: in' to the pod template and "
        "select it in the Service")
    assert fake.events == []


@pytest.mark.parametrize(("before", "after", "spare"), [
    ([1604.8, 380.99], [775.32, 715.22], 0), ([1753.68, 310.49], [353.53, 1982.46], 1)])
def test_rollouts_the_planners_node_order_would_block_complete(before: list[float],
                                                              after: list[float],
                                                              spare: int) -> None:
    pb, current, change = replan(before, after, spare)
    nodes = [f"n{i}" for i in range(max(len(current), len(change.target)))]
    rollout = build_rollout(pb, "A100-40GB", current, change, nodes, 1)
    assert rollout.blocked is None
    clock = ManualClock()
    fake = checked(rollout, clock)
    report = roll(rollout, fake, clock)
    assert report.ok, report.outcome
    assert fake.pods == {}


def test_config_names_name_their_layouts_across_rollouts() -> None:
    rollout, _ = example()
    pb, current, change = replan([1604.8, 380.99], [775.32, 715.22], 0)  # another plan
    before = build_rollout(pb, "A100-40GB", current, change, NODES, 1)
    ours, theirs = rollout.configs["mig-configs"], before.configs["mig-configs"]
    for name in set(ours) & set(theirs):
        assert ours[name] == theirs[name]  # one name, one layout
    other = sorted(set(theirs) - set(ours))[0]  # another plan's config, left at success
    first = rollout.changes[0]
    clock = ManualClock()
    fake = checked(rollout, clock)
    fake.labels[first.node].update({CONFIG_LABEL: other, STATE_LABEL: "success"})
    report = roll(rollout, fake, clock)
    assert report.ok, report.outcome
    assert f"label {first.node}={first.config}" in fake.events  # not taken for done


def test_partial_random_rollouts_were_exercised() -> None:
    if not PARTIAL:
        test_random_rollouts_keep_every_floor_at_every_write()
    assert PARTIAL, "no blocked example: the partial branch above never ran"
    assert any(n > 0 for n in PARTIAL), PARTIAL  # some went part of the way


def test_a_node_that_only_gains_a_replica_is_counted_once_its_new_pod_serves() -> None:
    # n1 keeps its layout and gains a replica of a (not drained); n0's drain needs it
    pb, current, change = replan([1201.0, 0.0], [901.0, 0.0], 1)
    rollout = build_rollout(pb, "A100-40GB", current, change, ["n0", "n1", "n2"], 1)
    gains = [c for c in rollout.changes if not c.drains and len(c.restore) > len(c.drain)]
    assert [c.node for c in gains] == ["n1"]
    clock = ManualClock()
    fake = checked(rollout, clock)
    fake.serve_s = 40.0
    report = roll(rollout, fake, clock)
    assert report.ok, report.outcome
    at = {str(a): t for t, a in report.actions}
    assert at["drain n0"] >= at[f"label n1 nvidia.com/mig.config={gains[0].config}"] + 30 + 40


def test_the_fakes_temporary_pod_needs_an_instance_no_serving_pod_holds() -> None:
    clock = ManualClock()
    configs = {"mig-configs": {
        "small": [{"devices": [0], "mig-enabled": True, "mig-devices": {"1g.5gb": 2}}]}}
    fake = FakeMigNodes(clock, configs=configs, services={"svc"}, ready_s=10)
    fake.add_node("n", {CONFIG_LABEL: "small"}, serving=True)
    fake.serves["n"] = [("svc", "1g.5gb", 0.0)]  # one of the two 1g instances serves
    fake.create_temporary(TempReplica("t0", "svc", "n", "1g.5gb", 1.0))
    fake.create_temporary(TempReplica("t1", "svc", "n", "1g.5gb", 1.0))
    clock.advance(10)
    pods = fake.temporary_pods()
    assert not pods["t0"].ready  # two temporary pods for the one idle instance
    fake.remove_temporary("t1")
    assert fake.temporary_pods()["t0"].ready
