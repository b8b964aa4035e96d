"""A genetic algorithm over per-GPU configurations, seeded by the greedy plans.

MIG-serving (Tan et al., arXiv 2109.11067) searches plans with a genetic algorithm whose genes
are GPU configurations; this is our own design in that spirit:

- **Individual**: a plan as a list of GPUs, each a maximal layout with an owner per instance
  (:mod:`~cotenant.policies.partition.search`). Fitness: fewer GPUs, then less capacity beyond
  demand (in slice equivalents), so that a plan one GPU away from dropping one ranks higher.
- **Seeds**: the greedy plan, the bulk-then-fill plan, and randomised fills.
- **Crossover**: each GPU of either parent is kept with probability 1/2; GPUs that no demand
  needs are dropped (random order) and the uncovered demand is filled greedily.
- **Mutation**: remove one to three GPUs and refill with a randomised fill (one of the two best
  layouts each step), which lets the search escape the greedy's choices.
- **Elitism** keeps the two best; tournament selection of size two picks parents.

It stops at the time limit, after ``generations``, after ``stall`` generations without
improvement, or at the LP lower bound. With the same seed and enough time the result is the
same run to run; a binding time limit makes it depend on machine speed.
"""

from __future__ import annotations

import time

import numpy as np

from cotenant.policies.partition.greedy import solve_greedy
from cotenant.policies.partition.milp import lp_bound
from cotenant.policies.partition.problem import PartitionProblem, Plan
from cotenant.policies.partition.registry import PARTITION
from cotenant.policies.partition.search import (
    Config,
    Tables,
    bulk,
    coverage,
    fill,
    from_gpus,
    prune,
    repair,
    tables,
    to_gpus,
)


def _fitness(t: Tables, plan: list[Config]) -> tuple[int, float]:
    slack = coverage(t, plan).sum(axis=0) - t.demand
    return len(plan), float((np.maximum(slack, 0.0) / t.eff).sum())


def _mutate(t: Tables, plan: list[Config], rng: np.random.Generator) -> list[Config]:
    drop = set(rng.choice(len(plan), size=min(len(plan), int(rng.integers(1, 4))), replace=False))
    kept = [c for g, c in enumerate(plan) if g not in drop]
    return prune(t, repair(t, kept, rng, width=2), rng)


def _cross(
    t: Tables, a: list[Config], b: list[Config], rng: np.random.Generator
) -> list[Config]:
    child = [c for c in a if rng.random() < 0.5] + [c for c in b if rng.random() < 0.5]
    return repair(t, prune(t, child, rng))


@PARTITION.register("genetic", aliases=("ga",))
def solve_genetic(
    problem: PartitionProblem,
    time_limit: float = 10.0,
    *,
    seed: int = 0,
    population: int = 12,
    generations: int = 200,
    stall: int = 25,
) -> Plan:
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    t = tables(problem)
    bound = lp_bound(problem)
    base, rest = bulk(problem, t)
    seeds = [from_gpus(problem, t, solve_greedy(problem).gpus), base + fill(t, rest)]
    pop = [prune(t, s, rng) for s in seeds]
    while len(pop) < population:
        pop.append(_mutate(t, pop[len(pop) % len(seeds)], rng))
    pop.sort(key=lambda p: _fitness(t, p))
    best, since = _fitness(t, pop[0]), 0
    for _ in range(generations):
        if best[0] <= bound or since >= stall or time.perf_counter() - start > time_limit:
            break
        children = pop[:2]
        while len(children) < population:
            i, j = rng.integers(len(pop), size=2), rng.integers(len(pop), size=2)
            a, b = pop[int(i.min())], pop[int(j.min())]  # sorted: lower index is fitter
            child = _cross(t, a, b, rng)
            if rng.random() < 0.5:
                child = _mutate(t, child, rng)
            children.append(child)
        pop = sorted(children, key=lambda p: _fitness(t, p))
        score = _fitness(t, pop[0])
        best, since = (score, 0) if score < best else (best, since + 1)
    gpus = to_gpus(problem, t, pop[0])
    return Plan(
        "genetic", gpus, min(bound, len(gpus)), len(gpus) <= bound, time.perf_counter() - start
    )
