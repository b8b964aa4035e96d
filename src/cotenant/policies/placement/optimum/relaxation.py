"""An upper bound on the GPU share any placement of a set of pods can allocate: an arc-flow
integer program over GPU packings, solved by HiGHS.

The cluster's GPUs are pooled by model (models that every pod's ``gpu_spec`` treats alike
share a pool). Within a pool, each GPU that hosts fractional pods is one path of the arc-flow
graph of the pods' sizes (:mod:`..arcflow`), and the flow on an arc counts the pods of that
size packed at that offset. Variables ``z[t, p]`` count the pods of shape t placed in pool p.
The program maximises the milli placed subject to

* per shape, at most the pods that arrived (``sum_p z[t, p] <= n_t``);
* per pool and fractional size, no more pods than arcs of that size carry;
* per pool, the GPUs of fractional paths plus the whole GPUs of other pods at most the pool's;
* per pool and whole-GPU count k, pods of k or more GPUs on no more GPUs than nodes with k or
  more hold, and pods of exactly k on at most ``k * floor(G_n / k)`` per node;
* per pool, the pods' CPU and memory at most the pool's total.

What it relaxes, so the value is an upper bound and not always reachable: a node's CPU and
memory are pooled over its GPU model, and whole-GPU pods need their k GPUs on one node only as
far as the aggregate counts above say. :mod:`.plan` builds a node-level placement from the
solution and checks it with :meth:`ClusterState.allocate`; where both agree the optimum is
exact.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_array

from cotenant.errors import InfeasibleError
from cotenant.model.cluster import Cluster
from cotenant.model.workload import MILLI_PER_GPU, PodShape
from cotenant.policies.placement.arcflow import ArcFlowGraph, quantum_of

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Pool:
    """GPU models every pod treats alike, and their nodes."""

    models: tuple[int, ...]  # indices into Cluster.model_names
    nodes: tuple[int, ...]


@dataclass(frozen=True)
class Relaxed:
    """The program's answer: its proven upper bound and its best integer solution."""

    upper_milli: int
    """At least the milli of any placement (HiGHS's dual bound, rounded to the size grid)."""
    solution_milli: int
    """Milli the integer solution places (its objective)."""
    optimal: bool
    """HiGHS proved its solution optimal (else it stopped at the time limit)."""
    pools: tuple[Pool, ...]
    placed: dict[tuple[PodShape, int], int]
    """Pods of each shape the solution places, per pool index."""
    patterns: tuple[tuple[tuple[int, ...], ...], ...]
    """Per pool, each fractional GPU's pod sizes in milli (one tuple per GPU)."""


def pools_of(cluster: Cluster, shapes: Sequence[PodShape]) -> tuple[Pool, ...]:
    """GPU models grouped by which of the pods' specs admit them."""
    specs = sorted({s.gpu_spec for s in shapes if s.gpu_spec})
    by_sig: dict[tuple[bool, ...], list[int]] = {}
    for m, name in enumerate(cluster.model_names):
        by_sig.setdefault(tuple(name in spec for spec in specs), []).append(m)
    pools = []
    for models in by_sig.values():
        nodes = np.flatnonzero(np.isin(cluster.model_index, models) & (cluster.gpu_count > 0))
        if nodes.size:
            pools.append(Pool(tuple(models), tuple(int(n) for n in nodes)))
    return tuple(pools)


def _fits_pool(shape: PodShape, cluster: Cluster, pool: Pool) -> bool:
    if shape.gpu_spec and cluster.model_names[pool.models[0]] not in shape.gpu_spec:
        return False
    nodes = np.array(pool.nodes)
    ok = (
        (cluster.gpu_count[nodes] >= shape.num_gpu)
        & (cluster.cpu[nodes] >= shape.cpu_milli)
        & (cluster.memory[nodes] >= shape.memory_mib)
    )
    return bool(ok.any())


@contextmanager
def _quiet_stdout() -> Iterator[None]:
    """Silence file descriptor 1 for a while: HiGHS's MIP solver prints debugging lines to
    it even with display off, which would corrupt a ``--json`` answer on stdout."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


class _Rows:
    """A sparse constraint matrix built row by row."""

    def __init__(self) -> None:
        self.r: list[int] = []
        self.c: list[int] = []
        self.v: list[float] = []
        self.lo: list[float] = []
        self.hi: list[float] = []

    def add(self, cols: Sequence[int], vals: Sequence[float], lo: float, hi: float) -> None:
        row = len(self.lo)
        self.r.extend([row] * len(cols))
        self.c.extend(cols)
        self.v.extend(vals)
        self.lo.append(lo)
        self.hi.append(hi)

    def constraint(self, n_vars: int) -> LinearConstraint:
        a = coo_array((self.v, (self.r, self.c)), shape=(len(self.lo), n_vars)).tocsr()
        return LinearConstraint(a, np.array(self.lo), np.array(self.hi))


def relax(
    cluster: Cluster,
    shapes: Sequence[PodShape],
    time_limit: float = 10.0,
    must_place: Callable[[PodShape], bool] | None = None,
) -> Relaxed:
    """Solve the arc-flow program for the GPU pods among ``shapes`` on ``cluster``. With
    ``must_place``, every pod it is true for must be placed: the bound is then on placements
    that leave none of them out (for a question such as: how far can a policy go that places
    every 810-milli pod that arrives?)."""
    counts = Counter(s for s in shapes if s.num_gpu)
    pools = pools_of(cluster, list(counts))
    quantum = quantum_of(s.gpu_milli for s in counts if s.fractional)
    top = MILLI_PER_GPU // quantum
    cost: list[float] = []
    z_index: dict[tuple[PodShape, int], int] = {}
    arc_index: list[list[tuple[int, int, int]]] = []  # per pool: (start, size, column)
    loss_index: list[list[tuple[int, int]]] = []  # per pool: (start, column)
    for p, pool in enumerate(pools):
        graph = ArcFlowGraph.build(
            [s.gpu_milli for s in counts if s.fractional and _fits_pool(s, cluster, pool)],
            quantum,
        )
        arcs, inner = graph.arcs, graph.inner
        arc_index.append([(i, v, len(cost) + k) for k, (i, v) in enumerate(arcs)])
        cost.extend([0.0] * len(arcs))
        loss_index.append([(i, len(cost) + k) for k, i in enumerate(inner)])
        cost.extend([0.0] * len(inner))
        for shape in counts:
            if _fits_pool(shape, cluster, pool):
                z_index[(shape, p)] = len(cost)
                cost.append(-float(shape.gpu_milli_total))
    rows = _Rows()
    for shape, n in counts.items():
        cols = [c for (s, _), c in z_index.items() if s == shape]
        least = float(n) if must_place is not None and must_place(shape) else 0.0
        if cols or least:
            rows.add(cols, [1.0] * len(cols), least, float(n))
    for p, pool in enumerate(pools):
        _pool_rows(rows, cluster, pool, p, quantum, z_index, arc_index[p], loss_index[p])
    n_vars = len(cost)
    if not z_index:
        return Relaxed(0, 0, True, pools, {}, tuple(() for _ in pools))
    with _quiet_stdout():
        res = milp(
            np.array(cost),
            constraints=rows.constraint(n_vars),
            integrality=np.ones(n_vars),
            bounds=Bounds(0, np.inf),
            options={"time_limit": max(time_limit, 0.01), "mip_rel_gap": 0.0, "disp": False},
        )
    dual = getattr(res, "mip_dual_bound", None)
    if res.status == 2:  # only where must_place asks for the impossible
        raise InfeasibleError("no placement places every pod it must")
    if dual is None or not np.isfinite(dual):
        raise RuntimeError(f"HiGHS gave no bound: {res.message}")
    # the optimum is a multiple of the size grid; round the float bound to it (safe while
    # HiGHS's own error is under half a grid step)
    upper = round(-float(dual) / quantum) * quantum
    # stopped before its root LP, HiGHS's bound is only every pod placed: the pools' GPUs are
    # a bound too
    gpus = sum(int(cluster.gpu_count[list(pool.nodes)].sum()) for pool in pools)
    upper = min(upper, gpus * MILLI_PER_GPU)
    if res.x is None:
        return Relaxed(upper, 0, False, pools, {}, tuple(() for _ in pools))
    x = np.rint(res.x).astype(np.int64)
    placed = {key: int(x[c]) for key, c in z_index.items() if x[c] > 0}
    patterns = tuple(
        _paths(x, arc_index[p], loss_index[p], top, quantum) for p in range(len(pools))
    )
    value = sum(k.gpu_milli_total * n for (k, _), n in placed.items())
    return Relaxed(upper, value, res.status == 0, pools, placed, patterns)


def _pool_rows(
    rows: _Rows,
    cluster: Cluster,
    pool: Pool,
    p: int,
    quantum: int,
    z_index: dict[tuple[PodShape, int], int],
    arcs: list[tuple[int, int, int]],
    losses: list[tuple[int, int]],
) -> None:
    """The constraints of one pool (see the module docstring)."""
    mine = [(s, c) for (s, q), c in z_index.items() if q == p]
    # fractional pods of a size ride on arcs of that size
    for size in sorted({s.gpu_milli for s, _ in mine if s.fractional}):
        pods = [c for s, c in mine if s.fractional and s.gpu_milli == size]
        on = [c for _, v, c in arcs if v * quantum == size]
        rows.add(pods + on, [1.0] * len(pods) + [-1.0] * len(on), -np.inf, 0.0)
    # flow conservation at inner vertices
    into: dict[int, list[int]] = {}
    out: dict[int, list[int]] = {}
    for i, v, c in arcs:
        into.setdefault(i + v, []).append(c)
        out.setdefault(i, []).append(c)
    for i, c in losses:
        out.setdefault(i, []).append(c)
    for vertex, _ in losses:  # one loss arc per inner vertex
        cols_in, cols_out = into.get(vertex, []), out.get(vertex, [])
        rows.add(cols_in + cols_out, [1.0] * len(cols_in) + [-1.0] * len(cols_out), 0.0, 0.0)
    nodes = np.array(pool.nodes)
    gpus = cluster.gpu_count[nodes]
    whole = [(s, c) for s, c in mine if not s.fractional]
    starts = [c for i, _, c in arcs if i == 0]
    rows.add(starts + [c for _, c in whole], [1.0] * len(starts)
             + [float(s.num_gpu) for s, _ in whole], 0.0, float(gpus.sum()))
    for k in sorted({s.num_gpu for s, _ in whole}):
        big = [(s, c) for s, c in whole if s.num_gpu >= k]
        rows.add([c for _, c in big], [float(s.num_gpu) for s, _ in big], 0.0,
                 float(gpus[gpus >= k].sum()))
        same = [c for s, c in whole if s.num_gpu == k]
        rows.add(same, [float(k)] * len(same), 0.0, float((k * (gpus // k)).sum()))
    for need, have in (("cpu_milli", cluster.cpu), ("memory_mib", cluster.memory)):
        rows.add([c for _, c in mine], [float(getattr(s, need)) for s, _ in mine], 0.0,
                 float(have[nodes].sum()))


def _paths(
    x: npt.NDArray[np.int64],
    arcs: list[tuple[int, int, int]],
    losses: list[tuple[int, int]],
    top: int,
    quantum: int,
) -> tuple[tuple[int, ...], ...]:
    """Decompose one pool's integer flow into 0 -> top paths: each a GPU's pod sizes."""
    out: dict[int, list[list[int]]] = {}  # vertex -> [[size, column], ...] with flow left
    flow = {c: int(x[c]) for _, _, c in arcs} | {c: int(x[c]) for _, c in losses}
    for i, v, c in arcs:
        if flow[c] > 0:
            out.setdefault(i, []).append([v, c])
    for i, c in losses:
        if flow[c] > 0:
            out.setdefault(i, []).append([top - i, c])  # a loss arc jumps to the end
    loss_cols = {c for _, c in losses}
    paths = []
    while out.get(0):
        vertex, sizes = 0, []
        while vertex < top:
            step = out[vertex][0]
            v, c = step
            flow[c] -= 1
            if flow[c] == 0:
                out[vertex].pop(0)
            if c not in loss_cols:
                sizes.append(v * quantum)
            vertex += v
        paths.append(tuple(sizes))
    return tuple(paths)
