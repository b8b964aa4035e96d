"""Online latency and offline speed under MPS SM shares and time slicing, vectorised.

Every constant below is copied from ``../shared/reference/calibration.md`` (which names the
public artefact each number comes from), read from the Tally tables shipped in
``perf/data`` (:mod:`cotenant.perf.published`, shared with the pair predictor), or is a fit
to those numbers done here:

* **Latency vs SM share** (calibration.md section 2, MIGER ``jobs/profile/online_profile``,
  A100-80GB 7g instance, batch 32): the MPS active-thread rows 100..30% per model. We fit
  ``latency(p) = L100 * (a + (1 - a) / p)`` per model by least squares on ``a`` (closed form,
  done at import from the rows below); ``a`` is the share of the batch that does not speed up
  with more SMs. ``speed(p) = 1 / (a + (1 - a) / p)`` is the relative serving speed.
* **Offline speed vs SM share** (sections 2 and 4). MIGER publishes training runtimes per
  MIG slice only (``offline_result``), and a MIG slice cuts memory bandwidth and L2 with the
  SMs, where an MPS limit cuts SMs alone. The same law fitted to MIGER's online rows shows the
  difference on one GPU: per model, ``a`` from the MPS rows (inside a 7g instance) exceeds
  ``a`` from the MIG rows (``online_result``, relative to 7g) by 0.07 (BERT) to 0.34
  (ResNet-50), median :data:`MPS_MIG_GAP`. The offline curve is therefore the median MIG fit
  over the training jobs whose rows are monotone (mobilenet, SqueezeNet and GAN are flat,
  i.e. input-bound, and left out), relative to 7g, plus that median gap. Cross-check: Gavel's
  V100 pairs (two training jobs under space sharing) have a median combined normalised
  throughput of 1.35 (calibration.md section 0), which an equal split implies at ``a = 0.52``.
* **Queueing** (our modelling choice, not from a source): a service with solo duty cycle
  ``load`` on the whole GPU runs at utilisation ``rho = load / speed(p) * interference``, with
  batch time ``S = L100 * interference / speed(p)``. Its p99 is ``S`` plus the 99th
  percentile of an M/D/1 wait under Kingman's mean ``E[W] = rho S / (2 (1 - rho))`` with an
  exponential tail: ``P(W > t) = rho * exp(-2 (1 - rho) t / S)``, hence
  ``p99 = S * (1 + max(0, ln(100 rho)) / (2 (1 - rho)))``; infinite at ``rho >= 1``.
* **Interference** between an online service and its co-runner, per sharing mechanism, is
  :mod:`cotenant.perf.interference` (one source and one statistic for every mechanism);
  :data:`TALLY_HP_LOAD` below is the duty cycle its Tally ratios are solved at: Tally runs
  its server at "load 0.5" of its request capacity, which alone keeps a kernel running
  44.7% of the time; ``load`` here is that duty cycle.
* **Memory** (section 3, Tally ``single-job-perf.csv``): training footprints 9,615-18,129 MB,
  inference-server footprints 1,475 and 15,915 MB on a 40,960 MB GPU.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from cotenant.perf import published
from cotenant.perf.measured import MIGER_ONLINE_MS

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

MIG_SM_FRACTION = (1.0, 56 / 98, 42 / 98, 28 / 98, 14 / 98)
"""SMs of each MIG slice relative to a 7g instance (calibration.md section 0)."""
MIG_LATENCY_MS: dict[str, tuple[float | None, ...]] = {
    m: tuple(reversed(MIGER_ONLINE_MS[m])) for m in MPS_LATENCY_MS
}
"""MIGER ``online_result`` for the same models (:mod:`cotenant.perf.measured`), ms per
batch-32 inference on 7g, 4g, 3g, 2g, 1g (A100-80GB); None where the source reports an error."""

# MIGER offline_result: seconds for the fixed job on 7g, 4g, 3g, 2g, 1g (A100-80GB).
OFFLINE_RUNTIME_S: dict[str, tuple[float, ...]] = {
    "resnet50": (77.0, 114.6, 131.9, 209.1, 390.5),
    "resnet152": (150.1, 227.3, 263.4, 424.1, 813.2),
    "bert": (23.9, 41.4, 52.7, 80.5, 157.6),
    "transformer": (21.4, 31.8, 39.9, 55.3, 101.8),
    "unet": (132.9, 182.1, 219.7, 322.9, 596.1),
    "deeplabv3": (10.4, 16.0, 17.9, 29.1, 55.8),
}

# Tally priority-aware-perf.csv (``perf/data/tally_pairs.csv``): means over the 12 pairs,
# rounded to two decimals as calibration.md section 3 reports them.
_PAIRS = published.tally_pairs()
_MECH = {"mps": "mps", "mps-priority": "mps_priority", "time-slicing": "time_slicing"}
P99_RATIO = {
    k: round(float(np.mean([p.hp_p99_ratio[m] for p in _PAIRS])), 2) for k, m in _MECH.items()
}
BE_NORMALISED_TPUT = {
    k: round(float(np.mean([p.be_norm_tput[m] for p in _PAIRS])), 2) for k, m in _MECH.items()
}
MPS_LIMITED_INTERFERENCE = min(p.hp_p99_ratio["mps_priority"] for p in _PAIRS)
"""Residual online slowdown beside an offline job when MPS limits SMs (smallest MPS-priority
p99 ratio in Tally's table, 1.27); an assumption documented in the module docstring."""
TALLY_HP_LOAD = round(float(np.mean(
    [j.gpu_util for j in published.tally_jobs() if j.kind == "inference-server"]
)), 7)
"""The inference server's solo duty cycle in Tally's co-location runs (0.447). Tally runs it
at "load 0.5", half its request capacity; alone it keeps a kernel running 45.2% (llama-2-7b)
and 44.2% (BERT) of the time (``single-job-perf.csv``). ``load`` here is that duty cycle, as
nvidia-smi and the GenAI trace report it."""

# Tally single-job-perf.csv (``perf/data/tally_jobs.csv``): footprints (MB), memory-bandwidth
# and GPU utilisation of the training jobs, in file order (a job profile is an index here).
# The file's percentages have at most five decimals; rounding the fractions to seven drops
# the division's last-bit noise, so the values are the decimals the file states.
_TRAINING = [j for j in published.tally_jobs() if j.kind == "training"]
TRAINING_MEMORY_MB = tuple(j.memory_mb for j in _TRAINING)
TRAINING_GPU_UTIL = tuple(round(j.gpu_util, 7) for j in _TRAINING)
TRAINING_MEM_UTIL = tuple(round(j.mem_util, 7) for j in _TRAINING)
SERVER_MEMORY_FRACTION = float(np.mean(
    [j.memory_mb for j in published.tally_jobs() if j.kind == "inference-server"]
)) / published.tally_gpu_memory_mib()
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


def mig_serial_fraction(row: tuple[float | None, ...]) -> float:
    """``a`` of one MIG row (relative to 7g), over the slices the source measured."""
    ok = [i for i, v in enumerate(row) if v is not None]
    shares = np.array([MIG_SM_FRACTION[i] for i in ok])
    times = np.array([row[i] for i in ok], dtype=np.float64)
    return fit_serial_fraction(shares, times / times[0])


def _mps_mig_gap(online: dict[str, float]) -> float:
    gaps = [online[m] - mig_serial_fraction(row) for m, row in MIG_LATENCY_MS.items()]
    return float(np.median(gaps))


SERIAL_FRACTION: dict[str, float] = _fit_online()
MPS_MIG_GAP: float = _mps_mig_gap(SERIAL_FRACTION)
"""Median over models of ``a`` under an MPS limit minus ``a`` on MIG slices (MIGER)."""
OFFLINE_SERIAL_FRACTION_MIG: float = float(
    np.median([mig_serial_fraction(row) for row in OFFLINE_RUNTIME_S.values()])
)
"""The training curve on MIG slices (memory cut with the SMs)."""
OFFLINE_SERIAL_FRACTION: float = min(1.0, OFFLINE_SERIAL_FRACTION_MIG + MPS_MIG_GAP)
"""The training curve under an MPS SM limit (see the module docstring)."""
L100_MS: dict[str, float] = {m: row[0] for m, row in MPS_LATENCY_MS.items()}
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
    load: FloatArray, share: FloatArray, serial: FloatArray | float, l100: FloatArray | float,
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


def busy_beside(load: float, share: float, serial: float, overlap: float) -> float:
    """Share of time a service of solo duty ``load`` is busy (what NVML shows as its SM
    utilisation) beside a co-runner that holds all but ``share`` of the SMs ``overlap`` of
    the time (its own busy fraction) and leaves it the whole GPU otherwise; at most 1."""
    slow = overlap / float(speed(share, serial)) + (1.0 - overlap)
    return min(1.0, load * slow)


def load_beside(busy: float, share: float, serial: float, overlap: float) -> float:
    """The solo duty of a service busy ``busy`` of the time beside such a co-runner: the
    inverse of :func:`busy_beside` below saturation."""
    return busy / (overlap / float(speed(share, serial)) + (1.0 - overlap))


def violation_share(
    load: FloatArray, stretch: FloatArray | float, l100: FloatArray | float,
    slo_ms: FloatArray, share: FloatArray | float = 1.0, serial: FloatArray | float = 0.0,
) -> FloatArray:
    """Share of requests slower than ``slo_ms``: the same queue as :func:`p99_ms` (batch time
    ``S = l100 / speed(share) * stretch``, utilisation ``rho = load * S / l100``, wait tail
    ``P(W > t) = rho exp(-2 (1 - rho) t / S)``), so ``P(W + S > SLO)``: 1 where ``S >= SLO``
    or the queue is unstable, and 0 at no load."""
    v = speed(share, serial) / np.asarray(stretch, dtype=np.float64)
    service = np.asarray(l100, dtype=np.float64) / v
    rho = np.asarray(load, dtype=np.float64) / v
    slack = np.asarray(slo_ms, dtype=np.float64) - service
    stable = rho < 1.0
    safe_rho = np.where(stable, rho, 0.5)
    tail = safe_rho * np.exp(-2.0 * (1.0 - safe_rho) * np.maximum(slack, 0.0) / service)
    out = np.where(stable & (slack > 0.0), np.minimum(tail, 1.0), 1.0)
    return np.asarray(np.where(rho <= 0.0, 0.0, out), dtype=np.float64)
