"""Matching weights: the predicted normalised speed sum of an (online GPU, offline job) pair.

The pair predictor takes solo features of both sides, ``(util, sm_activity, memory)``; we
feed the online service's observed duty cycle as utilisation and as SM activity (the GenAI
trace has no SM counter) and its memory share of the GPU, and for the offline job its
profile's solo utilisation (Tally ``single-job-perf.csv``) for both, and its memory share.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from cotenant.perf import mps
from cotenant.perf.predictor import PairPredictor
from cotenant.sim.colocation.workload import ColocationWorkload

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def pair_weights(
    work: ColocationWorkload,
    load: FloatArray,
    gpus: IntArray,
    jobs: IntArray,
    predictor: PairPredictor,
) -> FloatArray:
    """(len(gpus), len(jobs)) predicted speed sums."""
    a_util = np.clip(load[gpus], 0.0, 1.0)[:, None]
    a_mem = (work.online_memory_mib[gpus] / work.gpu_memory_mib[gpus])[:, None]
    b_util = np.asarray(mps.TRAINING_GPU_UTIL)[work.job_profile[jobs]][None, :]
    b_mem = work.job_memory_mib[jobs][None, :] / work.gpu_memory_mib[gpus][:, None]
    sa, sb = predictor.predict(a_util, a_util, a_mem, b_util, b_util, b_mem)  # broadcasts
    return np.asarray(sa + sb, dtype=np.float64)
