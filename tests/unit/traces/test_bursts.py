"""Load inside the minute: sub-steps that keep each interval's mean, and the fit of alpha."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from cotenant.errors import InputError
from cotenant.traces.bursts import DEFAULT_ALPHA, fit_alpha, sub_steps, variance_time
from cotenant.traces.genai import load_duty_cycles


def test_sub_steps_keep_each_intervals_mean_and_stay_under_one() -> None:
    rng = np.random.default_rng(1)
    values = rng.random((20, 50)) * 0.6
    fine = sub_steps(values, 6, 1.3, np.random.default_rng(2))
    assert fine.shape == (20, 50, 6)
    assert np.allclose(fine.mean(axis=2), values)
    assert fine.max() <= 1.0
    assert fine.min() >= 0.0
    assert fine.std(axis=2).mean() > 0.05  # bursty, not flat


def test_an_interval_near_full_keeps_its_mean_by_spreading_the_excess() -> None:
    fine = sub_steps(np.array([[0.95]]), 6, 0.2, np.random.default_rng(0))
    assert fine.max() <= 1.0
    assert fine.mean() == pytest.approx(0.95)


def test_flat_minutes_and_one_sub_step() -> None:
    values = np.array([[0.2, 0.4]])
    assert np.allclose(sub_steps(values, 6, math.inf, np.random.default_rng(0)), np.repeat(
        values[:, :, None], 6, axis=2))
    assert sub_steps(values, 1, 1.3, np.random.default_rng(0)).shape == (1, 2, 1)


def test_smaller_alpha_is_burstier_and_the_fit_finds_more_variance_at_finer_steps() -> None:
    rng = np.random.default_rng(3)
    values = np.abs(rng.normal(0.2, 0.15, (30, 400)))
    spread = [sub_steps(values, 6, a, np.random.default_rng(4)).std(axis=2).mean()
              for a in (0.5, 5.0)]
    assert spread[0] > spread[1]
    alpha, beta, cv2 = fit_alpha(values, 6)
    assert beta < 0
    assert cv2 > 0
    assert alpha > 0
    assert variance_time(values)[0] == pytest.approx(cv2)
    assert 0.5 < DEFAULT_ALPHA < 5


def test_bad_settings_are_one_line_errors() -> None:
    with pytest.raises(InputError):
        sub_steps(np.zeros((1, 1)), 0, 1.0, np.random.default_rng(0))
    with pytest.raises(InputError):
        sub_steps(np.zeros((1, 1)), 6, 0.0, np.random.default_rng(0))
    with pytest.raises(InputError):
        variance_time(np.zeros((2, 3)))


@pytest.mark.shared_data
def test_the_default_alpha_is_the_fit_on_the_genai_duty_cycles() -> None:
    path = (Path(__file__).resolve().parents[3].parent / "shared" / "data"
            / "alibaba-genai-v2026" / "pod_gpu_duty_cycle_anon.tar.gz")
    if not path.exists():
        pytest.skip("../shared/data/alibaba-genai-v2026 is absent")
    series, _ = load_duty_cycles(path)
    alpha, beta, _ = fit_alpha(series.values, 6)
    assert round(alpha, 2) == DEFAULT_ALPHA
    assert beta == pytest.approx(-0.33, abs=0.005)
