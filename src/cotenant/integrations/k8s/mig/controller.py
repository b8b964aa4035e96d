"""The MIG controller's loop: read the rollout's node labels, ask :func:`.steps.step` what to
do, do it through a :class:`MigApi`, and repeat until done or stopped. The clock and the sleep
are injected, so tests and ``--dry-run`` run it on a manual clock against the fake.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from cotenant.integrations.k8s.mig.rollout import Rollout
from cotenant.integrations.k8s.mig.steps import Act, Action, Cursor, Labels, step


class MigApi(Protocol):
    """What the controller reads and writes in the cluster."""

    def node_labels(self, node: str) -> dict[str, str]:
        """The node's labels now."""
        ...

    def set_config(self, node: str, config: str) -> None:
        """Write ``nvidia.com/mig.config=config`` on the node."""
        ...

    def set_rotation(self, node: str, serving: bool) -> int:
        """Put the serving pods on ``node`` in (or out of) rotation; how many pods."""
        ...


@dataclass(frozen=True)
class Settings:
    timeout_s: float = 900.0
    """Seconds a node may take from its label write to ``success`` (a reboot included)."""
    poll_s: float = 5.0
    """Seconds between reads of a node's state while it applies."""


@dataclass
class RolloutReport:
    actions: list[tuple[float, Action]] = field(default_factory=list)
    """Every action but the waits, with the time it was taken."""
    outcome: Action | None = None
    """The last action: ``done``, or ``stop`` with its reason."""

    @property
    def ok(self) -> bool:
        return self.outcome is not None and self.outcome.act is Act.DONE


def run_rollout(rollout: Rollout, api: MigApi, clock: Callable[[], float],
                sleep: Callable[[float], object], settings: Settings = Settings(),
                on_action: Callable[[float, Action], None] | None = None) -> RolloutReport:
    """Carry out ``rollout`` node by node; stops at the first failure, timeout or node that
    lacks slack, and says why in the report's ``outcome``."""
    report = RolloutReport()
    cursor = Cursor()
    while True:
        if cursor.active is None:
            nodes = [c.node for k, c in enumerate(rollout.changes) if k not in cursor.finished]
        else:
            nodes = [rollout.changes[cursor.active].node]
        labels: Labels = {n: api.node_labels(n) for n in nodes}
        now = clock()
        action, cursor = step(rollout, cursor, labels, now, settings.timeout_s)
        if action.act is Act.WAIT:
            sleep(settings.poll_s)
            continue
        if action.act in (Act.DONE, Act.STOP):
            report.outcome = action
            if on_action is not None:
                on_action(now, action)
            return report
        assert action.node is not None
        if action.act is Act.DRAIN:
            api.set_rotation(action.node, False)
        elif action.act is Act.LABEL:
            assert action.config is not None
            api.set_config(action.node, action.config)
        elif action.act is Act.RESTORE:
            api.set_rotation(action.node, True)
        report.actions.append((now, action))
        if on_action is not None:
            on_action(now, action)
