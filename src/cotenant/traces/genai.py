"""Loader for the Alibaba GenAI serving trace 2026: per-pod GPU duty cycle over time.

The trace (``pod_gpu_duty_cycle_anon.tar.gz``) is one CSV with columns ``value,
timestamp_anon, container_ip``: ``value`` is the pod's GPU duty cycle in percent (the share of
time a kernel runs, as nvidia-smi reports it), sampled about every 57 s for about 23 h, with
gaps. ``pod_gpu_memory_used_bytes_anon.tar.gz`` has the same columns in another order (bytes
used); columns are read by header name. A ``.tar.gz`` is streamed, never extracted.

Every series is resampled onto one grid: the union time span of all series, step
``interval_s``, values as fractions 0..1. The rules, each counted in the :class:`LoadReport`:

* **grid values** are the series interpolated linearly at the grid points (point samples,
  not averages over the step), so the grid step should be close to the sampling step (~60 s).
* **gap length**: two consecutive samples ``dt`` apart leave ``round(dt / interval_s) - 1``
  grid steps without a sample; 0 is regular sampling (linear interpolation between samples).
* **short gaps** (1..``max_gap_intervals`` steps) are interpolated linearly; the grid points
  inside them are counted in ``filled_points``.
* **long gaps** (more steps), and the grid before a series' first and after its last sample,
  are *held at the series' mean* (over its samples), so the series keeps its mean load
  without inventing a shape. Those points are counted in ``held_points``, the long gaps in
  ``long_gaps``.
* **coverage**: a series whose covered points (samples, interpolation, short gaps; not held
  points) are less than ``min_coverage`` of the grid is rejected and counted under
  ``rejected["covers under N% of the grid"]``. In the real trace these are pods that lived
  only part of the day.

Memory (``memory_path``): each kept series' memory samples are resampled onto the same grid
by the same rules and divided by the series' peak (its largest sample), giving
``memory_profile``, the memory used over time as a fraction of the peak; ``memory_mib`` holds
the peak. A kept series without memory samples (or whose memory is always 0) gets a NaN peak
and a NaN profile row, counted in ``LoadReport.memory_missing``; memory points filled and
held by the gap rules are counted in ``memory_filled_points`` and ``memory_held_points``.

Malformed rows (non-numeric, NaN, negative, a duty cycle over 100, an empty container id, a
repeated timestamp for one container) stop the load with an :class:`InputError` naming
``file:line:column`` and the rule. Rows may come in any order.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cotenant.errors import InputError
from cotenant.traces.csvrows import CsvRows
from cotenant.traces.genai_synthetic import (
    GenaiParams,
    default_genai_params,
    fit_genai,
    synthetic_duty_cycles,
)
from cotenant.traces.series import LoadSeries

__all__ = [
    "GenaiParams",
    "LoadReport",
    "LoadSeries",
    "default_genai_params",
    "fit_genai",
    "load_duty_cycles",
    "synthetic_duty_cycles",
]

DUTY_COLUMNS = ("value", "timestamp_anon", "container_ip")
MEMORY_COLUMNS = ("timestamp_anon", "value", "container_ip")
MIB = 1024 * 1024
MAX_GRID_STEPS = 1_000_000
"""Longest grid: about two years of one-minute steps (the trace spans a day). A longer one is a
stray timestamp, and would not fit in memory across the series."""

@dataclass(frozen=True)
class LoadReport:
    """What the load did with every series and row; ``series_kept + sum(rejected) ==
    series_read``."""

    series_read: int
    series_kept: int
    rejected: dict[str, int]  # reason -> number of series rejected
    filled_points: int  # grid points filled by interpolation across short gaps (kept series)
    rows_read: int
    held_points: int = 0  # grid points held at the series' mean (long gaps, outside span)
    long_gaps: int = 0  # gaps longer than max_gap_intervals in kept series
    memory_missing: int = 0  # kept series with no (or only zero) memory samples
    memory_filled_points: int = 0  # memory grid points filled across short gaps
    memory_held_points: int = 0  # memory grid points held at the series' mean
    memory_rows_read: int = 0
    memory_series_read: int = 0
    memory_of_rejected: int = 0  # memory series of duty-cycle series rejected above
    memory_unmatched: int = 0  # memory series of containers the duty-cycle file lacks

    def memory_summary(self, name: str) -> str:
        """What the load did with the memory-used file ``name``, every series accounted for."""
        return (
            f"{name}: {self.memory_rows_read} rows, {self.memory_series_read} series; "
            f"{self.series_kept - self.memory_missing} of the {self.series_kept} kept "
            f"duty-cycle series have memory ({self.memory_missing} without, held at their "
            f"peak); left out: {self.memory_of_rejected} of rejected duty-cycle series, "
            f"{self.memory_unmatched} of containers the duty-cycle file lacks; filled "
            f"{self.memory_filled_points} points, held {self.memory_held_points}"
        )


Samples = dict[str, tuple[np.ndarray, np.ndarray]]
"""Per container: its sample times (sorted, distinct) and values."""




def _read(
    path: Path, required: tuple[str, ...], check: Callable[[float], str | None]
) -> tuple[Samples, int]:
    """Samples per container, validated row by row (``check`` names a broken value rule), then
    sorted by time; a repeated time for one container is an error."""
    rows = CsvRows(path, required)
    raw: dict[str, tuple[list[float], list[float], list[int]]] = {}
    count = 0
    for line, row in rows:
        name = row["container_ip"]
        if not name:
            raise InputError(rows.where(line, "container_ip"), "container id is empty")
        value = rows.number(line, row, "value")
        broken = check(value)
        if broken:
            raise InputError(rows.where(line, "value"), f"{row['value']} {broken}")
        stamp = rows.number(line, row, "timestamp_anon")
        times, values, lines = raw.setdefault(name, ([], [], []))
        times.append(stamp)
        values.append(value)
        lines.append(line)
        count += 1
    series: Samples = {}
    for name, (times, values, lines) in raw.items():
        order = np.argsort(np.asarray(times), kind="stable")
        sorted_t = np.asarray(times)[order]
        dup = np.flatnonzero(np.diff(sorted_t) == 0)
        if dup.size:
            first, again = sorted((lines[int(order[dup[0]])], lines[int(order[dup[0] + 1])]))
            raise InputError(
                rows.where(again, "timestamp_anon"),
                f"container {name!r} has a second sample at {sorted_t[dup[0]]:g} "
                f"(first on line {first})",
            )
        series[name] = (sorted_t, np.asarray(values)[order])
    return series, count


def _duty_rule(value: float) -> str | None:
    if value < 0:
        return "is negative; a duty cycle is a percentage 0..100"
    if value > 100:
        return "is over 100; a duty cycle is a percentage 0..100"
    return None


def _bytes_rule(value: float) -> str | None:
    return "is negative; memory used is in bytes >= 0" if value < 0 else None


@dataclass(frozen=True)
class _Resampled:
    values: np.ndarray
    covered: int
    filled: int
    held: int
    long_gaps: int


def _resample(
    t: np.ndarray, v: np.ndarray, grid: np.ndarray, interval_s: int, max_gap: int
) -> _Resampled:
    """One series (times sorted) on the grid, by the rules in the module docstring."""
    steps = np.rint(np.diff(t) / interval_s).astype(np.int64) - 1  # grid steps without a sample
    out = np.interp(grid, t, v)
    left = np.searchsorted(t, grid, side="right") - 1  # sample at or before each grid point
    inside = (left >= 0) & (left < len(t) - 1)
    seg = np.clip(left, 0, max(len(t) - 2, 0))
    interior = inside & (grid > t[np.clip(left, 0, len(t) - 1)])
    gap = steps[seg] if steps.size else np.zeros_like(seg)
    long_mask = interior & (gap > max_gap)
    filled_mask = interior & (gap >= 1) & (gap <= max_gap)
    held = long_mask | (grid < t[0]) | (grid > t[-1])
    out[held] = float(v.mean())
    return _Resampled(
        values=out,
        covered=int(len(grid) - held.sum()),
        filled=int(filled_mask.sum()),
        held=int(held.sum()),
        long_gaps=int((steps > max_gap).sum()),
    )


def load_duty_cycles(
    path: Path,
    *,
    interval_s: int = 60,
    max_gap_intervals: int = 5,
    min_coverage: float = 0.5,
    memory_path: Path | None = None,
) -> tuple[LoadSeries, LoadReport]:
    """Per-pod duty cycles on a common grid, and a report of what was filled, held and
    rejected (see the module docstring for the rules)."""
    if interval_s < 1:
        raise InputError("interval", f"{interval_s} s; the grid step must be >= 1 s")
    if max_gap_intervals < 0:
        raise InputError("max_gap_intervals", f"{max_gap_intervals}; must be >= 0")
    if not 0.0 <= min_coverage <= 1.0:
        raise InputError("min_coverage", f"{min_coverage}; must be in 0..1")
    path = Path(path)
    samples, rows_read = _read(path, DUTY_COLUMNS, _duty_rule)
    start = min(float(t[0]) for t, _ in samples.values())
    end = max(float(t[-1]) for t, _ in samples.values())
    if (end - start) / interval_s >= MAX_GRID_STEPS:
        raise InputError(str(path), f"timestamps span {end - start:g} s, {MAX_GRID_STEPS:,} or "
                         f"more steps of {interval_s} s", hint="timestamps are seconds; check "
                         "for a stray value, or pass a larger --interval")
    grid = start + interval_s * np.arange(int((end - start) // interval_s) + 1, dtype=np.float64)
    kept: list[str] = []
    rows: list[np.ndarray] = []
    rejected: dict[str, int] = {}
    filled = held = long_gaps = 0
    for name in sorted(samples):
        times, values = samples[name]
        r = _resample(times, values / 100.0, grid, interval_s, max_gap_intervals)
        if r.covered < min_coverage * len(grid):
            reason = f"covers under {min_coverage:.0%} of the grid"
            rejected[reason] = rejected.get(reason, 0) + 1
            continue
        kept.append(name)
        rows.append(r.values)
        filled += r.filled
        held += r.held
        long_gaps += r.long_gaps
    peak = profile = None
    missing = mem_filled = mem_held = mem_rows = 0
    memory_names: set[str] = set()
    if memory_path is not None:
        peak, profile, mem_filled, mem_held, mem_rows, memory_names = _memory(
            Path(memory_path), kept, grid, interval_s, max_gap_intervals
        )
        missing = int(np.isnan(peak).sum())
    table = np.vstack(rows) if rows else np.zeros((0, len(grid)))
    series = LoadSeries(
        tuple(kept), interval_s, float(start), np.clip(table, 0.0, 1.0), peak, profile
    )
    report = LoadReport(
        series_read=len(samples),
        series_kept=len(kept),
        rejected=rejected,
        filled_points=filled,
        rows_read=rows_read,
        held_points=held,
        long_gaps=long_gaps,
        memory_missing=missing,
        memory_filled_points=mem_filled,
        memory_held_points=mem_held,
        memory_rows_read=mem_rows,
        memory_series_read=len(memory_names),
        memory_of_rejected=len((memory_names & set(samples)) - set(kept)),
        memory_unmatched=len(memory_names - set(samples)),
    )
    return series, report


def _memory(
    path: Path, names: list[str], grid: np.ndarray, interval_s: int, max_gap: int
) -> tuple[np.ndarray, np.ndarray, int, int, int, set[str]]:
    """Peak memory used (MiB) per container of ``names``, its use over the grid as a fraction
    of that peak (NaN, peak and row, where the file has no non-zero samples), the grid points
    filled and held by the gap rules, the rows read and the containers the file holds."""
    samples, rows_read = _read(path, MEMORY_COLUMNS, _bytes_rule)
    largest = max((float(v.max()) for _, v in samples.values()), default=0.0)
    if 0.0 < largest <= 100.0:
        raise InputError(str(path), f"the largest memory sample is {largest:g} bytes: this "
                         "looks like a duty-cycle file (percent), not memory used in bytes",
                         hint="give pod_gpu_memory_used_bytes_anon.tar.gz")
    peak = np.full(len(names), math.nan)
    profile = np.full((len(names), len(grid)), math.nan)
    filled = held = 0
    for i, name in enumerate(names):
        if name not in samples or samples[name][1].max() <= 0:
            continue
        times, values = samples[name]
        peak[i] = values.max() / MIB
        r = _resample(times, values, grid, interval_s, max_gap)
        profile[i] = np.clip(r.values / values.max(), 0.0, 1.0)
        filled += r.filled
        held += r.held
    return peak, profile, filled, held, rows_read, set(samples)
