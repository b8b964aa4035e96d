"""Matching weights: the predicted normalised speed sum of an (online GPU, offline job) pair.

The pair predictor takes solo features of both sides, ``(util, sm_activity, memory)``; we
feed the online service's observed duty cycle as utilisation and as SM activity (the GenAI
trace has no SM counter) and its memory share of the GPU, and for the offline job its
profile's solo utilisation (Tally ``single-job-perf.csv``) for both, and its memory share.
Without a trained predictor, :class:`ShareModelPredictor` estimates the pair from the MPS
model: online slowed by the residual interference scaled by the offline utilisation, offline
running on the SMs the online duty leaves.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

from cotenant.perf import mps
from cotenant.sim.colocation_workload import ColocationWorkload

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class PairPredictor(Protocol):
    def predict(
        self, a_util: FloatArray, a_sm: FloatArray, a_mem: FloatArray,
        b_util: FloatArray, b_sm: FloatArray, b_mem: FloatArray,
    ) -> tuple[FloatArray, FloatArray]: ...


class ShareModelPredictor:
    """Model-based stand-in for a trained predictor (see the module docstring)."""

    def predict(
        self, a_util: FloatArray, a_sm: FloatArray, a_mem: FloatArray,
        b_util: FloatArray, b_sm: FloatArray, b_mem: FloatArray,
    ) -> tuple[FloatArray, FloatArray]:
        speed_a = 1.0 / (1.0 + (mps.MPS_LIMITED_INTERFERENCE - 1.0) * b_util)
        speed_b = mps.offline_speed(np.clip(1.0 - a_sm, 0.05, 1.0)) * (1.0 - 0.2 * a_mem)
        return np.asarray(speed_a), np.asarray(speed_b)


_DEFAULT = ShareModelPredictor()


def pair_weights(
    work: ColocationWorkload,
    load: FloatArray,
    gpus: IntArray,
    jobs: IntArray,
    predictor: PairPredictor | None,
) -> FloatArray:
    """(len(gpus), len(jobs)) predicted speed sums."""
    chosen = predictor if predictor is not None else _DEFAULT
    a_util = np.clip(load[gpus], 0.0, 1.0)[:, None]
    a_mem = (work.online_memory_mib[gpus] / work.gpu_memory_mib[gpus])[:, None]
    b_util = np.asarray(mps.TRAINING_GPU_UTIL)[work.job_profile[jobs]][None, :]
    b_mem = work.job_memory_mib[jobs][None, :] / work.gpu_memory_mib[gpus][:, None]
    shape = (len(gpus), len(jobs))
    sa, sb = chosen.predict(
        np.broadcast_to(a_util, shape), np.broadcast_to(a_util, shape),
        np.broadcast_to(a_mem, shape), np.broadcast_to(b_util, shape),
        np.broadcast_to(b_util, shape), np.broadcast_to(b_mem, shape),
    )
    return np.asarray(sa + sb, dtype=np.float64)
