"""FGD's fragmentation measure: how much of a node's free GPU cannot serve the workload.

Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation
Gradient Descent", USENIX ATC'23. The workload is modelled by its *typical pods*: the most
common shapes (CPU, GPU milli, GPU count, GPU spec) that together cover ``coverage`` (95%) of
pods, each weighted by its frequency renormalised over that set. CPU-only shapes are included.

For a node n with free milli ``f_g`` per GPU, free CPU ``c_n`` and idle ``I_n = sum_g f_g``, and
a typical shape s = (c_s, m_s, k_s, spec_s):

* if m_s = 0 (a CPU-only shape), or the node's GPU model is not in spec_s, or the node cannot
  host s (fewer than k_s GPUs with ``f_g >= m_s``, or ``c_n < c_s``): every idle milli is a
  fragment for s, ``F_n(s) = I_n``;
* otherwise only GPUs too small for s are fragments: ``F_n(s) = sum_{g: f_g < m_s} f_g``.

``F_n = sum_s p_s F_n(s)``. Memory plays no part, as in the paper's artifact. Everything here is
vectorised over a batch of nodes: arrays are (nodes, GPUs, shapes).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cotenant.model.cluster import BoolArray, Cluster, ClusterState, IntArray
from cotenant.model.workload import PodShape

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class TypicalPods:
    """The workload model: typical shapes and their frequencies (summing to 1)."""

    shapes: tuple[PodShape, ...]
    freq: tuple[float, ...]
    coverage: float  # share of all pods the typical shapes cover

    @staticmethod
    def from_shapes(pods: Iterable[PodShape], coverage: float = 0.95) -> TypicalPods:
        """Most common shapes until their count reaches ``coverage`` of all pods. Ties in
        count go to the larger CPU, then GPU milli, GPU count, spec."""
        counts = Counter(
            PodShape(p.cpu_milli, 0, p.num_gpu, p.gpu_milli, p.gpu_spec) for p in pods
        )
        total = sum(counts.values())
        if total == 0:
            return TypicalPods((), (), 0.0)
        ranked = sorted(
            counts.items(),
            key=lambda kv: (kv[1], kv[0].cpu_milli, kv[0].gpu_milli, kv[0].num_gpu, kv[0].gpu_spec),
            reverse=True,
        )
        chosen: list[tuple[PodShape, int]] = []
        cum = 0
        for shape, n in ranked:
            if cum >= coverage * total:
                break
            chosen.append((shape, n))
            cum += n
        return TypicalPods(
            tuple(s for s, _ in chosen), tuple(n / cum for _, n in chosen), cum / total
        )


class FragModel:
    """:class:`TypicalPods` laid out as arrays for one :class:`Cluster`."""

    def __init__(self, typical: TypicalPods, cluster: Cluster) -> None:
        self.typical = typical
        shapes = typical.shapes
        self.cpu = np.array([s.cpu_milli for s in shapes], dtype=np.int64)
        self.milli = np.array(
            [0 if s.num_gpu == 0 else s.gpu_milli for s in shapes], dtype=np.int64
        )
        self.count = np.array([s.num_gpu for s in shapes], dtype=np.int64)
        self.freq = np.array(typical.freq, dtype=np.float64)
        # access[n, s]: shape s may use node n's GPU model and asks for GPU at all
        access = np.ones((cluster.size, len(shapes)), dtype=np.bool_)
        for j, s in enumerate(shapes):
            if s.gpu_spec:
                access[:, j] = cluster.spec_mask(s.gpu_spec)
        self.access: BoolArray = access & (self.milli > 0)[None, :]

    def parts(self, free: IntArray) -> tuple[IntArray, IntArray, IntArray]:
        """Per node and shape: GPUs that fit the shape, milli on GPUs too small; and idle."""
        fits = free[:, :, None] >= self.milli[None, None, :]
        fit_count: IntArray = fits.sum(axis=1)
        small: IntArray = np.where(fits, 0, free[:, :, None]).sum(axis=1)
        idle: IntArray = free.sum(axis=1)
        return fit_count, small, idle

    def combine(
        self,
        fit_count: IntArray,
        small: IntArray,
        idle: IntArray,
        cpu_left: IntArray,
        nodes: IntArray,
    ) -> FloatArray:
        """F_n from :meth:`parts`; arrays may carry extra middle axes (candidate GPUs)."""
        access = self.access[nodes]
        cpu_ok = cpu_left[..., None] >= self.cpu
        while access.ndim < fit_count.ndim:
            access = access[:, None, :]
        satisfied = (fit_count >= self.count) & cpu_ok & access
        frag = np.where(satisfied, small, idle[..., None])
        # a row sum, not a matrix product: BLAS rounds by the batch's shape, so a node's F_n
        # (and a score at an exact delta of 0) would depend on which nodes share the batch
        result: FloatArray = (frag * self.freq).sum(axis=-1)
        return result

    def node_frag(self, free: IntArray, cpu_left: IntArray, nodes: IntArray) -> FloatArray:
        """F_n for each of ``nodes`` given their free GPU milli (nodes x GPUs) and CPU."""
        fit_count, small, idle = self.parts(free)
        return self.combine(fit_count, small, idle, cpu_left, nodes)


class FragTracker:
    """The cluster's total fragmentation, kept up to date incrementally: on each read only the
    nodes whose :attr:`ClusterState.version` moved since the last read are recomputed."""

    def __init__(self, model: FragModel, state: ClusterState) -> None:
        self.model = model
        self.state = state
        nodes = np.arange(state.cluster.size)
        self._frag = model.node_frag(state.gpu_free, state.cpu_free, nodes)
        self._version = state.version.copy()

    def total(self) -> float:
        """Sum over nodes of F_n, in milli-GPUs."""
        state = self.state
        changed = np.flatnonzero(state.version != self._version)
        if changed.size:
            self._frag[changed] = self.model.node_frag(
                state.gpu_free[changed], state.cpu_free[changed], changed
            )
            self._version[changed] = state.version[changed]
        return float(self._frag.sum())
