"""Monte Carlo tree search over the next GPU's configuration, with greedy rollouts.

MIG-serving (Tan et al., arXiv 2109.11067) also explores plans with MCTS; the tree here is our
design. After the bulk step (:func:`~cotenant.policies.partition.search.bulk`) the remaining
demand is covered one GPU at a time:

- a **node** is the demand still uncovered after the GPUs on its path;
- its **actions** are the ``width`` best-scoring configurations for the next GPU
  (:func:`~cotenant.policies.partition.search.fill_scores`);
- a **rollout** completes the plan with the greedy fill (so the first rollout *is* the
  bulk-then-fill greedy plan); the result is never worse than that nor than
  :func:`~cotenant.policies.partition.greedy.solve_greedy`'s plan;
- the **reward** of a plan of n GPUs is ``lower / n`` (``lower``: the LP bound of the
  remainder), in (0, 1]; selection is UCT, ``mean + c sqrt(ln N / n)`` with c = 0.5.

It stops at the time limit (inside a rollout too), after ``iterations`` rollouts, or when a
plan reaches the bound; it never returns a plan worse than the greedy one.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from cotenant.policies.partition.greedy import greedy_gpus
from cotenant.policies.partition.milp import lower_bound
from cotenant.policies.partition.problem import Deadline, FloatArray, PartitionProblem, Plan
from cotenant.policies.partition.registry import PARTITION
from cotenant.policies.partition.search import (
    Config,
    OutOfTime,
    Tables,
    bulk,
    covers,
    fill,
    fill_scores,
    tables,
    to_gpus,
    too_large,
)

EXPLORATION = 0.5


@dataclass
class _Node:
    deficit: FloatArray
    path: list[Config]
    actions: list[Config] | None = None
    lefts: list[FloatArray] = field(default_factory=list)
    children: list[_Node] = field(default_factory=list)
    visits: int = 0
    total: float = 0.0

    def expand(self, t: Tables, width: int) -> None:
        score, owners, left = fill_scores(t, self.deficit)
        order = [int(i) for i in np.lexsort((np.arange(len(score)), -score)) if score[i] > 0]
        self.actions = [(i, tuple(int(o) for o in owners[i])) for i in order[:width]]
        self.lefts = [left[i] for i in order[:width]]

    def uct(self, child: _Node) -> float:
        if child.visits == 0:
            return math.inf
        explore = EXPLORATION * math.sqrt(math.log(self.visits) / child.visits)
        return child.total / child.visits + explore


@PARTITION.register("mcts")
def solve_mcts(
    problem: PartitionProblem,
    time_limit: float = 10.0,
    *,
    width: int = 3,
    iterations: int = 400,
) -> Plan:
    deadline = Deadline(time_limit)
    greedy = greedy_gpus(problem)
    bound = lower_bound(problem, deadline, share=0.2)
    if len(greedy) <= bound or too_large(problem):
        return Plan("mcts:greedy", greedy, min(bound, len(greedy)), len(greedy) <= bound,
                    deadline.elapsed())
    t = tables(problem, deadline)
    gpus = greedy
    try:
        base, rest = bulk(problem, t)
        for plan in _search(t, base, rest, bound, width, iterations):
            if len(plan) < len(gpus):
                gpus = to_gpus(problem, t, plan)
    except OutOfTime:  # the deadline passed inside a rollout: the best plan so far
        pass
    return Plan("mcts", gpus, min(bound, len(gpus)), len(gpus) <= bound, deadline.elapsed())


def _search(t: Tables, base: list[Config], rest: FloatArray, bound: int, width: int,
            iterations: int) -> Iterator[list[Config]]:
    """Every plan better than the last one found, rollout by rollout."""
    lower = max(1, bound - len(base))
    root = _Node(rest, [])
    best = fill(t, rest)
    yield base + best
    for _ in range(iterations):
        if len(base) + len(best) <= bound:
            break
        node, trail = root, [root]
        while not covers(t, node.deficit):
            if node.actions is None:
                node.expand(t, width)
            assert node.actions is not None
            if len(node.children) < len(node.actions):  # expand one new child, then roll out
                k = len(node.children)
                node.children.append(_Node(node.lefts[k], [*node.path, node.actions[k]]))
                node = node.children[-1]
                trail.append(node)
                break
            node = max(node.children, key=node.uct)
            trail.append(node)
        plan = node.path + fill(t, node.deficit)
        if len(plan) < len(best):
            best = plan
            yield base + best
        reward = lower / len(plan) if plan else 1.0
        for visited in trail:
            visited.visits += 1
            visited.total += reward
