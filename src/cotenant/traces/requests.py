"""Loader for the GenAI trace's request series (``qps.tar.gz``): requests per container over time.

The file has columns ``timestamp_anon, value, container_ip, request_type``; a row is one
sample of a container's request rate (``value``, requests a second, finite and >= 0), taken on
the trace's ~57 s grid, and a container has a row only where it served requests: a slot
without a row is a slot with none, so the series is dense with zeros between rows (counted in
``zero_slots``, never invented as load). Rows without a container id (the trace's "API
Requests") cannot be attributed to a service and are counted in ``rejected``. A negative,
non-numeric or non-finite value stops the load with an :class:`InputError` at
``file:line:column``.

The series serve one purpose here: to check the burst model of :mod:`cotenant.traces.bursts`
against the requests themselves (``cotenant trace bursts``), whose variance-time slope is
steeper than the duty cycles' (burstier).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cotenant.errors import InputError
from cotenant.traces.csvrows import CsvRows

COLUMNS = ("timestamp_anon", "value", "container_ip")
MAX_SLOTS = 1_000_000


@dataclass(frozen=True)
class RequestSeries:
    """Per container, the request rate on a regular grid of ``interval_s``."""

    names: tuple[str, ...]
    interval_s: float
    values: np.ndarray  # (containers, slots), requests a second; 0 where no row
    rows: int
    zero_slots: int
    rejected: dict[str, int] = field(default_factory=dict)


def load_requests(path: Path, interval_s: float | None = None) -> RequestSeries:
    """The request series of ``path`` on a grid of ``interval_s`` (default: the smallest gap
    between two of a container's rows)."""
    rows = CsvRows(path, COLUMNS)
    times: dict[str, list[float]] = {}
    values: dict[str, list[float]] = {}
    rejected: Counter[str] = Counter()
    count = 0
    for line, row in rows:
        value = rows.number(line, row, "value")
        if value < 0:
            raise InputError(rows.where(line, "value"), f"{row['value']} is negative; a "
                             "request rate is >= 0")
        stamp = rows.number(line, row, "timestamp_anon")
        name = row["container_ip"]
        if not name:
            rejected["row without a container id"] += 1
            continue
        times.setdefault(name, []).append(stamp)
        values.setdefault(name, []).append(value)
        count += 1
    if not times:
        raise InputError(str(path), "no row names a container", hint="expected the GenAI "
                         "trace's qps.csv columns: timestamp_anon, value, container_ip")
    step = interval_s or _grid_step(times)
    if not (math.isfinite(step) and step > 0):
        raise InputError(f"{path}:interval", f"{step:g} s must be a finite number > 0")
    t0 = min(min(t) for t in times.values())
    t1 = max(max(t) for t in times.values())
    slots = round((t1 - t0) / step) + 1
    if slots > MAX_SLOTS:
        raise InputError(str(path), f"spans {slots} slots of {step:g} s; at most {MAX_SLOTS}")
    names = tuple(sorted(times))
    grid = np.zeros((len(names), slots))
    for i, name in enumerate(names):
        idx = np.rint((np.asarray(times[name]) - t0) / step).astype(np.int64)
        np.add.at(grid[i], idx, values[name])
    zero = int((grid == 0).sum())
    return RequestSeries(names, step, grid, count, zero, dict(rejected))


def _grid_step(times: dict[str, list[float]]) -> float:
    gaps = [np.diff(np.unique(t)) for t in times.values() if len(set(t)) > 1]
    positive = np.concatenate(gaps) if gaps else np.zeros(0)
    positive = positive[positive > 0]
    return float(positive.min()) if len(positive) else 60.0


