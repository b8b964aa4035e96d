"""The MIG controller's decisions as a pure step machine: given the rollout, where it stands
(:class:`Cursor`), what it saw in the cluster (:class:`Seen`: node labels, temporary pods and
each node's serving pods, :mod:`.seen`) and the time, the next action.

A node's replicas in the plan count as serving only as far as its serving pods are seen Ready
and in rotation (``cotenant.io/rotation: in``). A run refuses to start where a node shows
serving pods out of rotation that the rollout did not take out (a run of another plan did).

The changes run in the rollout's order, one at a time. For each:

1. the temporary replicas it needs are created (if missing), waited for until Ready, and put
   in rotation;
2. unless the node's layout stays, its replicas are taken out of rotation (``drain``), but
   only if every service keeps at least its floor in rotation and, if it had a replica today,
   one replica (the planner's invariants, :mod:`~cotenant.policies.partition.reconfig.steps`),
   counting what earlier changes took out and put back and the temporary pods seen Ready and
   in rotation; otherwise the rollout stops and names the service;
3. its ``nvidia.com/mig.config`` label is written and ``nvidia.com/mig.config.state`` waited
   for; ``success`` puts the node's new replicas in rotation (``restore``), and the next
   step waits (up to the temporary pods' timeout) until the node's serving pods, which the
   user's Deployments create, are Ready and in rotation for every replica the plan puts
   back: nothing relies on them before. The slack is
   checked again before the label: if a replica the drain relied on no longer serves,
   the node is put back in rotation unchanged and the rollout stops; if one is lost while
   the node applies, the rollout stops and says so;
4. the temporary replicas it no longer needs are taken out and deleted.

Each change is checked against the labels first, so a rerun after a stop or a crash resumes:
a node already at the change's config (or at a later config of the rollout) is not changed
again, a label written but not yet applied is waited for, and a temporary pod that exists is
not created twice. A ``failed`` state, no ``success`` within the timeout, or a temporary pod
not Ready within its timeout stops the rollout, leaving in rotation all it can.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from cotenant.integrations.k8s.mig.rollout import NodeChange, Rollout, TempReplica
from cotenant.integrations.k8s.mig.seen import (
    CONFIG_LABEL,
    DEFAULT_SETTINGS,
    STATE_LABEL,
    Cursor,
    Phase,
    Seen,
    ServingPod,
    Settings,
    TempPod,
    applied,
    lacks_slack,
    node_replicas,
    not_serving,
    past,
    unexplained,
)

__all__ = ["CONFIG_LABEL", "DEFAULT_SETTINGS", "STATE_LABEL", "Act", "Action", "Cursor", "Phase",
           "Seen", "ServingPod", "Settings", "TempPod", "lacks_slack", "node_replicas",
           "step", "unexplained"]



class Act(StrEnum):
    CREATE = "create"  # a temporary pod
    ADMIT = "admit"  # a Ready temporary pod into rotation
    REMOVE = "remove"  # a temporary pod out of rotation and deleted
    DRAIN = "drain"
    LABEL = "label"
    WAIT = "wait"
    RESTORE = "restore"
    SKIP = "skip"  # the node already has its config: nothing to do
    DONE = "done"
    STOP = "stop"


@dataclass(frozen=True)
class Action:
    act: Act
    node: str | None = None
    config: str | None = None
    reason: str = ""
    pod: TempReplica | None = None
    """The temporary replica a create, admit or remove is about."""

    def __str__(self) -> str:
        what = f"{self.act.value} {self.node or ''}".rstrip()
        if self.pod is not None:
            what += f" pod {self.pod.name} ({self.pod.service}, {self.pod.profile})"
        if self.config:
            what += f" {CONFIG_LABEL}={self.config}"
        return f"{what}: {self.reason}" if self.reason else what


def _begin(rollout: Rollout, cursor: Cursor, seen: Seen,
           now: float) -> tuple[Action | None, Cursor]:
    """A change not yet begun: already applied, superseded, under way, or to start."""
    change = rollout.changes[cursor.stage]
    labels = seen.labels.get(change.node, {})
    if applied(labels, change.config):
        if change.drains and change.restore:
            return (Action(Act.RESTORE, change.node, change.config, "already applied"),
                    replace(cursor, phase=Phase.RESTORED, since=None))
        return (Action(Act.SKIP, change.node, change.config, "already applied"),
                replace(cursor, phase=Phase.RESTORED, since=None))
    if past(rollout, cursor.stage, labels.get(CONFIG_LABEL), seen):
        return (Action(Act.SKIP, change.node, change.config,
                       f"the node is at a later config, {labels[CONFIG_LABEL]}"),
                replace(cursor, phase=Phase.RELEASING, since=None))
    if labels.get(CONFIG_LABEL) == change.config:  # written by an earlier run: wait for it
        return None, replace(cursor, phase=Phase.LABELLED, since=now)
    return None, replace(cursor, phase=Phase.STARTING, since=None)


def _start(rollout: Rollout, cursor: Cursor, seen: Seen, now: float,
           settings: Settings) -> tuple[Action, Cursor]:
    """Bring the change's temporary replicas into rotation, then drain (or label) its node."""
    change = rollout.changes[cursor.stage]
    for t in change.temporaries:
        if t.name not in seen.temps:
            return Action(Act.CREATE, t.node, pod=t), replace(cursor, since=now)
    waiting = [t for t in change.temporaries if not seen.temps[t.name].ready]
    if waiting:
        since = now if cursor.since is None else cursor.since
        if now - since >= settings.ready_s:
            return Action(Act.STOP, waiting[0].node, pod=waiting[0], reason=(
                f"not Ready within {settings.ready_s:g} s; {change.node} was not drained "
                "(see the pod's events)")), cursor
        return Action(Act.WAIT, waiting[0].node, pod=waiting[0], reason="not Ready"), replace(
            cursor, since=since)
    for t in change.temporaries:
        if not seen.temps[t.name].serving:
            return Action(Act.ADMIT, t.node, pod=t), replace(cursor, since=None)
    if change.drains:
        why = lacks_slack(rollout, cursor, seen, change.node)
        if why is not None:
            tail = "; no safe node order was found from here" if rollout.blocked else ""
            return Action(Act.STOP, reason=f"{change.node} cannot be drained: {why}{tail}"), cursor
        stale = sorted(n for n, t in seen.temps.items() if t.node == change.node)
        if stale:  # a temporary pod the new layout would kill (left by another run)
            pod = rollout.temporaries.get(stale[0]) or TempReplica(
                stale[0], seen.temps[stale[0]].service, change.node, "", 0.0)
            return Action(Act.REMOVE, change.node, pod=pod, reason="on a node to change"), cursor
    if not change.drains or not change.drain:
        why = "" if change.final else "an intermediate layout: room for temporary replicas"
        return (Action(Act.LABEL, change.node, change.config, why),
                replace(cursor, phase=Phase.LABELLED, since=now))
    return Action(Act.DRAIN, change.node), replace(cursor, phase=Phase.DRAINED)


def _label(rollout: Rollout, cursor: Cursor, seen: Seen, now: float) -> tuple[Action, Cursor]:
    """Label the drained node, unless what its drain relied on is gone since (a temporary pod,
    or another node's serving pod, no longer Ready and in rotation): then put it back in
    rotation, unchanged, and stop."""
    change = rollout.changes[cursor.stage]
    lost = lacks_slack(rollout, cursor, seen)
    if lost is not None:
        why = (f"{change.node} was put back in rotation unchanged: {lost} (a replica its drain "
               "relied on no longer serves)")
        return (Action(Act.RESTORE, change.node, reason="a replica it relied on is gone"),
                replace(cursor, phase=Phase.HALTED, why=why))
    why = "" if change.final else "an intermediate layout: room for temporary replicas"
    return (Action(Act.LABEL, change.node, change.config, why),
            replace(cursor, phase=Phase.LABELLED, since=now))


def _applying(change: NodeChange, cursor: Cursor, seen: Seen, now: float,
              settings: Settings) -> tuple[Action, Cursor]:
    """Wait for the MIG manager's answer to the change's label."""
    labels = seen.labels.get(change.node, {})
    state = labels.get(STATE_LABEL)
    if labels.get(CONFIG_LABEL) != change.config:
        return Action(Act.STOP, change.node, reason=(
            f"its {CONFIG_LABEL} is now {labels.get(CONFIG_LABEL)!r}; someone else changed it"
        )), cursor
    if state == "success":
        if change.drains and change.restore:
            return (Action(Act.RESTORE, change.node, change.config),
                    replace(cursor, phase=Phase.RESTORED, since=None))
        return (Action(Act.SKIP, change.node, change.config, "applied, nothing to restore"),
                replace(cursor, phase=Phase.RESTORED, since=None))
    if state == "failed":
        return Action(Act.STOP, change.node, change.config,
                      f"the MIG manager reports {STATE_LABEL}=failed; the node stays out of "
                      "rotation (see the nvidia-mig-manager pod's log)"), cursor
    since = now if cursor.since is None else cursor.since
    if now - since >= settings.timeout_s:
        return Action(Act.STOP, change.node, change.config,
                      f"no success within {settings.timeout_s:g} s (state {state or 'unset'}); "
                      "the node stays out of rotation"), cursor
    return Action(Act.WAIT, change.node, change.config, state or "unset"), replace(
        cursor, since=since)


def _restored(change: NodeChange, cursor: Cursor, seen: Seen, now: float,
              settings: Settings) -> tuple[Action | None, Cursor]:
    """Wait until the node's new pods (the user's Deployments create them) are Ready and in
    rotation for every replica the plan puts back, before anything relies on them."""
    missing = not_serving(change, seen)
    if not missing:
        return None, replace(cursor, phase=Phase.RELEASING, since=None)
    since = now if cursor.since is None else cursor.since
    if now - since >= settings.ready_s:
        return Action(Act.STOP, change.node, change.config, (
            f"its new replicas are not all Ready and in rotation within {settings.ready_s:g} s "
            f"(missing: {missing}); nothing else was drained")), cursor
    return (Action(Act.WAIT, change.node, change.config, f"its new pods: missing {missing}"),
            replace(cursor, since=since))


def _release(rollout: Rollout, cursor: Cursor, seen: Seen) -> Action | None:
    """Remove the change's temporary replicas that are still there, each only if safe."""
    for t in rollout.changes[cursor.stage].release:
        if t.name in seen.temps:
            why = lacks_slack(rollout, cursor, seen, pods=(t.name,))
            if why is not None:
                return Action(Act.STOP, t.node, pod=t, reason=f"kept: without it {why}")
            return Action(Act.REMOVE, t.node, pod=t, reason="no longer needed")
    return None


def step(rollout: Rollout, cursor: Cursor, seen: Seen, now: float,
         settings: Settings = DEFAULT_SETTINGS) -> tuple[Action, Cursor]:
    """The next action and the cursor once it is carried out."""
    if cursor == Cursor():  # a run's first step: what the cluster shows must be explained
        why = unexplained(rollout, seen)
        if why is not None:
            return Action(Act.STOP, reason=why), cursor
    while cursor.stage < len(rollout.changes):
        change = rollout.changes[cursor.stage]
        if cursor.phase is Phase.IDLE and cursor.stage >= rollout.clean:
            node, why = str(rollout.blocked).split(": ", 1)
            return Action(Act.STOP, reason=(
                f"{node} cannot be drained: {why}; no safe node order was found from here, so "
                f"the rollout stops after the {cursor.stage} change(s) that leave no temporary "
                "replica or intermediate layout behind")), cursor
        if cursor.phase is Phase.IDLE:
            action, cursor = _begin(rollout, cursor, seen, now)
            if action is not None:
                return action, cursor
        elif cursor.phase is Phase.STARTING:
            return _start(rollout, cursor, seen, now, settings)
        elif cursor.phase is Phase.DRAINED:
            return _label(rollout, cursor, seen, now)
        elif cursor.phase is Phase.LABELLED:
            lost = lacks_slack(rollout, cursor, seen)
            if lost is not None:
                return Action(Act.STOP, change.node, change.config, (
                    f"while it applies, {lost} (a replica its drain relied on no longer "
                    "serves); it stays out of rotation until a rerun after success")), cursor
            return _applying(change, cursor, seen, now, settings)
        elif cursor.phase is Phase.HALTED:
            return Action(Act.STOP, change.node, reason=cursor.why), cursor
        elif cursor.phase is Phase.RESTORED:
            waiting, cursor = _restored(change, cursor, seen, now, settings)
            if waiting is not None:
                return waiting, cursor
        else:
            action = _release(rollout, cursor, seen)
            if action is not None:
                return action, cursor
            cursor = Cursor(cursor.stage + 1)
    left = sorted(seen.temps)  # none should be: one a stopped earlier plan left behind
    if left:
        pod = rollout.temporaries.get(left[0]) or TempReplica(
            left[0], seen.temps[left[0]].service, seen.temps[left[0]].node, "", 0.0)
        return Action(Act.REMOVE, pod.node, pod=pod, reason="not part of this rollout"), cursor
    return Action(Act.DONE), cursor
