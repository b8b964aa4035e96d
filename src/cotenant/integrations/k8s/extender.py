"""The extender's decisions: filter, prioritize and bind, on the cache and a placement policy.

*filter* keeps the nodes that can host the pod now (CPU, memory, GPU room, MIG instances) and
gives every other node a reason: ``FailedAndUnresolvableNodes`` where even an empty node could
not host it (preempting pods would not help), ``FailedNodes`` otherwise, and a node the cache
does not know always fails ("never silently passes a node"). A reason reads the same on every
node, so kube-scheduler's "0/N nodes are available" message counts them. Both verbs work on
the rows of the cache's node index as arrays: kube-scheduler sends thousands of names a call.

*prioritize* asks the placement policy (FGD by default, the object the simulator uses) for its
score and GPU on each feasible node. Extender scores are 0..10 and kube-scheduler breaks ties at
random, so the node the policy would choose (the simulator's :func:`select_node`: highest score,
lowest rank) gets 10 alone and the others the policy's score scaled to 0..9: with the extender's
weight above the scheduler's own plugins, the cluster places pods as the simulator does.

*preempt* (optional in kube-scheduler) keeps the candidate nodes where evicting the proposed
victims frees room for the pod in cotenant's own accounting.

*bind* chooses the GPUs on the node the scheduler picked (the policy's GPU for a share, the
lowest-index free GPUs for whole ones), writes them to the pod (annotations
``cotenant.io/gpus`` and ``cotenant.io/gpu-milli``), creates the Binding, and assumes the pod
in the cache until the watch reports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import compress
from typing import Protocol

import numpy as np

from cotenant.errors import CotenantError, InputError
from cotenant.integrations.k8s.cache import ClusterCache
from cotenant.integrations.k8s.index import NodeIndex
from cotenant.integrations.k8s.resources import (
    ANNOTATION_GPUS,
    ANNOTATION_MILLI,
    PodRequest,
)
from cotenant.model.cluster import BoolArray, IntArray
from cotenant.policies.placement.base import lowest_free_gpus, select_node

MAX_PRIORITY = 10  # extenderv1.MaxExtenderPriority


class KubeApi(Protocol):
    """The two writes bind makes to the API server."""

    def annotate_pod(self, namespace: str, name: str, annotations: dict[str, str]) -> None:
        """Merge ``annotations`` into the pod's metadata."""
        ...

    def bind_pod(self, namespace: str, name: str, uid: str, node: str) -> None:
        """Create the pod's Binding to ``node``."""
        ...


@dataclass(frozen=True)
class FilterResult:
    """Per node name asked (in order): its row in the cache (-1: unknown) and the index of its
    reason in ``reasons`` (0, the empty reason: passed); ``never[k]``: reason ``k`` holds even on
    an empty node (``FailedAndUnresolvableNodes``)."""

    names: list[str]
    rows: IntArray
    code: IntArray
    reasons: tuple[str, ...]
    never: tuple[bool, ...]
    index: NodeIndex  # the rows' index (the cache may have a newer one by now)

    @property
    def passed(self) -> list[str]:
        return list(compress(self.names, (self.code == 0).tolist()))

    def _failed(self, never: bool) -> dict[str, str]:
        return {n: self.reasons[c] for n, c in zip(self.names, self.code.tolist(), strict=True)
                if c and self.never[c] == never}

    @property
    def failed(self) -> dict[str, str]:
        return self._failed(False)

    @property
    def unresolvable(self) -> dict[str, str]:
        return self._failed(True)


@dataclass(frozen=True)
class Priorities:
    """Per node name asked (in order): its row (-1: unknown) and its score 0..10."""

    names: list[str]
    rows: IntArray
    scores: IntArray
    index: NodeIndex

    def items(self) -> list[tuple[str, int]]:
        return list(zip(self.names, self.scores.tolist(), strict=True))


UNKNOWN = "cotenant: node unknown to the cotenant extender's cache"


def _reasons(request: PodRequest) -> tuple[tuple[str, ...], tuple[bool, ...]]:
    """The filter's reasons for ``request`` (the same text on every node, so kube-scheduler's
    "0/N nodes are available" message counts them), and which hold on an empty node."""
    shape = request.shape
    gpu = (f"asks {shape.gpu_milli} milli of one GPU" if shape.fractional
           else f"asks {shape.num_gpu} whole GPUs")
    never_gpu = "the node has no GPU" if shape.fractional else "more than the node has"
    asks = [("", False), (UNKNOWN, False)]
    for what in (f"asks {shape.cpu_milli} milli-CPU", f"asks {shape.memory_mib} MiB of memory",
                 gpu, *(f"asks {n} nvidia.com/mig-{p}" for p, n in request.mig)):
        asks.append((f"cotenant: {what}, fewer are free", False))
        asks.append((f"cotenant: {what}, {never_gpu if what == gpu else 'more than the node has'}",
                     True))
    return tuple(r for r, _ in asks), tuple(n for _, n in asks)


class Extender:
    """filter / prioritize / bind over ``cache`` with the cache's policy."""

    def __init__(self, cache: ClusterCache, api: KubeApi) -> None:
        self.cache = cache
        self.api = api

    def _mig_free(self, node: str) -> dict[str, int]:
        free = dict(self.cache.nodes[node].mig)
        for p in self.cache.placed.values():
            if p.node == node:
                for profile, n in p.request.mig:
                    free[profile] = free.get(profile, 0) - n
        return free

    def _mig_short(self, request: PodRequest, rows: IntArray) -> tuple[BoolArray, BoolArray,
                                                                       IntArray]:
        """Over ``rows``: short of the pod's MIG instances, never enough, and which profile
        of the request (its index) is short first."""
        names = self.cache.node_index().names
        wanted = {p for p, _ in request.mig}
        used: dict[tuple[str, str], int] = {}
        for p in self.cache.placed.values():
            for profile, n in p.request.mig:
                if profile in wanted:
                    used[p.node, profile] = used.get((p.node, profile), 0) + n
        short, never = np.zeros(rows.size, np.bool_), np.zeros(rows.size, np.bool_)
        which = np.zeros(rows.size, np.int64)
        for k, i in enumerate(rows.tolist()):
            total = dict(self.cache.nodes[names[i]].mig)
            for j, (profile, n) in enumerate(request.mig):
                if total.get(profile, 0) - used.get((names[i], profile), 0) < n:
                    short[k], never[k], which[k] = True, n > total.get(profile, 0), j
                    break
        return short, never, which

    def filter(self, request: PodRequest, names: list[str]) -> FilterResult:
        self.cache.expire()
        shape = request.shape
        reasons, never = _reasons(request)
        with self.cache.lock:
            self.cache.pending.setdefault(request.uid, request)
            index = self.cache.node_index()
            rows = index.rows(names)
            placer = self.cache.placer()
            state, cluster = placer.state, placer.state.cluster
            code = np.ones(len(names), np.int64)  # unknown unless found
            known = np.flatnonzero(rows >= 0)
            r = rows[known]
            got = np.where(placer.feasible(shape)[r], 0, 6)
            no = np.flatnonzero(got)
            if no.size:  # the reason: MIG (8+), else CPU (2), memory (4), GPU (6); +1: never
                f = r[no]
                gpu_never = (cluster.gpu_count[f] == 0 if shape.fractional
                             else cluster.gpu_count[f] < shape.num_gpu)
                fail = np.where(shape.memory_mib > state.mem_free[f],
                                4 + (shape.memory_mib > cluster.memory[f]), 6 + gpu_never)
                fail = np.where(shape.cpu_milli > state.cpu_free[f],
                                2 + (shape.cpu_milli > cluster.cpu[f]), fail)
                got[no] = fail
            if request.mig:  # MIG instances are checked first
                short, mig_never, which = self._mig_short(request, r)
                got = np.where(short, 8 + 2 * which + mig_never, got)
            code[known] = got
        return FilterResult(names, rows, code, reasons, never, index)

    def _scores(self, request: PodRequest, names: list[str]) -> tuple[list[int], dict[int, int],
                                                                        dict[int, int]]:
        placer = self.cache.placer()
        nodes, score, gpu = placer.candidates(request.shape)
        by_node = dict(zip(nodes.tolist(), score.tolist(), strict=True))
        gpu_of = dict(zip(nodes.tolist(), gpu.tolist(), strict=True))
        rows = self.cache.indices()
        known = [i for n in names if (i := rows.get(n)) is not None and i in by_node]
        return known, by_node, gpu_of

    def prioritize(self, request: PodRequest, names: list[str]) -> Priorities:
        """A 0..10 score for every name, in the given order; 10 for the policy's choice."""
        self.cache.expire()
        with self.cache.lock:
            index = self.cache.node_index()
            if not index.distinct(names):  # a name twice: scored once, where first given
                names = list(dict.fromkeys(names))
            rows = index.rows(names)
            placer = self.cache.placer()
            nodes, score, _ = placer.candidates(request.shape)
            size = placer.state.cluster.size
            feasible = np.zeros(size + 1, np.bool_)  # the last entry for row -1 (unknown)
            full = np.zeros(size + 1, np.int64)
            feasible[nodes], full[nodes] = True, score
            ok = feasible[rows]
            result = np.zeros(len(names), np.int64)
            if ok.any() and not request.mig:
                raw = full[rows[ok]]
                best = select_node(rows[ok], raw, placer.rank)
                low, high = int(raw.min()), int(raw.max())
                scaled = np.full(raw.size, 9) if high == low else (raw - low) * 9 // (high - low)
                result[ok] = np.where(rows[ok] == best, MAX_PRIORITY, scaled)
            elif ok.any():
                result[ok] = MAX_PRIORITY
        return Priorities(names, rows, result, index)

    def preempt(self, request: PodRequest,
                victims: dict[str, tuple[list[str], int]]) -> dict[str, tuple[list[str], int]]:
        """Of the scheduler's candidate nodes (node -> (victim uids, PDB violations)), those
        where evicting the victims frees enough for the pod in cotenant's accounting (GPU
        milli per GPU and MIG instances, which kube-scheduler does not see). A node the cache
        does not know is dropped, never passed; a victim it does not know frees nothing."""
        self.cache.expire()
        out: dict[str, tuple[list[str], int]] = {}
        with self.cache.lock:
            base = self.cache.placer().state
            rows = self.cache.indices()
            for node, (uids, violations) in victims.items():
                i = rows.get(node)
                if i is None:
                    continue
                state = base.copy()
                freed_mig: dict[str, int] = {}
                for uid in uids:
                    placed = self.cache.placed.get(uid)
                    if placed is None or placed.node != node:
                        continue
                    if placed.alloc is not None:
                        state.release(placed.request.shape, placed.alloc)
                    for profile, n in placed.request.mig:
                        freed_mig[profile] = freed_mig.get(profile, 0) + n
                mig_free = self._mig_free(node)
                mig_ok = all(mig_free.get(p, 0) + freed_mig.get(p, 0) >= n
                             for p, n in request.mig)
                if mig_ok and state.feasible(request.shape, np.array([i]))[0]:
                    out[node] = (uids, violations)
        return out

    def choose_gpus(self, request: PodRequest, node: str) -> tuple[int, ...]:
        """The GPUs of ``node`` the pod gets; an :class:`InputError` if it no longer fits."""
        shape = request.shape
        with self.cache.lock:
            i = self.cache.index(node)
            if i is None:
                raise InputError("Node", f"{node!r} is unknown to the cotenant extender's cache")
            state = self.cache.placer().state
            if not state.feasible(shape, np.array([i]))[0]:
                raise InputError("Node", f"pod {request.key} no longer fits on {node}")
            if shape.fractional:
                _, _, gpu_of = self._scores(request, [node])
                return (gpu_of[i],)
            if shape.num_gpu:
                return lowest_free_gpus(state.gpu_free[i], shape.num_gpu)
            return ()

    def bind(self, uid: str, namespace: str, name: str, node: str) -> None:
        """Annotate the pod with its GPUs, then bind it; raises :class:`CotenantError`."""
        self.cache.expire()
        with self.cache.lock:
            request = self.cache.pending.get(uid)
            if request is None:
                placed = self.cache.placed.get(uid)
                request = placed.request if placed is not None else None
            if request is None:
                raise InputError("ExtenderBindingArgs", f"pod {namespace}/{name} (uid {uid}) "
                                 "is unknown to the cache: it was never filtered or watched")
            gpus = self.choose_gpus(request, node)
            self.cache.assume(request, node, gpus)
        try:
            if gpus:
                milli = request.shape.gpu_milli if request.shape.fractional else 1000
                self.api.annotate_pod(namespace, name, {
                    ANNOTATION_GPUS: ",".join(str(g) for g in gpus),
                    ANNOTATION_MILLI: str(milli),
                })
            self.api.bind_pod(namespace, name, uid, node)
        except CotenantError:
            self.cache.forget(uid, request)
            raise
        except Exception as exc:  # the client's ApiException and transport errors
            self.cache.forget(uid, request)
            raise CotenantError(f"binding {namespace}/{name} to {node}: {exc}") from exc
