"""The MIG controller's decisions as a pure step machine: given the rollout, where it stands
(:class:`Cursor`), what the cluster's labels say and the time, the next action.

One node changes at a time: drain it (its replicas out of rotation), write its
``nvidia.com/mig.config`` label, wait for ``nvidia.com/mig.config.state``, then put its new
replicas in rotation. The next node is the first in the planner's order that

* already shows its config applied (``success`` under the same label): nothing to do; or
* can be drained: every service keeps at least its floor in rotation and, if it had a
  replica today, one replica (the planner's invariants, :mod:`~cotenant.policies.partition.
  reconfig.steps`), counting what earlier nodes took out and put back.

A node whose services lack that slack is never drained. If no remaining node can be, the
rollout stops and says which service blocks the first. A ``failed`` state stops it, and so does
a node that reports no ``success`` within the timeout: both leave that node out of rotation.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from cotenant.integrations.k8s.mig.rollout import NodeChange, Rollout
from cotenant.policies.partition.problem import unmet

CONFIG_LABEL = "nvidia.com/mig.config"
STATE_LABEL = "nvidia.com/mig.config.state"
WAITING_STATES = ("pending", "rebooting")


class Phase(StrEnum):
    IDLE = "idle"  # no node under way
    DRAINED = "drained"  # the active node's replicas are out of rotation
    LABELLED = "labelled"  # its label is written; waiting for the MIG manager


class Act(StrEnum):
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

    def __str__(self) -> str:
        what = f"{self.act.value} {self.node or ''}".rstrip()
        if self.config:
            what += f" {CONFIG_LABEL}={self.config}"
        return f"{what}: {self.reason}" if self.reason else what


@dataclass(frozen=True)
class Cursor:
    finished: tuple[int, ...] = ()
    """Indices of the changes done (or skipped), in the order they were done."""
    active: int | None = None
    phase: Phase = Phase.IDLE
    since: float = 0.0
    """When the active node's label was written."""


Labels = dict[str, dict[str, str]]
"""Per node of the rollout, its labels as last read."""


def in_rotation(rollout: Rollout, cursor: Cursor) -> tuple[list[float], list[int]]:
    """Per service, req/s and replicas in rotation now: today's, less the replicas of the
    nodes drained, plus the new replicas of the nodes done."""
    index = {s: i for i, s in enumerate(rollout.services)}
    rate, count = list(rollout.capacity), [0] * len(rollout.services)
    for change in rollout.changes:
        for service, _ in change.drain:
            if service in index:
                count[index[service]] += 1
    moves: list[tuple[tuple[tuple[str, float], ...], int]] = []
    for k in cursor.finished:
        if rollout.changes[k].layout_changes:
            moves += [(rollout.changes[k].drain, -1), (rollout.changes[k].restore, 1)]
    if cursor.active is not None and rollout.changes[cursor.active].layout_changes:
        moves.append((rollout.changes[cursor.active].drain, -1))
    for replicas, sign in moves:
        for service, r in replicas:
            if service in index:
                rate[index[service]] += sign * r
                count[index[service]] += sign
    return rate, count


def lacks_slack(rollout: Rollout, cursor: Cursor, change: NodeChange) -> str | None:
    """Why draining ``change.node`` now breaks an invariant, or None if it is safe."""
    if not change.layout_changes:
        return None
    rate, count = in_rotation(rollout, cursor)
    index = {s: i for i, s in enumerate(rollout.services)}
    for service, r in change.drain:
        if service in index:
            rate[index[service]] -= r
            count[index[service]] -= 1
    for s, name in enumerate(rollout.services):
        if unmet(rate[s], rollout.floor[s]):
            return (f"{name} would have {rate[s]:.1f} req/s in rotation, below its floor of "
                    f"{rollout.floor[s]:.1f}")
        if rollout.replicas[s] > 0 and count[s] <= 0:
            return f"{name} would have no replica in rotation"
    return None


def _applied(labels: dict[str, str], config: str) -> bool:
    return labels.get(CONFIG_LABEL) == config and labels.get(STATE_LABEL) == "success"


def _next(rollout: Rollout, cursor: Cursor, labels: Labels, now: float) -> tuple[Action, Cursor]:
    todo = [k for k in range(len(rollout.changes)) if k not in cursor.finished]
    if not todo:
        return Action(Act.DONE), cursor
    blocked = None
    for k in todo:
        change = rollout.changes[k]
        if _applied(labels.get(change.node, {}), change.config):
            return (Action(Act.SKIP, change.node, change.config, "already applied"),
                    replace(cursor, finished=(*cursor.finished, k)))
        why = lacks_slack(rollout, cursor, change)
        if why is None:
            if not change.layout_changes or not change.drain:
                return (Action(Act.LABEL, change.node, change.config),
                        Cursor(cursor.finished, k, Phase.LABELLED, now))
            return Action(Act.DRAIN, change.node), Cursor(cursor.finished, k, Phase.DRAINED)
        blocked = blocked or f"{change.node} cannot be drained: {why}"
    return Action(Act.STOP, reason=f"{blocked}; no other node left to change can be"), cursor


def step(rollout: Rollout, cursor: Cursor, labels: Labels, now: float,
         timeout_s: float) -> tuple[Action, Cursor]:
    """The next action and the cursor once it is carried out."""
    if cursor.active is None:
        return _next(rollout, cursor, labels, now)
    change = rollout.changes[cursor.active]
    if cursor.phase is Phase.DRAINED:
        return (Action(Act.LABEL, change.node, change.config),
                replace(cursor, phase=Phase.LABELLED, since=now))
    seen = labels.get(change.node, {})
    state = seen.get(STATE_LABEL)
    if seen.get(CONFIG_LABEL) != change.config:
        return Action(Act.STOP, change.node, reason=(
            f"its {CONFIG_LABEL} is now {seen.get(CONFIG_LABEL)!r}; someone else changed it"
        )), cursor
    if state == "success":
        done = Cursor((*cursor.finished, cursor.active))
        if change.layout_changes and change.restore:
            return Action(Act.RESTORE, change.node, change.config), done
        return Action(Act.SKIP, change.node, change.config, "applied, nothing to restore"), done
    if state == "failed":
        return Action(Act.STOP, change.node, change.config,
                      f"the MIG manager reports {STATE_LABEL}=failed; the node stays out of "
                      "rotation (see the nvidia-mig-manager pod's log)"), cursor
    if now - cursor.since >= timeout_s:
        return Action(Act.STOP, change.node, change.config,
                      f"no success within {timeout_s:g} s (state {state or 'unset'}); the node "
                      "stays out of rotation"), cursor
    return Action(Act.WAIT, change.node, change.config, state or "unset"), cursor
