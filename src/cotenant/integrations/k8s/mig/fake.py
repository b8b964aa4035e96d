"""A stateful fake of the cluster side of a MIG rollout: node labels, the MIG manager that
answers a ``nvidia.com/mig.config`` label with ``nvidia.com/mig.config.state``, and which
nodes' serving pods are in rotation. For tests and ``cotenant k8s mig --dry-run``.

Like NVIDIA's MIG manager, writing the config label sets the state to ``pending``; after
``apply_s`` (on the injected clock) the state becomes ``success``, or what the node's script
says (``failed``; ``rebooting`` then ``success``; ``pending`` for ever). Its own rule: a node
relabelled to a different layout while its pods are still in rotation fails (mig-parted
cannot repartition GPUs that have processes on them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from cotenant.errors import InputError
from cotenant.integrations.k8s.mig.rollout import Rollout
from cotenant.integrations.k8s.mig.steps import CONFIG_LABEL, STATE_LABEL


@dataclass
class FakeMigNodes:
    """Nodes by name with their labels; ``script[node]``: the states the MIG manager goes
    through after a label write, one per ``apply_s`` (default: ``("success",)``)."""

    clock: Callable[[], float]
    labels: dict[str, dict[str, str]] = field(default_factory=dict)
    layouts: dict[str, str] = field(default_factory=dict)
    """Per node, the config its GPUs have now (what mig-parted applied last)."""
    script: dict[str, tuple[str, ...]] = field(default_factory=dict)
    apply_s: float = 30.0
    rotation: dict[str, bool] = field(default_factory=dict)
    events: list[str] = field(default_factory=list)
    """What was written, in order: ``drain n``, ``label n=config``, ``restore n``."""
    _written: dict[str, float] = field(default_factory=dict)
    _busy: set[str] = field(default_factory=set)

    def add_node(self, name: str, labels: Mapping[str, str] | None = None,
                 serving: bool = True) -> None:
        self.labels[name] = dict(labels or {})
        self.rotation[name] = serving
        if CONFIG_LABEL in self.labels[name]:
            self.layouts[name] = self.labels[name][CONFIG_LABEL]

    @classmethod
    def for_rollout(cls, rollout: Rollout, clock: Callable[[], float],
                    apply_s: float = 30.0) -> FakeMigNodes:
        """The rollout's nodes, unlabelled, those with replicas today serving; a node whose
        layouts do not change already has its config's layout."""
        fake = cls(clock, apply_s=apply_s)
        for change in rollout.changes:
            fake.add_node(change.node, serving=bool(change.drain))
            if not change.layout_changes:
                fake.layouts[change.node] = change.config
        return fake

    def _node(self, name: str) -> dict[str, str]:
        if name not in self.labels:
            raise InputError(f"node {name}", "not found (404)")
        return self.labels[name]

    def _advance(self, name: str) -> None:
        labels = self.labels[name]
        if name not in self._written:
            return
        states = ("failed",) if name in self._busy else self.script.get(name, ("success",))
        step = int((self.clock() - self._written[name]) // self.apply_s)
        if step <= 0:
            labels[STATE_LABEL] = "pending"
            return
        labels[STATE_LABEL] = states[min(step, len(states)) - 1]
        if labels[STATE_LABEL] == "success":
            self.layouts[name] = labels[CONFIG_LABEL]
            del self._written[name]

    def node_labels(self, node: str) -> dict[str, str]:
        self._node(node)
        self._advance(node)
        return dict(self.labels[node])

    def set_config(self, node: str, config: str) -> None:
        labels = self._node(node)
        self._advance(node)
        self.events.append(f"label {node}={config}")
        labels[CONFIG_LABEL] = config
        labels[STATE_LABEL] = "pending"
        self._written[node] = self.clock()
        self._busy.discard(node)
        if self.rotation[node] and self.layouts.get(node) != config:
            self._busy.add(node)

    def set_rotation(self, node: str, serving: bool) -> int:
        self._node(node)
        self.events.append(f"{'restore' if serving else 'drain'} {node}")
        self.rotation[node] = serving
        return 1
