"""The MIG controller's loop: read the rollout's node labels and temporary pods, ask
:func:`.steps.step` what to do, do it through a :class:`MigApi`, and repeat until done or
stopped. The clock and the sleep are injected, so tests and ``--dry-run`` run it on a manual
clock against the fake. A failed call to the cluster stops the rollout with its reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from cotenant.errors import CotenantError
from cotenant.integrations.k8s.mig.rollout import Rollout, TempReplica
from cotenant.integrations.k8s.mig.steps import (
    DEFAULT_SETTINGS,
    Act,
    Action,
    Cursor,
    Seen,
    ServingPod,
    Settings,
    TempPod,
    step,
)

T = TypeVar("T")


class MigNodes(Protocol):
    """The controller's node side: MIG labels, and serving pods in and out of rotation."""

    def node_labels(self, node: str) -> dict[str, str]:
        """The node's labels now."""
        ...

    def set_config(self, node: str, config: str) -> None:
        """Write ``nvidia.com/mig.config=config`` on the node."""
        ...

    def set_rotation(self, node: str, serving: bool) -> int:
        """Put the serving pods on ``node`` in (or out of) rotation; how many pods."""
        ...

    def serving_pods(self, node: str) -> tuple[ServingPod, ...]:
        """The serving pods on ``node`` now (temporary ones excepted)."""
        ...


class TempPods(Protocol):
    """The controller's own pods: temporary replicas."""

    def temporary_pods(self) -> dict[str, TempPod]:
        """Every temporary pod the controller made, by name."""
        ...

    def create_temporary(self, temp: TempReplica) -> None:
        """Create ``temp``'s pod, out of rotation: a copy of a serving pod of its service,
        pinned to its node and asking for one ``nvidia.com/mig-<profile>``."""
        ...

    def admit_temporary(self, name: str) -> None:
        """Put the temporary pod ``name`` in rotation."""
        ...

    def remove_temporary(self, name: str) -> None:
        """Take the temporary pod ``name`` out of rotation and delete it."""
        ...


class MigApi(MigNodes, TempPods, Protocol):
    """What the controller reads and writes in the cluster."""


@dataclass
class RolloutReport:
    actions: list[tuple[float, Action]] = field(default_factory=list)
    """Every action but the waits, with the time it was taken."""
    outcome: Action | None = None
    """The last action: ``done``, or ``stop`` with its reason."""

    @property
    def ok(self) -> bool:
        return self.outcome is not None and self.outcome.act is Act.DONE


class _Lazy(Mapping[str, T]):
    """Per node of the rollout, what ``read`` returns for it, read when first looked up."""

    def __init__(self, read: Callable[[str], T], nodes: tuple[str, ...]) -> None:
        self.reader, self.nodes, self.read = read, nodes, dict[str, T]()

    def __getitem__(self, node: str) -> T:
        if node not in self.nodes:
            raise KeyError(node)
        if node not in self.read:
            self.read[node] = self.reader(node)
        return self.read[node]

    def __iter__(self) -> Iterator[str]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)


def _carry_out(api: MigApi, action: Action) -> None:
    node, pod = action.node, action.pod
    assert node is not None
    if action.act is Act.DRAIN:
        api.set_rotation(node, False)
    elif action.act is Act.LABEL:
        assert action.config is not None
        api.set_config(node, action.config)
    elif action.act is Act.RESTORE:
        api.set_rotation(node, True)
    elif pod is not None and action.act is Act.CREATE:
        api.create_temporary(pod)
    elif pod is not None and action.act is Act.ADMIT:
        api.admit_temporary(pod.name)
    elif pod is not None and action.act is Act.REMOVE:
        api.remove_temporary(pod.name)


def run_rollout(rollout: Rollout, api: MigApi, clock: Callable[[], float],
                sleep: Callable[[float], object], settings: Settings = DEFAULT_SETTINGS,
                on_action: Callable[[float, Action], None] | None = None) -> RolloutReport:
    """Carry out ``rollout`` change by change; stops at the first failure, timeout or node
    that lacks slack, and says why in the report's ``outcome``. A rollout with no safe node
    order is refused before anything is changed, unless ``settings.partial``. Started again
    on the same rollout, it resumes from what the cluster's labels and temporary pods show."""
    report = RolloutReport()
    if rollout.blocked is not None and not settings.partial:
        node, why = rollout.blocked.split(": ", 1)
        report.outcome = Action(Act.STOP, reason=(
            f"{node} cannot be drained: {why}; no safe node order was found, so nothing was "
            "changed (--partial carries out the changes before it that leave nothing temporary)"))
        if on_action is not None:
            on_action(clock(), report.outcome)
        return report
    cursor = Cursor()
    nodes = tuple(dict.fromkeys(c.node for c in rollout.changes))
    while True:
        now = clock()
        try:
            seen = Seen(_Lazy(api.node_labels, nodes), api.temporary_pods(),
                        _Lazy(api.serving_pods, nodes))
            action, after = step(rollout, cursor, seen, now, settings)
            if action.act not in (Act.WAIT, Act.DONE, Act.STOP):
                _carry_out(api, action)
        except CotenantError as exc:
            action = Action(Act.STOP, reason=f"the cluster refused: {exc.one_line()}")
            after = cursor
        if action.act is Act.WAIT:
            cursor = after
            sleep(settings.poll_s)
            continue
        if on_action is not None:
            on_action(now, action)
        if action.act in (Act.DONE, Act.STOP):
            report.outcome = action
            return report
        report.actions.append((now, action))
        cursor = after
