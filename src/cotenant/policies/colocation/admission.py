"""Admission: which online GPUs may take offline work, from the load seen so far.

A static rule an operator can run: a GPU is admitted while the ``quantile`` of its online
service's load over what has been observed (the peak at 1.0) is at most ``max_load``; nothing
is admitted before ``warmup_s`` of history, unless every load is admitted (``max_load`` 1),
which needs no history. A GPU that loses admission has its offline job evicted. The baselines'
lever for fewer SLO misses is a lower ``max_load``; MuxFlow admits every GPU and relies on its
guard. Pure: the caller keeps the load history and asks per decision.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cotenant.errors import InputError, check_seconds

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Admission:
    """Admit a GPU while the ``quantile`` of its observed load is at most ``max_load``."""

    max_load: float = 1.0
    quantile: float = 1.0
    warmup_s: float = 3600.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.max_load <= 1.0:
            raise InputError("admission.max_load", f"{self.max_load} must be in [0, 1]")
        if not 0.0 < self.quantile <= 1.0:
            raise InputError("admission.quantile", f"{self.quantile} must be in (0, 1]")
        check_seconds(self.warmup_s, "admission.warmup_s")

    @property
    def admits_all(self) -> bool:
        return self.max_load >= 1.0

    def admitted(self, statistic: FloatArray, observed_s: float) -> BoolArray:
        """Per GPU, given the ``quantile`` of its observed load (``statistic``) after
        ``observed_s`` seconds of history."""
        stat = np.asarray(statistic, dtype=np.float64)
        if self.admits_all:
            return np.ones(stat.shape, dtype=np.bool_)
        if observed_s < self.warmup_s:
            return np.zeros(stat.shape, dtype=np.bool_)
        return np.asarray(stat <= self.max_load, dtype=np.bool_)
