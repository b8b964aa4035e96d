"""Online latency and offline speed under MPS SM shares and time slicing, vectorised.

Every constant below is copied from ``../shared/reference/calibration.md`` (which names the
public artefact each number comes from) or is a fit to those numbers done here:

* **Latency vs SM share** (calibration.md section 2, MIGER ``jobs/profile/online_profile``,
  A100-80GB 7g instance, batch 32): the MPS active-thread rows 100..30% per model. We fit
  ``latency(p) = L100 * (a + (1 - a) / p)`` per model by least squares on ``a`` (closed form,
  done at import from the rows below); ``a`` is the share of the batch that does not speed up
  with more SMs. ``speed(p) = 1 / (a + (1 - a) / p)`` is the relative serving speed.
* **Offline speed vs SM share** (section 2, MIGER ``offline_result``): runtime per MIG slice
  with the slice's SMs (14/28/42/56/98 of 108, section 0). The same law fitted to every model
  whose rows are monotone (mobilenet, SqueezeNet and GAN are flat, i.e. input-bound, and left
  out); the median ``a`` is the offline curve.
* **Queueing** (our modelling choice, not from a source): a service with solo duty cycle
  ``load`` on the whole GPU runs at utilisation ``rho = load / speed(p) * interference``. Its
  p99 is the batch latency plus the 99th percentile of an M/D/1 wait under Kingman's
  exponential approximation: ``P(W > t) = rho * exp(-2 (1 - rho) t / (rho S))``, hence
  ``p99 = S * (1 + max(0, ln(100 rho)) / (2 (1 - rho)))``; infinite at ``rho >= 1``.
* **Interference by mode** (section 3, Tally ``priority-aware-perf.csv``, 12 pairs, A100-40GB):
  mean HP p99 ratio MPS 3.90, MPS-priority 2.96, time slicing 2.38; mean BE normalised
  throughput MPS 0.87, MPS-priority 0.85, time slicing 0.54. With an MPS SM *limit* the online
  service keeps its SMs, so only memory-system contention remains; we take the smallest
  MPS-priority ratio seen (1.27, llama-2-7b with ResNet-50 training) as that residual factor
  and apply it to the batch latency whenever an offline job runs beside (an assumption).
* **Memory** (section 3, Tally ``single-job-perf.csv``): training footprints 9,615-18,129 MB,
  inference-server footprints 1,475 and 15,915 MB on a 40,960 MB GPU.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

MPS_PERCENT = (100, 90, 80, 70, 60, 50, 40, 30)
# MIGER online_profile, 1c-7g-80gb row per model (ms per batch-32 inference).
MPS_LATENCY_MS: dict[str, tuple[float, ...]] = {
    "resnet50": (14.8, 15.4, 16.6, 17.6, 20.5, 23.2, 27.4, 35.7),
    "resnet152": (32.4, 33.4, 35.6, 37.1, 45.3, 49.5, 57.4, 75.3),
    "vgg16": (22.2, 23.6, 25.0, 27.6, 31.0, 36.3, 44.3, 59.8),
    "inception_v3": (16.6, 17.7, 18.9, 20.8, 23.1, 27.0, 32.4, 42.3),
    "mobilenet_v2": (7.6, 7.9, 8.5, 9.1, 10.2, 11.7, 14.1, 18.4),
    "unet": (28.0, 27.5, 29.7, 32.1, 35.6, 41.7, 50.6, 66.8),
    "bert": (133.9, 142.8, 154.1, 168.5, 188.9, 219.7, 266.0, 346.0),
    "deeplabv3": (133.7, 133.9, 139.3, 144.4, 150.2, 162.5, 178.4, 207.4),
}
ONLINE_MODELS: tuple[str, ...] = tuple(MPS_LATENCY_MS)

# MIGER offline_result: seconds for the fixed job on full GPU, 7g, 4g, 3g, 2g, 1g (A100-80GB).
_SLICE_SM_FRACTION = (1.0, 98 / 108, 56 / 108, 42 / 108, 28 / 108, 14 / 108)
OFFLINE_RUNTIME_S: dict[str, tuple[float, ...]] = {
    "resnet50": (72.2, 77.0, 114.6, 131.9, 209.1, 390.5),
    "resnet152": (142.7, 150.1, 227.3, 263.4, 424.1, 813.2),
    "bert": (23.1, 23.9, 41.4, 52.7, 80.5, 157.6),
    "transformer": (20.4, 21.4, 31.8, 39.9, 55.3, 101.8),
    "unet": (121.7, 132.9, 182.1, 219.7, 322.9, 596.1),
    "deeplabv3": (10.6, 10.4, 16.0, 17.9, 29.1, 55.8),
}

# Tally priority-aware-perf.csv, means over the 12 pairs (calibration.md section 3).
P99_RATIO = {"mps": 3.90, "mps-priority": 2.96, "time-slicing": 2.38}
BE_NORMALISED_TPUT = {"mps": 0.87, "mps-priority": 0.85, "time-slicing": 0.54}
MPS_LIMITED_INTERFERENCE = 1.27
"""Residual online slowdown beside an offline job when MPS limits SMs (smallest MPS-priority
p99 ratio in Tally's table); an assumption documented in the module docstring."""

# Tally single-job-perf.csv footprints (MB) and solo GPU utilisation of the training jobs.
TRAINING_MEMORY_MB = (9717.0, 12685.0, 11285.0, 14131.0, 18129.0, 9615.0)
TRAINING_GPU_UTIL = (0.49994, 0.99506, 0.9323, 0.89767, 0.8945, 0.98041)
TRAINING_MEM_UTIL = (0.12714, 0.10586, 0.31347, 0.29368, 0.34834, 0.24445)
SERVER_MEMORY_FRACTION = (1475.0 + 15915.0) / 2 / 40960.0
"""Mean inference-server footprint over the A100-40GB memory (Tally), for pods without one."""


def fit_serial_fraction(shares: FloatArray, relative_latency: FloatArray) -> float:
    """Least-squares ``a`` in ``relative_latency = a + (1 - a) / shares`` (closed form)."""
    x = 1.0 - 1.0 / shares
    y = relative_latency - 1.0 / shares
    return float(np.clip(np.dot(x, y) / np.dot(x, x), 0.0, 1.0))


def _fit_online() -> dict[str, float]:
    shares = np.array(MPS_PERCENT, dtype=np.float64) / 100.0
    return {
        model: fit_serial_fraction(shares, np.asarray(row) / row[0])
        for model, row in MPS_LATENCY_MS.items()
    }


def _fit_offline() -> float:
    shares = np.array(_SLICE_SM_FRACTION)
    fits = [
        fit_serial_fraction(shares, np.asarray(row) / row[0])
        for row in OFFLINE_RUNTIME_S.values()
    ]
    return float(np.median(fits))


SERIAL_FRACTION: dict[str, float] = _fit_online()
L100_MS: dict[str, float] = {m: row[0] for m, row in MPS_LATENCY_MS.items()}
OFFLINE_SERIAL_FRACTION: float = _fit_offline()
ONLINE_SERIAL = np.array([SERIAL_FRACTION[m] for m in ONLINE_MODELS])
ONLINE_L100 = np.array([L100_MS[m] for m in ONLINE_MODELS])


def model_index(name: str) -> int:
    """Position of an online model in :data:`ONLINE_MODELS` (unknown: ValueError)."""
    return ONLINE_MODELS.index(name)


def speed(share: FloatArray | float, serial: FloatArray | float) -> FloatArray:
    """Relative speed at SM share ``share`` (0-1]: ``1 / (a + (1 - a) / p)``."""
    p = np.maximum(np.asarray(share, dtype=np.float64), 1e-6)
    return np.asarray(1.0 / (serial + (1.0 - np.asarray(serial)) / p), dtype=np.float64)


def offline_speed(share: FloatArray | float) -> FloatArray:
    """Offline (training) speed relative to the whole GPU at SM share ``share``; 0 at 0."""
    s = np.asarray(share, dtype=np.float64)
    return np.where(s > 0.0, speed(s, OFFLINE_SERIAL_FRACTION), 0.0)


def p99_ms(
    load: FloatArray, share: FloatArray, serial: FloatArray, l100: FloatArray,
    interference: FloatArray | float = 1.0,
) -> FloatArray:
    """Online p99 latency (ms) at solo duty ``load``, SM share ``share`` (0-1] and a slowdown
    factor ``interference`` from the co-runner; ``inf`` where the service is overloaded."""
    v = speed(share, serial) / np.asarray(interference, dtype=np.float64)
    service = l100 / v
    rho = np.asarray(load, dtype=np.float64) / v
    stable = rho < 1.0
    safe_rho = np.where(stable, rho, 0.5)
    tail = np.maximum(0.0, np.log(np.maximum(100.0 * safe_rho, 1e-12))) / (2.0 * (1.0 - safe_rho))
    return np.where(stable, service * (1.0 + tail), np.inf)


def busy_fraction(load: FloatArray, share: FloatArray, serial: FloatArray) -> FloatArray:
    """Share of time the online service has a kernel running: its load over its speed."""
    return np.minimum(1.0, np.asarray(load) / speed(share, serial))


def min_share(
    load: FloatArray, slo_ms: FloatArray, serial: FloatArray, l100: FloatArray,
    interference: FloatArray | float, step_pct: int = 1,
) -> npt.NDArray[np.int64]:
    """Smallest share (percent, multiple of ``step_pct``) whose p99 is within ``slo_ms``;
    101 where even 100% misses it. Vectorised over services by bisection on the grid."""
    load = np.asarray(load, dtype=np.float64)
    lo = np.zeros(load.shape, dtype=np.int64)  # p99 misses at lo * step (0 always misses)
    hi = np.full(load.shape, 100 // step_pct, dtype=np.int64)
    ok_full = p99_ms(load, np.ones_like(load), serial, l100, interference) <= slo_ms
    while True:
        open_ = hi - lo > 1
        if not open_.any():
            break
        mid = (lo + hi) // 2
        fits = p99_ms(load, mid * step_pct / 100.0, serial, l100, interference) <= slo_ms
        hi = np.where(open_ & fits, mid, hi)
        lo = np.where(open_ & ~fits, mid, lo)
    return np.where(ok_full, hi * step_pct, 101).astype(np.int64)
