"""A co-location run's settings, its summary and the jobs every run finished, by value.

The run is built here by hand with a different figure in every column (and figures where the
rounding shows), so a column showing another's value, or rounded to other places, fails.
"""

from __future__ import annotations

import math
from dataclasses import astuple, replace
from typing import Any

import numpy as np
import pytest

from cotenant.errors import InputError
from cotenant.sim.colocation.frontier import FrontierPoint
from cotenant.sim.colocation.records import (
    ColocationConfig,
    ColocationRun,
    FloatArray,
    common_finished,
    common_jct,
)

NAN = math.nan


def _run(policy: str = "mps-fixed", waits: list[float] | None = None,
         completed: int = 3) -> ColocationRun:
    def a(*values: float) -> FloatArray:
        return np.array(values, np.float64)

    return ColocationRun(
        policy=policy, seed=17, interval_s=60,
        utilisation=a(0.123456, 0.123456), sm_activity=a(0.5, 0.412346),
        memory_used=a(0.666666, 0.666666), requests=a(300.0, 100.0),
        late_requests=a(4.0, 1.0), minute_violation=a(0.02, 0.0123456), oom_rate=a(0.0, 0.5),
        offline_throughput=a(0.3, 0.123456), running=np.array([2, 5], np.int64),
        online_served=np.array([8, 8], np.int64), gpus=8, jobs_completed=completed,
        jct_mean_min=12.3456,
        counts={"pauses": 11, "throttles": 12, "evictions": 13, "share_changes": 14,
                "offline_starts": 15, "online_oom_intervals": 16, "jobs_given_up": 17},
        faults={"signal": 2, "gpu_xid": 1},
        job_wait_min=None if waits is None else a(*waits))


def test_the_summary_gives_each_column_its_own_figure_rounded() -> None:
    assert _run().summary() == {
        "policy": "mps-fixed", "seed": 17, "gpus": 8,
        "utilisation_pct": 12.35, "sm_activity_pct": 45.62, "memory_used_pct": 66.67,
        "slo_violation_pct": 1.25,  # 5 late of 400 requests
        "gpu_minute_violation_pct": 1.617, "offline_throughput": 0.2117,
        "jobs_completed": 3, "jct_mean_min": 12.3, "colocated_gpu_intervals": 7,
        "pauses": 11, "throttles": 12, "evictions": 13, "share_changes": 14,
        "offline_starts": 15, "online_oom_intervals": 16, "jobs_given_up": 17,
        "faults": {"gpu_xid": 1, "signal": 2},
    }
    faults = _run().summary()["faults"]
    assert isinstance(faults, dict)
    assert list(faults) == ["gpu_xid", "signal"]  # sorted by name


def test_the_summary_rounds_late_requests_to_three_places_and_no_jobs_has_no_jct() -> None:
    run = _run(completed=0)
    late = replace(run, late_requests=np.array([1.0, 0.0]))
    assert late.summary()["slo_violation_pct"] == 0.25
    odd = replace(run, requests=np.array([3000.0, 1000.0]),
                           late_requests=np.array([1.0, 0.0]))
    assert odd.summary()["slo_violation_pct"] == 0.025
    thirds = replace(run, requests=np.array([2000.0, 1000.0]),
                              late_requests=np.array([1.0, 0.0]))
    assert thirds.summary()["slo_violation_pct"] == 0.033
    assert run.summary()["jct_mean_min"] is None
    idle = replace(run, requests=np.zeros(2),
                            late_requests=np.zeros(2))
    assert idle.violation_pct == 0.0


def test_a_frontier_point_holds_the_runs_totals_unrounded() -> None:
    point = FrontierPoint.of(_run(), "share=50%", 0.25)
    assert (point.policy, point.setting) == ("mps-fixed", "share=50%")
    assert astuple(point)[2:] == pytest.approx((12.3456, 45.6173, 1.25, 1.0, 1.61728, 0.211728))


def test_only_the_jobs_every_finishing_run_finished_are_compared() -> None:
    runs = [_run("a", [1.04, NAN, 3.0, 4.07]), _run("b", [2.0, 5.0, NAN, 8.0]),
            _run("c", [NAN] * 4, completed=0), _run("d", None)]
    common = common_finished(runs)
    assert common is not None
    assert common.tolist() == [True, False, False, True]
    assert common_jct(runs) == {"a": 2.6, "b": 5.0, "c": None, "d": None}


def test_a_run_that_finished_no_job_does_not_narrow_the_common_set() -> None:
    runs = [_run("a", [1.0, 3.0]), _run("b", [NAN, NAN], completed=0)]
    assert common_jct(runs) == {"a": 2.0, "b": None}


def test_no_common_job_or_no_finished_job_gives_no_figure() -> None:
    disjoint = [_run("a", [1.0, NAN], completed=1), _run("b", [NAN, 2.0], completed=1)]
    assert common_jct(disjoint) == {"a": None, "b": None}
    nothing = [_run("a", [NAN, NAN], completed=0), _run("b", None)]
    assert common_finished(nothing) is None
    assert common_jct(nothing) == {"a": None, "b": None}


@pytest.mark.parametrize("name", ["offline_start_s", "share_change_s", "reaction_s"])
def test_the_config_refuses_negative_or_infinite_seconds(name: str) -> None:
    zero: dict[str, Any] = {name: 0.0}
    assert getattr(ColocationConfig(**zero), name) == 0.0
    for bad in (-1.0, math.inf):
        kwargs: dict[str, Any] = {name: bad}
        with pytest.raises(InputError) as err:
            ColocationConfig(**kwargs)
        assert err.value.where == f"ColocationConfig.{name}"


def test_the_config_names_the_valid_calibrations_and_statistics() -> None:
    for source in ("tally", "h200"):
        assert ColocationConfig(calibration=source).calibration == source
    for stat in ("mean", "min", "max"):
        assert ColocationConfig(statistic=stat).statistic == stat
    with pytest.raises(InputError) as err:
        ColocationConfig(calibration="a100")
    assert (err.value.where, err.value.rule) == ("calibration", "'a100'; one of tally, h200")
    with pytest.raises(InputError) as err:
        ColocationConfig(statistic="median")
    assert (err.value.where, err.value.rule) == ("statistic", "'median'; one of mean, min, max")
