"""The MPS latency/speed model: fitted constants, monotonicity, queueing tail, share search."""

from __future__ import annotations

import numpy as np
import pytest

from cotenant.perf import mps
from cotenant.perf.predictor import gavel_pairs


def test_fit_recovers_a_known_serial_fraction() -> None:
    shares = np.array([1.0, 0.8, 0.5, 0.3])
    assert mps.fit_serial_fraction(shares, 0.4 + 0.6 / shares) == pytest.approx(0.4)


def test_resnet50_fit_matches_the_calibration_rough_fit() -> None:
    # calibration.md section 2: "a ~ 0.4-0.5" for the ResNet-50 7g row
    assert 0.35 <= mps.SERIAL_FRACTION["resnet50"] <= 0.5
    assert 0.0 < mps.OFFLINE_SERIAL_FRACTION < 1.0


def test_fitted_curve_reproduces_the_measured_rows_within_15_percent() -> None:
    shares = np.array(mps.MPS_PERCENT) / 100.0
    for model, row in mps.MPS_LATENCY_MS.items():
        predicted = row[0] / mps.speed(shares, mps.SERIAL_FRACTION[model])
        assert np.max(np.abs(predicted / np.array(row) - 1.0)) < 0.15, model


def test_p99_grows_with_load_and_shrinks_with_share() -> None:
    a, l100 = mps.SERIAL_FRACTION["bert"], mps.L100_MS["bert"]
    loads = np.array([0.0, 0.1, 0.3, 0.6])
    p = mps.p99_ms(loads, np.ones(4), a, l100)
    assert p[0] == pytest.approx(l100)
    assert np.all(np.diff(p) > 0)
    shares = np.array([0.3, 0.5, 0.8, 1.0])
    assert np.all(np.diff(mps.p99_ms(np.full(4, 0.2), shares, a, l100)) < 0)
    assert np.isinf(mps.p99_ms(np.array([0.9]), np.array([0.3]), a, l100)[0])


def test_offline_speed_is_zero_without_share_and_one_at_full() -> None:
    s = mps.offline_speed(np.array([0.0, 0.5, 1.0]))
    assert s[0] == 0.0
    assert 0.0 < s[1] < 1.0
    assert s[2] == pytest.approx(1.0)


def test_an_mps_limit_costs_less_than_a_mig_slice_for_every_measured_model() -> None:
    # MIGER, same models and GPU: the MPS rows scale better with SMs than the MIG rows
    for model, row in mps.MIG_LATENCY_MS.items():
        assert mps.SERIAL_FRACTION[model] > mps.mig_serial_fraction(row), model
    assert 0.0 < mps.MPS_MIG_GAP < 0.5
    assert pytest.approx(
        mps.OFFLINE_SERIAL_FRACTION_MIG + mps.MPS_MIG_GAP
    ) == mps.OFFLINE_SERIAL_FRACTION


def test_offline_mps_curve_agrees_with_gavels_measured_pairs() -> None:
    # two training jobs splitting a GPU evenly each run at speed(0.5); Gavel measured the sum
    combined = [r.speed_a + r.speed_b for r in gavel_pairs("V100") if r.job_a != r.job_b]
    implied = 2.0 - 2.0 / float(np.median(combined))
    assert abs(implied - mps.OFFLINE_SERIAL_FRACTION) < 0.1
    assert abs(implied - mps.OFFLINE_SERIAL_FRACTION) < abs(
        implied - mps.OFFLINE_SERIAL_FRACTION_MIG
    )


def test_tallys_server_load_is_its_measured_duty_cycle_not_its_request_load() -> None:
    # Tally's "load 0.5" server keeps a kernel running 44-45% of the time alone; the fits
    # take that duty cycle, the unit of ``load`` everywhere in the simulator
    assert 0.44 < mps.TALLY_HP_LOAD < 0.46
    # one time split: the server's GPU time plus the offline job's is at most the GPU
    assert mps.TALLY_HP_LOAD + mps.BE_NORMALISED_TPUT["time-slicing"] <= 1.0
