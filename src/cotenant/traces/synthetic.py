"""A synthetic workload and cluster generator whose distributions are fitted to openb.

The fitted parameters ship inside the package (``params/openb_default.json``) and are the
embedded default of ``cotenant simulate``, so the main job runs without any trace on disk.
:func:`fit_openb` is how that file was made (``cotenant trace fit`` reruns it), so anyone can
refit on their own cluster's trace.

What is fitted, by maximum likelihood:

* **pod shapes**: a categorical distribution over (CPU, memory, GPU count, GPU milli)
  requests, which carries the GPU-request mix (CPU-only, fractional, 1/2/4/8 GPUs) and the
  fractional shares together with the CPU and memory that come with them;
* **qos**: a categorical per GPU-request class (CPU-only, fractional, whole GPUs);
* **lifetimes**: per qos, the empirical quantile function of ``log(1 + seconds)`` (101
  quantiles, sampled by inverse transform with linear interpolation): openb's lifetimes are
  bimodal (most pods live minutes, running services until the trace ends), which a
  log-normal misses;
* **arrivals**: independent gaps drawn the same way from the quantiles of the gaps between
  consecutive creation times;
* **nodes**: a categorical over node types (GPU model, GPUs, CPU, memory).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from cotenant.errors import InputError
from cotenant.model.documents import loads_json
from cotenant.model.gpu import CATALOG
from cotenant.model.workload import Node, Pod, PodShape, Qos
from cotenant.traces.params_check import checked_fields, request_class

FORMAT = "cotenant/synthetic-params/v1"


def params_json(text: str | bytes, where: str, fmt: str, kind: str) -> dict[str, Any]:
    """The fields of a parameters file whose ``format`` is ``fmt`` (``format`` removed)."""
    data = loads_json(text, where)
    if not isinstance(data, dict) or data.pop("format", None) != fmt:
        raise InputError(where, f"not a {kind} file (format {fmt})")
    return data


@dataclass(frozen=True)
class SyntheticParams:
    """Fitted parameters; every list of weights sums to 1."""

    source: str
    shapes: list[tuple[int, int, int, int]]  # cpu_milli, memory_mib, num_gpu, gpu_milli
    shape_weights: list[float]
    qos: dict[str, dict[str, float]]  # request class -> qos -> probability
    lifetime: dict[str, list[float]]  # qos -> 101 quantiles of log(1 + seconds)
    arrival_gap: list[float]  # 101 quantiles of log(1 + seconds between arrivals)
    node_types: list[tuple[str, int, int, int]]  # model, gpus, cpu_milli, memory_mib
    node_weights: list[float]
    nodes: int  # nodes in the fitted cluster
    pods: int  # pods in the fitted trace

    def to_json(self) -> str:
        return json.dumps({"format": FORMAT, **asdict(self)}, indent=1)

    @staticmethod
    def from_json(text: str | bytes, where: str = "params") -> SyntheticParams:
        data = params_json(text, where, FORMAT, "synthetic-parameters")
        return SyntheticParams(**checked_fields(data, where))


def fit_openb(pods: Sequence[Pod], nodes: Sequence[Node], source: str) -> SyntheticParams:
    """Fit :class:`SyntheticParams` to an openb pod list and node list."""
    if not pods or not nodes:
        raise InputError(source, "need at least one pod and one node to fit")
    if not any(n.gpu_count and n.gpu_model is not None for n in nodes):
        raise InputError(source, "the node list has no GPU node to fit")
    shapes = Counter(
        (p.shape.cpu_milli, p.shape.memory_mib, p.shape.num_gpu, p.shape.gpu_milli) for p in pods
    )
    ranked = sorted(shapes.items(), key=lambda kv: (-kv[1], kv[0]))
    qos: dict[str, Counter[str]] = {}
    for p in pods:
        qos.setdefault(request_class(p.shape), Counter())[p.qos.value] += 1
    lifetime = {}
    for q in Qos:
        durations = [p.duration for p in pods if p.qos is q and p.duration is not None]
        if durations:
            lifetime[q.value] = _log_quantiles(durations)
    created = np.sort(np.array([p.creation_time for p in pods], dtype=np.float64))
    gaps = np.diff(created) if len(created) > 1 else np.zeros(1)
    types = Counter(
        (n.gpu_model.name, n.gpu_count, n.cpu_milli, n.memory_mib)
        for n in nodes
        if n.gpu_model is not None
    )
    type_list = sorted(types.items(), key=lambda kv: (-kv[1], kv[0]))
    return SyntheticParams(
        source=source,
        shapes=[s for s, _ in ranked],
        shape_weights=[n / len(pods) for _, n in ranked],
        qos={
            c: {k: v / sum(cnt.values()) for k, v in sorted(cnt.items())}
            for c, cnt in qos.items()
        },
        lifetime=lifetime,
        arrival_gap=_log_quantiles(gaps.tolist()),
        node_types=[t for t, _ in type_list],
        node_weights=[n / sum(types.values()) for _, n in type_list],
        nodes=len(nodes),
        pods=len(pods),
    )


QUANTILES = np.linspace(0.0, 1.0, 101)


def _log_quantiles(values: Sequence[float]) -> list[float]:
    logs = np.log1p(np.asarray(values, dtype=np.float64))
    return [round(float(v), 6) for v in np.quantile(logs, QUANTILES)]


def _draw(quantiles: Sequence[float], size: int, rng: np.random.Generator) -> np.ndarray:
    """Inverse-transform samples of ``exp(Q(u)) - 1`` with Q the tabulated quantiles."""
    u = rng.random(size)
    drawn: np.ndarray = np.expm1(np.interp(u, QUANTILES, np.asarray(quantiles)))
    return drawn


def default_params() -> SyntheticParams:
    """The parameters fitted to openb's default pod list and GPU node list."""
    text = resources.files("cotenant.traces").joinpath("params/openb_default.json").read_text()
    return SyntheticParams.from_json(text, "openb_default.json")


def load_params(path: str | Path) -> SyntheticParams:
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(str(path), f"cannot read parameters: {exc.strerror or exc}") from exc
    return SyntheticParams.from_json(raw, str(path))


def generate_pods(params: SyntheticParams, count: int, rng: np.random.Generator) -> list[Pod]:
    """``count`` pods drawn from ``params``, the first arriving at time 0. Pods of a qos
    without a fitted lifetime (a trace with no deletion times) never leave."""
    if count <= 0:
        return []
    idx = rng.choice(len(params.shapes), size=count, p=np.asarray(params.shape_weights))
    gaps = _draw(params.arrival_gap, count, rng)
    gaps[0] = 0.0
    created = np.floor(np.cumsum(gaps)).astype(np.int64)
    lifetimes = {q: _draw(v, count, rng) for q, v in params.lifetime.items()}
    pods = []
    for i in range(count):
        cpu, mem, num_gpu, milli = params.shapes[int(idx[i])]
        shape = PodShape(cpu, mem, num_gpu, milli)
        classes = params.qos[request_class(shape)]
        qos = Qos(str(rng.choice(list(classes), p=list(classes.values()))))
        drawn = lifetimes.get(qos.value)
        start = int(created[i])
        end = None if drawn is None else start + max(1, int(drawn[i]))
        pods.append(Pod(f"synth-pod-{i:05d}", shape, qos, start, end))
    return pods


def generate_nodes(params: SyntheticParams, count: int, rng: np.random.Generator) -> list[Node]:
    """``count`` nodes; node types in proportion to the fitted weights (largest remainder,
    then a seeded shuffle), so a full-size cluster has the fitted mix exactly."""
    weights = np.asarray(params.node_weights)
    exact = weights * count
    counts = np.floor(exact).astype(np.int64)
    for i in np.argsort(-(exact - counts), kind="stable")[: count - int(counts.sum())]:
        counts[i] += 1
    kinds = np.repeat(np.arange(len(weights)), counts)
    rng.shuffle(kinds)
    nodes = []
    for i, k in enumerate(kinds):
        model, gpus, cpu, mem = params.node_types[int(k)]
        nodes.append(Node(f"synth-node-{i:04d}", cpu, mem, gpus, CATALOG.get(model)))
    return nodes
