"""Time replay: pods arrive at their creation time and leave at their deletion time.

Runs on the :class:`~cotenant.sim.engine.Engine`: an arrival places the pod (tried once; a pod
that fits nowhere is counted as failed, never dropped silently) and returns its departure as a
follow-up event; departures at a time stamp run before arrivals at it. Every ``sample_every``
simulated seconds the allocated GPU share, the fragmented share (FGD's measure over the
workload's typical pods) and the running pods are recorded.

A pod list sampled from a cluster's pods (openb's) keeps their times but not their
concurrency: its pods alive at once may ask for a tiny share of the cluster, and then every
policy places every pod. :func:`peak_demand` measures that share from the trace alone;
:func:`speed_up_arrivals` (arrivals closer together, lifetimes kept) and :func:`sample_nodes`
(a smaller cluster of the same node mix) raise it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from cotenant.errors import InputError
from cotenant.model.cluster import Cluster, ClusterState
from cotenant.model.workload import Pod
from cotenant.policies.placement import PLACEMENT
from cotenant.policies.placement.frag import FragModel, FragTracker, TypicalPods
from cotenant.sim.engine import Engine, Event, Priority
from cotenant.sim.placer import Placer

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class ReplayConfig:
    """Settings of a time replay."""

    sample_every: float = 3600.0
    """Seconds of simulated time between metric samples."""
    coverage: float = 0.95
    """Share of pods FGD's typical shapes must cover."""


@dataclass(frozen=True)
class ReplayRun:
    """Metric samples of one replay, plus totals."""

    policy: str
    seed: int
    times: FloatArray
    alloc_percent: FloatArray
    frag_percent: FloatArray
    running: npt.NDArray[np.int64]
    arrivals: int
    failed: int
    departures: int


@dataclass(frozen=True)
class PeakDemand:
    """The most the trace's pods ask for at one moment, whatever the placement."""

    pods: int
    """Pods alive at once (``creation_time <= t < deletion_time``), at most."""
    gpu_percent: float
    """Their GPU demand, as a share of the cluster's GPU capacity (%), at most."""


def peak_demand(cluster: Cluster, pods: Sequence[Pod]) -> PeakDemand:
    """Sweep the pods' lifetimes: the most pods alive at once and the most GPU demand alive
    at once (a pod without a deletion time stays to the end)."""
    events = sorted(
        [(p.creation_time, 1, p.shape.gpu_milli_total) for p in pods]
        + [(p.deletion_time, -1, -p.shape.gpu_milli_total)
           for p in pods if p.deletion_time is not None]
    )  # at one time stamp departures (-1) come first, as in the replay
    alive = milli = most_pods = most_milli = 0
    for _, step, gpu in events:
        alive += step
        milli += gpu
        most_pods, most_milli = max(most_pods, alive), max(most_milli, milli)
    return PeakDemand(most_pods, 100.0 * most_milli / cluster.total_gpu_milli)


def speed_up_arrivals(pods: Sequence[Pod], factor: float) -> list[Pod]:
    """Pods arriving ``factor`` times as fast (their gaps from the first arrival divided by
    ``factor``), each keeping its lifetime: about ``factor`` times as many alive at once."""
    if not (math.isfinite(factor) and factor >= 1.0):
        raise InputError("--arrival-speedup", f"{factor} must be a finite number >= 1")
    start = min((p.creation_time for p in pods), default=0)
    out = []
    for pod in pods:
        born = start + round((pod.creation_time - start) / factor)
        end = None if pod.deletion_time is None else born + (pod.deletion_time - pod.creation_time)
        out.append(replace(pod, creation_time=born, deletion_time=end))
    return out


MAX_SPEEDUP = 1e6
"""The largest arrival speed-up :func:`speedup_for` tries: a year of arrivals in 30 s."""


def speedup_for(cluster: Cluster, pods: Sequence[Pod], target_pct: float) -> float | None:
    """About the arrival speed-up at which the pods alive at once ask for ``target_pct`` of
    the cluster's GPUs (bisection on a log scale: more speed-up, more pods alive at once,
    though not in proportion, as a few long pods weigh more than many short ones); None
    where even :data:`MAX_SPEEDUP` falls short."""
    if peak_demand(cluster, speed_up_arrivals(pods, MAX_SPEEDUP)).gpu_percent < target_pct:
        return None
    low, high = 0.0, math.log(MAX_SPEEDUP)
    for _ in range(30):
        mid = (low + high) / 2
        if peak_demand(cluster, speed_up_arrivals(pods, math.exp(mid))).gpu_percent < target_pct:
            low = mid
        else:
            high = mid
    return math.exp(high)


def sample_nodes(cluster: Cluster, fraction: float, rng: np.random.Generator) -> Cluster:
    """A cluster of ``fraction`` of the nodes (at least one), drawn without replacement by
    ``rng``: the same mix of node types, smaller."""
    if not (math.isfinite(fraction) and 0.0 < fraction <= 1.0):
        raise InputError("--cluster-fraction", f"{fraction} must be in (0, 1]")
    keep = max(1, round(fraction * cluster.size))
    chosen = np.sort(rng.choice(cluster.size, size=keep, replace=False))
    return Cluster([cluster.nodes[i] for i in chosen])


MAX_SAMPLES = 1_000_000
"""Most metric samples of one replay (each costs a fragmentation measure): a year at 30 s."""


def check_samples(pods: Sequence[Pod], config: ReplayConfig) -> None:
    """An error when the trace's time span holds more than :data:`MAX_SAMPLES` samples."""
    stamps = [t for p in pods for t in (p.creation_time, p.deletion_time) if t is not None]
    span = max(stamps, default=0) - min(stamps, default=0)
    if span / config.sample_every > MAX_SAMPLES:
        raise InputError("--sample-every", f"{config.sample_every:g} s over the trace's "
                         f"{span:,} s is more than {MAX_SAMPLES:,} samples",
                         hint=f"give at least {span / MAX_SAMPLES:,.0f} s, or check the trace's "
                         "times (seconds)")


def run_replay(
    cluster: Cluster,
    pods: Sequence[Pod],
    policy: str,
    seed: int,
    config: ReplayConfig = ReplayConfig(),
) -> ReplayRun:
    """Replay ``pods`` on ``cluster`` with ``policy``; ties between nodes broken by ``seed``."""
    check_samples(pods, config)
    rng = np.random.default_rng(seed)
    rank = rng.permutation(cluster.size).astype(np.int64)
    workload = [p.shape for p in pods]
    chosen = PLACEMENT.create(policy, workload=workload)
    state = ClusterState(cluster)
    placer = Placer(chosen, state, rank, rng)
    typical = TypicalPods.from_shapes(workload, config.coverage)
    tracker = FragTracker(FragModel(typical, cluster), state)
    engine = Engine()
    samples: list[tuple[float, float, float, int]] = []
    counters = {"arrivals": 0, "failed": 0, "departures": 0, "running": 0}

    def arrive(event: Event) -> list[tuple[float, int, str, Any]] | None:
        pod: Pod = event.payload
        counters["arrivals"] += 1
        alloc = placer.place(pod.shape)
        if alloc is None:
            counters["failed"] += 1
            return None
        counters["running"] += 1
        if pod.deletion_time is None:
            return None
        leave = max(float(pod.deletion_time), event.time)
        return [(leave, Priority.DEPARTURE, "depart", (pod.shape, alloc))]

    def depart(event: Event) -> None:
        shape, alloc = event.payload
        state.release(shape, alloc)
        counters["departures"] += 1
        counters["running"] -= 1

    def sample(event: Event) -> list[tuple[float, int, str, Any]] | None:
        cap = cluster.total_gpu_milli
        samples.append(
            (
                event.time,
                100.0 * state.gpu_allocated_milli() / cap,
                100.0 * tracker.total() / cap,
                counters["running"],
            )
        )
        if len(engine) == 0:
            return None
        return [(event.time + config.sample_every, Priority.SAMPLE, "sample", None)]

    engine.on("arrive", arrive)
    engine.on("depart", depart)
    engine.on("sample", sample)
    for pod in sorted(pods, key=lambda p: (p.creation_time, p.name)):
        engine.schedule(float(pod.creation_time), Priority.ARRIVAL, "arrive", pod)
    start = float(min((p.creation_time for p in pods), default=0))
    engine.schedule(start, Priority.SAMPLE, "sample", None)
    engine.run()
    times, alloc, frag, running = zip(*samples, strict=True) if samples else ((), (), (), ())
    return ReplayRun(
        chosen.name,
        seed,
        np.array(times, dtype=np.float64),
        np.array(alloc, dtype=np.float64),
        np.array(frag, dtype=np.float64),
        np.array(running, dtype=np.int64),
        counters["arrivals"],
        counters["failed"],
        counters["departures"],
    )

