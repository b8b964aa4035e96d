"""Interference calibration: one source and one statistic for every mechanism; job profiles;
SLOs by a multiple; the per-request miss share."""

from __future__ import annotations

import numpy as np
import pytest

from cotenant.errors import InputError, UnknownNameError
from cotenant.perf import mps
from cotenant.perf.interference import (
    SOURCES,
    STATISTICS,
    h200_rows,
    interference,
    stretch_from_p99_ratio,
)
from cotenant.perf.jobs import job_profiles, occupancy_table, online_occupancy
from cotenant.perf.slo import slo_ms


def test_a_stretch_reproduces_its_p99_ratio_at_tallys_load() -> None:
    for ratio in (1.05, 2.38, 6.0):
        f = stretch_from_p99_ratio(ratio)
        load = np.array([mps.TALLY_HP_LOAD])
        got = mps.p99_ms(load, np.ones(1), 0.0, 1.0, f)[0] / mps.p99_ms(load, np.ones(1), 0.0,
                                                                          1.0)[0]
        assert got == pytest.approx(ratio, rel=1e-6)
    assert stretch_from_p99_ratio(0.9) == 1.0


def test_every_mechanism_is_calibrated_alike_from_tally() -> None:
    """Time slicing from Tally's time-slicing column and priority from its Tally column, by the
    same solve; the mean statistic lies between min and max for each."""
    lo, mid, hi = (interference("tally", s) for s in ("min", "mean", "max"))
    for name in ("ts_stretch", "priority_stretch", "mps_residual"):
        a, b, c = (getattr(x, name) for x in (lo, mid, hi))
        assert np.all(a <= b + 1e-12)
        assert np.all(b <= c + 1e-12)
    assert np.all(mid.ts_stretch > mid.priority_stretch)  # Tally: 2.38x against 1.05x
    assert np.all(mid.mps_residual >= 1.0)


def test_the_h200_source_is_the_measurement() -> None:
    rows = h200_rows()
    h = interference("h200", "mean")
    resnet = next(i for i, n in enumerate(job_profiles().names) if "resnet50" in n)
    assert h.ts_stretch[resnet] == pytest.approx(rows["time-slicing"]["service_ms"]
                                                 / rows["solo"]["service_ms"])
    residual = np.mean([rows[f"mps-{p}"]["service_ms"] / rows[f"mps-cap-{p}"]["service_ms"]
                        for p in (50, 70)])
    assert h.mps_residual[resnet] == pytest.approx(residual)
    assert set(SOURCES) == {"tally", "h200"}
    assert set(STATISTICS) == {"mean", "min", "max"}
    with pytest.raises(UnknownNameError):
        interference("bogus")


def test_jobs_differ_in_memory_speed_curve_and_occupancy() -> None:
    jobs = job_profiles()
    assert len(jobs.names) == 6
    assert len(set(np.round(jobs.serial, 6))) >= 3
    half = jobs.speed(np.arange(6), np.full(6, 0.5))
    assert np.all((half > 0.3) & (half < 1.0))
    assert np.ptp(half) > 0.1
    assert np.all(jobs.speed(np.arange(6), np.ones(6)) == pytest.approx(1.0))
    assert np.all(jobs.speed(np.arange(6), np.zeros(6)) == 0.0)


def test_occupancy_is_a_share_and_online_models_map_to_orions() -> None:
    assert all(0.0 < v <= 1.0 for _, v in occupancy_table().values())
    occ = online_occupancy(np.arange(len(mps.ONLINE_MODELS)))
    assert occ[mps.model_index("bert")] == occupancy_table()["bert_2_fwd"][1]


def test_slo_is_a_multiple_of_the_solo_batch_time() -> None:
    m = np.array([mps.model_index("resnet50"), mps.model_index("bert")])
    assert list(slo_ms(m, 5.0)) == pytest.approx([5 * 14.8, 5 * 133.9])
    with pytest.raises(InputError):
        slo_ms(m, 1.0)


def test_the_miss_share_is_the_queue_tail_beyond_the_slo() -> None:
    load = np.array([0.0, 0.1, 0.5, 0.9, 1.0])
    got = mps.violation_share(load, 1.0, 10.0, np.full(5, 50.0))
    assert got[0] == 0.0
    assert got[-1] == 1.0
    assert np.all(np.diff(got) > 0)
    # where the p99 is within the SLO, at most 1% of requests miss it
    p99 = mps.p99_ms(load[1:4], np.ones(3), 0.0, 10.0)
    assert np.all((p99 <= 50.0) == (got[1:4] <= 0.01))
    assert mps.violation_share(np.array([0.2]), 6.0, 10.0, np.array([50.0]))[0] == 1.0
