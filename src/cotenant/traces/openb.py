"""Strict, streaming loader for the Alibaba GPU cluster trace v2023 ("openb") CSV format.

Node lists have columns ``sn, cpu_milli, memory_mib, gpu, model``; pod lists ``name,
cpu_milli, memory_mib, num_gpu, gpu_milli`` and optionally ``gpu_spec, qos, pod_phase,
creation_time, deletion_time, scheduled_time`` (the multigpu variants omit the optional ones).
``pod_phase`` and ``scheduled_time`` are not read: every pod of the list is scheduled, whatever
phase the trace recorded for it.
Rows are read one at a time; the first bad row stops the load with an :class:`InputError`
naming file, line, column and rule. Nothing is dropped silently.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path

from cotenant.errors import InputError, UnknownNameError
from cotenant.model.gpu import CATALOG
from cotenant.model.workload import MILLI_PER_GPU, Node, Pod, PodShape, Qos
from cotenant.traces.csvrows import CsvRows as _Rows

POD_REQUIRED = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
NODE_REQUIRED = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
_QOS = {q.value.lower(): q for q in Qos}
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
MAX_VALUE = 10**12
"""Bound of the columns with no natural one (CPU, memory, times): far above any cluster (a
million cores, an exbibyte, 30,000 years), and within what int64 sums of them can hold."""


def _int(rows: _Rows, line: int, row: dict[str, str], col: str, lo: int, hi: int | None) -> int:
    """An integer column: ASCII digits, or a number whose value is whole ("1000.0", "1e3"),
    within ``lo..hi`` (``hi`` None: up to :data:`MAX_VALUE`)."""
    text = row[col]
    top = MAX_VALUE if hi is None else hi
    as_float = float(text) if _NUMBER.fullmatch(text) else math.nan
    if math.isnan(as_float):
        raise InputError(rows.where(line, col), f"{text!r} is not an integer", hint="e.g. 1000")
    if not lo <= as_float <= top:
        raise InputError(rows.where(line, col), f"{text} is out of range ({lo}..{top})")
    if not as_float.is_integer():
        raise InputError(rows.where(line, col), f"{text!r} is not an integer", hint="e.g. 1000")
    return int(text) if text.lstrip("+-").isdigit() else int(as_float)


def _gpu_spec(rows: _Rows, line: int, text: str) -> tuple[str, ...]:
    if not text:
        return ()
    names = []
    for part in text.split("|"):
        try:
            names.append(CATALOG.get(part).name)
        except UnknownNameError as exc:
            raise InputError(
                rows.where(line, "gpu_spec"),
                f"unknown GPU model {part!r}; known: {', '.join(CATALOG.names())}",
            ) from exc
    return tuple(sorted(set(names)))


def iter_pods(path: str | Path) -> Iterator[Pod]:
    """Pods of an openb pod list, in file order, validated row by row."""
    rows = _Rows(Path(path), POD_REQUIRED)
    seen: set[str] = set()
    for line, row in rows:
        name = row["name"]
        if not name:
            raise InputError(rows.where(line, "name"), "pod name is empty")
        if name in seen:
            raise InputError(rows.where(line, "name"), f"pod {name!r} appears twice")
        seen.add(name)
        cpu = _int(rows, line, row, "cpu_milli", 0, None)
        mem = _int(rows, line, row, "memory_mib", 0, None)
        num_gpu = _int(rows, line, row, "num_gpu", 0, 64)
        milli = _int(rows, line, row, "gpu_milli", 0, MILLI_PER_GPU)
        if num_gpu == 0 and milli != 0:
            raise InputError(rows.where(line, "gpu_milli"), f"{milli} with num_gpu 0; must be 0")
        if num_gpu >= 1 and milli == 0:
            raise InputError(rows.where(line, "gpu_milli"), "0 with num_gpu >= 1; must be 1..1000")
        if num_gpu > 1 and milli != MILLI_PER_GPU:
            raise InputError(
                rows.where(line, "gpu_milli"),
                f"{milli} with num_gpu {num_gpu}; multi-GPU pods take whole GPUs (1000)",
            )
        spec = _gpu_spec(rows, line, row.get("gpu_spec", ""))
        qos_text = row.get("qos", "") or "LS"
        qos = _QOS.get(qos_text.lower())
        if qos is None:
            raise InputError(
                rows.where(line, "qos"), f"{qos_text!r} is not one of {', '.join(Qos)}"
            )
        if "creation_time" not in row:  # a variant without times: every pod arrives at 0
            created = 0
        elif not row["creation_time"]:
            raise InputError(rows.where(line, "creation_time"), "empty; the column is in the "
                             "header, so every pod needs its creation time")
        else:
            created = _int(rows, line, row, "creation_time", 0, None)
        deleted = (
            _int(rows, line, row, "deletion_time", 0, None) if row.get("deletion_time") else None
        )
        if deleted is not None and deleted < created:
            raise InputError(
                rows.where(line, "deletion_time"),
                f"{deleted} is before creation_time {created}",
            )
        yield Pod(name, PodShape(cpu, mem, num_gpu, milli, spec), qos, created, deleted)


def load_pods(path: str | Path) -> list[Pod]:
    return list(iter_pods(path))


def iter_nodes(path: str | Path, *, gpu_only: bool = True) -> Iterator[Node]:
    """Nodes of an openb node list; CPU-only nodes are skipped when ``gpu_only``."""
    rows = _Rows(Path(path), NODE_REQUIRED)
    seen: set[str] = set()
    for line, row in rows:
        name = row["sn"]
        if not name or name in seen:
            raise InputError(rows.where(line, "sn"), f"node name {name!r} is empty or repeated")
        seen.add(name)
        cpu = _int(rows, line, row, "cpu_milli", 0, None)
        mem = _int(rows, line, row, "memory_mib", 0, None)
        gpus = _int(rows, line, row, "gpu", 0, 64)
        model_name = row["model"]
        if gpus == 0:
            if not gpu_only:
                yield Node(name, cpu, mem, 0, None)
            continue
        if not model_name:
            raise InputError(rows.where(line, "model"), f"empty, but the node has {gpus} GPUs")
        try:
            model = CATALOG.get(model_name)
        except UnknownNameError as exc:
            raise InputError(
                rows.where(line, "model"),
                f"unknown GPU model {model_name!r}; known: {', '.join(CATALOG.names())}",
            ) from exc
        yield Node(name, cpu, mem, gpus, model)


def load_nodes(path: str | Path, *, gpu_only: bool = True) -> list[Node]:
    return list(iter_nodes(path, gpu_only=gpu_only))
