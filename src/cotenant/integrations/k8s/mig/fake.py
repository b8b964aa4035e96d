"""A stateful fake of the cluster side of a MIG rollout: node labels, the MIG manager that
answers a ``nvidia.com/mig.config`` label with ``nvidia.com/mig.config.state``, which nodes'
serving pods are in rotation, and the controller's temporary pods. For tests and
``cotenant k8s mig --dry-run``.

Like NVIDIA's MIG manager, writing the config label sets the state to ``pending``; after
``apply_s`` (on the injected clock) the state becomes ``success``, or what the node's script
says (``failed``; ``rebooting`` then ``success``; ``pending`` for ever). Its own rule: a node
relabelled to a different layout while pods on it are still in rotation fails (mig-parted
cannot repartition GPUs that have processes on them), and the temporary pods on it die.

A node's serving pods are those of the replicas its applied config serves (per config, as the
rollout says); when a new layout is applied, the old ones go and the new ones (which the
user's Deployments create) become Ready ``serve_s`` later; a config with the same layout
keeps the pods it keeps and adds those it gains, Ready ``serve_s`` later. They are in
rotation while the node is (``cotenant.io/rotation``).

A temporary pod becomes Ready ``ready_s`` after it is created if its node is up and the
node's applied config has an instance of its profile that no serving pod of the node and no
other temporary pod holds (else it stays Pending, as a pod asking for a resource no node
offers does). Creating one fails where ``refuse`` names its
service or no pod of the service exists to copy. A node in ``down`` answers nothing: its
state stays as it is and its pods never become Ready.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cotenant.errors import InputError, PermanentError
from cotenant.integrations.k8s.mig.rollout import Rollout, TempReplica
from cotenant.integrations.k8s.mig.steps import CONFIG_LABEL, STATE_LABEL, ServingPod, TempPod


@dataclass
class _Pod:
    temp: TempReplica
    created: float
    serving: bool = False
    dead: bool = False


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
    """What was written, in order: ``drain n``, ``label n=config``, ``restore n``,
    ``create pod``, ``admit pod``, ``remove pod``."""
    configs: dict[str, Any] = field(default_factory=dict)
    """The mig-parted document the configs come from (``mig-configs``)."""
    services: set[str] = field(default_factory=set)
    """Services with a serving pod to copy."""
    ready_s: float = 20.0
    refuse: set[str] = field(default_factory=set)
    down: set[str] = field(default_factory=set)
    pods: dict[str, _Pod] = field(default_factory=dict)
    serve_s: float = 15.0
    """Seconds after a new layout is applied until its serving pods are Ready."""
    replicas: dict[tuple[str, str], tuple[tuple[str, str], ...]] = field(default_factory=dict)
    """Per (node, config), the serving pods that config's layout runs: service and profile."""
    serves: dict[str, list[tuple[str, str, float]]] = field(default_factory=dict)
    """Per node, its serving pods now: each one's service, profile and when it is Ready."""
    unlabelled: set[str] = field(default_factory=set)
    """Nodes whose serving pods carry no rotation label (their template lacks it) until the
    controller first labels them."""
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
        fake = cls(clock, apply_s=apply_s, configs=rollout.configs)
        for change in rollout.changes:
            fake.services |= {s for s, _ in (*change.drain, *change.restore)}
            fake.replicas[change.node, change.config] = tuple(zip(
                (s for s, _ in change.restore), change.profiles or ("",) * len(change.restore),
                strict=True))
            if change.node in fake.labels:
                continue
            fake.serves[change.node] = [
                (s, p, float("-inf")) for (s, _), p in zip(
                    change.drain, change.drain_profiles or ("",) * len(change.drain),
                    strict=True)]
            fake.add_node(change.node, serving=bool(change.drain))
            if not change.drains:
                fake.layouts[change.node] = change.config
        return fake

    def _node(self, name: str) -> dict[str, str]:
        if name not in self.labels:
            raise InputError(f"node {name}", "not found (404)")
        return self.labels[name]

    def _advance(self, name: str) -> None:
        labels = self.labels[name]
        if name not in self._written or name in self.down:
            return
        states = ("failed",) if name in self._busy else self.script.get(name, ("success",))
        step = int((self.clock() - self._written[name]) // self.apply_s)
        if step <= 0:
            labels[STATE_LABEL] = "pending"
            return
        labels[STATE_LABEL] = states[min(step, len(states)) - 1]
        if labels[STATE_LABEL] == "success":
            self._redeploy(name, labels[CONFIG_LABEL])
            self.layouts[name] = labels[CONFIG_LABEL]
            del self._written[name]

    def _redeploy(self, name: str, config: str) -> None:
        """The serving pods once ``config`` is applied: all new for a new layout; for the
        same layout, those it keeps stay and those it gains come (new pods, Ready later)."""
        want = self.replicas.get((name, config))
        up = self.clock() + self.serve_s
        if self.layouts.get(name) != config:
            self.serves[name] = [(s, p, up) for s, p in want or ()]
        elif want is not None:
            left, keep = Counter(want), []
            for service, profile, at in self.serves.get(name, []):
                if left[service, profile] > 0:
                    left[service, profile] -= 1
                    keep.append((service, profile, at))
            self.serves[name] = keep + [(s, p, up) for s, p in left.elements()]

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
        if self.layouts.get(node) != config:
            on_node = [p for p in self.pods.values() if p.temp.node == node]
            if self.rotation[node] or any(p.serving for p in on_node):
                self._busy.add(node)
            for pod in on_node:  # their MIG instances go with the old layout
                pod.dead = True

    def set_rotation(self, node: str, serving: bool) -> int:
        self._node(node)
        self.events.append(f"{'restore' if serving else 'drain'} {node}")
        self.rotation[node] = serving
        self.unlabelled.discard(node)
        return 1

    def serving_pods(self, node: str) -> tuple[ServingPod, ...]:
        self._node(node)
        self._advance(node)
        rotation = None if node in self.unlabelled else "in" if self.rotation[node] else "out"
        return tuple(ServingPod(s, node not in self.down and self.clock() >= at, rotation)
                     for s, _, at in self.serves.get(node, []))

    def _offers(self, node: str, profile: str) -> int:
        """Instances of ``profile`` the node's applied config has."""
        config = self.configs.get("mig-configs", {}).get(self.layouts.get(node, ""), [])
        return sum(len(sel["devices"]) * sel.get("mig-devices", {}).get(profile, 0)
                   for sel in config if sel.get("mig-enabled"))

    def _ready(self, pod: _Pod) -> bool:
        node = pod.temp.node
        if pod.dead or node in self.down or self.clock() - pod.created < self.ready_s:
            return False
        if not self.configs:  # no configs to check the instance against
            return True
        if node in self._written:  # the MIG manager is still applying a config
            return False
        rivals = [p for p in self.pods.values() if p.temp.node == node and not p.dead
                  and p.temp.profile == pod.temp.profile]
        held = [s for s, profile, _ in self.serves.get(node, []) if profile == pod.temp.profile]
        return self._offers(node, pod.temp.profile) >= len(rivals) + len(held)

    def temporary_pods(self) -> dict[str, TempPod]:
        return {name: TempPod(p.temp.node, p.temp.service, self._ready(p), p.serving)
                for name, p in self.pods.items()}

    def create_temporary(self, temp: TempReplica) -> None:
        self._node(temp.node)
        if temp.name in self.pods:
            raise PermanentError(f"pod {temp.name} already exists (409)")
        if temp.service in self.refuse or temp.service not in self.services:
            why = "refused" if temp.service in self.refuse else "no pod to copy"
            raise PermanentError(f"cannot create pod {temp.name}: {why}")
        self.events.append(f"create {temp.name}")
        self.pods[temp.name] = _Pod(temp, self.clock())

    def admit_temporary(self, name: str) -> None:
        if name not in self.pods:
            raise PermanentError(f"pod {name} not found (404)")
        self.events.append(f"admit {name}")
        self.pods[name].serving = True

    def remove_temporary(self, name: str) -> None:
        if name not in self.pods:
            raise PermanentError(f"pod {name} not found (404)")
        self.events.append(f"remove {name}")
        del self.pods[name]
