"""The search optimisers' shared steps by value (:mod:`cotenant.policies.partition.search`):
the per-problem tables, the scoring of every layout as the next GPU, the fill (greedy, or one
of the ``width`` best at random), the bulk step, coverage, pruning and repair, and the
conversion to GPUs and back; each on hand-sized A100 problems whose answers are worked out
here by hand or by a plain-Python reference."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from cotenant.errors import InfeasibleError
from cotenant.policies.partition import PartitionProblem, search
from cotenant.policies.partition.problem import TOLERANCE
from cotenant.policies.partition.search import (
    Config,
    bulk,
    coverage,
    covers,
    fill,
    fill_scores,
    from_gpus,
    prune,
    repair,
    tables,
    to_gpus,
    too_large,
)
from tests.unit.policies.a100 import GEOMETRY, PROFILES, only_4g, still

IDLE = (-1,) * 7  # an A100 layout holds at most seven instances
SEEDS = range(8)


def problem(rates: dict[str, list[float]], demand: list[float]) -> PartitionProblem:
    return PartitionProblem(GEOMETRY, tuple(rates), np.array(demand), PROFILES,
                            np.array(list(rates.values())))


def pair(a: float, b: float) -> PartitionProblem:
    """a: only a 4g serves it, 100 req/s (25 per slice); b: 10 req/s per slice on any."""
    return problem({"a": [0, 0, 0, 100, 0], "b": [10, 20, 30, 40, 70]}, [a, b])


def index(p: PartitionProblem, *placements: str) -> int:
    """The layout holding exactly ``placements`` (``"3g.20gb@4"``...)."""
    return next(i for i, lay in enumerate(p.layouts)
                if sorted(map(str, lay.placements)) == sorted(placements))


def owners(*first: int) -> tuple[int, ...]:
    return first + IDLE[len(first):]


def test_slots_are_ordered_largest_first_then_by_start() -> None:
    p = pair(1.0, 1.0)
    t = tables(p)
    assert t.slot_prof.dtype == np.int64
    assert t.slot_prof.shape == (19, 7)  # the A100's 19 maximal layouts
    mixed = index(p, "2g.10gb@0", "2g.10gb@2", "3g.20gb@4")
    assert [str(x) for x in t.slot_place[mixed]] == ["3g.20gb@4", "2g.10gb@0", "2g.10gb@2"]
    assert t.slot_prof[mixed].tolist() == [2, 1, 1, -1, -1, -1, -1]  # columns of PROFILES
    for li, layout in enumerate(p.layouts):
        slots = t.slot_place[li]
        assert sorted(slots, key=str) == sorted(layout.placements, key=str)
        keys = [(-x.profile.compute_slices, x.start) for x in slots]
        assert keys == sorted(keys)
        names = [PROFILES[j] for j in t.slot_prof[li] if j >= 0]
        assert names == [x.profile.name for x in slots]
        assert (t.slot_prof[li, len(slots):] == -1).all()


def test_best_rate_per_slice_and_tolerance_per_service() -> None:
    p = problem({"a": [0, 0, 0, 100, 0], "b": [10, 20, 30, 40, 70], "z": [0, 0, 0, 0, 0],
                 "h": [0.5, 0, 0, 0, 0]}, [400.0, 0.5, 0.0, 2.0])
    deadline = still(3.0)
    t = tables(p, deadline)
    # a: 100 req/s on 4 slices; b: 10 on each; z serves nowhere (taken as 1); h: half a req/s
    assert t.eff.tolist() == [25.0, 10.0, 1.0, 0.5]
    assert t.tol.tolist() == [TOLERANCE * 400.0, TOLERANCE, TOLERANCE, TOLERANCE * 2.0]
    assert t.deadline is deadline
    assert tables(p).deadline is None


def test_a_deficit_within_the_tolerance_counts_as_covered() -> None:
    t = tables(pair(400.0, 0.5))
    assert covers(t, t.tol.copy())
    assert covers(t, np.array([-5.0, 0.0]))
    assert not covers(t, np.array([t.tol[0], np.nextafter(t.tol[1], 1.0)]))


def test_the_search_size_limit_counts_layouts_times_services(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    p = pair(1.0, 1.0)  # 19 layouts x 2 services: 38 cells
    monkeypatch.setattr(search, "MAX_CELLS", 38)
    assert not too_large(p)
    monkeypatch.setattr(search, "MAX_CELLS", 37)
    assert too_large(p)


def reference_scores(p: PartitionProblem, deficit: list[float]) -> list[tuple[float, list[int],
                                                                              list[float]]]:
    """Per layout, by the rule in plain Python: instances largest first (ties by start), each
    to the service whose demand left it covers most of in slice equivalents (ties to the
    lower index; none if it covers nothing)."""
    eff = [max(r / s for r, s in zip(row, p.slices, strict=True)) or 1.0 for row in p.rate]
    out = []
    for layout in p.layouts:
        left = [max(d, 0.0) for d in deficit]
        score, own = 0.0, []
        for x in sorted(layout.placements, key=lambda x: (-x.profile.compute_slices, x.start)):
            rates = [float(row[p.column[x.profile.name]]) for row in p.rate]
            gains = [min(r, lft) / e for r, lft, e in zip(rates, left, eff, strict=True)]
            s = max(range(len(gains)), key=lambda i: (gains[i], -i))
            if gains[s] > 0:
                own.append(s)
                left[s] -= rates[s]
                score += gains[s]
            else:
                own.append(-1)
        out.append((score, own + [-1] * (7 - len(own)), left))
    return out


def test_fill_scores_hands_each_instance_to_the_service_it_covers_most_of() -> None:
    p = pair(1.0, 1.0)
    t = tables(p)
    score, own, left = fill_scores(t, np.array([100.0, 25.0]))
    assert own.dtype == np.int64
    # 4g + 3g: the 4g covers all of a (4 slice equivalents), the 3g 25 of b's 30 (2.5)
    li = index(p, "4g.20gb@0", "3g.20gb@4")
    assert (score[li], own[li].tolist(), left[li].tolist()) == (6.5, list(owners(0, 1)),
                                                                [0.0, -5.0])
    # seven 1g: three serve b (10, 10, then 5 of 10); a takes none, so the rest stay idle
    li = index(p, *(f"1g.5gb@{k}" for k in range(7)))
    assert (score[li], own[li].tolist(), left[li].tolist()) == (2.5, list(owners(1, 1, 1)),
                                                                [100.0, -5.0])
    for deficit in ([100.0, 25.0], [250.0, 0.0], [0.0, 64.0], [35.0, 7.0], [-3.0, 12.0]):
        score, own, left = fill_scores(t, np.array(deficit))
        for li, (s, o, lft) in enumerate(reference_scores(p, deficit)):
            assert score[li] == pytest.approx(s)
            assert own[li].tolist() == o
            np.testing.assert_allclose(left[li], lft)


def test_fill_picks_the_best_layout_or_one_of_the_width_best_at_random() -> None:
    p = only_4g(100.0)  # one 4g covers it: the three layouts with a 4g score 4 each
    t = tables(p)
    four = [index(p, "4g.20gb@0", "3g.20gb@4"), index(p, "4g.20gb@0", "2g.10gb@4", "1g.5gb@6"),
            index(p, "4g.20gb@0", "1g.5gb@4", "1g.5gb@5", "1g.5gb@6")]
    assert fill(t, p.demand) == [(four[0], owners(0))]  # ties to the lower index
    picks = []
    for seed in SEEDS:
        assert fill(t, p.demand, np.random.default_rng(seed)) == [(four[0], owners(0))]
        k = int(np.random.default_rng(seed).integers(2))
        got = fill(t, p.demand, np.random.default_rng(seed), width=2)
        assert got == [(four[k], owners(0))]
        picks.append(got[0][0])
    assert set(picks) == set(four[:2])


def test_a_random_fill_picks_only_layouts_that_serve_something() -> None:
    p = problem({"s": [0, 0, 0, 0, 70]}, [70.0])  # only the one layout with a 7g serves
    t = tables(p)
    for seed in SEEDS:
        assert fill(t, p.demand, np.random.default_rng(seed), width=5) == [(0, owners(0))]


def test_fill_names_a_demand_no_instance_serves() -> None:
    t = tables(problem({"a": [0, 0, 0, 100, 0], "z": [0, 0, 0, 0, 0]}, [100.0, 0.0]))
    with pytest.raises(InfeasibleError) as caught:
        fill(t, np.array([0.0, 1.0]))
    assert str(caught.value) == "a demand is left that no instance can serve"


def test_bulk_gives_whole_gpus_of_the_best_layout_and_keeps_one_back() -> None:
    # z serves nowhere (and wants nothing); a's best GPU is a 4g (100), b's seven 1g (70)
    p = problem({"z": [0, 0, 0, 0, 0], "a": [0, 0, 0, 100, 0], "b": [10, 0, 0, 0, 0]},
                [0.0, 430.0, 300.0])
    t = tables(p)
    configs, deficit = bulk(p, t)
    four = index(p, "4g.20gb@0", "3g.20gb@4")
    ones = index(p, *(f"1g.5gb@{k}" for k in range(7)))
    # a: 4 whole GPUs fit in 430, one is kept back: 3 (130 left); b: 4 fit in 300, 3 (90)
    assert configs == [(four, owners(1, 1))] * 3 + [(ones, (2,) * 7)] * 3
    assert deficit.tolist() == [0.0, 130.0, 90.0]
    configs, deficit = bulk(p, t, keep=0)
    assert configs == [(four, owners(1, 1))] * 4 + [(ones, (2,) * 7)] * 4
    assert deficit.tolist() == [0.0, 30.0, 20.0]


def test_bulk_counts_whole_gpus_exactly_even_for_small_rates() -> None:
    p = problem({"s": [0, 0, 0, 0, 0.1]}, [1.0])  # a GPU of 0.1 req/s (one 7g)
    configs, deficit = bulk(p, tables(p))
    fits = int(Fraction(1.0) // Fraction(0.1))  # 9: the float 0.1 is a little over 1/10
    assert fits == 9
    assert configs == [(0, owners(0))] * (fits - 1)
    assert deficit.tolist() == pytest.approx([1.0 - (fits - 1) * 0.1])


def test_coverage_adds_up_each_gpus_instances_per_service() -> None:
    p = pair(1.0, 1.0)
    t = tables(p)
    configs = [(index(p, "4g.20gb@0", "3g.20gb@4"), owners(0, 1)),
               (index(p, *(f"1g.5gb@{k}" for k in range(7))), owners(1, 1, 1)),
               (index(p, "4g.20gb@0", "1g.5gb@4", "1g.5gb@5", "1g.5gb@6"), owners(0, 1, 1, 1))]
    assert coverage(t, configs).tolist() == [[100.0, 30.0], [0.0, 30.0], [100.0, 30.0]]
    assert coverage(t, []).shape == (0, 2)


def test_prune_drops_a_gpu_whose_loss_leaves_the_demand_within_tolerance() -> None:
    rate = 1.0 - TOLERANCE  # one 7g gives exactly the demand less its tolerance
    p = problem({"s": [0, 0, 0, 0, rate]}, [1.0])
    t = tables(p)
    for seed in SEEDS:
        assert prune(t, [(0, owners(0)), (0, IDLE)], np.random.default_rng(seed)) == [
            (0, owners(0))]


def test_prune_drops_redundant_gpus_in_random_order_until_each_is_needed() -> None:
    p = only_4g(100.0)
    t = tables(p)
    configs: list[Config] = [(li, owners(0)) for li in (1, 2, 3)]  # each covers it alone
    for seed in SEEDS:
        last = int(np.random.default_rng(seed).permutation(3)[-1])  # the first two go
        assert prune(t, configs, np.random.default_rng(seed)) == [configs[last]]


def test_repair_fills_only_the_demand_the_gpus_leave() -> None:
    p = only_4g(300.0)
    t = tables(p)
    have = [(3, owners(0))]  # 100 of 300
    assert repair(t, have) == have + [(1, owners(0))] * 2
    assert repair(t, []) == [(1, owners(0))] * 3
    q = only_4g(100.0)
    tq = tables(q)
    for seed in SEEDS:
        assert repair(tq, [], np.random.default_rng(seed)) == [(1, owners(0))]
        k = int(np.random.default_rng(seed).integers(2))
        assert repair(tq, [], np.random.default_rng(seed), width=2) == [((1, 2)[k], owners(0))]


def test_configs_become_gpus_and_back() -> None:
    p = pair(1.0, 1.0)
    t = tables(p)
    four = index(p, "4g.20gb@0", "3g.20gb@4")
    gpus = to_gpus(p, t, [(four, owners(0))])
    assert gpus[0].layout == p.layouts[four]
    assert [(str(x), s) for x, s in gpus[0].assignment] == [("4g.20gb@0", "a"),
                                                            ("3g.20gb@4", None)]
    configs = [(four, owners(0, 1)), (four, owners(-1, 0)),
               (index(p, *(f"1g.5gb@{k}" for k in range(7))), (1, -1, 0, 1, -1, -1, 0))]
    assert from_gpus(p, t, to_gpus(p, t, configs)) == configs
