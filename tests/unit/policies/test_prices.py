"""Pattern prices: LP duals of packing the workload's fractional sizes."""

from __future__ import annotations

import numpy as np

from cotenant.policies.placement.arcflow import ArcFlowGraph, quantum_of
from cotenant.policies.placement.prices import PatternPrices

# the fractional shapes of openb's typical pods, by frequency (rounded)
OPENB = {810: 0.37, 470: 0.26, 320: 0.10, 650: 0.08, 230: 0.04, 460: 0.04, 590: 0.03,
         550: 0.03, 160: 0.02, 370: 0.02, 220: 0.01}


def test_one_size_pays_its_share() -> None:
    prices = PatternPrices.from_frequencies({500: 1.0})
    assert prices.price == {500: 0.5}
    assert prices.reduced_cost(np.array([1000, 500, 700]), 500).tolist() == [0.0, 0.0, 0.0]


def test_completing_an_optimal_packing_costs_nothing_and_a_poor_one_costs() -> None:
    prices = PatternPrices.from_frequencies(OPENB)
    cost = prices.reduced_cost
    assert cost(np.array([530]), 470)[0] == 0.0  # 470 beside a 470
    assert cost(np.array([350]), 320)[0] == 0.0  # 320 beside a 650
    assert cost(np.array([1000]), 810)[0] == 0.0  # an 810 on its own GPU
    assert cost(np.array([530]), 320)[0] > 0.1  # 320 beside a 470 leaves 210 few pods fit


def test_no_packing_pays_more_than_a_gpu_and_costs_are_never_negative() -> None:
    prices = PatternPrices.from_frequencies(OPENB)
    assert prices.value(1000) <= 1.0 + 1e-9
    gaps = np.arange(0, 1001, 10)
    for size in [*OPENB, 50, 110, 999]:
        fits = gaps[gaps >= size]
        assert (prices.reduced_cost(fits, size) >= 0.0).all(), size


def test_a_size_the_lp_does_not_know_is_worth_what_its_space_holds() -> None:
    prices = PatternPrices.from_frequencies({600: 1.0})
    assert prices.size_price(300) == 0.0  # no 600 fits in 300
    assert prices.size_price(700) == 1.0  # a 600 does
    # a 300 on an empty GPU leaves room for a 600; on a GPU with 700 free it does not
    assert prices.reduced_cost(np.array([1000, 700]), 300).tolist() == [0.0, 1.0]


def test_arc_flow_graph_keeps_sizes_non_increasing() -> None:
    graph = ArcFlowGraph.build([500, 300], quantum_of([500, 300]))
    assert graph.quantum == 100
    assert graph.top == 10
    # 5: 0->5, 5->10; 3 from 0, 3, 5, 6, 8 (only after sizes >= 3)
    assert sorted(graph.arcs) == [(0, 3), (0, 5), (3, 3), (5, 3), (5, 5), (6, 3)]
    assert graph.inner == (3, 5, 6, 8, 9)


def test_only_fractional_sizes_that_occur_are_priced() -> None:
    """Sizes with no frequency, whole GPUs and 0 milli are no fractional pods: they are left
    out of the LP, so the prices are those of the sizes that remain."""
    noisy = PatternPrices.from_frequencies({470: 0.3, 650: 0.2, 320: 0.0, 1000: 0.4, 0: 0.1})
    clean = PatternPrices.from_frequencies({470: 0.3, 650: 0.2})
    assert set(noisy.price) == {470, 650}
    assert noisy.price == clean.price
    assert noisy.gap_value.tolist() == clean.gap_value.tolist()


def test_a_larger_gap_is_never_worth_less() -> None:
    """K(g) is the most pods that fit in g pay: whatever fits in g fits in a larger gap."""
    prices = PatternPrices.from_frequencies(OPENB)
    assert (np.diff(prices.gap_value) >= 0.0).all()
    assert prices.gap_value[0] == 0.0
