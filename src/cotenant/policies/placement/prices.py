"""Pattern prices: what each fractional pod size is worth in the best packing of the workload.

The linear program of packing the workload's fractional pods into as few GPUs as possible
(the arc-flow form of Gilmore and Gomory's cutting-stock LP, :mod:`.arcflow`; pod sizes
weighted by their frequency) has one dual price ``y_s`` per size: the share of a GPU that a pod
of size s pays in an optimal packing. No GPU's pods can pay more than the GPU (``sum y <= 1``
over any packing), and the packings of an optimal solution pay exactly 1.

With ``K(g)``, the most a gap of g milli can be paid by pods that fit in it (an unbounded
knapsack over the prices), placing a pod of size s in a gap of g has the *reduced cost*
``K(g) - K(g - s) - y_s >= 0``: how far the GPU falls off an optimal packing by taking it. Zero
means the placement is part of some optimal packing (a 470 beside another 470, a 320 beside a
650, an 810 on an empty GPU); the cost of a poor one is in shares of a GPU. Prices are the
primal-dual device of online stochastic bin packing (Gupta and Radovanović, "Interior-point
based online stochastic bin packing", Operations Research 68(5), 2020); here the LP is solved
once, from the workload's pod-size frequencies, never from the arrivals of a run.

A size the LP does not know (a pod outside the typical shapes) is priced at ``K(s)``, the most
pods of known sizes in its space would pay.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.optimize import linprog
from scipy.sparse import coo_array

from cotenant.model.cluster import IntArray
from cotenant.model.workload import MILLI_PER_GPU
from cotenant.policies.placement.arcflow import ArcFlowGraph, quantum_of

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class PatternPrices:
    """Dual prices per fractional size (milli) and the gap values ``K`` on the size grid."""

    quantum: int
    price: Mapping[int, float]
    gap_value: FloatArray  # K(g) for g = 0, quantum, ..., 1000

    @staticmethod
    def from_frequencies(freq: Mapping[int, float]) -> PatternPrices:
        """Prices for fractional sizes (milli, under 1000) with the given frequencies."""
        sizes = sorted(s for s, f in freq.items() if f > 0 and 0 < s < MILLI_PER_GPU)
        quantum = quantum_of(sizes)
        price = _duals(sizes, [float(freq[s]) for s in sizes], quantum)
        return PatternPrices(quantum, price, _knapsack(price, quantum))

    def value(self, milli: IntArray | int) -> FloatArray:
        """K of a gap of ``milli`` (rounded down to the grid)."""
        index = np.clip(np.asarray(milli) // self.quantum, 0, len(self.gap_value) - 1)
        out: FloatArray = self.gap_value[index]
        return out

    def size_price(self, milli: int) -> float:
        """The price of a pod of ``milli``; ``K(milli)`` for a size the LP did not have."""
        known = self.price.get(milli)
        return float(self.value(milli)) if known is None else known

    def reduced_cost(self, free: IntArray, milli: int) -> FloatArray:
        """For each GPU with ``free`` milli (any array shape), the reduced cost of placing a
        pod of ``milli`` on it; meaningless where it does not fit. Rounded to 1e-9 of a GPU,
        so that a float's last bit never decides between two placements."""
        cost = self.value(free) - self.value(np.maximum(free - milli, 0)) - self.size_price(milli)
        out: FloatArray = np.round(cost, 9)
        return out


def _duals(sizes: list[int], weight: list[float], quantum: int) -> dict[int, float]:
    """Dual prices of the demand rows of: minimise GPUs opened, such that the arcs of each
    size carry at least its weight."""
    if not sizes:
        return {}
    graph = ArcFlowGraph.build(sizes, quantum)
    n_arcs, n_loss = len(graph.arcs), len(graph.inner)
    cost = np.zeros(n_arcs + n_loss)
    cost[[k for k, (i, _) in enumerate(graph.arcs) if i == 0]] = 1.0
    index = {s // quantum: r for r, s in enumerate(sizes)}
    rows, cols, vals = [], [], []
    for k, (_, v) in enumerate(graph.arcs):  # -(arcs of size s) <= -weight_s
        rows.append(index[v])
        cols.append(k)
        vals.append(-1.0)
    a_ub = coo_array((vals, (rows, cols)), shape=(len(sizes), n_arcs + n_loss))
    vertex = {v: r for r, v in enumerate(graph.inner)}
    rows, cols, vals = [], [], []
    for k, (i, v) in enumerate(graph.arcs):  # inflow - outflow = 0 at inner vertices
        if i + v in vertex:
            rows.append(vertex[i + v])
            cols.append(k)
            vals.append(1.0)
        if i in vertex:
            rows.append(vertex[i])
            cols.append(k)
            vals.append(-1.0)
    for j, _ in enumerate(graph.inner):  # each inner vertex may end its path (a loss arc)
        rows.append(j)
        cols.append(n_arcs + j)
        vals.append(-1.0)
    a_eq = coo_array((vals, (rows, cols)), shape=(n_loss, n_arcs + n_loss))
    res = linprog(cost, A_ub=a_ub.tocsr(), b_ub=-np.array(weight), A_eq=a_eq.tocsr(),
                  b_eq=np.zeros(n_loss), bounds=(0, None), method="highs-ds")
    if res.status != 0:  # the LP is always feasible and bounded; this is a solver failure
        raise RuntimeError(f"pattern price LP: {res.message}")
    duals = np.maximum(-np.asarray(res.ineqlin.marginals), 0.0)
    return {s: float(duals[r]) for r, s in enumerate(sizes)}


def _knapsack(price: Mapping[int, float], quantum: int) -> FloatArray:
    """K(g) on the grid: the most that pods of the priced sizes fitting in g pay."""
    top = MILLI_PER_GPU // quantum
    best = np.zeros(top + 1)
    items = [(s // quantum, p) for s, p in price.items() if p > 0]
    for g in range(1, top + 1):
        value = best[g - 1]
        for v, p in items:
            if v <= g:
                value = max(value, best[g - v] + p)
        best[g] = value
    return best
