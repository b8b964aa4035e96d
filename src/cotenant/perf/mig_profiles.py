"""Throughput and latency of DNN inference on each MIG profile, and the capacity under an SLO.

A :class:`ProfileTable` holds operating points (model, GPU, MIG profile, batch size ->
requests/s and ms per batch). :meth:`ProfileTable.capacity` answers the question a MIG planner
asks: how many requests/s can one instance of this profile serve while a batch still finishes
within the latency SLO? It takes the highest-throughput batch whose latency meets the SLO.

The shipped table (``data/mig_profiles.csv``, read by :func:`default_table`) is exactly the
output of :func:`derive_default_points`, built from the published tables in
:mod:`cotenant.perf.measured`:

* MIGPerf (arXiv:2301.00407, ``HuaizhengZhang/MIGProfiler``): five NLP encoders on A100-40GB
  1g.5gb/2g.10gb/"20g"/7g.40gb, batch 1-256, seq_len 64. "20g" is read as 3g.20gb (it could be
  4g.20gb; see :mod:`cotenant.perf.measured`).
* MIGER (ICPP'24, ``Css22/ICPP-MIGER`` ``jobs/profile/online_result``): six CNNs on all five
  A100-80GB compute profiles at batch 32.

Measured rows carry their citation in ``source``. Every other row is derived, for the five
compute profiles (1g, 2g, 3g, 4g, 7g) of A100-40GB, A100-80GB, H100-80GB and H200-141GB, by
one rule: **throughput is a function of the instance's SM count only**, piecewise linear
between the measured profiles of the source GPU at the same batch size, proportional beyond
them (the published figures show capacity roughly proportional to compute slices). Latency is
the measured latency of the profile just below (or equal) in SMs, scaled inversely with
throughput, since for one blocking client latency ~= batch / throughput. The ``source`` column
states which case applied:

1. ``same N SMs``: A100-40GB and A100-80GB profiles of equal compute size have the same SMs
   (14/28/42/56/98), so they share rows. Going from 40GB to 80GB memory cannot bind; going
   from 80GB (MIGER) to 40GB assumes the batch-32 CNN fits 1g.5gb's 4.75 GiB (not measured).
2. ``linear in SMs``: e.g. MIGPerf's missing 4g (56 SMs) is 3g + (7g - 3g) x 14/56, i.e.
   linear in compute slices between 3g and 7g; H100/H200 3g.40gb (60 SMs) lies between A100
   4g (56) and 7g (98).
3. ``x N/M SMs``: beyond the largest measured profile, e.g. H100 7g.80gb = A100 7g x 132/98.

H100 and H200 profiles have 16/32/60/64/132 SMs (``nvidia-smi mig -lgip``; see
:mod:`cotenant.model.gpu`), so their rows come out of the A100 curve at those SM counts. The
plain per-profile ratio (x16/14, 32/28, 60/42, 64/56, 132/98) was not used: MIGER measures A100
4g only ~16% above 3g, and the ratios (1.43 for 3g, 1.14 for 4g) would then put H100 3g.40gb
above 4g.40gb. For NLP models both rules agree within ~4% (7g identical). Counting SMs only
ignores Hopper's faster SMs, HBM3 and FP8, so H100/H200 rows are a conservative lower bound
until measured; H200 rows equal H100's (same SMs).

Caveat (calibration.md): MIGPerf's ~11 ms latency floor at small batches (~6 ms for the distil
models) looks like a client/pipeline artefact. The data are kept as published (and scaled like
any other row in derived ones); rely on large-batch capacity, not small-batch latency.

Regenerate the CSV with ``python -m cotenant.perf.mig_profiles > .../data/mig_profiles.csv``.
"""

from __future__ import annotations

import csv
import io
import math
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import numpy.typing as npt

from cotenant.errors import InputError, UnknownNameError
from cotenant.model.documents import csv_records
from cotenant.model.gpu import CATALOG
from cotenant.model.mig import MigProfile
from cotenant.perf.measured import MEASURED, MeasuredTable

COLUMNS = ("model", "gpu", "profile", "batch", "throughput_rps", "latency_ms", "source")
TARGET_GPUS = ("A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB")
"""The GPU models the default table covers, five compute profiles each."""


@dataclass(frozen=True)
class ProfilePoint:
    """One measured or derived operating point; ``source`` is a citation or ``derived: <rule>``."""

    model: str
    gpu: str
    profile: str
    batch: int
    throughput: float  # requests/s
    latency_ms: float  # per batch
    source: str


@dataclass(frozen=True)
class Capacity:
    """The best operating point under an SLO: requests/s at ``batch``, ``latency_ms`` per batch."""

    throughput: float
    batch: int
    latency_ms: float


class ProfileTable:
    """Operating points indexed by (model, GPU) and profile; GPU names may be catalog aliases."""

    def __init__(self, points: Iterable[ProfilePoint], source: str = "profile table") -> None:
        self.points = tuple(points)
        self.source = source  # where the points came from, for error messages
        self._curves: dict[tuple[str, str], dict[str, list[ProfilePoint]]] = {}
        seen: set[tuple[str, str, str, int]] = set()
        for p in self.points:
            where = f"{p.model}/{p.gpu}/{p.profile}/bs{p.batch}"
            if p.profile not in _profile_names(p.gpu, where):
                raise InputError(where, f"profile is not one of {p.gpu}'s MIG profiles")
            if (p.model, p.gpu, p.profile, p.batch) in seen:
                raise InputError(where, "duplicate operating point")
            seen.add((p.model, p.gpu, p.profile, p.batch))
            self._curves.setdefault((p.model, p.gpu), {}).setdefault(p.profile, []).append(p)
        for by_profile in self._curves.values():
            for curve in by_profile.values():
                curve.sort(key=lambda p: p.batch)

    def models(self) -> list[str]:
        return sorted({model for model, _ in self._curves})

    def check(self, model: str, gpu: str) -> None:
        """Raise :class:`UnknownNameError` unless the table has data for ``model`` on ``gpu``."""
        if model not in self.models():
            raise UnknownNameError("DNN model", model, self.models(), self.source)
        gpus = [g for m, g in self._curves if m == model]
        if _canonical(gpu) not in gpus:
            raise UnknownNameError(f"GPU model with data for {model}", gpu, gpus)

    def profiles(self, model: str, gpu: str) -> list[str]:
        """Profile names with data, in the catalog's order (smallest first)."""
        self.check(model, gpu)
        name = _canonical(gpu)
        have = self._curves[(model, name)]
        return [p for p in _profile_names(name, gpu) if p in have]

    def capacity(self, model: str, gpu: str, profile: str, slo_ms: float) -> Capacity | None:
        """The highest-throughput batch with latency <= ``slo_ms`` (ties: the smaller batch);
        ``None`` if no batch meets the SLO."""
        best: ProfilePoint | None = None
        for p in self._curve(model, gpu, profile):
            if p.latency_ms <= slo_ms and (best is None or p.throughput > best.throughput):
                best = p
        return None if best is None else Capacity(best.throughput, best.batch, best.latency_ms)

    def capacities(
        self, model: str, gpu: str, profile: str, slo_ms: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.float64]:
        """:meth:`capacity`'s throughput for many SLOs at once (0 where no batch meets one):
        the running maximum of throughput over the points sorted by latency, looked up by
        each SLO."""
        curve = sorted(self._curve(model, gpu, profile), key=lambda p: p.latency_ms)
        latency = np.array([p.latency_ms for p in curve])
        best = np.maximum.accumulate(np.array([p.throughput for p in curve]))
        index = np.searchsorted(latency, slo_ms, side="right") - 1
        return np.where(index >= 0, best[np.maximum(index, 0)], 0.0)

    def best_latency(self, model: str, gpu: str) -> float:
        """The lowest latency over all profiles and batch sizes: no SLO below it can be met."""
        self.check(model, gpu)
        curves = self._curves[(model, _canonical(gpu))].values()
        return min(p.latency_ms for curve in curves for p in curve)

    def _curve(self, model: str, gpu: str, profile: str) -> list[ProfilePoint]:
        valid = self.profiles(model, gpu)
        if profile.strip() not in valid:
            raise UnknownNameError(f"MIG profile with data for {model} on {gpu}", profile, valid)
        return self._curves[(model, _canonical(gpu))][profile.strip()]


def _canonical(gpu: str) -> str:
    return CATALOG.get(gpu).name if gpu in CATALOG else gpu


def _profile_names(gpu: str, where: str) -> list[str]:
    if gpu not in CATALOG or CATALOG.get(gpu).name != gpu:
        valid = ", ".join(CATALOG.mig_names())
        raise InputError(where, f"unknown GPU model {gpu!r}; valid MIG GPUs: {valid}")
    return [p.name for p in CATALOG.get(gpu).require_mig(where).profiles]


# --- the default table -------------------------------------------------------------------------


def _compute_profiles(gpu: str) -> list[MigProfile]:
    """One profile per compute size (1g, 2g, 3g, 4g, 7g): the smallest-memory, non-``+me`` one."""
    geometry = CATALOG.get(gpu).mig
    assert geometry is not None, gpu
    by_size: dict[int, MigProfile] = {}
    for p in sorted(geometry.profiles, key=lambda p: -p.memory_slices):  # smallest memory last
        if not p.name.endswith("+me"):
            by_size[p.compute_slices] = p
    return [by_size[k] for k in sorted(by_size)]


def _derive(table: MeasuredTable, gpu: str, target: MigProfile) -> list[ProfilePoint]:
    """``table``'s rows for ``target`` on ``gpu``: measured, or by the SM rule (module doc)."""
    n = len(table.batches)
    if gpu == table.gpu and target.name in table.throughput:
        rates, ms = table.throughput[target.name], table.latency_ms[target.name]
        return [
            ProfilePoint(table.model, gpu, target.name, b, rates[i], ms[i], table.source)
            for i, b in enumerate(table.batches)
        ]
    geometry = CATALOG.get(table.gpu).mig
    assert geometry is not None, table.gpu
    knots = sorted((geometry.profile(name).sms, name) for name in table.throughput)
    s = target.sms
    below = [k for k in knots if k[0] <= s]
    above = [k for k in knots if k[0] > s]
    (s_lo, lo) = below[-1] if below else above[0]
    t_lo, lat_lo = table.throughput[lo], table.latency_ms[lo]
    if s_lo == s:
        rule = f"same {s} SMs as {table.gpu} {lo}"
        tput = list(t_lo)
    elif below and above:
        (s_hi, hi) = above[0]
        w = (s - s_lo) / (s_hi - s_lo)
        rule = f"{table.gpu} {lo}..{hi} linear in SMs at {s}"
        t_hi = table.throughput[hi]
        tput = [t_lo[i] + (t_hi[i] - t_lo[i]) * w for i in range(n)]
    else:
        rule = f"{table.gpu} {lo} x {s}/{s_lo} SMs"
        tput = [a * s / s_lo for a in t_lo]
    return [
        ProfilePoint(
            table.model,
            gpu,
            target.name,
            table.batches[i],
            round(tput[i], 2),
            round(lat_lo[i] * t_lo[i] / tput[i], 2),
            f"derived: {rule}",
        )
        for i in range(n)
    ]


def derive_default_points() -> list[ProfilePoint]:
    """The whole default table from :data:`cotenant.perf.measured.MEASURED`, deterministically:
    by model name, then GPU in :data:`TARGET_GPUS` order, profile size, batch size."""
    return [
        point
        for table in sorted(MEASURED, key=lambda t: t.model)
        for gpu in TARGET_GPUS
        for profile in _compute_profiles(gpu)
        for point in _derive(table, gpu, profile)
    ]


def _num(x: float) -> str:
    text = repr(float(x))
    return text[:-2] if text.endswith(".0") else text


def format_csv(points: Iterable[ProfilePoint]) -> str:
    """The CSV text :func:`load_csv` reads (``\\n`` line ends, numbers round-trip exactly)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for p in points:
        row = (p.batch, _num(p.throughput), _num(p.latency_ms), p.source)
        writer.writerow((p.model, p.gpu, p.profile, *row))
    return out.getvalue()


def default_table() -> ProfileTable:
    """The shipped table (``cotenant/perf/data/mig_profiles.csv``)."""
    text = resources.files("cotenant.perf").joinpath("data/mig_profiles.csv").read_text("utf-8")
    return ProfileTable(_parse(io.StringIO(text), "mig_profiles.csv"), "the shipped profiles")


def load_csv(path: str | Path) -> ProfileTable:
    """Read a table with columns ``model,gpu,profile,batch,throughput_rps,latency_ms[,source]``.

    Strict: a missing or unknown column, a non-numeric or non-positive number, a GPU model the
    catalog does not know (aliases are accepted and canonicalised) or a profile that GPU does not
    have raises :class:`InputError` naming ``file:line:column`` and the rule.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(str(path), f"cannot read: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"{path}:{line}", "not UTF-8 text") from exc
    return ProfileTable(_parse(io.StringIO(text, newline=""), str(path)), str(path))


def _parse(lines: Iterable[str], name: str) -> list[ProfilePoint]:
    records = csv_records(lines, name)
    header = next(records, (1, []))[1]
    expected = ",".join(COLUMNS)
    for col in COLUMNS[:-1]:
        if col not in header:
            raise InputError(f"{name}:1:{col}", f"missing column; expected header {expected}")
    for col in header:
        if col not in COLUMNS or header.count(col) > 1:
            raise InputError(f"{name}:1:{col}", f"unknown or repeated column; expected {expected}")
    points = []
    first: dict[tuple[str, str, str, int], int] = {}
    for start, row in records:
        where = f"{name}:{start}"
        if len(row) != len(header):
            raise InputError(where, f"{len(row)} fields; the header has {len(header)}")
        point = _point(dict(zip(header, row, strict=True)), where)
        key = (point.model, point.gpu, point.profile, point.batch)
        if key in first:
            raise InputError(where, f"{point.model} on {point.gpu} {point.profile} at batch "
                             f"{point.batch} is already on line {first[key]}", hint="keep one")
        first[key] = start
        points.append(point)
    if not points:
        raise InputError(f"{name}:2", "no data rows after the header")
    return points


def _point(rec: dict[str, str], where: str) -> ProfilePoint:
    if not rec["model"]:
        raise InputError(f"{where}:model", "empty model name")
    if rec["gpu"] not in CATALOG:
        valid = ", ".join(CATALOG.mig_names())
        raise InputError(f"{where}:gpu", f"unknown GPU model {rec['gpu']!r}; valid: {valid}")
    gpu = CATALOG.get(rec["gpu"]).name
    profiles = _profile_names(gpu, f"{where}:gpu")
    if rec["profile"] not in profiles:
        raise InputError(
            f"{where}:profile",
            f"{rec['profile']!r} is not a MIG profile of {gpu}; valid: {', '.join(profiles)}",
        )
    batch = rec["batch"]
    if not (batch.isascii() and batch.isdigit()) or int(batch) < 1:
        raise InputError(f"{where}:batch", f"{rec['batch']!r} is not a positive integer")
    return ProfilePoint(
        rec["model"],
        gpu,
        rec["profile"],
        int(rec["batch"]),
        _positive(rec, "throughput_rps", where),
        _positive(rec, "latency_ms", where),
        rec.get("source", ""),
    )


def _positive(rec: dict[str, str], col: str, where: str) -> float:
    try:
        value = float(rec[col])
    except ValueError:
        raise InputError(f"{where}:{col}", f"{rec[col]!r} is not a number") from None
    if value < 0:
        raise InputError(f"{where}:{col}", f"{rec[col]!r} is negative; must be > 0")
    if not math.isfinite(value) or value == 0:
        raise InputError(f"{where}:{col}", f"{rec[col]!r} must be a finite number > 0")
    return value


if __name__ == "__main__":
    sys.stdout.write(format_csv(derive_default_points()))
