"""Latency objectives per online model that do not depend on the policy being judged.

An online service's SLO is ``multiple`` times its model's solo batch time (the MIGER batch-32
latency on a whole A100-80GB 7g instance, :data:`cotenant.perf.mps.L100_MS`), the same multiple
for every model and every policy: nothing about the load, the co-runner or the policy enters
it, so a dedicated GPU misses it too when its own load runs high.

Why a multiple and not MLPerf's server targets (``../shared/reference/calibration.md``
section 7): MLPerf's ResNet-50 and BERT targets (15 ms, 130 ms) equal one batch-32 execution
here (14.8 ms, 133.9 ms), because an MLPerf server chooses its batch size to meet them; the
services here run fixed batches of 32, so that target would be missed by any queueing at
all. The default multiple, 5, is a latency budget of five batch times: at a solo duty of 0.5
the queue's p99 is 4.9 batch times (:func:`cotenant.perf.mps.p99_ms`), so a service alone on
its GPU meets it up to about half load. ``docs`` report the comparison at 3, 5 and 10.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from cotenant.errors import InputError
from cotenant.perf import mps

DEFAULT_MULTIPLE = 5.0


def check_multiple(multiple: float, where: str = "slo multiple") -> float:
    """``multiple`` if it is a finite number > 1 (an SLO at or under one batch time is missed
    by every request); else a one-line error."""
    if not (math.isfinite(multiple) and multiple > 1.0):
        raise InputError(where, f"{multiple:g} must be a finite number > 1",
                         hint="the SLO is this many solo batch times, e.g. 5")
    return multiple


def slo_ms(model: npt.NDArray[np.int64], multiple: float = DEFAULT_MULTIPLE) -> npt.NDArray[
        np.float64]:
    """The SLO (ms) of each online model index: ``multiple`` x its solo batch time."""
    check_multiple(multiple)
    return np.asarray(multiple * mps.ONLINE_L100[model], dtype=np.float64)
