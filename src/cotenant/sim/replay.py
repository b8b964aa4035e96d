"""Time replay: pods arrive at their creation time and leave at their deletion time.

Runs on the :class:`~cotenant.sim.engine.Engine`: an arrival places the pod (tried once; a pod
that fits nowhere is counted as failed, never dropped silently) and returns its departure as a
follow-up event; departures at a time stamp run before arrivals at it. Every ``sample_every``
simulated seconds the allocated GPU share, the fragmented share (FGD's measure over the
workload's typical pods) and the running pods are recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
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

