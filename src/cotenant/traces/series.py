"""Load series on a common time grid: what the GenAI loader and its synthetic generator
produce and the co-location simulator consumes (defined apart so both can share it)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LoadSeries:
    """Load series on a common grid: row ``i`` is container ``names[i]``."""

    names: tuple[str, ...]  # container ids, one per row of values
    interval_s: int  # grid step
    start: float  # timestamp of column 0
    values: np.ndarray  # float64 (n_series, n_intervals), duty cycle as a fraction 0..1
    memory_mib: np.ndarray | None  # float64 (n_series,) peak memory used (NaN: no samples)
    memory_profile: np.ndarray | None = None
    """float64 (n_series, n_intervals): memory used over time as a fraction of the series'
    own peak, on the same grid (a NaN row: no memory samples for that series)."""

    @property
    def n_intervals(self) -> int:
        return int(self.values.shape[1])
