"""Offline job profiles that differ: each training job's speed against its SM cap, its memory,
its duty and the SMs its kernels occupy; and the SMs an online model's kernels occupy.

The profiles are Tally's six training jobs (``perf/data/tally_jobs.csv``, file order, the index
the simulator's ``job_profile`` holds): memory and solo GPU utilisation from there. The speed
curve of each is the Amdahl law ``speed(c) = 1 / (a + (1 - a) / c)`` with ``a`` fitted to the
MIGER training runtimes per MIG slice of the nearest MIGER job (ResNet-50 for ResNet-50, BERT
for BERT, the Transformer for Whisper, Pegasus and GPT-2; the median of MIGER's fits for
PointNet, which MIGER lacks), plus the MPS-versus-MIG gap of :mod:`cotenant.perf.mps` (an MPS
cap leaves memory bandwidth whole, a MIG slice cuts it). So a job whose runtime hardly moves
with its slice (the Transformers: ``a`` 0.65) loses little under a small cap and pairs well
with a busy online service, while one that scales with its SMs (BERT: ``a`` 0.34) wants a
quiet one: what the matching has to find.

SM occupancy (``perf/data/orion_occupancy.csv``, derived from Orion's kernel profiles): the
time-weighted share of the SMs a workload's kernels occupy while it runs. SM activity (what
DCGM reports, and MuxFlow's 16% -> 33%) is busy time times occupancy, where utilisation counts
any kernel as the whole GPU. Online models map to Orion's inference profiles (ResNet-152 to
ResNet-101; the others to their median), training jobs to its training profiles.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from functools import cache
from importlib import resources

import numpy as np
import numpy.typing as npt

from cotenant.perf import mps, published

FloatArray = npt.NDArray[np.float64]

_MIGER_FOR = {"whisper": "transformer", "resnet50": "resnet50", "pegasus": "transformer",
              "gpt2": "transformer", "bert": "bert"}
_ORION_TRAIN_FOR = {"whisper": "transformer_xl_8_fb1", "resnet50": "resnet50_32_fb1",
                    "pegasus": "transformer_xl_8_fb1", "gpt2": "transformer_xl_8_fb1",
                    "bert": "bert_8_fb1"}
_ORION_ONLINE_FOR = {"resnet50": "resnet50_4_fwd", "resnet152": "resnet101_4_fwd",
                     "mobilenet_v2": "mobilenetv2_4_fwd", "bert": "bert_2_fwd"}


@cache
def occupancy_table() -> dict[str, tuple[str, float]]:
    """Orion profile -> (kind, occupancy) from ``perf/data/orion_occupancy.csv``."""
    text = resources.files("cotenant.perf").joinpath("data/orion_occupancy.csv").read_text(
        encoding="utf-8")
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    return {row["profile"]: (row["kind"], published.number("orion_occupancy.csv", n, row,
                                                          "occupancy"))
            for n, row in enumerate(csv.DictReader(io.StringIO("\n".join(lines))), start=2)}


def _median_occupancy(kind: str) -> float:
    return float(np.median([v for k, v in occupancy_table().values() if k == kind]))


@dataclass(frozen=True)
class JobProfiles:
    """Per training job profile (Tally's file order)."""

    names: tuple[str, ...]
    memory_mb: FloatArray
    gpu_util: FloatArray
    serial: FloatArray
    """Amdahl ``a`` of the job's speed under an MPS cap."""
    occupancy: FloatArray

    def speed(self, profile: npt.NDArray[np.int64], cap: FloatArray) -> FloatArray:
        """Each job's speed (relative to the whole GPU) at SM cap ``cap`` (0-1]; 0 at 0."""
        c = np.asarray(cap, dtype=np.float64)
        return np.where(c > 0.0, mps.speed(c, self.serial[profile]), 0.0)


def _key(name: str) -> str:
    return next((k for k in _MIGER_FOR if k in name), "")


@cache
def job_profiles() -> JobProfiles:
    """The six training profiles with their curves (see the module docstring)."""
    jobs = [j for j in published.tally_jobs() if j.kind == "training"]
    fits = {m: mps.mig_serial_fraction(row) for m, row in mps.OFFLINE_RUNTIME_S.items()}
    median_fit = float(np.median(list(fits.values())))
    serial, occ = [], []
    for job in jobs:
        key = _key(job.name)
        a = fits[_MIGER_FOR[key]] if key else median_fit
        serial.append(min(1.0, a + mps.MPS_MIG_GAP))
        orion = _ORION_TRAIN_FOR.get(key)
        occ.append(occupancy_table()[orion][1] if orion else _median_occupancy("training"))
    return JobProfiles(
        names=tuple(j.name for j in jobs),
        memory_mb=np.array([j.memory_mb for j in jobs]),
        gpu_util=np.array([round(j.gpu_util, 7) for j in jobs]),
        serial=np.array(serial),
        occupancy=np.array(occ),
    )


@cache
def _online_occupancy() -> FloatArray:
    table = occupancy_table()
    return np.array([table[_ORION_ONLINE_FOR[m]][1] if m in _ORION_ONLINE_FOR
                     else _median_occupancy("inference") for m in mps.ONLINE_MODELS])


def online_occupancy(model: npt.NDArray[np.int64]) -> FloatArray:
    """Share of the SMs an online model's kernels occupy while it runs (per model index)."""
    return np.asarray(_online_occupancy()[model], dtype=np.float64)
