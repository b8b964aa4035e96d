"""Share sizing: the smallest SLO-keeping share per mechanism, hysteresis, the lookup table."""

from __future__ import annotations

import numpy as np
import pytest

from cotenant.errors import InputError
from cotenant.perf import mps
from cotenant.policies.colocation import DynamicShare, FixedShare, Mechanism, need
from cotenant.policies.colocation import share as share_module
from cotenant.policies.colocation.share import NEVER, _bisect, p99_at

RESNET = mps.model_index("resnet50")


@pytest.fixture(autouse=True)
def fresh_tables() -> None:
    """Each test builds the lookup tables it reads: a table cached by an earlier test (or
    process) would hide what the table-building code does now."""
    share_module._TABLES.clear()


@pytest.mark.parametrize("mechanism", [Mechanism.MPS, Mechanism.TIME_SLICING])
def test_need_is_the_smallest_share_that_keeps_the_target(mechanism: Mechanism) -> None:
    loads = np.array([0.02, 0.1, 0.3, 0.45])
    model = np.full(4, RESNET)
    target = np.full(4, 74.0)
    got = need(mechanism, model, loads, target, np.full(4, 1.3))
    assert got[-1] == NEVER or mechanism is Mechanism.TIME_SLICING
    for load, share in zip(loads, got, strict=True):
        if share == NEVER:
            assert p99_at(mechanism, model[:1], np.array([load]), np.array([100.0]),
                          np.array([1.3]))[0] > 74.0
            continue
        at = p99_at(mechanism, model[:1], np.array([load]), np.array([float(share)]),
                    np.array([1.3]))[0]
        assert at <= 74.0
        if share > 0:
            below = p99_at(mechanism, model[:1], np.array([load]),
                           np.array([float(share - 1)]), np.array([1.3]))[0]
            assert below > 74.0


def test_need_rises_with_load_and_is_never_where_a_whole_gpu_misses() -> None:
    loads = np.linspace(0.0, 1.0, 11)
    got = need(Mechanism.MPS, np.full(11, RESNET), loads, np.full(11, 74.0), np.full(11, 1.1))
    assert np.all(np.diff(got) >= 0)
    assert got[-1] == NEVER


def test_the_table_rounds_loads_up_and_agrees_with_bisection() -> None:
    rng = np.random.default_rng(0)
    loads = rng.random(400) * 0.8
    models = rng.integers(0, len(mps.ONLINE_MODELS), 400)
    target = 5 * mps.ONLINE_L100[models]
    table = need(Mechanism.MPS, models, loads, target, np.full(400, 1.07))
    up = np.ceil(loads * 1000 - 1e-9) / 1000  # what the table sizes for
    exact = _bisect(Mechanism.MPS, models, up, target, np.full(400, 1.07))
    assert np.array_equal(table, exact)
    at_load = _bisect(Mechanism.MPS, models, loads, target, np.full(400, 1.07))
    assert np.all(table >= at_load)  # never under-sized


def test_priority_has_nothing_to_size() -> None:
    got = need(Mechanism.PRIORITY, np.array([RESNET, RESNET]), np.array([0.1, 0.99]),
               np.array([74.0, 74.0]), np.array([1.03, 1.03]))
    assert list(got) == [0, NEVER]


def test_dynamic_share_raises_at_once_and_lowers_only_for_a_large_move() -> None:
    share = DynamicShare(step=30, min_share=10)
    assert list(share.hold(np.array([80]), np.array([50]))) == [80]  # raised at once
    assert list(share.hold(np.array([30]), np.array([50]))) == [50]  # 20 points: kept
    assert list(share.hold(np.array([15]), np.array([50]))) == [15]  # 35 points: lowered
    assert list(share.hold(np.array([40]), np.array([-1]))) == [40]  # a new pair: its need


def test_dynamic_share_keeps_its_margin_and_floor() -> None:
    sizing = DynamicShare(margin=0.2, min_share=10)
    got = sizing.needed(Mechanism.MPS, np.array([RESNET]), np.array([0.3]), np.array([74.0]),
                        np.array([1.0]))
    assert got[0] == need(Mechanism.MPS, np.array([RESNET]), np.array([0.3]),
                          np.array([74.0 * 0.8]), np.array([1.0]))[0]
    low = sizing.needed(Mechanism.MPS, np.array([RESNET]), np.array([0.0]), np.array([740.0]),
                        np.array([1.0]))
    assert low[0] == 10


def test_fixed_share_is_constant() -> None:
    fixed = FixedShare(70)
    assert list(fixed.hold(np.array([10, 99]), np.array([-1, 40]))) == [70, 70]


@pytest.mark.parametrize("bad", [{"margin": 1.0}, {"step": 0}, {"min_share": 101}])
def test_bad_settings_are_one_line_errors(bad: dict[str, float]) -> None:
    with pytest.raises(InputError):
        DynamicShare(**bad)  # type: ignore[arg-type]


def test_a_gpus_need_does_not_depend_on_another_gpus_load() -> None:
    """A load over a whole GPU on one GPU once sent every GPU to bisection, whose answers
    differ from the table's (the table rounds the load up to its grid): a GPU's share then
    moved with another GPU's reading."""
    loads = np.array([0.18311, 0.056115, 0.006383])  # where the table's rounding shows
    alone = need(Mechanism.MPS, np.full(3, RESNET), loads, np.full(3, 80.0), np.full(3, 1.2))
    with_over = need(Mechanism.MPS, np.full(4, RESNET), np.append(loads, 1.4),
                     np.full(4, 80.0), np.full(4, 1.2))
    assert with_over[:3].tolist() == alone.tolist()
    assert with_over[3] == NEVER  # over a whole GPU: no share keeps any target
    bisected = need(Mechanism.MPS, np.full(3, RESNET), loads, np.array([80.0, 80.0, 80.0001]),
                    np.full(3, 1.2))  # targets that differ: bisection for all
    assert (bisected == alone - 1).all()  # the table errs high, never low
