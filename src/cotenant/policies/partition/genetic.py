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

from collections.abc import Iterator

import numpy as np

from cotenant.policies.partition.greedy import greedy_gpus
from cotenant.policies.partition.milp import lower_bound
from cotenant.policies.partition.problem import Deadline, PartitionProblem, Plan
from cotenant.policies.partition.registry import PARTITION
from cotenant.policies.partition.search import (
    Config,
    OutOfTime,
    Tables,
    bulk,
    coverage,
    fill,
    from_gpus,
    prune,
    repair,
    tables,
    to_gpus,
    too_large,
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
    deadline = Deadline(time_limit)
    greedy = greedy_gpus(problem)
    bound = lower_bound(problem, deadline, share=0.2)
    if len(greedy) <= bound or too_large(problem):
        return Plan("genetic:greedy", greedy, min(bound, len(greedy)), len(greedy) <= bound,
                    deadline.elapsed())
    rng = np.random.default_rng(seed)
    t = tables(problem, deadline)
    best_plan = from_gpus(problem, t, greedy)
    try:
        for fittest in _evolve(t, problem, rng, best_plan, bound, population, generations,
                               stall):
            best_plan = fittest
    except OutOfTime:  # the deadline passed inside a step: the best plan of the last round
        pass
    gpus = to_gpus(problem, t, best_plan)
    return Plan("genetic", gpus, min(bound, len(gpus)), len(gpus) <= bound, deadline.elapsed())


def _evolve(t: Tables, problem: PartitionProblem, rng: np.random.Generator,
            greedy: list[Config], bound: int, population: int, generations: int,
            stall: int) -> Iterator[list[Config]]:
    """The fittest plan after seeding and after every generation."""
    base, rest = bulk(problem, t)
    seeds = [greedy, base + fill(t, rest)]
    pop = [prune(t, s, rng) for s in seeds]
    while len(pop) < population:
        pop.append(_mutate(t, pop[len(pop) % len(seeds)], rng))
    pop.sort(key=lambda p: _fitness(t, p))
    best, since = _fitness(t, pop[0]), 0
    yield pop[0]
    for _ in range(generations):
        if best[0] <= bound or since >= stall:
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
        yield pop[0]
