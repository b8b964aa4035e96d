"""Shared machinery of the search optimisers (genetic, MCTS, and auto's decomposition): GPUs
chosen one at a time against the demand still uncovered.

A *config* is one GPU: a maximal layout (index into ``problem.layouts``) and, per instance,
the service it serves (-1: idle). :func:`fill_scores` scores every layout for the next GPU at
once (numpy over layouts x services): instances are handed out largest first, each to the
service it covers most of, and a GPU's score is the demand it covers measured in *slice
equivalents* (req/s divided by the service's best req/s per compute slice), so a GPU scores
at most 7 and idle or wasted capacity scores nothing. :func:`fill` repeats that until every
demand is met. :func:`bulk` first gives each service whole GPUs of its own best single-service
layout, keeping one GPU's worth back so the remainder can still be mixed with other services.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cotenant.errors import InfeasibleError
from cotenant.model.deployment import GpuPlan
from cotenant.model.mig import MigPlacement
from cotenant.policies.partition.problem import (
    TOLERANCE,
    Deadline,
    FloatArray,
    IntArray,
    PartitionProblem,
)

Config = tuple[int, tuple[int, ...]]  # (layout index, owner per slot; -1 idle)

MAX_CELLS = 20_000_000
"""Layouts x services beyond which the searches do not run: each step scores every layout
for every service, (L, S) arrays of that many cells (160 MB each)."""


class OutOfTime(Exception):  # noqa: N818  (a signal inside a search, never shown to a user)
    """A search step found its deadline passed; the search returns its best plan so far."""


def too_large(problem: PartitionProblem) -> bool:
    """Whether the searches would need more than :data:`MAX_CELLS` per step."""
    return len(problem.layouts) * len(problem.services) > MAX_CELLS


@dataclass(frozen=True)
class Tables:
    """Per-problem arrays, computed once."""

    slot_prof: IntArray  # (L, K) profile column of each instance slot, largest first; -1 pad
    slot_place: tuple[tuple[MigPlacement, ...], ...]  # per layout, placements in slot order
    eff: FloatArray  # (S,) best req/s per compute slice
    rate: FloatArray  # (S, P)
    demand: FloatArray  # (S,)
    tol: FloatArray  # (S,) slack below which demand counts as met
    deadline: Deadline | None = None  # fill() raises OutOfTime once it has passed


def tables(problem: PartitionProblem, deadline: Deadline | None = None) -> Tables:
    slices = problem.slices
    width = max(len(lay.placements) for lay in problem.layouts)
    slot_prof = np.full((len(problem.layouts), width), -1, dtype=np.int64)
    places = []
    for li, layout in enumerate(problem.layouts):
        ordered = sorted(layout.placements, key=lambda p: (-p.profile.compute_slices, p.start))
        places.append(tuple(ordered))
        for k, p in enumerate(ordered):
            slot_prof[li, k] = problem.profiles.index(p.profile.name)
    eff = (problem.rate / slices[None, :]).max(axis=1)
    return Tables(
        slot_prof, tuple(places), np.where(eff > 0, eff, 1.0), problem.rate, problem.demand,
        TOLERANCE * np.maximum(1.0, problem.demand), deadline,
    )


def fill_scores(t: Tables, deficit: FloatArray) -> tuple[FloatArray, IntArray, FloatArray]:
    """For every layout as the next GPU: its score, owners (L, K) and the deficit left (L, S)."""
    n_layouts, width = t.slot_prof.shape
    left = np.repeat(np.maximum(deficit, 0.0)[None, :], n_layouts, axis=0)
    owners = np.full((n_layouts, width), -1, dtype=np.int64)
    score = np.zeros(n_layouts)
    rows = np.arange(n_layouts)
    for k in range(width):
        prof = t.slot_prof[:, k]
        rate = t.rate[:, np.maximum(prof, 0)].T  # (L, S)
        gain = np.minimum(rate, left) / t.eff[None, :]
        best = gain.argmax(axis=1)
        got = gain[rows, best]
        take = (prof >= 0) & (got > 0)
        owners[take, k] = best[take]
        left[rows[take], best[take]] -= rate[rows[take], best[take]]
        score += np.where(take, got, 0.0)
    return score, owners, left


def covers(t: Tables, deficit: FloatArray) -> bool:
    return bool((deficit <= t.tol).all())


def fill(
    t: Tables, deficit: FloatArray, rng: np.random.Generator | None = None, width: int = 1
) -> list[Config]:
    """GPUs until ``deficit`` is covered: the best-scoring layout each time, or with ``rng``
    one of the ``width`` best at random."""
    out: list[Config] = []
    deficit = deficit.copy()
    while not covers(t, deficit):
        if t.deadline is not None and t.deadline.expired():
            raise OutOfTime
        score, owners, left = fill_scores(t, deficit)
        order = np.lexsort((np.arange(len(score)), -score))
        order = order[score[order] > 0]  # a random pick only among layouts that serve some
        if len(order) == 0:
            raise InfeasibleError("a demand is left that no instance can serve")
        pick = int(order[rng.integers(min(width, len(order)))] if rng is not None else order[0])
        out.append((pick, tuple(int(o) for o in owners[pick])))
        deficit = left[pick]
    return out


def bulk(
    problem: PartitionProblem, t: Tables, keep: int = 1
) -> tuple[list[Config], FloatArray]:
    """Whole single-service GPUs for all but about ``keep`` + 1 GPUs' worth of each demand."""
    per_layout = problem.layout_counts() @ problem.rate.T  # (L, S): a GPU all for s
    best = per_layout.argmax(axis=0)
    cap = per_layout[best, np.arange(len(best))]
    configs: list[Config] = []
    deficit = problem.demand.copy()
    for s, layout in enumerate(best):
        if cap[s] <= 0:
            continue
        whole = max(0, int(deficit[s] // cap[s]) - keep)
        width = int((t.slot_prof[layout] >= 0).sum())
        owners = tuple(s if k < width else -1 for k in range(t.slot_prof.shape[1]))
        configs += [(int(layout), owners)] * whole
        deficit[s] -= whole * cap[s]
    return configs, deficit


def coverage(t: Tables, configs: list[Config]) -> FloatArray:
    """(G, S): req/s each GPU gives each service."""
    out = np.zeros((len(configs), len(t.demand)))
    for g, (layout, owners) in enumerate(configs):
        for k, s in enumerate(owners):
            if s >= 0:
                out[g, s] += t.rate[s, t.slot_prof[layout, k]]
    return out


def prune(t: Tables, configs: list[Config], rng: np.random.Generator) -> list[Config]:
    """Drop GPUs whose capacity no demand needs, in random order."""
    cov = coverage(t, configs)
    total = cov.sum(axis=0)
    keep = np.ones(len(configs), dtype=bool)
    for g in rng.permutation(len(configs)):
        if ((total - cov[g]) >= t.demand - t.tol).all():
            total -= cov[g]
            keep[g] = False
    return [c for c, k in zip(configs, keep, strict=True) if k]


def repair(
    t: Tables, configs: list[Config], rng: np.random.Generator | None = None, width: int = 1
) -> list[Config]:
    """Add GPUs (by :func:`fill`) until every demand is met."""
    total = coverage(t, configs).sum(axis=0) if configs else np.zeros(len(t.demand))
    return configs + fill(t, t.demand - total, rng, width)


def to_gpus(problem: PartitionProblem, t: Tables, configs: list[Config]) -> tuple[GpuPlan, ...]:
    gpus = []
    for layout, owners in configs:
        pairs = [
            (p, problem.services[o] if o >= 0 else None)
            for p, o in zip(t.slot_place[layout], owners, strict=False)
        ]
        gpus.append(GpuPlan(problem.layouts[layout], tuple(pairs)))
    return tuple(gpus)


def from_gpus(problem: PartitionProblem, t: Tables, gpus: tuple[GpuPlan, ...]) -> list[Config]:
    """The inverse of :func:`to_gpus` (for seeding searches with another optimiser's plan)."""
    index = {lay: i for i, lay in enumerate(problem.layouts)}
    names = {s: i for i, s in enumerate(problem.services)}
    out: list[Config] = []
    width = t.slot_prof.shape[1]
    for gpu in gpus:
        li = index[gpu.layout]
        owner = dict(gpu.assignment)
        slots = [names[s] if (s := owner[p]) is not None else -1 for p in t.slot_place[li]]
        out.append((li, tuple(slots + [-1] * (width - len(slots)))))
    return out
