"""What the MIG controller's step machine (:mod:`.steps`) sees and where it stands: the
labels, temporary pods and serving pods it read (:class:`Seen`), its place in the rollout
(:class:`Cursor`), its timeouts (:class:`Settings`), and what that makes of the slack: the
plan's replicas in rotation at a cursor, counted only as far as the serving pods seen Ready
and in rotation account for them, and the one invariant rule of the reconfiguration
(:func:`~cotenant.policies.partition.reconfig.shortfall`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from cotenant.integrations.k8s.mig.pods import ROTATION_LABEL
from cotenant.integrations.k8s.mig.rollout import NodeChange, Rollout
from cotenant.policies.partition.reconfig import shortfall

CONFIG_LABEL = "nvidia.com/mig.config"
STATE_LABEL = "nvidia.com/mig.config.state"
WAITING_STATES = ("pending", "rebooting")


class Phase(StrEnum):
    IDLE = "idle"  # the change has not begun
    STARTING = "starting"  # its temporary replicas are being brought into rotation
    DRAINED = "drained"  # the node's replicas are out of rotation
    LABELLED = "labelled"  # its label is written; waiting for the MIG manager
    RESTORED = "restored"  # applied and put back: waiting for its new pods to serve
    RELEASING = "releasing"  # serving: its temporary replicas no longer needed go
    HALTED = "halted"  # put back in rotation unchanged after a loss: the rollout stops


@dataclass(frozen=True)
class TempPod:
    """A temporary pod as seen in the cluster."""

    node: str
    service: str
    ready: bool
    serving: bool
    """Whether it is in rotation (``cotenant.io/rotation: in``)."""


@dataclass(frozen=True)
class ServingPod:
    """A serving pod (``cotenant.io/service``, not temporary) on a node, as seen."""

    service: str
    ready: bool
    rotation: str | None
    """Its ``cotenant.io/rotation`` label: ``in``, ``out`` or None (never moved)."""

    @property
    def serving(self) -> bool:
        return self.ready and self.rotation == "in"


Labels = Mapping[str, dict[str, str]]
"""Per node of the rollout, its labels as last read (read when looked up)."""


@dataclass(frozen=True)
class Seen:
    labels: Labels
    temps: dict[str, TempPod] = field(default_factory=dict)
    """Every temporary pod the controller made, by name."""
    serving: Mapping[str, tuple[ServingPod, ...]] | None = None
    """Per node of the rollout, its serving pods (read when looked up); None where not
    observed: the plan's replicas then count as they are."""


@dataclass(frozen=True)
class Cursor:
    stage: int = 0
    """The change under way (all before it are done)."""
    phase: Phase = Phase.IDLE
    since: float | None = None
    """When the current wait began (a label written, a pod created)."""
    why: str = ""
    """Why the rollout stops (:attr:`Phase.HALTED`)."""


@dataclass(frozen=True)
class Settings:
    timeout_s: float = 900.0
    """Seconds a node may take from its label write to ``success`` (a reboot included)."""
    poll_s: float = 5.0
    """Seconds between reads of a node's state while it applies."""
    ready_s: float = 300.0
    """Seconds a temporary pod, or a changed node's new serving pods, may take to become Ready
    (image pull included)."""
    partial: bool = False
    """Whether a rollout with no safe node order for every node carries out the changes
    before the blocked one that leave no temporary replica or intermediate layout behind
    (:attr:`~.rollout.Rollout.clean`) rather than being refused."""


DEFAULT_SETTINGS = Settings()


def node_replicas(rollout: Rollout, cursor: Cursor) -> dict[str, tuple[tuple[str, float], ...]]:
    """Per node, the plan's replicas in rotation on it at ``cursor`` (the serving pods seen
    decide how many of them count, :func:`observed`)."""
    out: dict[str, tuple[tuple[str, float], ...]] = {}
    for c in rollout.changes:
        out.setdefault(c.node, c.drain)
    for k, c in enumerate(rollout.changes[:cursor.stage + 1]):
        if k < cursor.stage or cursor.phase in (Phase.RESTORED, Phase.RELEASING):
            out[c.node] = c.restore  # a change without a drain may gain replicas too
        elif c.drains and cursor.phase in (Phase.DRAINED, Phase.LABELLED):
            out[c.node] = ()
    return out


def lacks_slack(rollout: Rollout, cursor: Cursor, seen: Seen, node: str | None = None,
                pods: tuple[str, ...] = ()) -> str | None:
    """Why taking ``node``'s replicas (and the temporary ``pods``) out of rotation now breaks
    an invariant, or None if it is safe. Temporary pods count while Ready and in rotation."""
    index = {s: i for i, s in enumerate(rollout.services)}
    rate, count = [0.0] * len(index), [0] * len(index)
    known = rollout.temporaries
    items = [r for n, reps in node_replicas(rollout, cursor).items() if n != node
             for r in observed(reps, seen, n)]
    items += [(t.service, known[name].rate if name in known else 0.0)
              for name, t in seen.temps.items()
              if t.ready and t.serving and t.node != node and name not in pods]
    for service, r in items:
        if service in index:
            rate[index[service]] += r
            count[index[service]] += 1
    return shortfall(rollout.services, rate, count, rollout.floor, rollout.replicas)


def observed(replicas: tuple[tuple[str, float], ...], seen: Seen,
              node: str) -> tuple[tuple[str, float], ...]:
    """The plan's ``replicas`` on ``node`` that its serving pods seen Ready and in rotation
    account for: per service, at most as many as there are such pods."""
    if seen.serving is None:
        return replicas
    room = Counter(p.service for p in seen.serving.get(node, ()) if p.serving)
    out = []
    for service, rate in replicas:
        if room[service] > 0:
            room[service] -= 1
            out.append((service, rate))
    return tuple(out)


def not_serving(change: NodeChange, seen: Seen) -> str:
    """The plan's new replicas on the change's node its pods seen Ready and in rotation do not
    yet account for ("2 dedup, 1 ocr"), or "" when they all serve."""
    got = Counter(s for s, _ in observed(change.restore, seen, change.node))
    want = Counter(s for s, _ in change.restore) - got
    return ", ".join(f"{n} {s}" for s, n in sorted(want.items()))


def unexplained(rollout: Rollout, seen: Seen) -> str | None:
    """A node of the rollout with serving pods out of rotation that the rollout did not take
    out (a run of another plan, or someone else, did), or with serving pods that carry no
    rotation label at all (their pod template lacks it: the controller could neither take
    them out nor count them), or None. Pods out of rotation are explained on a node showing
    one of the rollout's configs for it, and on the node of the first change not yet applied
    (a run that stopped between its drain and its label)."""
    if seen.serving is None:
        return None
    for node in dict.fromkeys(c.node for c in rollout.changes):
        bare = sorted({p.service for p in seen.serving.get(node, ()) if p.rotation is None})
        if bare:
            return (f"{node} has serving pods without the label {ROTATION_LABEL} "
                    f"({', '.join(bare)}): traffic moves by that label, so add "
                    f"'{ROTATION_LABEL}: in' to the pod template and select it in the Service")
    mine = {(c.node, c.config) for c in rollout.changes}
    labels = [seen.labels.get(c.node, {}) for c in rollout.changes]
    first = next((c.node for k, c in enumerate(rollout.changes)
                  if not applied(labels[k], c.config)
                  and not past(rollout, k, labels[k].get(CONFIG_LABEL), seen)), None)
    for node in dict.fromkeys(c.node for c in rollout.changes):
        out = sorted({p.service for p in seen.serving.get(node, ()) if p.rotation == "out"})
        if not out or node == first or (node, seen.labels.get(node, {}).get(CONFIG_LABEL)) in mine:
            continue
        return (f"{node} has serving pods out of rotation that this rollout did not take out "
                f"({', '.join(out)}): finish the rollout that did, or put them back in "
                "rotation (cotenant.io/rotation: in)")
    return None


def applied(labels: dict[str, str], config: str) -> bool:
    return labels.get(CONFIG_LABEL) == config and labels.get(STATE_LABEL) == "success"


def past(rollout: Rollout, k: int, label: str | None, seen: Seen) -> bool:
    """Whether the node of change ``k`` shows a later change's config (``label``). A node
    that lends room comes back to a config it had before; it is past ``k`` only if a change
    of another node in between shows its config applied."""
    node = rollout.changes[k].node
    later = [j for j in range(k + 1, len(rollout.changes))
             if rollout.changes[j].node == node and rollout.changes[j].config == label]
    if not later or label == rollout.changes[k].config:
        return False
    if not any(c.node == node and c.config == label for c in rollout.changes[:k]):
        return True
    return any(c.node != node and applied(seen.labels.get(c.node, {}), c.config)
               for c in rollout.changes[k + 1:later[0]])
