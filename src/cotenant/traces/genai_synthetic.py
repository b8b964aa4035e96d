"""Synthetic GPU duty-cycle series fitted to the Alibaba GenAI serving trace.

The embedded default of the co-location simulator needs online-service load without the trace
on disk, at any scale. The generator is deliberately simple; what it reproduces, and how:

* **per-series mean**: drawn by inverse transform from the 101 quantiles of the real series'
  means (most pods run at ~5-6%, a few at 10-28%, some near 0);
* **zeros and bursts**: serving pods are idle ~59% of the minutes. A latent Gaussian AR(1)
  process ``z`` (unit variance) is thresholded: ``load ~ max(0, z - c_t)``, so the pod is
  idle while ``z`` is under the cut and busy stretches come as bursts of random length and
  height;
* **diurnal shape**: 24 hourly multipliers ``D`` (mean 1) of the cross-series mean load, hour
  0 being the trace's first hour (its timestamps are anonymised, so the clock hour is
  unknown), interpolated linearly and circularly. The time of day changes *how often* a pod
  is busy, not how hard: ``P(z > c_t) = (1 - zero_share) * D(t)``, and each busy burst is
  scaled so the expected load at ``t`` is ``mean * D(t)``. (Scaling the heights by ``D``
  instead overshoots the real 99th percentile by a third.) ``D`` is rescaled to average 1
  over the generated horizon, so every horizon has the mean load ``mean``: over whole days
  this changes nothing, and a run shorter than a day gets the shape of its hours at the
  day's mean level, not the level of those hours (the fit depends on it: the real trace
  covers 22.8 h). The overall idle share is ``zero_share``;
* **autocorrelation**: the latent AR(1) coefficient is fitted by bisection so that the
  generated series have the real pooled lag-1 autocorrelation (of deviations from each
  series' mean), generated with a fixed seed so the fit is deterministic;
* **memory**: peak memory per series drawn from the quantiles of the real peaks, when fitted
  with the memory file; and memory used over time as a fraction of that peak, a Gaussian
  copula. The real profiles' values are turned into normal scores (pooled ranks); a share
  ``memory_level_share`` of the scores' variance lies *between* series (some pods sit near
  their peak, others far below it) and the rest is a within-series AR(1) of coefficient
  ``memory_latent_ar1`` (the pooled lag-1 autocorrelation of the scores' deviations from their
  series' mean). A synthetic series is ``sqrt(b) Z_i + sqrt(1 - b) AR(1)_t``, mapped through
  the 101 quantiles of the real profile values. Like the real profiles on the grid, a series
  need not touch 1 (a peak between two grid points is missed). (The real profiles sit at a
  median 61% of their peak and correlate weakly and negatively with the duty cycle; the
  generator keeps memory and duty independent.)

Values are clipped to [0, 1].
The parameters ship as ``params/genai_default.json`` (``cotenant trace genai PATH --out``
refits them).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from importlib import resources

import numpy as np
from scipy.signal import lfilter
from scipy.special import ndtr, ndtri
from scipy.stats import rankdata

from cotenant.errors import InputError
from cotenant.traces.series import LoadSeries
from cotenant.traces.synthetic import QUANTILES, params_json

FORMAT = "cotenant/genai-params/v1"
ZERO = 1e-3
"""A duty cycle below this fraction (0.1%) counts as idle."""
FIT_SEED = 20260
"""Seed of the simulations that fit the latent AR(1) coefficient (keeps the fit reproducible)."""


@dataclass(frozen=True)
class GenaiParams:
    """Fitted parameters of the synthetic duty-cycle generator (fractions 0..1)."""

    source: str
    series: int  # series fitted
    interval_s: int  # grid step of the fitted series
    mean_quantiles: list[float]  # 101 quantiles of per-series mean duty
    zero_share: float  # share of grid points idle (< ZERO)
    latent_ar1: float  # AR(1) coefficient of the latent Gaussian
    lag1_autocorr: float  # pooled lag-1 autocorrelation it reproduces
    diurnal: list[float]  # 24 hourly multipliers, mean 1
    mean_duty: float  # mean duty over all fitted points
    memory_mib_quantiles: list[float] | None  # 101 quantiles of peak memory per series
    memory_profile_quantiles: list[float] | None = None  # 101 quantiles of use / peak
    memory_level_share: float | None = None  # share of score variance between series
    memory_latent_ar1: float | None = None  # within-series lag-1 autocorrelation of scores

    @property
    def memory_model(self) -> tuple[list[float], float, float] | None:
        """The memory-profile quantiles, level share and latent AR(1), or None when the file
        has none (the three go together, see :meth:`from_json`)."""
        q, level = self.memory_profile_quantiles, self.memory_level_share
        ar1 = self.memory_latent_ar1
        return None if q is None or level is None or ar1 is None else (q, level, ar1)

    def to_json(self) -> str:
        return json.dumps({"format": FORMAT, **asdict(self)}, indent=1)

    @staticmethod
    def from_json(text: str, where: str = "params") -> GenaiParams:
        data = params_json(text, where, FORMAT, "GenAI parameters")
        try:
            params = GenaiParams(**data)
        except TypeError as exc:
            raise InputError(where, f"missing or unknown field: {exc}") from exc
        if len(params.mean_quantiles) != len(QUANTILES) or len(params.diurnal) != 24:
            raise InputError(where, "need 101 mean quantiles and 24 diurnal multipliers")
        if not (0.0 <= params.zero_share < 1.0 and 0.0 <= params.latent_ar1 < 1.0):
            raise InputError(where, "zero_share and latent_ar1 must lie in [0, 1)")
        fields = (params.memory_profile_quantiles, params.memory_level_share,
                  params.memory_latent_ar1)
        model = params.memory_model
        if model is None and any(x is not None for x in fields):
            raise InputError(where, "memory_profile_quantiles, memory_level_share and "
                             "memory_latent_ar1 go together")
        if model is not None and (
            len(model[0]) != len(QUANTILES) or not all(0.0 <= q <= 1.0 for q in model[0])
            or not 0.0 <= model[1] < 1.0 or not 0.0 <= model[2] < 1.0
        ):
            raise InputError(where, "need 101 memory profile quantiles in [0, 1], and a level "
                             "share and a latent AR(1) in [0, 1)")
        return params


def default_genai_params() -> GenaiParams:
    """The parameters fitted to the real GenAI duty-cycle trace (package data)."""
    text = resources.files("cotenant.traces").joinpath("params/genai_default.json").read_text()
    return GenaiParams.from_json(text, "genai_default.json")


def _diurnal_curve(diurnal: list[float], n_intervals: int, interval_s: int) -> np.ndarray:
    hours = np.arange(n_intervals) * interval_s / 3600.0
    centres = np.arange(25) + 0.5  # hour h's multiplier sits at h + 0.5, wrapping at 24
    values = np.append(diurnal, diurnal[0])
    return np.asarray(np.interp((hours - 0.5) % 24 + 0.5, centres, values), dtype=np.float64)


def _generate(
    params: GenaiParams,
    ar1: float,
    n_series: int,
    n_intervals: int,
    interval_s: int,
    rng: np.random.Generator,
) -> np.ndarray:
    means = np.interp(rng.random(n_series), QUANTILES, params.mean_quantiles)
    latent = _latent(ar1, n_series, n_intervals, rng)
    curve = _diurnal_curve(params.diurnal, n_intervals, interval_s)
    curve = curve / curve.mean()
    busy = np.clip((1.0 - params.zero_share) * curve, 1e-6, 1.0 - 1e-6)  # P(load > 0) at t
    cut = ndtri(1.0 - busy)
    expected = np.exp(-cut * cut / 2) / math.sqrt(2 * math.pi) - cut * (1.0 - ndtr(cut))
    values = means[:, None] * (curve / expected)[None, :] * np.maximum(latent - cut, 0.0)
    out: np.ndarray = np.clip(values, 0.0, 1.0)
    return out


def synthetic_duty_cycles(
    n_series: int,
    n_intervals: int,
    rng: np.random.Generator,
    *,
    interval_s: int = 60,
    params: GenaiParams | None = None,
) -> LoadSeries:
    """``n_series`` duty-cycle series of ``n_intervals`` steps drawn from ``params`` (the
    embedded default when ``None``); deterministic for a seeded ``rng``."""
    if n_series < 0 or n_intervals < 1 or interval_s < 1:
        raise InputError(
            "synthetic",
            f"need n_series >= 0, n_intervals >= 1, interval_s >= 1 (got "
            f"{n_series}, {n_intervals}, {interval_s})",
        )
    p = params if params is not None else default_genai_params()
    values = _generate(p, p.latent_ar1, n_series, n_intervals, interval_s, rng)
    memory = profile = None
    if p.memory_mib_quantiles is not None:
        memory = np.interp(rng.random(n_series), QUANTILES, p.memory_mib_quantiles)
    if p.memory_model is not None:
        profile = _memory_profile(*p.memory_model, n_series, n_intervals, rng)
    names = tuple(f"synth-genai-{i:05d}" for i in range(n_series))
    return LoadSeries(names, interval_s, 0.0, values, memory, profile)


def _latent(ar1: float, n_series: int, n_intervals: int, rng: np.random.Generator) -> np.ndarray:
    """Stationary unit-variance Gaussian AR(1) series, one per row."""
    shocks = rng.standard_normal((n_series, n_intervals))
    start = ar1 * rng.standard_normal((n_series, 1))
    out: np.ndarray = lfilter([math.sqrt(1.0 - ar1 * ar1)], [1.0, -ar1], shocks, axis=1,
                              zi=start)[0]
    return out


def _memory_profile(
    quantiles: list[float], level: float, ar1: float, n_series: int, n_intervals: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Memory used over time as a fraction of each series' peak (see the module docstring)."""
    within = _latent(ar1, n_series, n_intervals, rng)
    latent = math.sqrt(level) * rng.standard_normal((n_series, 1)) + math.sqrt(1.0 - level) * within
    out: np.ndarray = np.interp(ndtr(latent), QUANTILES, quantiles)
    return out


def pooled_lag1(values: np.ndarray) -> float:
    """Lag-1 autocorrelation of deviations from each series' mean, pooled over series."""
    dev = values - values.mean(axis=1, keepdims=True)
    denom = float((dev * dev).sum())
    return float((dev[:, 1:] * dev[:, :-1]).sum() / denom) if denom > 0 else 0.0


def fit_genai(series: LoadSeries, source: str = "alibaba-genai-v2026") -> GenaiParams:
    """Fit :class:`GenaiParams` to loaded series (see the module docstring)."""
    v = series.values
    if v.shape[0] == 0 or v.shape[1] < 2:
        raise InputError(source, "need at least one series of two or more points to fit")
    hour = (np.arange(v.shape[1]) * series.interval_s // 3600) % 24
    column = v.mean(axis=0)
    seen = np.unique(hour)
    by_hour = np.array([column[hour == h].mean() for h in seen])
    ring = np.concatenate([seen - 24, seen, seen + 24])
    diurnal = np.interp(np.arange(24), ring, np.tile(by_hour, 3))
    diurnal = diurnal / diurnal.mean() if diurnal.mean() > 0 else np.ones(24)
    memory = None
    if series.memory_mib is not None and not np.isnan(series.memory_mib).all():
        memory = _rounded(np.nanquantile(series.memory_mib, QUANTILES))
    mem_q, level, mem_ar1 = _fit_memory_profile(series.memory_profile)
    draft = GenaiParams(
        source=source,
        series=int(v.shape[0]),
        interval_s=series.interval_s,
        mean_quantiles=_rounded(np.quantile(v.mean(axis=1), QUANTILES)),
        zero_share=round(float((v < ZERO).mean()), 6),
        latent_ar1=0.0,
        lag1_autocorr=round(pooled_lag1(v), 6),
        diurnal=_rounded(diurnal),
        mean_duty=round(float(v.mean()), 6),
        memory_mib_quantiles=memory,
        memory_profile_quantiles=mem_q,
        memory_level_share=level,
        memory_latent_ar1=mem_ar1,
    )
    return GenaiParams(**{**asdict(draft), "latent_ar1": _fit_ar1(draft, v.shape)})


def _fit_memory_profile(
    profile: np.ndarray | None,
) -> tuple[list[float] | None, float | None, float | None]:
    """Over the series that have a profile: quantiles of its values, the share of their normal
    scores' (pooled ranks) variance between series, and the within-series lag-1
    autocorrelation of the scores; each share clamped to what the generator accepts."""
    if profile is None:
        return None, None, None
    rows = profile[~np.isnan(profile).any(axis=1)]
    if rows.size == 0 or rows.shape[1] < 2:
        return None, None, None
    scores = ndtri((rankdata(rows, axis=None) - 0.5) / rows.size).reshape(rows.shape)
    total = float(scores.var())
    level = float(scores.mean(axis=1).var()) / total if total > 0 else 0.0
    return (
        _rounded(np.quantile(rows, QUANTILES)),
        round(min(max(level, 0.0), 0.99), 6),
        round(min(max(pooled_lag1(scores), 0.0), 0.995), 6),
    )


def _fit_ar1(params: GenaiParams, shape: tuple[int, ...]) -> float:
    """Bisection on the latent coefficient for the target pooled lag-1 autocorrelation."""
    lo, hi = 0.0, 0.995
    for _ in range(30):
        mid = (lo + hi) / 2
        rng = np.random.default_rng(FIT_SEED)
        got = pooled_lag1(_generate(params, mid, shape[0], shape[1], params.interval_s, rng))
        lo, hi = (mid, hi) if got < params.lag1_autocorr else (lo, mid)
    return round((lo + hi) / 2, 6)


def _rounded(values: np.ndarray) -> list[float]:
    return [round(float(x), 6) for x in values]
