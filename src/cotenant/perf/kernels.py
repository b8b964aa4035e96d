"""Kernel-level profiles of Tally's benchmark jobs, for the priority-sharing simulator.

A job is a repeated *unit* (an inference request, a training iteration) of GPU kernels with
idle gaps between them. Every constant comes from a shipped table:

* **kernel durations, SM demand, waves, compute/memory kind**: Orion's per-kernel profiles
  (``perf/data/orion_occupancy.csv``: duration quantiles, time-weighted SM occupancy, block
  waves, share of compute- and memory-bound kernels; V100, eth-easl/orion at aded65d). A
  unit draws its kernels from the quantiles (log-linear between them), rescaled to the
  profile's mean kernel time. Tally's jobs map to the nearest Orion profile
  (:data:`ORION_FOR`; the training jobs as :mod:`cotenant.perf.jobs` maps them).
* **an inference request's length and busy share**: Tally's single-stream latency and GPU
  utilisation (``perf/data/tally_jobs.csv``, A100-40GB): the request's kernels are scaled to
  ``latency x utilisation`` and the rest is spread as launch gaps between kernels.
* **a training iteration's idle share**: Tally's GPU utilisation of the job; the iteration's
  kernels are Orion's V100 durations as they are (Tally's batch sizes and A100 are not
  profiled per kernel anywhere public: a stated gap), followed by one idle gap.

A request longer than ``max_kernels`` kernels (Llama-2-7B: about 107 forward passes) is
coarsened by merging consecutive kernels into groups, which keeps its busy and idle time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np
import numpy.typing as npt

from cotenant.errors import InputError, UnknownNameError
from cotenant.perf import published

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int8]
QUANTILES = (0.0, 0.1, 0.5, 0.9, 0.99, 1.0)
_Q_COLUMNS = ("min_us", "p10_us", "p50_us", "p90_us", "p99_us", "max_us")
A100_SMS = 108
"""SMs of the A100 Tally measured on (calibration.md, quick-start table)."""
ORION_FOR = {
    "onnxruntime_bert": "bert_2_fwd",
    "onnxruntime_llama-2-7b": "transformer_xl_4_fwd",
    "pytorch_whisper-large-v3": "transformer_xl_8_fb1",
    "pytorch_resnet50": "resnet50_32_fb1",
    "pytorch_pointnet": "mobilenetv2_32_fb1",
    "pytorch_pegasus-x-base": "transformer_xl_8_fb1",
    "pytorch_gpt2-large": "transformer_xl_8_fb1",
    "pytorch_bert": "bert_8_fb1",
}
"""Tally job (name prefix) -> Orion profile. The Transformers train as Transformer-XL, as
:mod:`cotenant.perf.jobs` maps them; PointNet, which Orion lacks, as the smaller CNN
(MobileNetV2); inference BERT as BERT, Llama-2 as Transformer-XL's forward pass."""
DEFAULT_MAX_KERNELS = 1000
COMPUTE, MEMORY, UNKNOWN = 1, 0, -1
"""Orion's kernel kinds."""


@dataclass(frozen=True)
class OrionStats:
    """One row of ``orion_occupancy.csv``."""

    profile: str
    kernels: int
    kernel_ms: float
    occupancy: float
    quantiles_us: tuple[float, ...]
    waves: float
    compute_share: float
    memory_share: float


@cache
def orion_stats() -> dict[str, OrionStats]:
    name, out = "orion_occupancy.csv", dict[str, OrionStats]()
    for line, row in published.table(name):
        cell = {c: published.number(name, line, row, c) for c in (
            "kernels", "kernel_ms", "occupancy", "waves", "compute_share", "memory_share",
            *_Q_COLUMNS)}
        out[row["profile"]] = OrionStats(
            row["profile"], int(cell["kernels"]), cell["kernel_ms"], cell["occupancy"],
            tuple(cell[c] for c in _Q_COLUMNS), cell["waves"], cell["compute_share"],
            cell["memory_share"])
    return out


@dataclass(frozen=True)
class Units:
    """A sampled unit: per kernel its solo duration (us), kind and the idle gap after it."""

    duration_us: FloatArray
    gap_us: FloatArray
    kind: IntArray

    @property
    def busy_us(self) -> float:
        return float(self.duration_us.sum())

    @property
    def length_us(self) -> float:
        return float(self.duration_us.sum() + self.gap_us.sum())


@dataclass(frozen=True)
class KernelProfile:
    """A job at kernel granularity (see the module docstring)."""

    job: str
    high_priority: bool
    orion: OrionStats
    busy_us: float
    """Kernel time of one unit."""
    idle_us: float
    """Idle time of one unit (launch gaps of a request, the host part of an iteration)."""
    passes: int
    """Orion profiles per unit (a Llama request is many forward passes)."""

    @property
    def duty(self) -> float:
        return self.busy_us / (self.busy_us + self.idle_us)

    @property
    def sms(self) -> float:
        """SMs a kernel occupies on an A100 (Orion's time-weighted occupancy)."""
        return self.orion.occupancy * A100_SMS

    def sample(self, rng: np.random.Generator, max_kernels: int = DEFAULT_MAX_KERNELS) -> Units:
        """One unit's kernels, drawn from the profile's duration quantiles."""
        o = self.orion
        n = o.kernels * self.passes
        u = rng.random(n)
        logq = np.log(np.maximum(np.asarray(o.quantiles_us), 1e-3))
        dur = np.exp(np.interp(u, QUANTILES, logq))
        dur *= self.busy_us / dur.sum()
        kind = rng.choice(np.array([COMPUTE, MEMORY, UNKNOWN], dtype=np.int8), size=n,
                          p=_kind_shares(o))
        if n > max_kernels:
            dur, kind = _coarsen(dur, kind, math.ceil(n / max_kernels))
        gaps = _gaps(len(dur), self.idle_us, per_kernel=self.high_priority)
        return Units(dur, gaps, kind)


def _kind_shares(o: OrionStats) -> list[float]:
    c, m = o.compute_share, o.memory_share
    return [c, m, max(0.0, 1.0 - c - m)]


def _coarsen(dur: FloatArray, kind: IntArray, k: int) -> tuple[FloatArray, IntArray]:
    pad = (-len(dur)) % k
    d = np.concatenate([dur, np.zeros(pad)]).reshape(-1, k).sum(axis=1)
    kinds = np.concatenate([kind, np.full(pad, UNKNOWN, dtype=np.int8)]).reshape(-1, k)
    same = (kinds == kinds[:, :1]).all(axis=1)
    return d, np.where(same, kinds[:, 0], UNKNOWN).astype(np.int8)


def _gaps(n: int, idle_us: float, *, per_kernel: bool) -> FloatArray:
    gaps = np.zeros(n)
    if per_kernel and n > 1:
        gaps[:-1] = idle_us / (n - 1)
    else:
        gaps[-1] = idle_us
    return gaps


def _orion_for(job: str) -> OrionStats:
    key = next((k for k in ORION_FOR if job.startswith(k)), None)
    if key is None:
        raise UnknownNameError("kernel profile", job, ORION_FOR)
    return orion_stats()[ORION_FOR[key]]


@cache
def kernel_profile(job: str) -> KernelProfile:
    """The kernel profile of a Tally job (its name, or a unique prefix such as ``bert``
    for inference and ``pytorch_bert`` for training)."""
    jobs = {j.name: j for j in published.tally_jobs()}
    prefixes = (job, f"onnxruntime_{job}", f"pytorch_{job}")
    match = [n for n in jobs if n.startswith(prefixes)]
    serving = [n for n in match if "single-stream" in n]
    match = serving if serving and len(serving) < len(match) else match
    if len(match) != 1:
        raise UnknownNameError("Tally job", job, [n for n in jobs if "server" not in n])
    t = jobs[match[0]]
    orion = _orion_for(t.name)
    if t.kind == "training":
        busy = orion.kernel_ms * 1000.0
        return KernelProfile(t.name, False, orion, busy, busy * (1.0 / t.gpu_util - 1.0), 1)
    if t.latency_ms is None:
        raise InputError(f"tally_jobs.csv:{t.name}", "an inference job needs latency_alone_ms")
    busy = t.latency_ms * 1000.0 * t.gpu_util
    passes = max(1, round(busy / (orion.kernel_ms * 1000.0)))
    return KernelProfile(t.name, True, orion, busy, t.latency_ms * 1000.0 - busy, passes)


def hp_jobs() -> tuple[str, ...]:
    """Tally's high-priority inference jobs (single-stream profiles)."""
    return tuple(j.name for j in published.tally_jobs() if j.kind == "inference-single-stream")


def be_jobs() -> tuple[str, ...]:
    """Tally's best-effort training jobs."""
    return tuple(j.name for j in published.tally_jobs() if j.kind == "training")
