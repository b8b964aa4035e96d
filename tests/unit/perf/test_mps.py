"""The MPS latency/speed model: fitted constants, monotonicity, queueing tail, share search."""

from __future__ import annotations

import numpy as np
import pytest

from cotenant.perf import mps


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


def test_min_share_is_the_smallest_that_meets_the_slo() -> None:
    a, l100 = mps.SERIAL_FRACTION["resnet50"], mps.L100_MS["resnet50"]
    loads = np.array([0.0, 0.05, 0.2, 0.95])
    slo = np.full(4, 60.0)
    need = mps.min_share(loads, slo, a, l100, 1.27)
    for load, s in zip(loads, need, strict=True):
        if s == 101:
            assert mps.p99_ms(np.array([load]), np.array([1.0]), a, l100, 1.27)[0] > 60.0
            continue
        assert mps.p99_ms(np.array([load]), np.array([s / 100]), a, l100, 1.27)[0] <= 60.0
        if s > 1:
            assert mps.p99_ms(np.array([load]), np.array([(s - 1) / 100]), a, l100, 1.27)[0] > 60
    assert need[-1] == 101


def test_offline_speed_is_zero_without_share_and_one_at_full() -> None:
    s = mps.offline_speed(np.array([0.0, 0.5, 1.0]))
    assert s[0] == 0.0
    assert 0.0 < s[1] < 1.0
    assert s[2] == pytest.approx(1.0)
