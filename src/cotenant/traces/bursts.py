"""Online load inside the minute: a burst model fitted to the GenAI trace's own variability.

The GenAI duty cycles are sampled once a minute, but a service's load is not flat inside one:
its requests (the trace's ``qps`` series: mostly one request in a sample window, none in 84% of
them) arrive in bursts, and a guard that reacts in a fraction of a second meets those bursts,
not the minute's mean. The model splits every minute of every series into ``k`` sub-steps
whose loads average to the minute's duty cycle: ``load[k] = duty * k * w[k]`` with
``w ~ Dirichlet(alpha)``, and a sub-step above 1 (the GPU busy all of it) gives its excess to
the others in proportion to their room, so the minute keeps its mean whenever it fits.

The fit: the trace's variance-time curve (the squared coefficient of variation of each series
aggregated over 1, 2, 4 and 8 minutes, median over series with a mean duty above 1%) falls
with slope ``beta`` on a log-log plot (self-similar load, Hurst exponent ``1 + beta / 2``).
Extended down to ``60 / k`` seconds it gives the variance the sub-steps must have; the part the
minutes do not already carry is ``c = (CV2_1 (k^-beta - 1)) / (1 + CV2_1)`` for multiplicative
weights, and a ``k``-part Dirichlet has that variance at ``alpha = ((k - 1) / c - 1) / k``
(:func:`fit_alpha`). On the real trace (106 series, 1,369 minutes) ``beta`` is -0.33
(H = 0.84), ``CV2_1`` 2.47 and, at ``k = 6``, ``alpha`` = 1.29 (:data:`DEFAULT_ALPHA`). The
request series alone gives a steeper slope (-0.46, H = 0.77), so burstier sub-steps; the
default follows the duty cycles, which are the load itself. Smaller ``alpha``: burstier.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from cotenant.errors import InputError

FloatArray = npt.NDArray[np.float64]
DEFAULT_SUBSTEPS = 6
DEFAULT_ALPHA = 1.29
"""``fit_alpha`` on the GenAI duty cycles at six sub-steps (module docstring)."""


def variance_time(values: FloatArray, scales: tuple[int, ...] = (1, 2, 4, 8)) -> list[float]:
    """Median over series (mean duty > 1%) of the squared coefficient of variation of the
    series averaged over each of ``scales`` intervals."""
    v = np.asarray(values, dtype=np.float64)
    out = []
    for m in scales:
        n = v.shape[1] // m
        if n < 2:
            raise InputError("load", f"{v.shape[1]} intervals are too few to aggregate by {m}")
        agg = v[:, :n * m].reshape(v.shape[0], n, m).mean(axis=2)
        mu = agg.mean(axis=1)
        ok = mu > 0.01
        if not ok.any():
            raise InputError("load", "no series has a mean duty above 1%")
        cv2 = ((agg[ok] - mu[ok, None]) ** 2).mean(axis=1) / mu[ok] ** 2
        out.append(float(np.median(cv2)))
    return out


def fit_alpha(values: FloatArray, k: int = DEFAULT_SUBSTEPS) -> tuple[float, float, float]:
    """``(alpha, beta, cv2_1)`` for ``k`` sub-steps from per-interval duty cycles ``values``
    (series x intervals), as the module docstring derives it."""
    scales = (1, 2, 4, 8)
    cv2 = variance_time(values, scales)
    beta = float(np.polyfit(np.log(scales), np.log(cv2), 1)[0])
    c = cv2[0] * (k ** (-beta) - 1.0) / (1.0 + cv2[0])
    if not c > 0.0:
        return math.inf, beta, cv2[0]
    return max(((k - 1) / c - 1.0) / k, 1e-3), beta, cv2[0]


def _cap(load: FloatArray) -> FloatArray:
    """Give every sub-step's excess over 1 to its minute's other sub-steps, by their room."""
    out = load.copy()
    for _ in range(8):
        excess = np.maximum(out - 1.0, 0.0).sum(axis=-1, keepdims=True)
        if not (excess > 1e-12).any():
            break
        out = np.minimum(out, 1.0)
        room = 1.0 - out
        total = room.sum(axis=-1, keepdims=True)
        share = np.where(total > 0.0, room / np.where(total > 0.0, total, 1.0), 0.0)
        out = out + np.minimum(excess, total) * share
    return np.minimum(out, 1.0)


def sub_steps(values: FloatArray, k: int, alpha: float, rng: np.random.Generator) -> FloatArray:
    """(series, intervals, k) loads whose mean over ``k`` is each interval's value (where the
    interval's value fits: at most 1 everywhere). ``alpha`` = inf: flat minutes."""
    v = np.asarray(values, dtype=np.float64)
    if k < 1:
        raise InputError("substeps", f"{k} must be >= 1")
    if not alpha > 0.0:
        raise InputError("burst alpha", f"{alpha:g} must be > 0 (inf: no bursts)")
    if k == 1 or math.isinf(alpha):
        return np.repeat(v[:, :, None], k, axis=2)
    w = rng.gamma(alpha, 1.0, size=(*v.shape, k))
    w /= np.maximum(w.sum(axis=2, keepdims=True), 1e-300)
    return _cap(v[:, :, None] * k * w)
