"""Published measurements shipped as package data (``perf/data/*.csv``), read once: the
single source for both the MPS performance model (:mod:`cotenant.perf.mps`) and the pair
predictor (:mod:`cotenant.perf.predictor`).

``data/tally_jobs.csv`` holds each benchmark job's stand-alone footprint and
``data/tally_pairs.csv`` the 12 inference-server + training pairs per sharing mechanism
(tally-project/tally-bench, A100-40GB; the files' ``#`` lines name the source). A malformed
cell is an :class:`~cotenant.errors.InputError` naming file, line and column.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from functools import cache
from importlib import resources

from cotenant.errors import InputError
from cotenant.model.gpu import CATALOG

TALLY_GPU = "A100-40GB"
"""The GPU of Tally's measurements (GCP a2-highgpu-1g)."""
MECHANISMS = ("tally", "mps", "mps_priority", "time_slicing", "tgs")


@dataclass(frozen=True)
class TallyJob:
    name: str
    kind: str  # training, inference-single-stream, inference-server
    memory_mb: float
    mem_util: float  # 0..1 memory-bandwidth utilisation
    gpu_util: float  # 0..1 share of time a kernel runs
    latency_ms: float | None = None  # mean request latency alone (inference jobs)


@dataclass(frozen=True)
class TallyPair:
    hp_job: str
    be_job: str
    hp_p99_ratio: dict[str, float]  # per mechanism: co-located p99 / stand-alone p99
    be_norm_tput: dict[str, float]  # per mechanism: BE throughput / stand-alone


def table(name: str) -> list[tuple[int, dict[str, str]]]:
    """Rows of a package-data CSV (``#`` lines are its source note) with their line numbers."""
    text = resources.files("cotenant.perf").joinpath(f"data/{name}").read_text(encoding="utf-8")
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if not line.startswith("#")]
    reader = csv.DictReader(io.StringIO("\n".join(line for _, line in lines)))
    return [(lines[reader.line_num - 1][0], row) for row in reader]


def number(name: str, line: int, row: dict[str, str], col: str, scale: float = 1.0) -> float:
    """A finite, non-negative cell divided by ``scale``; else a one-line error."""
    try:
        value = float(row[col]) / scale
    except (KeyError, TypeError, ValueError):
        raise InputError(f"{name}:{line}:{col}", f"{row.get(col)!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise InputError(f"{name}:{line}:{col}", f"{value} must be a finite number >= 0")
    return value


def tally_gpu_memory_mib() -> float:
    mib = CATALOG.get(TALLY_GPU).memory_mib
    if mib is None:  # pragma: no cover - the catalog lists A100-40GB's memory
        raise InputError(TALLY_GPU, "the catalog does not know this GPU's memory")
    return float(mib)


@cache
def tally_jobs() -> tuple[TallyJob, ...]:
    """Every job of ``tally_jobs.csv``, in file order."""
    name = "tally_jobs.csv"
    return tuple(
        TallyJob(
            row["job"], row["kind"], number(name, line, row, "gpu_mem_mb"),
            number(name, line, row, "mem_util_pct", 100.0),
            number(name, line, row, "gpu_util_pct", 100.0),
            number(name, line, row, "latency_alone_ms") if row.get("latency_alone_ms")
            else None,
        )
        for line, row in table(name)
    )


@cache
def tally_pairs() -> tuple[TallyPair, ...]:
    """Every pair of ``tally_pairs.csv``, in file order; both jobs must have a footprint."""
    name, known = "tally_pairs.csv", {j.name for j in tally_jobs()}
    out = []
    for line, row in table(name):
        if row.get("hp_job") not in known or row.get("be_job") not in known:
            raise InputError(f"{name}:{line}", f"job {row.get('hp_job')!r} or "
                             f"{row.get('be_job')!r} has no footprint in tally_jobs.csv")
        out.append(TallyPair(
            row["hp_job"], row["be_job"],
            {m: number(name, line, row, f"hp_p99_ratio_{m}") for m in MECHANISMS},
            {m: number(name, line, row, f"be_norm_tput_{m}") for m in MECHANISMS},
        ))
    return tuple(out)
