"""The rounding's instance patterns against brute force: every count vector within two GPUs'
compute and memory slices, in order, and per service the cheapest one that covers its demand
at the given prices (ties to fewer slices; a negative price counts as free; a demand no
pattern covers gets the greedy's instances), in chunks of services as in one."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from cotenant.policies.partition import PartitionProblem
from cotenant.policies.partition.greedy import instance_counts
from cotenant.policies.partition.packing import CHUNK, cheapest_patterns, patterns
from cotenant.policies.partition.problem import TOLERANCE
from tests.unit.policies.a100 import GEOMETRY

PROFILES = ("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "7g.40gb")
COMPUTE = (1, 1, 2, 3, 7)  # slices of each, from NVIDIA's A100-40GB table
MEMORY = (1, 2, 2, 4, 8)


def problem(demand: list[float], rates: list[list[float]],
            profiles: tuple[str, ...] = PROFILES) -> PartitionProblem:
    return PartitionProblem(GEOMETRY, tuple(f"s{i}" for i in range(len(demand))),
                            np.array(demand, dtype=np.float64), profiles,
                            np.array(rates, dtype=np.float64))


def brute_patterns(compute: tuple[int, ...], memory: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Every non-zero count vector within 14 compute and 16 memory slices (two A100s), in
    lexicographic order."""
    ranges = [range(14 // k + 1) for k in compute]
    return [n for n in itertools.product(*ranges)
            if any(n) and sum(a * k for a, k in zip(n, compute, strict=True)) <= 14
            and sum(a * m for a, m in zip(n, memory, strict=True)) <= 16]


RATES = [[10.0, 13.0, 21.0, 33.0, 80.0]]


def test_patterns_are_every_count_vector_within_two_gpus_in_order() -> None:
    found = patterns(problem([1.0], RATES))
    expected = brute_patterns(COMPUTE, MEMORY)
    assert found.dtype == np.int64
    assert found.tolist() == [list(n) for n in expected]
    # memory binds where compute would not: eight 1g.10gb (16 memory slices), not fourteen
    assert max(n[1] for n in expected) == 8
    assert max(n[0] for n in expected) == 14  # 1g.5gb: the compute limit, exactly
    assert [0, 0, 0, 0, 2] in found.tolist()  # two whole GPUs


def test_one_profile_gives_one_column() -> None:
    found = patterns(problem([1.0], [[80.0]], ("7g.40gb",)))
    assert found.tolist() == [[1], [2]]


def brute_cheapest(pb: PartitionProblem, price: np.ndarray) -> np.ndarray:
    """Per service, the first pattern (in order) of least price, then fewest compute slices,
    among those serving its demand within half the tolerance; zeros without demand, the
    greedy's instances where no pattern serves it."""
    table = brute_patterns(COMPUTE, MEMORY)
    out = instance_counts(pb)
    for s, demand in enumerate(pb.demand):
        if demand <= 0:
            out[s] = 0
            continue
        best: tuple[float, int] | None = None
        for n in table:
            serves = sum(a * r for a, r in zip(n, pb.rate[s], strict=True))
            if serves < demand * (1 - TOLERANCE / 2):
                continue
            key = (round(sum(a * max(p, 0.0) for a, p in zip(n, price, strict=True)), 9),
                   sum(a * k for a, k in zip(n, COMPUTE, strict=True)))
            if best is None or key < best:
                best, out[s] = key, n
        if best is None:
            continue  # the greedy's, set above
    return out


def test_each_service_gets_its_cheapest_covering_pattern() -> None:
    rng = np.random.default_rng(5)
    rates = rng.uniform(5.0, 100.0, size=(40, 5)).round(1)
    demand = rng.uniform(1.0, 300.0, size=40).round(1)
    demand[3] = 0.0  # nothing to serve: no instances
    price = np.array([0.13, -0.2, 0.31, 0.47, 1.0])  # a negative price counts as 0
    pb = problem(demand.tolist(), rates.tolist())
    np.testing.assert_array_equal(cheapest_patterns(pb, price), brute_cheapest(pb, price))


def test_at_equal_prices_the_fewer_slices_win() -> None:
    # a 2g and a 3g both serve 24 req/s at 0.2; 1g instances (5 req/s) would cost 0.5
    pb = problem([24.0], [[5.0, 5.0, 25.0, 35.0, 80.0]])
    price = np.array([0.1, 0.1, 0.2, 0.2, 0.7])
    assert cheapest_patterns(pb, price).tolist() == [[0, 0, 1, 0, 0]]


def test_a_demand_is_covered_within_half_the_tolerance() -> None:
    price = np.array([1.0, 1.5, 1.0, 1.0, 1.0])  # past one 1g.5gb, a 2g is cheapest
    rate = [[100.0, 100.0, 150.0, 200.0, 500.0]]
    within = problem([100.0 * (1 + 0.4 * TOLERANCE)], rate)
    beyond = problem([100.0 * (1 + 0.6 * TOLERANCE)], rate)
    assert cheapest_patterns(within, price).tolist() == [[1, 0, 0, 0, 0]]
    assert cheapest_patterns(beyond, price).tolist() == [[0, 0, 1, 0, 0]]


def test_a_demand_no_pattern_covers_gets_the_greedys_instances() -> None:
    pb = problem([50.0, 2000.0], [[10.0, 13.0, 21.0, 33.0, 80.0]] * 2)  # 2 GPUs serve 160
    out = cheapest_patterns(pb, np.array([0.1, 0.1, 0.2, 0.3, 0.7]))
    assert out[1].tolist() == instance_counts(pb)[1].tolist()
    assert int(out[1] @ pb.rate[1]) >= 2000
    assert out[0].tolist() == brute_cheapest(pb, np.array([0.1, 0.1, 0.2, 0.3, 0.7]))[0].tolist()


@pytest.mark.parametrize("extra", [1, 7, CHUNK + 3])
def test_services_past_a_chunk_are_priced_like_the_first(extra: int) -> None:
    n = CHUNK + extra
    demand = np.tile([15.0, 40.0, 0.0, 130.0, 95.0], n // 5 + 1)[:n]
    pb = problem(demand.tolist(), [[10.0, 13.0, 21.0, 33.0, 80.0]] * n)
    price = np.array([0.11, 0.12, 0.25, 0.4, 0.95])
    out = cheapest_patterns(pb, price)
    small = problem(demand[:5].tolist(), [[10.0, 13.0, 21.0, 33.0, 80.0]] * 5)
    expected = brute_cheapest(small, price)
    np.testing.assert_array_equal(out, np.tile(expected, (n // 5 + 1, 1))[:n])
