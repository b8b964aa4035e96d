"""The ATC'23 fragmentation experiment: how much GPU capacity a policy can allocate as the
cluster fills, with no departures.

Protocol (Weng et al., USENIX ATC'23, and its artifact): sort the pods by name and shuffle them
with the seed; append pods sampled with replacement from the original list until the arrived
GPU demand would pass ``demand_multiple`` x the cluster's GPU capacity (or drop random pods
while it is above); draw one random permutation of the nodes to break score ties; then try each
pod once, in order. CPU-only pods are scheduled too and add nothing to the arrived demand;
failed pods count toward it. After every pod the allocated and arrived milli-GPUs are recorded;
the cluster's fragmentation (FGD's measure over the trace's typical pods, for every policy) is
sampled at each whole percent of arrived demand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from cotenant.errors import InputError
from cotenant.model.cluster import Cluster, ClusterState, IntArray
from cotenant.model.workload import Pod, PodShape
from cotenant.policies.placement import PLACEMENT
from cotenant.policies.placement.frag import FragModel, FragTracker, TypicalPods
from cotenant.sim.placer import Placer

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class FragmentationConfig:
    """Settings of one fragmentation run."""

    demand_multiple: float = 1.3
    """Arrived GPU demand to reach, as a multiple of the cluster's GPU capacity."""
    coverage: float = 0.95
    """Share of pods FGD's typical shapes must cover."""
    cache: bool = True
    """Reuse node scores across pods where the policy allows it (same result, faster)."""


@dataclass(frozen=True)
class FragmentationRun:
    """What one (policy, seed) run recorded, one entry per pod tried."""

    policy: str
    seed: int
    capacity_milli: int
    arrived_milli: IntArray
    used_milli: IntArray
    failed: npt.NDArray[np.bool_]
    frag_percent: IntArray = field(repr=False)
    frag_milli: FloatArray = field(repr=False)

    @property
    def arrivals(self) -> int:
        return len(self.arrived_milli)

    def curve(self, max_percent: int | None = None) -> tuple[IntArray, FloatArray]:
        """Allocated share (%) of GPU capacity against arrived demand (whole %), as the
        artifact discretises it: the mean over pods whose arrived demand rounds to x, or over
        x-1..x+1 when none does."""
        arrive = np.rint(100.0 * self.arrived_milli / self.capacity_milli).astype(np.int64)
        alloc = 100.0 * self.used_milli / self.capacity_milli
        top = self.arrived_percent if max_percent is None else max_percent
        xs = np.arange(top + 1)
        sums = np.bincount(arrive, weights=alloc, minlength=top + 2)[: top + 2]
        counts = np.bincount(arrive, minlength=top + 2)[: top + 2]
        ys = np.full(top + 1, np.nan)
        for x in xs:
            if counts[x]:
                ys[x] = sums[x] / counts[x]
            else:
                lo, hi = max(0, x - 1), x + 2
                if counts[lo:hi].sum():
                    ys[x] = sums[lo:hi].sum() / counts[lo:hi].sum()
        return xs, ys

    def alloc_at(self, percent: int) -> float:
        """Allocated share (%) of GPU capacity when arrived demand is ``percent``%; NaN when
        no arrival came within 1% of it (pods large against the cluster jump past it). A
        negative ``percent`` is an :class:`~cotenant.errors.InputError`."""
        if percent < 0:
            raise InputError("alloc_at percent", f"{percent} must be >= 0 (a whole percent of "
                             "arrived GPU demand)")
        _, ys = self.curve(percent)
        return float(ys[percent])

    @property
    def arrived_percent(self) -> int:
        """Arrived GPU demand at the end, in whole % of capacity (0 for a run that drew no
        pod: a trace of a few pods larger than the target demand)."""
        if not self.arrivals:
            return 0
        return int(np.rint(100.0 * self.arrived_milli[-1] / self.capacity_milli))

    @property
    def final_alloc_percent(self) -> float:
        """Allocated share (%) of GPU capacity at the end of the run."""
        return 100.0 * float(self.used_milli[-1]) / self.capacity_milli if self.arrivals else 0.0

    def failed_pods(self) -> int:
        return int(self.failed.sum())


def point_window(arrived_milli: IntArray, capacity_milli: int, percent: int) -> IntArray:
    """Indices of the arrivals whose allocations :meth:`FragmentationRun.curve` averages at
    ``percent``: those whose arrived demand rounds to it, else those rounding to its
    neighbours; empty when there are none."""
    arrive = np.rint(100.0 * arrived_milli / capacity_milli).astype(np.int64)
    window: IntArray = np.flatnonzero(arrive == percent)
    if window.size == 0:
        window = np.flatnonzero(np.abs(arrive - percent) <= 1)
    return window


def check_gpu_demand(pods: Sequence[Pod]) -> None:
    """An error unless some pod asks for a GPU: arrivals go on until GPU demand reaches its
    target, which pods without GPUs never do."""
    if not any(p.shape.gpu_milli_total for p in pods):
        raise InputError("pods", "no pod asks for a GPU; the experiment fills the cluster with "
                         "GPU demand", hint="give a pod list with GPU pods")


def arrival_order(
    pods: Sequence[Pod], capacity_milli: int, multiple: float, rng: np.random.Generator
) -> list[PodShape]:
    """Shuffle, then inflate (sampling with replacement) or deflate to the target demand."""
    by_name = sorted(pods, key=lambda p: p.name)
    check_gpu_demand(by_name)
    shapes = [by_name[i].shape for i in rng.permutation(len(by_name))]
    target = multiple * capacity_milli
    total = sum(s.gpu_milli_total for s in shapes)
    if total < target:
        base = [p.shape for p in by_name]
        while True:
            extra = base[int(rng.integers(len(base)))]
            if total + extra.gpu_milli_total > target:
                break
            shapes.append(extra)
            total += extra.gpu_milli_total
    while total > target and shapes:
        removed = shapes.pop(int(rng.integers(len(shapes))))
        total -= removed.gpu_milli_total
    return shapes


def run_fragmentation(
    cluster: Cluster,
    pods: Sequence[Pod],
    policy: str,
    seed: int,
    config: FragmentationConfig = FragmentationConfig(),
) -> FragmentationRun:
    """One run of the protocol for ``policy`` and ``seed``."""
    rng = np.random.default_rng(seed)
    capacity = cluster.total_gpu_milli
    order = arrival_order(pods, capacity, config.demand_multiple, rng)
    rank = rng.permutation(cluster.size).astype(np.int64)
    workload = [p.shape for p in pods]
    typical = TypicalPods.from_shapes(workload, config.coverage)
    chosen = PLACEMENT.create(policy, workload=workload)
    state = ClusterState(cluster)
    placer = Placer(chosen, state, rank, rng, cache=config.cache)
    frag = FragTracker(FragModel(typical, cluster), state)

    n = len(order)
    arrived = np.empty(n, np.int64)
    used = np.empty(n, np.int64)
    failed = np.zeros(n, np.bool_)
    frag_pct: list[int] = []
    frag_val: list[float] = []
    demand = 0
    allocated = 0
    next_pct = 0
    for i, shape in enumerate(order):
        demand += shape.gpu_milli_total
        alloc = placer.place(shape)
        if alloc is None:
            failed[i] = True
        else:
            allocated += len(alloc.gpus) * alloc.milli
        arrived[i] = demand
        used[i] = allocated
        if 100 * demand >= next_pct * capacity:
            frag_pct.append(100 * demand // capacity)  # where it was measured: a large pod
            # can pass several percent at once
            frag_val.append(frag.total())
            next_pct = 100 * demand // capacity + 1
    return FragmentationRun(
        chosen.name,
        seed,
        capacity,
        arrived,
        used,
        failed,
        np.array(frag_pct, np.int64),
        np.array(frag_val),
    )
