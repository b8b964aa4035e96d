"""Share sizing at the edges the table cannot serve: per-GPU targets and stretches, overload,
ratios that are not whole numbers, an empty batch, a whole GPU that misses, priority sharing's
interference. Each need is checked against a brute-force search over every share 0-100."""

from __future__ import annotations

import numpy as np
import pytest

from cotenant.perf import mps
from cotenant.policies.colocation import DynamicShare, FixedShare, Mechanism, need
from cotenant.policies.colocation import share as share_module
from cotenant.policies.colocation.contract import MAX_SHARE_PCT
from cotenant.policies.colocation.share import NEVER, p99_at

RESNET = mps.model_index("resnet50")


@pytest.fixture(autouse=True)
def fresh_tables() -> None:
    share_module._TABLES.clear()


def smallest_share(mechanism: Mechanism, model: int, load: float, target: float,
                   stretch: float) -> int:
    """The rule, by brute force: the first share 0, 1, ..., 100 whose p99 keeps the target,
    NEVER where none does."""
    for share in range(MAX_SHARE_PCT + 1):
        p99 = p99_at(mechanism, np.array([model]), np.array([load]),
                     np.array([float(share)]), np.array([stretch]))[0]
        if p99 <= target:
            return share
    return NEVER


def check_against_brute_force(mechanism: Mechanism, models: np.ndarray, loads: np.ndarray,
                              targets: np.ndarray, stretches: np.ndarray) -> np.ndarray:
    got = need(mechanism, models, loads, targets, stretches)
    want = [smallest_share(mechanism, int(m), float(lo), float(t), float(s))
            for m, lo, t, s in zip(models, loads, targets, stretches, strict=True)]
    assert got.dtype == np.int64  # whole percentages, as MPS takes them
    assert got.shape == loads.shape
    assert list(got) == want
    return got


@pytest.mark.parametrize("mechanism", [Mechanism.MPS, Mechanism.TIME_SLICING])
def test_each_gpu_is_sized_for_its_own_target(mechanism: Mechanism) -> None:
    """Targets differ per GPU (so no single table fits): each GPU gets the smallest share
    that keeps its own target, and a tight target needs more than a loose one."""
    models = np.full(4, RESNET)
    loads = np.full(4, 0.2)
    ends = p99_at(mechanism, models[:2], loads[:2], np.array([100.0, 50.0]), np.full(2, 1.2))
    targets = ends[0] + (ends[1] - ends[0]) * np.array([0.1, 0.4, 0.7, 1.5])
    got = check_against_brute_force(mechanism, models, loads, targets, np.full(4, 1.2))
    assert np.all(np.diff(got) <= 0)
    assert got[0] > got[-1]


@pytest.mark.parametrize("mechanism", [Mechanism.MPS, Mechanism.TIME_SLICING])
def test_each_gpu_is_sized_for_its_own_co_runners_stretch(mechanism: Mechanism) -> None:
    """Stretches differ per GPU, targets do not: a heavier co-runner needs a larger share."""
    models = np.full(4, RESNET)
    loads = np.full(4, 0.2)
    stretches = np.array([1.0, 1.2, 1.5, 2.0])
    got = check_against_brute_force(mechanism, models, loads, np.full(4, 90.0), stretches)
    assert np.all(np.diff(got) >= 0)
    assert got[-1] > got[0]


def test_an_overloaded_service_needs_more_than_a_whole_gpu() -> None:
    """A load above 1 (more than the service serves alone on a whole GPU) is never met."""
    loads = np.array([0.1, 1.0, 1.5, 2.5])
    got = check_against_brute_force(Mechanism.MPS, np.full(4, RESNET), loads,
                                    np.full(4, 74.0), np.full(4, 1.0))
    assert list(got[2:]) == [NEVER, NEVER]


def test_a_target_that_is_not_a_whole_multiple_of_the_solo_latency() -> None:
    """One target and stretch for every GPU (the table's case) with a target 3.7 times the
    solo latency: the need is the target's own, not that of a rounded ratio."""
    loads = np.array([0.05, 0.2, 0.35, 0.5, 0.65])
    target = 3.7 * mps.ONLINE_L100[RESNET]
    check_against_brute_force(Mechanism.MPS, np.full(5, RESNET), loads, np.full(5, target),
                              np.full(5, 1.1))


def test_priority_sharing_counts_the_co_runners_interference() -> None:
    """Under priority sharing there is no share to size, but the co-runner still slows the
    service: a stretch that pushes the p99 past the target makes the need NEVER."""
    one = np.array([RESNET])
    load = np.array([0.3])
    calm = p99_at(Mechanism.PRIORITY, one, load, np.zeros(1), np.array([1.0]))[0]
    target = calm * 1.05
    got = check_against_brute_force(Mechanism.PRIORITY, np.full(2, RESNET), np.full(2, 0.3),
                                    np.full(2, target), np.array([1.0, 1.5]))
    assert list(got) == [0, NEVER]
    mixed = check_against_brute_force(Mechanism.PRIORITY, np.full(2, RESNET),
                                      np.array([0.3, 0.3]), np.array([target, 2 * target]),
                                      np.array([1.5, 1.5]))
    assert list(mixed) == [NEVER, 0]


def test_an_empty_batch_needs_nothing() -> None:
    got = need(Mechanism.MPS, np.zeros(0, np.int64), np.zeros(0), np.zeros(0), np.zeros(0))
    assert got.shape == (0,)


def test_dynamic_share_leaves_never_as_never() -> None:
    """Where no share keeps the SLO the sizing says so (the guard evicts on it): NEVER is not
    raised to the floor nor capped to a whole GPU."""
    got = DynamicShare(min_share=10).needed(
        Mechanism.MPS, np.full(2, RESNET), np.array([0.0, 1.5]), np.full(2, 740.0),
        np.full(2, 1.0))
    assert list(got) == [10, NEVER]


def test_a_fixed_share_gives_every_gpu_the_same_share() -> None:
    got = FixedShare(40).needed(Mechanism.MPS, np.full(3, RESNET), np.array([0.0, 0.5, 1.5]),
                                np.full(3, 74.0), np.full(3, 1.0))
    assert got.shape == (3,)
    assert list(got) == [40, 40, 40]
