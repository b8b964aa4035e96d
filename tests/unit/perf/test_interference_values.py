"""The interference calibration by value: each field recomputed from the shipped CSV files
(read here with the csv module, not through the package), each statistic over Tally's two
servers per training job, and each stretch checked by the p99 ratio it must reproduce."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from importlib import resources

import numpy as np
import pytest

from cotenant.perf import mps
from cotenant.perf.interference import (
    H200_LOAD,
    HALF_SHARE_SPEED,
    Interference,
    interference,
    stretch_from_p99_ratio,
)

STATS: dict[str, Callable[[list[float]], float]] = {
    "mean": lambda v: sum(v) / len(v), "min": min, "max": max}
RESNET50 = 1
"""pytorch_resnet50_train_128: the second training row of tally_jobs.csv."""


def rows(name: str) -> list[dict[str, str]]:
    text = resources.files("cotenant.perf").joinpath(f"data/{name}").read_text("utf-8")
    return list(csv.DictReader(io.StringIO(
        "\n".join(line for line in text.splitlines() if not line.startswith("#")))))


def per_job(column: str, statistic: str) -> list[float]:
    """``statistic`` of ``column`` over each training job's pairs (tally_jobs.csv order)."""
    pairs = rows("tally_pairs.csv")
    jobs = [r["job"] for r in rows("tally_jobs.csv") if r["kind"] == "training"]
    out = []
    for job in jobs:
        values = [float(p[column]) for p in pairs if p["be_job"] == job]
        assert len(values) == 2  # one row per inference server
        out.append(STATS[statistic](values))
    return out


def p99_ratio(stretch: float) -> float:
    """The p99 at Tally's server duty with batches stretched by ``stretch``, over it alone."""
    load, one = np.array([mps.TALLY_HP_LOAD]), np.ones(1)
    return float(mps.p99_ms(load, one, 0.0, 1.0, stretch)[0] / mps.p99_ms(load, one, 0.0,
                                                                          1.0)[0])


@pytest.mark.parametrize("statistic", list(STATS))
def test_tally_stretches_reproduce_the_statistic_of_the_measured_p99_ratios(
        statistic: str) -> None:
    cal = interference("tally", statistic)
    assert (cal.source, cal.statistic) == ("tally", statistic)
    for field, column in (("ts_stretch", "hp_p99_ratio_time_slicing"),
                          ("priority_stretch", "hp_p99_ratio_tally")):
        values = getattr(cal, field)
        assert values.shape == (6,)
        for got, ratio in zip(values, per_job(column, statistic), strict=True):
            assert p99_ratio(got) == pytest.approx(max(ratio, 1.0), rel=1e-6), field
            assert got >= 1.0


@pytest.mark.parametrize("statistic", list(STATS))
def test_tally_costs_are_the_lost_throughput_over_the_server_duty(statistic: str) -> None:
    cal = interference("tally", statistic)
    for field, column in (("ts_cost", "be_norm_tput_time_slicing"),
                          ("priority_cost", "be_norm_tput_tally")):
        want = [(1.0 - t) / mps.TALLY_HP_LOAD for t in per_job(column, statistic)]
        np.testing.assert_allclose(getattr(cal, field), want, rtol=1e-12, err_msg=field)


@pytest.mark.parametrize("statistic", list(STATS))
def test_the_capped_mps_residual_is_tallys_uncapped_stretch_at_half_the_sms(
        statistic: str) -> None:
    """Tally's MPS-priority stretch times the online speed at half the SMs, at least 1."""
    residual = interference("tally", statistic).mps_residual
    for got, ratio in zip(residual, per_job("hp_p99_ratio_mps_priority", statistic),
                          strict=True):
        if got > 1.0:
            assert p99_ratio(got / HALF_SHARE_SPEED) == pytest.approx(ratio, rel=1e-6)
        else:
            assert got == 1.0
            assert p99_ratio(1.0 / HALF_SHARE_SPEED) > ratio
    assert 0.6 < HALF_SHARE_SPEED < 0.7


@pytest.mark.parametrize("statistic", list(STATS))
def test_the_h200_source_scales_tally_by_its_resnet50_measurement(statistic: str) -> None:
    h200 = {r["mechanism"]: r for r in rows("h200_colocation.csv")}

    def ms(mechanism: str) -> float:
        return float(h200[mechanism]["service_ms"])

    tally = interference("tally", statistic)
    cal = interference("h200", statistic)
    assert (cal.source, cal.statistic) == ("h200", statistic)
    ts = ms("time-slicing") / ms("solo")  # 12.536 / 5.285
    want = np.maximum(1.0, ts * tally.ts_stretch / tally.ts_stretch[RESNET50])
    np.testing.assert_allclose(cal.ts_stretch, want, rtol=1e-12)
    cost = (1.0 - float(h200["time-slicing"]["offline_norm_tput"])) / H200_LOAD
    np.testing.assert_allclose(cal.ts_cost, cost * tally.ts_cost / tally.ts_cost[RESNET50],
                               rtol=1e-12)
    assert cal.ts_cost[RESNET50] == pytest.approx((1.0 - 0.7074) / 0.45)
    residual = STATS[statistic]([ms(f"mps-{p}") / ms(f"mps-cap-{p}") for p in (50, 70)])
    uncapped = np.array([stretch_from_p99_ratio(r)
                         for r in per_job("hp_p99_ratio_mps_priority", statistic)])
    np.testing.assert_allclose(
        cal.mps_residual, np.maximum(1.0, residual * uncapped / uncapped[RESNET50]), rtol=1e-9)
    assert cal.mps_residual[RESNET50] == pytest.approx(residual)
    np.testing.assert_array_equal(cal.priority_stretch, tally.priority_stretch)
    np.testing.assert_array_equal(cal.priority_cost, tally.priority_cost)


def test_the_statistics_differ_where_the_two_servers_differ() -> None:
    # the lower of two throughputs is the higher cost
    lo, mid, hi = (interference("tally", s).ts_cost for s in ("min", "mean", "max"))
    assert np.all(lo > hi)
    np.testing.assert_allclose(mid, (lo + hi) / 2)


def test_a_ratio_of_one_or_less_is_no_stretch() -> None:
    assert stretch_from_p99_ratio(1.0) == 1.0
    assert stretch_from_p99_ratio(0.5) == 1.0
    assert stretch_from_p99_ratio(1.0 + 1e-6) > 1.0


def test_the_summary_is_each_fields_mean_to_three_decimals() -> None:
    cal = Interference(
        "src", "stat", ts_stretch=np.array([1.0, 1.2345]), ts_cost=np.array([0.1, 0.3]),
        mps_residual=np.array([1.1, 1.4]), priority_stretch=np.array([1.01, 1.05]),
        priority_cost=np.array([0.4, 0.8]))
    assert cal.summary() == {"source": "src", "statistic": "stat", "ts_stretch": 1.117,
                             "ts_cost": 0.2, "mps_residual": 1.25, "priority_stretch": 1.03,
                             "priority_cost": 0.6}
    assert cal.stretch("mps").tolist() == [1.1, 1.4]
    assert cal.stretch("time-slicing").tolist() == [1.0, 1.2345]
    assert cal.stretch("priority").tolist() == [1.01, 1.05]
    assert cal.stretch("none").tolist() == [1.0, 1.0]
    assert cal.predicted_stretch("mps") == pytest.approx(1.25)
