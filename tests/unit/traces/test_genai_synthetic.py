"""Synthetic GenAI duty cycles: the shipped parameters are a refit of the real trace, and the
generator reproduces their statistics, stays in [0, 1] and is deterministic under a seed."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pytest

from cotenant.errors import InputError
from cotenant.traces.genai import (
    GenaiParams,
    LoadSeries,
    default_genai_params,
    fit_genai,
    load_duty_cycles,
    synthetic_duty_cycles,
)
from cotenant.traces.genai_synthetic import ZERO, pooled_lag1
from tests.unit.traces.test_genai import DUTY, MEMORY


@pytest.fixture(scope="module")
def drawn() -> LoadSeries:
    return synthetic_duty_cycles(400, 1440, np.random.default_rng(11))


def test_synthetic_has_the_fitted_statistics(drawn: LoadSeries) -> None:
    params = default_genai_params()
    v = drawn.values
    assert v.shape == (400, 1440)
    assert v.dtype == np.float64
    assert v.min() >= 0.0
    assert v.max() <= 1.0
    assert v.mean() == pytest.approx(params.mean_duty, rel=0.1)
    assert (v < ZERO).mean() == pytest.approx(params.zero_share, abs=0.03)
    assert pooled_lag1(v) == pytest.approx(params.lag1_autocorr, abs=0.03)
    # the spread of per-series means follows the fitted quantiles
    assert np.median(v.mean(axis=1)) == pytest.approx(params.mean_quantiles[50], rel=0.15)


def test_synthetic_is_deterministic_under_a_seed(drawn: LoadSeries) -> None:
    again = synthetic_duty_cycles(400, 1440, np.random.default_rng(11))
    np.testing.assert_array_equal(again.values, drawn.values)
    assert again.memory_mib is not None
    assert drawn.memory_mib is not None
    np.testing.assert_array_equal(again.memory_mib, drawn.memory_mib)
    other = synthetic_duty_cycles(400, 1440, np.random.default_rng(12))
    assert not np.array_equal(other.values, drawn.values)
    assert drawn.names[0] == "synth-genai-00000"
    assert drawn.interval_s == 60


def test_fit_recovers_the_statistics_of_synthetic_data(drawn: LoadSeries) -> None:
    params = default_genai_params()
    refit = fit_genai(drawn, source="synthetic")
    assert refit.mean_duty == pytest.approx(params.mean_duty, rel=0.1)
    assert refit.zero_share == pytest.approx(params.zero_share, abs=0.03)
    assert refit.latent_ar1 == pytest.approx(params.latent_ar1, abs=0.05)
    np.testing.assert_allclose(refit.diurnal, params.diurnal, atol=0.35)
    # memory over time: the copula's latent autocorrelation and the median level come back
    assert refit.memory_latent_ar1 is not None
    assert params.memory_latent_ar1 is not None
    assert refit.memory_latent_ar1 == pytest.approx(params.memory_latent_ar1, abs=0.05)
    assert refit.memory_level_share is not None
    assert params.memory_level_share is not None
    assert refit.memory_level_share == pytest.approx(params.memory_level_share, abs=0.05)
    assert refit.memory_profile_quantiles is not None
    assert params.memory_profile_quantiles is not None
    assert refit.memory_profile_quantiles[50] == pytest.approx(
        params.memory_profile_quantiles[50], abs=0.03
    )


def test_synthetic_memory_profile_has_the_real_levels_per_series(drawn: LoadSeries) -> None:
    prof = drawn.memory_profile
    params = default_genai_params()
    assert prof is not None
    assert params.memory_profile_quantiles is not None
    assert prof.shape == drawn.values.shape
    assert 0.0 <= prof.min() <= prof.max() <= 1.0
    # pooled values follow the fitted quantiles; series differ in level, as real pods do
    assert float(np.median(prof)) == pytest.approx(params.memory_profile_quantiles[50], abs=0.02)
    means = prof.mean(axis=1)
    assert means.std() > 0.5 * float(np.median(prof.std(axis=1)))


def test_parameter_files_without_memory_fields_still_load() -> None:
    data = json.loads(default_genai_params().to_json())
    for key in ("memory_profile_quantiles", "memory_level_share", "memory_latent_ar1"):
        del data[key]
    old = GenaiParams.from_json(json.dumps(data), "old.json")
    assert old.memory_latent_ar1 is None
    assert synthetic_duty_cycles(3, 10, np.random.default_rng(0), params=old).memory_profile \
        is None


def test_params_round_trip_and_reject_bad_files() -> None:
    params = default_genai_params()
    assert GenaiParams.from_json(params.to_json()) == params
    with pytest.raises(InputError, match="not valid JSON"):
        GenaiParams.from_json("{", "p.json")
    with pytest.raises(InputError, match="format"):
        GenaiParams.from_json("{}", "p.json")
    bad = replace(params, diurnal=[1.0] * 3)
    with pytest.raises(InputError, match="24 diurnal"):
        GenaiParams.from_json(bad.to_json(), "p.json")
    half = replace(params, memory_latent_ar1=None)
    with pytest.raises(InputError, match="go together"):
        GenaiParams.from_json(half.to_json(), "p.json")
    wrong = replace(params, memory_profile_quantiles=[1.5] * 101)
    with pytest.raises(InputError, match="memory profile quantiles"):
        GenaiParams.from_json(wrong.to_json(), "p.json")
    with pytest.raises(InputError, match="n_series"):
        synthetic_duty_cycles(-1, 10, np.random.default_rng(0))


@pytest.mark.shared_data
def test_refitting_the_real_trace_reproduces_the_shipped_parameters() -> None:
    if not DUTY.exists():
        pytest.skip("../shared/data/alibaba-genai-v2026 is absent")
    series, _ = load_duty_cycles(DUTY, memory_path=MEMORY)
    refit = asdict(fit_genai(series, source=Path(DUTY).name))
    shipped = asdict(default_genai_params())
    assert refit.keys() == shipped.keys()
    for key, value in shipped.items():
        if isinstance(value, list):
            np.testing.assert_allclose(refit[key], value, atol=1e-5, err_msg=key)
        elif isinstance(value, float):
            assert refit[key] == pytest.approx(value, abs=1e-5), key
        else:
            assert refit[key] == value, key
