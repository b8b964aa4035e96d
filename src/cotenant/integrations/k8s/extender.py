"""The extender's decisions: filter, prioritize and bind, on the cache and a placement policy.

*filter* keeps the nodes that can host the pod now (CPU, memory, GPU room, MIG instances) and
gives every other node a reason: ``FailedAndUnresolvableNodes`` where even an empty node could
not host it (preempting pods would not help), ``FailedNodes`` otherwise, and a node the cache
does not know always fails ("never silently passes a node").

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

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from cotenant.errors import CotenantError, InputError
from cotenant.integrations.k8s.cache import ClusterCache
from cotenant.integrations.k8s.resources import (
    ANNOTATION_GPUS,
    ANNOTATION_MILLI,
    PodRequest,
)
from cotenant.model.cluster import ClusterState
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


@dataclass
class FilterResult:
    passed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    unresolvable: dict[str, str] = field(default_factory=dict)


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

    def _why_not(self, state: ClusterState, request: PodRequest,
                 rows: list[int]) -> list[tuple[str, bool]]:
        """Why each node of ``rows`` cannot host the pod, and whether an empty node could
        not either (then preemption would not help)."""
        shape, cluster = request.shape, state.cluster
        idx = np.array(rows, dtype=np.int64)
        cpu_free, cpu = state.cpu_free[idx].tolist(), cluster.cpu[idx].tolist()
        mem_free, mem = state.mem_free[idx].tolist(), cluster.memory[idx].tolist()
        gpus = cluster.gpu_count[idx].tolist()
        free = state.gpu_free[idx]
        freest = free.max(axis=1).tolist()
        whole = (free == 1000).sum(axis=1).tolist()
        out = []
        for k, i in enumerate(rows):
            name = cluster.nodes[i].name
            if shape.cpu_milli > cpu_free[k]:
                out.append((f"{name}: asks {shape.cpu_milli} milli-CPU, {cpu_free[k]} free of "
                            f"{cpu[k]}", shape.cpu_milli > cpu[k]))
            elif shape.memory_mib > mem_free[k]:
                out.append((f"{name}: asks {shape.memory_mib} MiB of memory, {mem_free[k]} "
                            f"free of {mem[k]}", shape.memory_mib > mem[k]))
            elif shape.fractional:
                most = freest[k] if gpus[k] else 0
                out.append((f"{name}: asks {shape.gpu_milli} milli of one GPU, the freest GPU "
                            f"has {most}", gpus[k] == 0))
            else:
                out.append((f"{name}: asks {shape.num_gpu} whole GPUs, {whole[k]} free of "
                            f"{gpus[k]}", shape.num_gpu > gpus[k]))
        return out

    def filter(self, request: PodRequest, names: list[str]) -> FilterResult:
        self.cache.expire()
        out = FilterResult()
        with self.cache.lock:
            self.cache.pending.setdefault(request.uid, request)
            state = self.cache.placer().state
            rows = self.cache.indices()
            index = [rows.get(name) for name in names]
            known = np.array([i for i in index if i is not None], dtype=np.int64)
            fits = dict(zip(known.tolist(), state.feasible(request.shape, known).tolist(),
                            strict=True))
            failed: list[tuple[str, int]] = []
            for name, i in zip(names, index, strict=True):
                if i is None:
                    out.failed[name] = f"{name}: node unknown to the cotenant extender's cache"
                elif request.mig and (why := self._mig_short(request, name)) is not None:
                    (out.unresolvable if why[1] else out.failed)[name] = why[0]
                elif fits[i]:
                    out.passed.append(name)
                else:
                    failed.append((name, i))
            if failed:
                reasons = self._why_not(state, request, [i for _, i in failed])
                for (name, _), (reason, never) in zip(failed, reasons, strict=True):
                    (out.unresolvable if never else out.failed)[name] = reason
        return out

    def _mig_short(self, request: PodRequest, name: str) -> tuple[str, bool] | None:
        """Why ``name`` lacks the pod's MIG instances (and whether it never has enough)."""
        free, total = self._mig_free(name), dict(self.cache.nodes[name].mig)
        for profile, n in request.mig:
            if free.get(profile, 0) < n:
                have = max(free.get(profile, 0), 0)
                return (f"{name}: asks {n} nvidia.com/mig-{profile}, {have} free of "
                        f"{total.get(profile, 0)}", n > total.get(profile, 0))
        return None

    def _scores(self, request: PodRequest, names: list[str]) -> tuple[list[int], dict[int, int],
                                                                        dict[int, int]]:
        placer = self.cache.placer()
        nodes, score, gpu = placer.candidates(request.shape)
        by_node = dict(zip(nodes.tolist(), score.tolist(), strict=True))
        gpu_of = dict(zip(nodes.tolist(), gpu.tolist(), strict=True))
        rows = self.cache.indices()
        known = [i for n in names if (i := rows.get(n)) is not None and i in by_node]
        return known, by_node, gpu_of

    def prioritize(self, request: PodRequest, names: list[str]) -> list[tuple[str, int]]:
        """(node, 0..10) for every name, in the given order; 10 for the policy's choice."""
        self.cache.expire()
        with self.cache.lock:
            known, by_node, _ = self._scores(request, names)
            result = dict.fromkeys(names, 0)
            if known and not request.mig:
                idx = np.array(known, dtype=np.int64)
                raw = np.array([by_node[i] for i in known], dtype=np.int64)
                rank = self.cache.placer().rank
                best = select_node(idx, raw, rank)
                low, high = int(raw.min()), int(raw.max())
                nodes = self.cache.placer().state.cluster.nodes
                for i, s in zip(known, raw.tolist(), strict=True):
                    scaled = 9 if high == low else (s - low) * 9 // (high - low)
                    result[nodes[i].name] = MAX_PRIORITY if i == best else int(scaled)
            elif known:
                nodes = self.cache.placer().state.cluster.nodes
                for i in known:
                    result[nodes[i].name] = MAX_PRIORITY
            return list(result.items())

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
