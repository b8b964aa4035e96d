"""The MPS model by value on hand-worked inputs: the Amdahl speed, the busy share beside a
co-runner and its inverse, the queue's p99 and its miss share at their boundaries, and the
serial-fraction fits (checked against a brute-force search)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cotenant.perf import mps


def test_speed_is_amdahls_law() -> None:
    assert float(mps.speed(0.5, 0.2)) == pytest.approx(1 / 1.8, rel=1e-15)
    got = mps.speed(np.array([0.3, 0.7]), 0.25)
    np.testing.assert_allclose(got, [1 / (0.25 + 0.75 / 0.3), 1 / (0.25 + 0.75 / 0.7)])
    assert float(mps.speed(0.0, 0.2)) == pytest.approx(1 / (0.2 + 0.8 / 1e-6))


def test_speed_computes_in_float64_whatever_the_shares_dtype() -> None:
    # a share of 0 is floored at 1e-6 in float64 (float32's nearest is 9.99999997e-07):
    # with no serial part the speed is the floored share itself
    shares = [0.0, 0.25, 1.0]
    assert mps.speed(np.array(shares, np.float32), 0.0)[0] == 1.0 / (1.0 / 1e-6)
    for dtype in (np.float32, np.float16, np.int64):
        got = mps.speed(np.array(shares, dtype), 0.3)
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, mps.speed(np.array(shares, dtype).astype(np.float64),
                                                     0.3))


def test_busy_fraction_is_the_load_over_the_speed_at_most_one() -> None:
    got = mps.busy_fraction(np.array([0.3, 0.6]), np.array([0.5, 0.5]), np.array([0.2, 0.2]))
    np.testing.assert_allclose(got, [0.54, 1.0])  # 0.3 x 1.8; 0.6 x 1.8 saturates


def test_busy_beside_a_co_runner_and_back() -> None:
    # a quarter of the time beside the co-runner, at speed 1 / 1.8: slowed by 0.25 x 1.8 + 0.75
    assert mps.busy_beside(0.3, 0.5, 0.2, 0.25) == pytest.approx(0.36)
    assert mps.busy_beside(0.9, 0.5, 0.2, 0.25) == 1.0  # 1.08 saturates
    assert mps.busy_beside(0.3, 0.5, 0.2, 0.0) == pytest.approx(0.3)  # never beside it
    assert mps.load_beside(0.36, 0.5, 0.2, 0.25) == pytest.approx(0.3)
    assert mps.load_beside(0.45, 0.5, 0.2, 1.0) == pytest.approx(0.25)  # always beside: / 1.8


def test_the_p99_is_the_batch_time_plus_the_waits_tail() -> None:
    # a stretch of 2 halves the speed: batches of 20 ms at utilisation 0.4
    got = mps.p99_ms(np.array([0.2]), np.ones(1), 0.0, 10.0, 2.0)[0]
    assert got == pytest.approx(20.0 * (1.0 + math.log(40.0) / 1.2), rel=1e-12)
    # at half the SMs (serial 0.5: speed 2 / 3) the same load runs at 0.3
    got = mps.p99_ms(np.array([0.2]), np.array([0.5]), 0.5, 10.0)[0]
    assert got == pytest.approx(15.0 * (1.0 + math.log(30.0) / 1.4), rel=1e-12)
    assert mps.p99_ms(np.zeros(1), np.ones(1), 0.0, 10.0)[0] == 10.0  # no wait at all
    # a tiny load's tail is not negative: ln(100 rho) < 0 counts as no wait
    assert mps.p99_ms(np.array([0.005]), np.ones(1), 0.0, 10.0)[0] == 10.0
    unstable = mps.p99_ms(np.array([0.75, 1.0]), np.ones(2), 0.0, 10.0, 2.0)
    assert np.all(np.isinf(unstable))  # utilisation 1.5 and 2


def test_the_miss_share_by_hand() -> None:
    """Share 0.5 at serial 0 (speed 0.5), stretch 2: batches of 40 ms at utilisation 0.8."""
    slo = np.array([100.0, 40.5, 40.0, 30.0])
    got = mps.violation_share(np.full(4, 0.2), 2.0, 10.0, slo, share=0.5)
    assert got[0] == pytest.approx(0.8 * math.exp(-2 * 0.2 * 60 / 40), rel=1e-12)
    assert got[1] == pytest.approx(0.8 * math.exp(-2 * 0.2 * 0.5 / 40), rel=1e-12)
    assert got[2:].tolist() == [1.0, 1.0]  # a batch as long as the SLO, or longer, misses
    # no load: nothing misses, even an SLO no batch can meet
    assert mps.violation_share(np.zeros(2), 2.0, 10.0, np.array([100.0, 30.0]),
                               share=0.5).tolist() == [0.0, 0.0]
    # utilisation 1.2: the queue is unstable and every request misses
    assert mps.violation_share(np.array([0.3]), 2.0, 10.0, np.array([1e9]),
                               share=0.5).tolist() == [1.0]


def test_the_serial_fraction_fit_is_clipped_to_0_1() -> None:
    shares = np.array([1.0, 0.8, 0.5, 0.3])
    assert mps.fit_serial_fraction(shares, 1.5 - 0.5 / shares) == 1.0  # a = 1.5
    assert mps.fit_serial_fraction(shares, -0.5 + 1.5 / shares) == 0.0  # a = -0.5
    assert mps.fit_serial_fraction(shares, 0.7 + 0.3 / shares) == pytest.approx(0.7)


def test_a_mig_row_is_fitted_over_its_measured_slices_relative_to_7g() -> None:
    fraction = mps.MIG_SM_FRACTION  # 7g, 4g, 3g, 2g, 1g
    row = (7.0, None, 7.0 * (0.3 + 0.7 / fraction[2]), None, 7.0 * (0.3 + 0.7 / fraction[4]))
    assert mps.mig_serial_fraction(row) == pytest.approx(0.3)
    assert mps.mig_serial_fraction((2.0, 3.0, 3.0, 3.0, 3.0)) == pytest.approx(
        mps.mig_serial_fraction((4.0, 6.0, 6.0, 6.0, 6.0)))


def test_each_online_fit_is_the_least_squares_a_of_its_mps_rows() -> None:
    shares = np.array(mps.MPS_PERCENT) / 100.0
    grid = np.linspace(0.0, 1.0, 100_001)[:, None]
    fits = mps._fit_online()
    assert set(fits) == set(mps.MPS_LATENCY_MS)
    for model, row in mps.MPS_LATENCY_MS.items():
        relative = np.array(row) / row[0]
        errors = np.sum((grid + (1 - grid) / shares - relative) ** 2, axis=1)
        assert fits[model] == pytest.approx(grid[int(np.argmin(errors)), 0], abs=1e-5), model


def test_the_mps_mig_gap_is_the_median_difference_over_the_models() -> None:
    mig = {m: mps.mig_serial_fraction(row) for m, row in mps.MIG_LATENCY_MS.items()}
    offsets = [0.05, 0.4, 0.1, 0.3, 0.2, 0.6, 0.7, 0.8]  # median of eight: (0.3 + 0.4) / 2
    online = {m: a + d for (m, a), d in zip(mig.items(), offsets, strict=True)}
    assert mps._mps_mig_gap(online) == pytest.approx(0.35)
