"""Observations for the core's tests: one GPU per entry, fields by keyword."""

from __future__ import annotations

import numpy as np

from cotenant.perf import mps
from cotenant.policies.colocation import Observation


def obs(n: int = 1, *, now: float = 1000.0, model: str = "resnet50", slo_ms: float = 74.0,
        load: float = 0.1, peak: float | None = None, p99: float = float("nan"),
        since: float = 990.0, at: float | None = None, placed: bool = True,
        running: bool = True, share: int = 50, stretch: float = 1.0) -> Observation:
    """``n`` identical GPUs (arrays of one value each)."""
    m = mps.model_index(model)
    return Observation(
        now_s=now, model=np.full(n, m, dtype=np.int64), slo_ms=np.full(n, slo_ms),
        load=np.full(n, load), load_peak=np.full(n, load if peak is None else peak),
        p99_ms=np.full(n, p99), p99_since_s=np.full(n, since),
        p99_at_s=np.full(n, now if at is None else at), placed=np.full(n, placed),
        running=np.full(n, running), share=np.full(n, share, dtype=np.int64),
        stretch=np.full(n, stretch))
