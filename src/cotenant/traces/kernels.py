"""A kernel trace: one unit of a job (an inference request, a training iteration) as a CSV of
its kernels, for the priority-sharing simulator in place of a published profile.

Columns: ``duration_us`` (the kernel's solo time, >= 0.001 us, the simulator's resolution),
``gap_us`` (idle time after it, >= 0; default 0) and ``kind`` (1 compute-bound, 0
memory-bound, -1 unknown; default -1); any other column is refused, so that no data is
silently dropped. ``#`` lines are comments. A bad cell is a one-line error naming file, line
and column.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import numpy as np

from cotenant.errors import InputError
from cotenant.model.documents import read_text
from cotenant.perf.kernels import UNKNOWN, Units

KINDS = (1, 0, -1)
COLUMNS = ("duration_us", "gap_us", "kind")
MIN_DURATION_US = 0.001
"""The shortest kernel (1 ns): the simulator's time resolution; shorter ones lose their
length to rounding against times in seconds."""


def _cell(where: str, row: dict[str, str | None], col: str, default: float | None) -> float:
    raw = row.get(col)
    if raw is None or raw.strip() == "":
        if default is None:
            raise InputError(f"{where}:{col}", "is missing", hint="every row needs duration_us")
        return default
    try:
        value = float(raw)
    except ValueError:
        raise InputError(f"{where}:{col}", f"{raw!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise InputError(f"{where}:{col}", f"{value:g} must be a finite number >= 0",
                         hint="durations and gaps are microseconds, never negative")
    return value


def parse_kernel_trace(text: str, name: str) -> Units:
    """The kernels of a trace's text (``name`` for the error messages)."""
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1)
             if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        raise InputError(name, "has no kernels", hint="a header line duration_us,gap_us,kind "
                         "and one row per kernel")
    reader = csv.DictReader(io.StringIO("\n".join(line for _, line in lines)))
    header = list(reader.fieldnames or [])
    if "duration_us" not in header:
        raise InputError(f"{name}:{lines[0][0]}", "needs a duration_us column")
    unknown = [c for c in header if c not in COLUMNS]
    if unknown:
        names = ", ".join(map(repr, unknown))
        raise InputError(f"{name}:{lines[0][0]}", f"unknown column(s) {names}; known: "
                         f"{', '.join(COLUMNS)}")
    dur, gap, kind = [], [], []
    for i, row in enumerate(reader, start=1):
        where = f"{name}:{lines[i][0]}"
        d = _cell(where, row, "duration_us", None)
        if d < MIN_DURATION_US:
            raise InputError(f"{where}:duration_us", f"{d:g} must be >= {MIN_DURATION_US:g} "
                             "(the simulator's resolution, 1 ns)")
        dur.append(d)
        gap.append(_cell(where, row, "gap_us", 0.0))
        raw = (row.get("kind") or "").strip()
        try:
            k = int(raw) if raw else UNKNOWN
        except ValueError:
            raise InputError(f"{where}:kind", f"{raw!r} is not 1, 0 or -1") from None
        if k not in KINDS:
            raise InputError(f"{where}:kind", f"{k} must be one of 1, 0, -1")
        kind.append(k)
    if not dur:
        raise InputError(name, "has no kernels")
    return Units(np.array(dur), np.array(gap), np.array(kind, dtype=np.int8))


def load_kernel_trace(path: Path) -> Units:
    text = read_text(path)
    return parse_kernel_trace(text, str(path))
