"""Checks on a synthetic-parameters file (what ``cotenant trace fit`` writes, ``--params`` reads).

The file is JSON a person may edit, and every field feeds a random draw: a negative or NaN
weight, a weight list shorter than its shapes or a count given as a string would otherwise end
deep in numpy with a traceback, or quietly draw a workload the trace never had. Each rule
broken is an :class:`InputError` naming the field (``params.json:shape_weights[3]``).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from cotenant.errors import InputError
from cotenant.model.gpu import CATALOG
from cotenant.model.workload import MILLI_PER_GPU, PodShape, Qos

FIELDS = ("source", "shapes", "shape_weights", "qos", "lifetime", "arrival_gap", "node_types",
          "node_weights", "nodes", "pods")
CLASSES = ("cpu", "fractional", "whole")
N_QUANTILES = 101
WEIGHT_TOLERANCE = 1e-6
"""How far from 1 a list of weights may sum (rounding in a hand-edited file); the weights are
then divided by their sum, as numpy's choice() wants them within ~1e-8."""


def checked_fields(data: dict[str, Any], where: str) -> dict[str, Any]:
    """The fields of a parameters document, checked and converted to the types of
    :class:`~cotenant.traces.synthetic.SyntheticParams`."""
    missing = [f for f in FIELDS if f not in data]
    if missing:
        raise InputError(where, f"missing field {', '.join(missing)}")
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise InputError(where, f"unknown field {', '.join(unknown)}; valid: {', '.join(FIELDS)}")
    if not isinstance(data["source"], str):
        raise InputError(f"{where}:source", "must be a string")
    shapes = [shape(row, f"{where}:shapes[{i}]") for i, row in enumerate(items(data, "shapes",
                                                                                  where))]
    nodes = [node_type(row, f"{where}:node_types[{i}]")
             for i, row in enumerate(items(data, "node_types", where))]
    qos = qos_table(data["qos"], f"{where}:qos")
    for i, row in enumerate(shapes):
        klass = request_class(PodShape(*row))
        if klass not in qos:
            raise InputError(f"{where}:shapes[{i}]", f"a {klass} shape, but qos has no "
                             f"{klass!r} entry")
    return {
        "source": data["source"],
        "shapes": shapes,
        "shape_weights": weights(data["shape_weights"], f"{where}:shape_weights", len(shapes)),
        "qos": qos,
        "lifetime": lifetimes(data["lifetime"], f"{where}:lifetime"),
        "arrival_gap": quantiles(data["arrival_gap"], f"{where}:arrival_gap"),
        "node_types": nodes,
        "node_weights": weights(data["node_weights"], f"{where}:node_weights", len(nodes)),
        "nodes": count(data["nodes"], f"{where}:nodes"),
        "pods": count(data["pods"], f"{where}:pods"),
    }


def request_class(shape: PodShape) -> str:
    """The class a shape's qos is drawn by: CPU-only, a fraction of one GPU, whole GPUs."""
    if shape.num_gpu == 0:
        return "cpu"
    return "fractional" if shape.fractional else "whole"


def items(data: dict[str, Any], name: str, where: str) -> list[Any]:
    value = data[name]
    if not isinstance(value, list) or not value:
        raise InputError(f"{where}:{name}", "must be a non-empty list")
    return value


def integer(value: Any, where: str, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(where, f"{value!r} is not an integer")
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in {low}..{high}"
        raise InputError(where, f"{value} must be {bound}")
    return value


def count(value: Any, where: str) -> int:
    return integer(value, where, 1)


def number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InputError(where, f"{value!r} is not a finite number")
    return float(value)


def shape(row: Any, where: str) -> tuple[int, int, int, int]:
    """(cpu_milli, memory_mib, num_gpu, gpu_milli) under the openb pod-list rules."""
    if not isinstance(row, list) or len(row) != 4:
        raise InputError(where, "must be [cpu_milli, memory_mib, num_gpu, gpu_milli]")
    cpu = integer(row[0], f"{where}.cpu_milli", 0)
    mem = integer(row[1], f"{where}.memory_mib", 0)
    gpus = integer(row[2], f"{where}.num_gpu", 0, 64)
    milli = integer(row[3], f"{where}.gpu_milli", 0, MILLI_PER_GPU)
    if (gpus == 0) != (milli == 0) or (gpus > 1 and milli != MILLI_PER_GPU):
        raise InputError(f"{where}.gpu_milli", f"{milli} with num_gpu {gpus}; must be 0 with "
                         "0 GPUs, 1..1000 with one, 1000 with several")
    return cpu, mem, gpus, milli


def node_type(row: Any, where: str) -> tuple[str, int, int, int]:
    """(GPU model, GPUs, cpu_milli, memory_mib) of a GPU node type."""
    if not isinstance(row, list) or len(row) != 4:
        raise InputError(where, "must be [model, gpus, cpu_milli, memory_mib]")
    model = row[0]
    if not isinstance(model, str) or model not in CATALOG.names():
        raise InputError(f"{where}.model", f"{model!r} is not a known GPU model; known: "
                         f"{', '.join(CATALOG.names())}")
    return (model, integer(row[1], f"{where}.gpus", 1, 64),
            integer(row[2], f"{where}.cpu_milli", 0), integer(row[3], f"{where}.memory_mib", 0))


def weights(value: Any, where: str, n: int) -> list[float]:
    """``n`` probabilities: finite, >= 0, summing to 1."""
    if not isinstance(value, list) or len(value) != n:
        size = len(value) if isinstance(value, list) else "no list"
        raise InputError(where, f"must be a list of {n} weights, one per entry ({size} given)")
    out = [number(w, f"{where}[{i}]") for i, w in enumerate(value)]
    for i, w in enumerate(out):
        if w < 0:
            raise InputError(f"{where}[{i}]", f"{w} must be >= 0")
    total = math.fsum(out)
    if abs(total - 1.0) > WEIGHT_TOLERANCE:
        raise InputError(where, f"weights sum to {total:.9g}; must sum to 1")
    return [w / total for w in out]


def qos_table(value: Any, where: str) -> dict[str, dict[str, float]]:
    """Request class -> qos -> probability, for the classes the trace had."""
    if not isinstance(value, dict) or not value or not set(value) <= set(CLASSES):
        raise InputError(where, f"must map request classes ({', '.join(CLASSES)}) to qos "
                         "probabilities")
    valid = {q.value for q in Qos}
    table = {}
    for klass, probs in value.items():
        if not isinstance(probs, dict) or not probs or not set(probs) <= valid:
            raise InputError(f"{where}.{klass}", f"must map qos ({', '.join(sorted(valid))}) "
                             "to probabilities")
        table[klass] = dict(zip(probs, weights(list(probs.values()), f"{where}.{klass}",
                                               len(probs)), strict=True))
    return table


def lifetimes(value: Any, where: str) -> dict[str, list[float]]:
    """qos -> lifetime quantiles; a qos without any never leaves."""
    valid = {q.value for q in Qos}
    if not isinstance(value, dict) or not set(value) <= valid:
        raise InputError(where, f"must map qos ({', '.join(sorted(valid))}) to quantiles")
    return {q: quantiles(v, f"{where}.{q}") for q, v in value.items()}


def quantiles(value: Any, where: str) -> list[float]:
    """101 quantiles of log(1 + seconds): finite, >= 0, non-decreasing."""
    if not isinstance(value, list) or len(value) != N_QUANTILES:
        raise InputError(where, f"must be a list of {N_QUANTILES} quantiles")
    out = [number(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if out[0] < 0:
        raise InputError(f"{where}[0]", f"{out[0]} must be >= 0 (a log of 1 + seconds)")
    for i, (a, b) in enumerate(itertools.pairwise(out), start=1):
        if b < a:
            raise InputError(f"{where}[{i}]", f"{b} is below the quantile before it ({a})")
    return out
