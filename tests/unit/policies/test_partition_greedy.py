"""The greedy's instance counts worked by hand, one rule per case: whole instances of the
most efficient profile (req/s per compute slice, the larger on ties), the rest on the
smallest profile whose rate covers it, rates below 1 req/s, demands below one instance, the
absolute tolerance under 1 req/s; the MILP's columns (one layout per profile multiset, none
dominated by another); packing onto the fewest GPUs, and instances handed to services."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from cotenant.errors import InfeasibleError
from cotenant.policies.partition import PartitionProblem
from cotenant.policies.partition.formulation import distinct_layouts
from cotenant.policies.partition.greedy import instance_counts, pack
from cotenant.policies.partition.problem import realise
from tests.unit.policies.a100 import GEOMETRY, PROFILES


def counts(demand: float, rates: list[float]) -> list[int]:
    problem = PartitionProblem(GEOMETRY, ("s",), np.array([demand]), PROFILES,
                               np.array([rates]))
    return [int(n) for n in instance_counts(problem)[0]]


@pytest.mark.parametrize(("demand", "rates", "expected"), [
    # req/s per slice 10, 12.5, 10, 11.25, 10: the 2g; 100 = four of them exactly
    (100.0, [10.0, 25.0, 30.0, 45.0, 70.0], [0, 4, 0, 0, 0]),
    # 110: four 2g and 10 left, which a 1g covers exactly
    (110.0, [10.0, 25.0, 30.0, 45.0, 70.0], [1, 4, 0, 0, 0]),
    # every profile 10 per slice: the larger, the 7g; 150 = two 7g and a 1g for the 10 left
    (150.0, [10.0, 20.0, 30.0, 40.0, 70.0], [1, 0, 0, 0, 2]),
    # only a 3g serves: 45 = one 3g and 15 left, on a second 3g
    (45.0, [0.0, 0.0, 30.0, 0.0, 0.0], [0, 0, 2, 0, 0]),
    # half a request a second per 1g: 1.2 = two and 0.2 left, on a third
    (1.2, [0.5, 0.0, 0.0, 0.0, 0.0], [3, 0, 0, 0, 0]),
    # a demand under 1 req/s: 0.8 = one 0.5 instance and 0.3 left, on a second
    (0.8, [0.5, 0.0, 0.0, 0.0, 0.0], [2, 0, 0, 0, 0]),
    # the 7g is the more efficient (1.1 per slice); 0.3 left after one goes on a 0.5 1g
    (8.0, [0.5, 0.0, 0.0, 0.0, 7.7], [1, 0, 0, 0, 1]),
    # nothing to serve, with or without rates: no instances
    (0.0, [10.0, 20.0, 30.0, 40.0, 70.0], [0, 0, 0, 0, 0]),
    (0.0, [0.0, 0.0, 0.0, 0.0, 0.0], [0, 0, 0, 0, 0]),
])
def test_instance_counts_by_hand(demand: float, rates: list[float],
                                 expected: list[int]) -> None:
    assert counts(demand, rates) == expected


def test_a_rest_a_rounding_error_above_one_instance_takes_one_more_of_the_best() -> None:
    # 9.623215916139614 is 13 instances of 0.7402473781645857 req/s, but in floating point
    # 12 whole instances leave a rest a hair above one: no profile's rate covers it, so one
    # more of the best is taken (not a 1g from the other service's row)
    problem = PartitionProblem(
        GEOMETRY, ("a", "b"), np.array([9.623215916139614, 1.5]), PROFILES,
        np.array([[0.0, 0.0, 0.0, 0.7402473781645857, 0.0], [1.0, 0.0, 0.0, 0.0, 0.0]]))
    assert instance_counts(problem).tolist() == [[0, 0, 0, 13, 0], [2, 0, 0, 0, 0]]


def test_under_one_request_a_second_the_tolerance_is_absolute() -> None:
    # one instance of 1 - 1.5e-6 req/s leaves 1.5e-6 of a demand of 1: past the 1e-6 allowed
    assert counts(1.0, [1.0 - 1.5e-6, 0.0, 0.0, 0.0, 0.0]) == [2, 0, 0, 0, 0]
    assert counts(1.0, [1.0 - 0.5e-6, 0.0, 0.0, 0.0, 0.0]) == [1, 0, 0, 0, 0]


def test_services_are_counted_independently() -> None:
    problem = PartitionProblem(
        GEOMETRY, ("a", "b", "c"), np.array([110.0, 0.0, 8.0]), PROFILES,
        np.array([[10.0, 25.0, 30.0, 45.0, 70.0], [0.0] * 5, [0.5, 0.0, 0.0, 0.0, 7.7]]))
    assert instance_counts(problem).tolist() == [[1, 4, 0, 0, 0], [0] * 5, [1, 0, 0, 0, 1]]


ALL = ("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")


@pytest.mark.parametrize("profiles", [ALL, PROFILES, ("1g.10gb", "2g.10gb", "3g.20gb")])
def test_the_milps_columns_are_the_undominated_profile_multisets(
    profiles: tuple[str, ...],
) -> None:
    problem = PartitionProblem(GEOMETRY, ("s",), np.array([1.0]), profiles,
                               np.ones((1, len(profiles))))
    every = problem.layout_counts()
    kept = distinct_layouts(problem)
    rows = {tuple(r) for r in every[kept].tolist()}
    assert len(rows) == len(kept)  # one column per multiset

    def dominated(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
        return a != b and all(x <= y for x, y in zip(a, b, strict=True))

    assert not any(dominated(a, b) for a, b in itertools.permutations(rows, 2))
    # every multiset left out is one kept or inside one kept
    for row in map(tuple, every.tolist()):
        assert row in rows or any(dominated(row, b) for b in rows)
    dropped = {tuple(r) for r in every.tolist()} - rows
    if profiles == ALL:  # 1g.10gb + 1g.5gb x 5 + ... sits inside fuller ones
        assert dropped


def seven_ones() -> str:
    return ",".join(f"1g.5gb@{i}" for i in range(7))


def test_pack_fills_the_fewest_gpus_by_hand() -> None:
    problem = PartitionProblem(GEOMETRY, ("s",), np.array([1.0]), PROFILES,
                               np.ones((1, 5)))
    counts_of = problem.layout_counts()
    # seven 1g, one 3g, one 4g: a GPU of seven 1g and one of 4g + 3g
    use = pack(problem, np.array([7, 0, 1, 1, 0]))
    chosen = sorted(tuple(counts_of[li].tolist()) for li in np.flatnonzero(use)
                    for _ in range(int(use[li])))
    assert chosen == [(0, 0, 1, 1, 0), (7, 0, 0, 0, 0)]
    # fourteen 1g: the same layout twice, in one round
    twice = pack(problem, np.array([14, 0, 0, 0, 0]))
    assert twice.sum() == 2
    assert counts_of[int(np.flatnonzero(twice)[0])].tolist() == [7, 0, 0, 0, 0]
    assert pack(problem, np.zeros(5, dtype=np.int64)).sum() == 0


def test_realise_hands_instances_to_the_largest_need_first_then_in_service_order() -> None:
    problem = PartitionProblem(GEOMETRY, ("a", "b", "c"), np.array([1.0, 1.0, 1.0]),
                               PROFILES, np.ones((3, 5)))
    layout = GEOMETRY.parse(seven_ones())
    li = problem.layouts.index(layout)
    use = np.zeros(len(problem.layouts), dtype=np.int64)
    use[li] = 1
    instances = np.zeros((3, 5), dtype=np.int64)
    instances[:, 0] = [1, 3, 1]  # b needs three 1g, a and c one each
    (gpu,) = realise(problem, use, instances)
    assert [s for _, s in gpu.assignment] == ["b", "b", "b", "a", "c", None, None]


def test_realise_leaves_instances_of_unplanned_profiles_idle() -> None:
    mixed = GEOMETRY.parse("4g.20gb@0,2g.10gb@4,1g.5gb@6")
    problem = PartitionProblem(GEOMETRY, ("a",), np.array([1.0]), ("4g.20gb",),
                               np.ones((1, 1)), layouts=(mixed,))
    (gpu,) = realise(problem, np.array([1]), np.array([[1]]))
    assert [s for _, s in gpu.assignment] == ["a", None, None]


def test_realise_refuses_more_instances_than_the_layouts_hold() -> None:
    problem = PartitionProblem(GEOMETRY, ("a",), np.array([1.0]), PROFILES, np.ones((1, 5)))
    use = np.zeros(len(problem.layouts), dtype=np.int64)
    use[problem.layouts.index(GEOMETRY.parse("7g.40gb@0"))] = 1
    with pytest.raises(InfeasibleError) as refused:
        realise(problem, use, np.array([[0, 0, 0, 0, 2]]))
    assert str(refused.value) == "layouts hold fewer instances than the services were given"


def test_realise_keeps_service_order_among_equal_needs_however_many() -> None:
    names = tuple(f"s{i:02}" for i in range(40))
    problem = PartitionProblem(GEOMETRY, names, np.ones(40), PROFILES, np.ones((40, 5)))
    use = np.zeros(len(problem.layouts), dtype=np.int64)
    use[problem.layouts.index(GEOMETRY.parse(seven_ones()))] = 6  # 42 1g instances
    instances = np.zeros((40, 5), dtype=np.int64)
    instances[:, 0] = 1
    instances[17, 0] = 3  # s17 needs three: first; the others one each, in order
    gpus = realise(problem, use, instances)
    served = [s for gpu in gpus for _, s in gpu.assignment if s is not None]
    assert served == ["s17"] * 3 + [n for n in names if n != "s17"]
