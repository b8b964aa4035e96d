"""The tree search's pieces by value: UCT (an unvisited child first, then mean reward plus
0.5 sqrt(ln N / n)), a node's actions (the best-scoring configurations, ties to the lower
index, none that fills nothing), and the search's stops (a first plan at once, then only
better ones, none past the bound)."""

from __future__ import annotations

import math

import numpy as np

from cotenant.policies.partition import PartitionProblem
from cotenant.policies.partition.mcts import _Node, _search
from cotenant.policies.partition.search import bulk, fill, fill_scores, tables
from tests.unit.policies.a100 import GEOMETRY, PROFILES


def wasteful() -> PartitionProblem:
    """Seven services where the bulk step and greedy fill take 7 GPUs and the search finds
    a plan of 6 by mixing services on GPUs."""
    demand = [254.0, 300.0, 231.0, 376.0, 332.0, 31.0, 347.0]
    return PartitionProblem(GEOMETRY, tuple(f"s{i}" for i in range(7)), np.array(demand),
                            PROFILES, np.tile([22.0, 42.0, 113.0, 307.0, 528.0], (7, 1)))


def test_uct_is_the_mean_reward_plus_the_exploration_term() -> None:
    parent = _Node(np.zeros(1), [], visits=10)
    child = _Node(np.zeros(1), [], visits=2, total=1.2)
    assert parent.uct(child) == 0.6 + 0.5 * math.sqrt(math.log(10) / 2)
    once = _Node(np.zeros(1), [], visits=1, total=0.25)
    assert parent.uct(once) == 0.25 + 0.5 * math.sqrt(math.log(10))
    assert parent.uct(_Node(np.zeros(1), [])) == math.inf  # never visited: first


def test_a_nodes_actions_are_its_best_scoring_configurations() -> None:
    problem = wasteful()
    t = tables(problem)
    node = _Node(problem.demand.copy(), [])
    node.expand(t, 3)
    score, owners, left = fill_scores(t, node.deficit)
    ranked = sorted((i for i in range(len(score)) if score[i] > 0),
                    key=lambda i: (-score[i], i))[:3]
    assert node.actions == [(i, tuple(int(o) for o in owners[i])) for i in ranked]
    for got, i in zip(node.lefts, ranked, strict=True):
        np.testing.assert_array_equal(got, left[i])
    done = _Node(np.zeros(7), [])  # nothing left to fill: no action scores above 0
    done.expand(t, 3)
    assert done.actions == []


def test_the_search_yields_the_fill_first_then_only_better_plans() -> None:
    problem = wasteful()
    t = tables(problem)
    base, rest = bulk(problem, t)
    first = base + fill(t, rest)
    plans = list(_search(t, base, rest, 0, 3, 200))
    assert plans[0] == first
    assert [len(p) for p in plans] == [7, 6]  # one better plan, then none better in 200
    assert list(_search(t, base, rest, 0, 3, 0)) == [first]  # no rollouts: the fill alone
    # a bound the first plan meets: nothing more is searched
    assert list(_search(t, base, rest, len(first), 3, 200)) == [first]
    assert [len(p) for p in _search(t, base, rest, 6, 3, 200)] == [7, 6]  # stops at 6
