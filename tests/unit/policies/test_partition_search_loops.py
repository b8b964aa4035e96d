"""The genetic algorithm's and the tree search's steps by value: fitness, mutation (one to three
GPUs dropped at random and refilled from the two best layouts), crossover (each parent's GPU
kept with probability 1/2), the generation loop (elitism, tournaments of two, its stops), and
the tree's statistics after its rollouts. Random draws are replayed from a generator with the
same seed, so each expected value follows from the documented rule, not from a run."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from cotenant.policies.partition import PartitionProblem, genetic, mcts
from cotenant.policies.partition.genetic import _cross, _evolve, _fitness, _mutate
from cotenant.policies.partition.mcts import _Node, _search
from cotenant.policies.partition.search import Config, Tables, fill, tables
from tests.unit.policies.a100 import GEOMETRY, PROFILES, only_4g

IDLE = (-1,) * 7
SEEDS = range(12)


def owners(*first: int) -> tuple[int, ...]:
    return first + IDLE[len(first):]


def sevens(n: int) -> PartitionProblem:
    """n services, each served only by a 7g (70 req/s) and wanting exactly one: a plan is one
    7g GPU per service, and a refill gives the missing services theirs in index order."""
    return PartitionProblem(GEOMETRY, tuple(f"s{i}" for i in range(n)), np.full(n, 70.0),
                            PROFILES, np.tile([0.0, 0.0, 0.0, 0.0, 70.0], (n, 1)))


def seven(s: int) -> Config:
    return (0, owners(s))  # layout 0 is the single 7g


class Half(np.random.Generator):
    """A generator whose uniform draws are all exactly 1/2 (the edge of every coin flip)."""

    def random(self, *args: Any, **kwargs: Any) -> Any:
        return 0.5


def test_fitness_is_gpus_then_capacity_beyond_demand_in_slice_equivalents() -> None:
    p = PartitionProblem(GEOMETRY, ("a", "b"), np.array([250.0, 70.0]), PROFILES,
                         np.array([[0, 0, 0, 100, 0], [10, 20, 30, 40, 70]]))
    t = tables(p)  # a: 25 req/s per slice, b: 10
    four, ones = (1, owners(0)), (18, (1,) * 7)  # a 4g for a; seven 1g for b
    assert _fitness(t, [four] * 3 + [ones]) == (4, 50 / 25)  # a has 50 over, b none
    assert _fitness(t, [four] * 3) == (3, 50 / 25)  # b short: nothing over
    assert _fitness(t, [four] * 2 + [ones] * 2) == (4, 70 / 10)  # a short, b 70 over


def test_mutation_drops_one_to_three_random_gpus_and_refills_them() -> None:
    p = sevens(6)
    t = tables(p)
    plan = [seven(s) for s in (3, 0, 5, 1, 4, 2)]
    sizes = set()
    for seed in SEEDS:
        replay = np.random.default_rng(seed)
        k = int(replay.integers(1, 4))
        drop = {int(g) for g in replay.choice(6, size=k, replace=False)}
        assert len(drop) == k
        sizes.add(k)
        kept = [c for g, c in enumerate(plan) if g not in drop]
        refill = [seven(s) for s in sorted(plan[g][1][0] for g in drop)]
        assert _mutate(t, plan, np.random.default_rng(seed)) == kept + refill
    assert sizes == {1, 2, 3}


def test_mutation_refills_from_the_two_best_layouts_at_random() -> None:
    p = only_4g(400.0)  # three layouts hold a 4g; they tie, so the two lower are the best
    t = tables(p)
    plan = [(1, owners(0))] * 4
    seen = set()
    for seed in SEEDS:
        replay = np.random.default_rng(seed)
        k = int(replay.integers(1, 4))
        replay.choice(4, size=k, replace=False)
        refill = [((1, 2)[int(replay.integers(2))], owners(0)) for _ in range(k)]
        seen |= {li for li, _ in refill}
        assert _mutate(t, plan, np.random.default_rng(seed)) == plan[k:] + refill
    assert seen == {1, 2}


def test_crossover_keeps_each_parents_gpu_with_probability_one_half() -> None:
    p = sevens(6)
    t = tables(p)
    a, b = [seven(2), seven(1), seven(0)], [seven(5), seven(4), seven(3)]
    for seed in SEEDS:
        replay = np.random.default_rng(seed)
        kept = [c for c in a if replay.random() < 0.5] + [c for c in b if replay.random() < 0.5]
        missing = sorted(set(range(6)) - {c[1][0] for c in kept})
        assert _cross(t, a, b, np.random.default_rng(seed)) == kept + [seven(s)
                                                                       for s in missing]
    # a draw of exactly 1/2 keeps nothing: the child is the refill alone
    assert _cross(t, a, b, Half(np.random.PCG64(0))) == [seven(s) for s in range(6)]


class Operators:
    """Stand-ins for the genetic operators that record their calls and draw nothing, so the
    generation loop's own draws can be replayed: mutation returns its plan (or, ``worse``, a
    plan worse than any other), crossover the next scripted child or else a plan worse than
    any other."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, children: list[list[Config]],
                 worse: bool = False) -> None:
        self.mutated: list[list[Config]] = []
        self.crossed: list[tuple[list[Config], list[Config]]] = []
        self.children = children
        self.worse = worse
        monkeypatch.setattr(genetic, "prune", lambda t, plan, rng: plan)
        monkeypatch.setattr(genetic, "_mutate", self.mutate)
        monkeypatch.setattr(genetic, "_cross", self.cross)

    def mutate(self, t: Tables, plan: list[Config], rng: np.random.Generator) -> list[Config]:
        self.mutated.append(plan)
        return [(0, IDLE)] * (10 + len(self.mutated)) if self.worse else plan

    def cross(self, t: Tables, a: list[Config], b: list[Config],
              rng: np.random.Generator) -> list[Config]:
        self.crossed.append((a, b))
        return self.children.pop(0) if self.children else [(0, IDLE)] * (50 + len(self.crossed))


# only_4g(300) takes three GPUs; the given greedy plan uses 4g + 3 1g layouts (3), the bulk
# then fill plan two of 4g + 3g for the service and a third with the 3g idle (1)
GREEDY = [(3, owners(0))] * 3
BULK = [(1, owners(0, 0))] * 2 + [(1, owners(0))]
BETTER = [(1, owners(0))] * 2  # fewer GPUs (it need not cover: the loop only ranks plans)


def evolve(rng: np.random.Generator, bound: int, population: int, generations: int,
           stall: int, greedy: list[Config] = GREEDY) -> list[list[Config]]:
    p = only_4g(300.0)
    return list(_evolve(tables(p), p, rng, greedy, bound, population, generations, stall))


def test_a_generation_keeps_two_elites_and_picks_parents_by_tournaments_of_two(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for seed in SEEDS:
        ops = Operators(monkeypatch, [])
        yields = evolve(np.random.default_rng(seed), 0, 5, 1, 10)
        # seeding: the two seeds, then mutants of them in turn up to five plans
        assert ops.mutated[:3] == [GREEDY, BULK, GREEDY]
        ranked = [GREEDY, BULK, GREEDY, BULK, GREEDY]  # equal fitness: stable order
        replay = np.random.default_rng(seed)
        parents, coins = [], []
        for _ in range(3):  # five less the two elites
            i, j = replay.integers(5, size=2), replay.integers(5, size=2)
            parents.append((ranked[int(i.min())], ranked[int(j.min())]))
            coins.append(replay.random() < 0.5)
        assert ops.crossed == parents
        assert len(ops.mutated) == 3 + sum(coins)
        assert yields == [GREEDY, GREEDY]  # the fittest after seeding, kept as an elite
    ops = Operators(monkeypatch, [])
    evolve(Half(np.random.PCG64(0)), 0, 5, 1, 10)
    assert len(ops.mutated) == 3  # a coin of exactly 1/2 mutates no child


def test_the_first_fittest_is_the_fittest_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    Operators(monkeypatch, [], worse=True)
    assert evolve(np.random.default_rng(0), 0, 4, 0, 10) == [GREEDY]
    Operators(monkeypatch, [], worse=True)  # a greedy seed of four GPUs: the bulk's is fitter
    assert evolve(np.random.default_rng(0), 0, 4, 0, 10, [(3, owners(0))] * 4) == [BULK]


def test_the_loop_stops_after_stall_generations_without_improvement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    Operators(monkeypatch, [])
    assert evolve(np.random.default_rng(0), 0, 4, 10, 3) == [GREEDY] * 4
    Operators(monkeypatch, [])
    assert len(evolve(np.random.default_rng(0), 0, 4, 2, 3)) == 3  # or after `generations`
    # counted from the fittest seed (here the given plan), not from the second
    Operators(monkeypatch, [], worse=True)
    assert evolve(np.random.default_rng(0), 0, 4, 10, 3, BETTER) == [BETTER] * 4
    # an improvement in generation 2 restarts the count: two more generations, then stop
    worse = [(0, IDLE)] * 60
    Operators(monkeypatch, [worse, worse, BETTER, worse])
    assert evolve(np.random.default_rng(0), 0, 4, 10, 2) == [GREEDY] * 2 + [BETTER] * 3


def test_the_loop_stops_once_a_plan_meets_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    Operators(monkeypatch, [])
    assert evolve(np.random.default_rng(0), 3, 4, 10, 3) == [GREEDY]
    worse = [(0, IDLE)] * 60
    Operators(monkeypatch, [worse, worse, BETTER, worse])
    assert evolve(np.random.default_rng(0), 2, 4, 10, 5) == [GREEDY] * 2 + [BETTER]


class Tree:
    """Records every node the search makes; the first is its root."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.nodes: list[_Node] = []
        seen = self.nodes

        class Seen(_Node):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                seen.append(self)

        monkeypatch.setattr(mcts, "_Node", Seen)


def test_each_rollout_adds_its_reward_to_every_node_on_its_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tree = Tree(monkeypatch)
    p = only_4g(200.0)  # one 4g a GPU: every plan of the remainder takes two GPUs
    t = tables(p)
    base = [(1, owners(0))] * 3
    # bound 4 less 3 base GPUs: the remainder's bound is 1, so each plan of 2 earns 1/2
    plans = list(_search(t, base, p.demand, 4, 2, 6))
    assert plans == [base + fill(t, p.demand)]
    root = tree.nodes[0]
    assert (root.visits, root.total) == (6, 3.0)
    assert len(root.children) == 2  # the width: two of the three layouts with a 4g
    assert sum(c.visits for c in root.children) == 6
    for node in tree.nodes:
        assert node.total == 0.5 * node.visits


def test_a_rollout_with_nothing_left_to_cover_earns_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tree = Tree(monkeypatch)
    p = only_4g(200.0)
    t = tables(p)
    base = [(1, owners(0))] * 2
    assert list(_search(t, base, np.zeros(1), 0, 2, 3)) == [base]
    root = tree.nodes[0]
    assert (root.visits, root.total, root.children) == (3, 3.0, [])


def test_a_fully_expanded_node_descends_into_its_child_of_highest_uct(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tree = Tree(monkeypatch)

    def uct(self: _Node, child: _Node) -> float:  # the last child made is the favourite
        return 1.0 if child is self.children[-1] else 0.0

    monkeypatch.setattr(mcts._Node, "uct", uct)
    p = only_4g(200.0)
    t = tables(p)
    base = [(1, owners(0))] * 3
    list(_search(t, base, p.demand, 4, 2, 3))  # two rollouts expand the root, the third picks
    root = tree.nodes[0]
    assert [c.visits for c in root.children] == [1, 2]
