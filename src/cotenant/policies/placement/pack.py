"""cotenant-pack: FGD's fragmentation measure, plus what it leaves out.

FGD (:mod:`.fgd`) places a pod where the expected fragmentation over the next typical pod
grows least. On the openb traces it still leaves GPUs in packings that no later pod completes
well, CPU or memory used up on nodes that still have free GPUs, and GPU models that
model-restricted pods need taken by pods that could have gone elsewhere. The score of placing
a pod (in points; the highest wins) adds one term for each:

``25 * gain - 1000 * reduced_cost - 100 * stranded - 10 * pressure``

* ``gain``: FGD's F_n - F'_n in GPUs, without its sigmoid and truncation (25 points per GPU is
  the sigmoid's slope at 0, where FGD's scores lie);
* ``reduced_cost`` (fractional pods): how far the GPU falls off an optimal packing of the
  workload's pod sizes by taking the pod, in shares of a GPU (:mod:`.prices`); its weight
  makes the packing decide first and the other terms break its ties;
* ``stranded``: the GPUs of the node that the placement leaves without the CPU or memory the
  workload asks per GPU: with ``rho_c`` and ``rho_m`` the CPU and memory the workload's GPU
  pods ask per milli-GPU, a node with I idle milli, c CPU and m memory free strands
  ``max(0, I - c / rho_c, I - m / rho_m)``; the term is its growth, in GPUs;
* ``pressure``: the pod's GPUs times the share of the node's GPU model that the workload's
  model-restricted pods are expected to need (their GPU demand at 100% of capacity, spread
  over the models they allow in proportion to each model's GPUs).

Ties go to the GPU left with the least free milli (best fit), then to the node's rank. Every
term depends only on the node's state and the workload's shape frequencies (the same
information FGD uses), so the policy is node local and online: it never sees a later arrival.
The weights (:class:`PackWeights`) were chosen on the default openb trace; the docs' placement
page says how.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cotenant.model.cluster import Cluster, ClusterState, IntArray
from cotenant.model.workload import MILLI_PER_GPU, PodShape
from cotenant.policies.placement.base import PlacementPolicy, Scores
from cotenant.policies.placement.fgd import FgdPolicy
from cotenant.policies.placement.frag import FloatArray
from cotenant.policies.placement.prices import PatternPrices
from cotenant.policies.placement.registry import PLACEMENT

TIE = MILLI_PER_GPU + 1  # points are scaled by this, so the GPU's free milli breaks ties


@dataclass(frozen=True)
class PackWeights:
    """Points per unit of each term (see the module docstring); 0 switches a term off."""

    gain: float = 25.0
    """Per GPU of FGD fragmentation avoided."""
    packing: float = 1000.0
    """Per GPU share of reduced cost."""
    stranded: float = 100.0
    """Per GPU left without CPU or memory."""
    pressure: float = 10.0
    """Per GPU placed on a model that restricted pods are expected to need in full."""


@PLACEMENT.register("cotenant-pack", aliases=("cotenant", "pack"))
class CotenantPackPolicy(PlacementPolicy):
    """FGD plus packing prices, resource balance and GPU-model pressure."""

    name = "cotenant-pack"
    dedupe_states = True
    uses_workload = True

    def __init__(
        self,
        workload: Sequence[PodShape] = (),
        coverage: float = 0.95,
        weights: PackWeights = PackWeights(),
    ) -> None:
        self.weights = weights
        self.fgd = FgdPolicy(workload, coverage)
        typical = self.fgd.typical
        freq: dict[int, float] = {}
        for shape, f in zip(typical.shapes, typical.freq, strict=True):
            if shape.fractional:
                freq[shape.gpu_milli] = freq.get(shape.gpu_milli, 0.0) + f
        self.prices = PatternPrices.from_frequencies(freq)
        gpu_pods = [s for s in workload if s.num_gpu]
        milli = sum(s.gpu_milli_total for s in gpu_pods)
        self.cpu_per_milli = sum(s.cpu_milli for s in gpu_pods) / milli if milli else 0.0
        self.mem_per_milli = sum(s.memory_mib for s in gpu_pods) / milli if milli else 0.0
        restricted: Counter[tuple[str, ...]] = Counter()
        for s in gpu_pods:
            if s.gpu_spec:
                restricted[s.gpu_spec] += s.gpu_milli_total
        self.restricted = {spec: n / milli for spec, n in restricted.items()}
        self._pressure: dict[int, FloatArray] = {}
        self._cost: dict[int, FloatArray] = {}

    def packing_cost(self, free: IntArray, milli: int) -> FloatArray:
        """:meth:`PatternPrices.reduced_cost` of a pod of ``milli``, looked up per free milli
        (a table of 1001 entries per pod size, built on first use)."""
        table = self._cost.get(milli)
        if table is None:
            table = self.prices.reduced_cost(np.arange(MILLI_PER_GPU + 1), milli)
            self._cost[milli] = table
        out: FloatArray = table[free]
        return out

    def pressure(self, cluster: Cluster) -> FloatArray:
        """Per node: the share of its GPU model's GPUs that restricted pods will need."""
        key = id(cluster)
        if key not in self._pressure:
            models = np.arange(len(cluster.model_names))
            gpus = np.array([cluster.gpu_count[cluster.model_index == m].sum() for m in models],
                            dtype=np.float64)
            load = np.zeros(len(models))
            for spec, share in self.restricted.items():
                allowed = np.array([name in spec for name in cluster.model_names], np.bool_)
                if gpus[allowed].sum():
                    load[allowed] += share * cluster.total_gpus * gpus[allowed] / gpus[
                        allowed].sum()
            per_model = np.divide(load, gpus, out=np.zeros_like(load), where=gpus > 0)
            self._pressure[key] = np.where(
                cluster.model_index >= 0, per_model[np.maximum(cluster.model_index, 0)], 0.0
            )
        return self._pressure[key]

    def stranded(self, idle: IntArray, cpu: IntArray, mem: IntArray) -> FloatArray:
        """GPUs (in GPUs) that a node's free CPU or memory cannot serve at the workload's
        CPU and memory per GPU."""
        if not self.cpu_per_milli or not self.mem_per_milli:
            return np.zeros(np.shape(idle))
        short = np.maximum(idle - cpu / self.cpu_per_milli, idle - mem / self.mem_per_milli)
        out: FloatArray = np.maximum(short, 0.0) / MILLI_PER_GPU
        return out

    def stranding(self, state: ClusterState, shape: PodShape, nodes: IntArray) -> FloatArray:
        """How many more GPUs (in GPUs) each node strands once it hosts ``shape``:
        :meth:`stranded` after less before, written out for speed (max(I - a, I - b) is
        I - min(a, b))."""
        if not self.cpu_per_milli or not self.mem_per_milli:
            return np.zeros(len(nodes))
        idle = state.gpu_free[nodes].sum(axis=1)
        cpu = state.cpu_free[nodes] / self.cpu_per_milli
        mem = state.mem_free[nodes] / self.mem_per_milli
        before = idle - np.minimum(cpu, mem)
        after = (idle - shape.gpu_milli_total) - np.minimum(
            cpu - shape.cpu_milli / self.cpu_per_milli,
            mem - shape.memory_mib / self.mem_per_milli,
        )
        out: FloatArray = (np.maximum(after, 0.0) - np.maximum(before, 0.0)) / MILLI_PER_GPU
        return out

    def score(
        self, state: ClusterState, shape: PodShape, nodes: IntArray, rng: np.random.Generator
    ) -> Scores:
        free = state.gpu_free[nodes]
        w = self.weights
        node_points = (
            -w.stranded * self.stranding(state, shape, nodes)
            - w.pressure * self.pressure(state.cluster)[nodes]
            * (shape.gpu_milli_total / MILLI_PER_GPU)
        )
        points = w.gain * self.fgd.gain(state, shape, nodes) / MILLI_PER_GPU
        points = points + node_points[:, None]
        if not shape.fractional:
            total = np.floor(points[:, 0]).astype(np.int64) * TIE
            return Scores(total, np.full(len(nodes), -1, np.int64))
        milli = shape.gpu_milli
        points = points - w.packing * self.packing_cost(free, milli)
        fits = free >= milli
        per_gpu = np.floor(points).astype(np.int64) * TIE + np.where(fits, MILLI_PER_GPU - (
            free - milli), 0)
        per_gpu = np.where(fits, per_gpu, np.iinfo(np.int64).min)
        gpu: IntArray = per_gpu.argmax(axis=1)
        return Scores(per_gpu[np.arange(len(nodes)), gpu], gpu)
