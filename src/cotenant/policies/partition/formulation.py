"""The partition problem as a sparse integer program, with the cuts that make its bound honest.

Variables: ``y_l``, GPUs configured with layout l (one per distinct profile multiset), and
``z_sp``, instances of profile p serving service s, only for the pairs where p meets s's SLO
(an instance that serves nothing is no variable)::

    minimise    sum_l y_l
    subject to  sum_s z_sp - sum_l c_lp y_l <= free_p       every profile p  (instances exist)
                sum_p (r_sp / d_s) z_sp >= 1                every service s  (demand met)
                sum_p k_p z_sp >= K_s,  sum_p m_p z_sp >= M_s   every service s  (cuts)
                0 <= z_sp <= ceil(d_s / r_sp),  y, z integer

``k_p``/``m_p`` are the compute/memory slices of profile p, and ``K_s``/``M_s`` the fewest
compute/memory slices that *integer* instances covering ``d_s`` can take (:func:`min_slices`,
an exact knapsack over slices). The cuts change no integer solution, but without them the
LP relaxation lets a service of 10 req/s take a hundredth of a 7g instance, and on tight
SLOs (where only large profiles qualify) its bound is far below the optimum. With them the
LP bound is at least the *slice bound* (:func:`slice_bound`): the services' fewest slices
over the GPU's 7 compute and 8 memory slices.

Every matrix is ``scipy.sparse``: the memory grows linearly with the services (a dense
constraint matrix grows with their square: 100,000 services would take 373 GiB).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from cotenant.policies.partition.problem import TOLERANCE, FloatArray, IntArray, PartitionProblem

KNAPSACK_SLICES = 32
"""Slices up to which :func:`min_slices` solves each service's knapsack exactly; beyond, the
rate per slice of the most efficient profile bounds it (a service that large is within a
slice or two of that bound)."""


def distinct_layouts(problem: PartitionProblem) -> IntArray:
    """Indices of one layout per distinct profile multiset, dropping multisets that another
    one contains (a layout holding 3g+2g+1g makes 3g+2g redundant). Layouts that differ only
    in where instances sit are one column to the MILP; duplicate or dominated columns only
    make branch and bound explore symmetric copies."""
    counts = problem.layout_counts()
    _, first = np.unique(counts, axis=0, return_index=True)
    keep = [i for i in np.sort(first)
            if not any((counts[j] >= counts[i]).all() and (counts[j] != counts[i]).any()
                       for j in first)]
    return np.array(keep, dtype=np.int64)


def min_slices(rate: FloatArray, weight: IntArray, demand: FloatArray) -> IntArray:
    """(S,) the fewest slices (``weight`` per profile) integer instances take to cover each
    demand at ``rate`` (S, P) req/s; 0 where the demand is 0.

    ``best[c]``: the most req/s instances of total weight at most c serve (an unbounded
    knapsack, vectorised over services). Past :data:`KNAPSACK_SLICES` the bound
    ``demand / (best req/s per slice)`` is used, rounded up."""
    n_svc = len(demand)
    target = demand * (1.0 - TOLERANCE)  # the demand a plan must meet, within tolerance
    best = np.zeros((KNAPSACK_SLICES + 1, n_svc))
    need = np.where(demand > 0, -1, 0).astype(np.int64)
    for c in range(1, KNAPSACK_SLICES + 1):
        best[c] = best[c - 1]
        for p, w in enumerate(weight):
            if w <= c:
                np.maximum(best[c], best[c - int(w)] + rate[:, p], out=best[c])
        need = np.where((need < 0) & (best[c] >= target), c, need)
    per_slice = (rate / weight[None, :]).max(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        beyond = np.ceil(target / np.where(per_slice > 0, per_slice, np.inf) - 1e-9)
    beyond = np.maximum(beyond, KNAPSACK_SLICES + 1)
    return np.where(need < 0, beyond, need).astype(np.int64)


def slice_bound(problem: PartitionProblem) -> int:
    """No plan uses fewer GPUs than the services' fewest compute slices over the GPU's
    compute slices, nor than their fewest memory slices over its memory slices."""
    geometry = problem.geometry
    compute = int(min_slices(problem.rate, problem.slices, problem.demand).sum())
    memory = int(min_slices(problem.rate, problem.memory_slices, problem.demand).sum())
    return max(math.ceil(compute / geometry.compute_slices),
               math.ceil(memory / geometry.memory_slices))


@dataclass(frozen=True)
class Formulation:
    """The integer program in the form scipy's HiGHS interface takes."""

    cost: FloatArray  # (n,)
    matrix: sp.csr_array  # (m, n)
    row_lower: FloatArray  # (m,)
    row_upper: FloatArray  # (m,)
    upper: FloatArray  # (n,) variable upper bounds (lower bounds are 0)
    layouts: IntArray  # (L',) layout index of each y column
    pairs: IntArray  # (Z, 2) (service, profile) of each z column

    @property
    def n_layouts(self) -> int:
        return len(self.layouts)

    def as_upper_rows(self) -> tuple[sp.csr_array, FloatArray]:
        """(A, b) with ``A x <= b``, as ``linprog`` takes them: rows with an upper limit as
        they are, then rows with a lower limit negated (no row has both)."""
        up = np.isfinite(self.row_upper)
        low = np.isfinite(self.row_lower)
        matrix = sp.vstack([self.matrix[np.flatnonzero(up)], -self.matrix[np.flatnonzero(low)]])
        return sp.csr_array(matrix), np.concatenate([self.row_upper[up], -self.row_lower[low]])

    def instances(self, x: FloatArray, n_services: int, n_profiles: int) -> FloatArray:
        """(S, P) the z part of a solution ``x``."""
        out = np.zeros((n_services, n_profiles))
        out[self.pairs[:, 0], self.pairs[:, 1]] = x[self.n_layouts:]
        return out

    def layout_use(self, x: FloatArray, n_layouts: int) -> FloatArray:
        """(L,) the y part of ``x``, over all of the problem's layouts."""
        out = np.zeros(n_layouts)
        out[self.layouts] = x[: self.n_layouts]
        return out


def formulate(problem: PartitionProblem, free: IntArray | None = None) -> Formulation:
    """The program of the module docstring; ``free`` (P,) instances exist at no cost."""
    layouts = distinct_layouts(problem)
    counts = problem.layout_counts()[layouts].astype(np.float64)  # (L', P)
    n_lay, n_prof = counts.shape
    active = problem.demand > 0
    svc, prof = np.nonzero((problem.rate > 0) & active[:, None])
    n_z = len(svc)
    cols = n_lay + np.arange(n_z)
    rate = problem.rate[svc, prof]
    demand = problem.demand[svc]
    # instance rows 0..P-1: + z, - c y
    inst = sp.coo_array(
        (np.concatenate([np.ones(n_z), -counts.T.ravel()]),
         (np.concatenate([prof, np.repeat(np.arange(n_prof), n_lay)]),
          np.concatenate([cols, np.tile(np.arange(n_lay), n_prof)]))),
        shape=(n_prof, n_lay + n_z))
    # per-service rows, numbered over the active services only
    row_of = np.cumsum(active) - 1
    rows = row_of[svc]
    n_act = int(active.sum())
    shape = (n_act, n_lay + n_z)
    demand_rows = sp.coo_array((rate / demand, (rows, cols)), shape=shape)
    compute_rows = sp.coo_array((problem.slices[prof].astype(np.float64), (rows, cols)),
                                shape=shape)
    memory_rows = sp.coo_array((problem.memory_slices[prof].astype(np.float64), (rows, cols)),
                               shape=shape)
    blocks = [inst, demand_rows, compute_rows, memory_rows]
    extra = np.zeros(n_prof) if free is None else free.astype(np.float64)
    lower = [np.full(n_prof, -np.inf), np.full(n_act, 1.0 - TOLERANCE / 2),
             min_slices(problem.rate, problem.slices, problem.demand)[active].astype(float),
             min_slices(problem.rate, problem.memory_slices,
                        problem.demand)[active].astype(float)]
    upper = [extra, np.full(n_act, np.inf), np.full(n_act, np.inf), np.full(n_act, np.inf)]
    var_upper = np.concatenate([np.full(n_lay, np.inf), np.ceil(demand / rate - 1e-9)])
    return Formulation(
        np.concatenate([np.ones(n_lay), np.zeros(n_z)]),
        sp.csr_array(sp.vstack(blocks)),
        np.concatenate(lower), np.concatenate(upper), var_upper, layouts,
        np.stack([svc, prof], axis=1).astype(np.int64),
    )
