"""The extender's view of the cluster: nodes and pods from the API server's watches, as the
placement model's :class:`~cotenant.model.cluster.ClusterState`.

Events (``ADDED``/``MODIFIED``/``DELETED`` with the object's JSON) come from the informer
loops of :mod:`.watch` or from a test; a periodic resync replaces the whole set. A pod counts
against its node once it has ``spec.nodeName`` and has not finished; its GPUs are the ones the
extender annotated (``cotenant.io/gpus``), else the lowest-index GPUs with room (a pod another
scheduler placed). A pod the extender bound is *assumed* on its node at once, before the watch
reports it, and the assumption expires after ``assume_ttl_s`` if the binding never shows up.

Node order (the tie-break rank of :func:`~cotenant.policies.placement.base.select_node`) is
node-name order, so a replay of the same pods over the same nodes places them as the simulator
does with that rank. Thread-safe: the HTTP handlers and the watch threads share one lock.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from cotenant.errors import CotenantError
from cotenant.integrations.k8s.index import NodeIndex
from cotenant.integrations.k8s.resources import (
    ANNOTATION_GPUS,
    NodeSpec,
    PodRequest,
    field,
    node_spec,
    pod_request,
)
from cotenant.model.cluster import Allocation, Cluster, ClusterState
from cotenant.model.workload import MILLI_PER_GPU, Node
from cotenant.policies.placement import PlacementPolicy
from cotenant.sim.placer import Placer

FINISHED = ("Succeeded", "Failed")
MAX_ERRORS = 1000
CPU_ONLY_PLACEHOLDER = Node("cotenant-placeholder", 0, 0, 0, None)


@dataclass
class _Placed:
    request: PodRequest
    node: str
    gpus: tuple[int, ...]
    assumed_until: float | None  # None: the API server reports it bound
    alloc: Allocation | None = None


class ClusterCache:
    """Nodes and placed pods, and a :class:`Placer` over them for ``policy``."""

    def __init__(self, policy: PlacementPolicy, clock: Callable[[], float],
                 *, assume_ttl_s: float = 30.0, seed: int = 0) -> None:
        self.policy = policy
        self.clock = clock
        self.assume_ttl_s = assume_ttl_s
        self.lock = threading.RLock()
        self.nodes: dict[str, NodeSpec] = {}
        self.placed: dict[str, _Placed] = {}
        self.pending: dict[str, PodRequest] = {}
        """Pods seen without a node (from the watch or a filter call), for bind."""
        self.errors: deque[str] = deque(maxlen=MAX_ERRORS)
        """Objects from the watch that could not be read: one line each, newest last."""
        self._seed = seed
        self._placer: Placer | None = None
        self._index = NodeIndex([])
        self._assumed: dict[str, float] = {}
        """Deadlines of the assumed pods (a subset of :attr:`placed`)."""

    # ---- events ------------------------------------------------------------------------------
    def on_node(self, event: str, obj: dict[str, Any]) -> None:
        with self.lock:
            name = field(obj, "metadata", "name")
            if event == "DELETED":
                self.nodes.pop(str(name), None)
            else:
                try:
                    spec = node_spec(obj)
                except CotenantError as exc:
                    self.errors.append(exc.one_line())
                    return
                if self.nodes.get(spec.node.name) == spec:
                    return
                self.nodes[spec.node.name] = spec
            self._placer = None

    def on_pod(self, event: str, obj: dict[str, Any]) -> None:
        with self.lock:
            try:
                request = pod_request(obj)
            except CotenantError as exc:
                self.errors.append(exc.one_line())
                return
            node = field(obj, "spec", "nodeName")
            done = field(obj, "status", "phase") in FINISHED
            if event == "DELETED" or done:
                self.pending.pop(request.uid, None)
                self._unplace(request.uid)
                return
            if not node:
                self.pending[request.uid] = request
                return
            self.pending.pop(request.uid, None)
            gpus = _annotated_gpus(obj)
            old = self.placed.get(request.uid)
            if old is not None and old.node == node and (not gpus or old.gpus == gpus):
                old.assumed_until = None
                self._assumed.pop(request.uid, None)
                return
            self._unplace(request.uid)
            self._place(_Placed(request, str(node), gpus, None))

    def replace(self, nodes: Iterable[dict[str, Any]], pods: Iterable[dict[str, Any]]) -> None:
        """A resync: the full lists replace what the cache holds (assumed pods are kept until
        they expire or the lists show them)."""
        with self.lock:
            assumed = {u: p for u, p in self.placed.items() if p.assumed_until is not None}
            self.nodes, self.placed, self.pending = {}, {}, {}
            self._placer = None
            for node in nodes:
                self.on_node("ADDED", node)
            for pod in pods:
                self.on_pod("ADDED", pod)
            for uid, p in assumed.items():
                if uid not in self.placed:
                    self._place(_Placed(p.request, p.node, p.gpus, p.assumed_until))

    def assume(self, request: PodRequest, node: str, gpus: tuple[int, ...]) -> None:
        """Count ``request`` on ``node``/``gpus`` now, until the watch confirms or it expires."""
        with self.lock:
            self.pending.pop(request.uid, None)
            self._unplace(request.uid)
            self._place(_Placed(request, node, gpus, self.clock() + self.assume_ttl_s))

    def forget(self, uid: str, request: PodRequest) -> None:
        """Undo :meth:`assume`: the pod is pending again."""
        with self.lock:
            self._unplace(uid)
            self.pending[uid] = request

    def expire(self) -> list[str]:
        """Drop assumptions older than the TTL; the uids dropped."""
        now = self.clock()
        with self.lock:
            gone = [u for u, until in self._assumed.items() if until <= now]
            for uid in gone:
                self._unplace(uid)
            return gone

    # ---- the model -----------------------------------------------------------------------------
    def placer(self) -> Placer:
        """The :class:`Placer` over the current state (rebuilt when the node set changed)."""
        with self.lock:
            if self._placer is None:
                self._rebuild()
            assert self._placer is not None
            return self._placer

    def index(self, name: str) -> int | None:
        return self.indices().get(name)

    def indices(self) -> dict[str, int]:
        """Node name -> row of the placer's state."""
        return self.node_index().row

    def node_index(self) -> NodeIndex:
        """The rows and JSON fragments of the current node set."""
        self.placer()
        return self._index

    def _rebuild(self) -> None:
        names = sorted(self.nodes)
        specs = [self.nodes[n].node for n in names] or [CPU_ONLY_PLACEHOLDER]
        state = ClusterState(Cluster(specs))
        self._index = NodeIndex(names)
        rank = np.arange(len(specs), dtype=np.int64)
        self._placer = Placer(self.policy, state, rank, np.random.default_rng(self._seed))
        for p in self.placed.values():
            p.alloc = None
            self._allocate(p)

    def _place(self, placed: _Placed) -> None:
        self.placed[placed.request.uid] = placed
        if placed.assumed_until is not None:
            self._assumed[placed.request.uid] = placed.assumed_until
        if self._placer is not None:
            self._allocate(placed)

    def _allocate(self, p: _Placed) -> None:
        i = self._index.row.get(p.node)
        if i is None:  # a pod on a node the cache does not know (yet): counted when it comes
            return
        state = self._placer.state if self._placer else None
        assert state is not None
        shape = p.request.shape
        gpus = p.gpus
        if len(gpus) != shape.num_gpu or any(g >= state.cluster.gpu_count[i] for g in gpus):
            milli = shape.gpu_milli if shape.fractional else MILLI_PER_GPU
            room = np.flatnonzero(state.gpu_free[i] >= milli)
            gpus = tuple(int(g) for g in room[: shape.num_gpu])
        try:
            p.alloc = state.allocate(shape, i, gpus)
        except CotenantError as exc:  # over-committed as reported: keep going, say so
            self.errors.append(f"pod {p.request.key} on {p.node}: {exc.one_line()}")

    def _unplace(self, uid: str) -> None:
        self._assumed.pop(uid, None)
        p = self.placed.pop(uid, None)
        if p is not None and p.alloc is not None and self._placer is not None:
            self._placer.state.release(p.request.shape, p.alloc)


def _annotated_gpus(pod: dict[str, Any]) -> tuple[int, ...]:
    text = field(pod, "metadata", "annotations", ANNOTATION_GPUS)
    if not isinstance(text, str) or not text.strip():
        return ()
    try:
        return tuple(int(g) for g in text.split(","))
    except ValueError:
        return ()
