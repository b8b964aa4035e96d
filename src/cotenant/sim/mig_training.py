"""Training jobs on MIG GPUs: one-to-one static MIG, one-to-one dynamic MIG (drain, then
remake the layout) and Flex-MIG's one-to-many, on the same jobs and the same layouts.

The cluster is ``gpus`` GPUs of one MIG model in nodes of ``gpus_per_node``, laid out by
:func:`~cotenant.policies.flexmig.static_layouts` from the jobs' mix. Jobs queue in arrival
order; after every arrival, finish or remake, the scheduler walks the queue and starts every
job it can place (backfilling: a job that does not fit does not hold back smaller ones
behind it; all three policies walk the queue alike). A job runs ``work_s /`` its speed
(:func:`~cotenant.policies.flexmig.speed`): slices beyond those it asked for do not speed it
up, and each instance beyond the first costs ``overhead``.

* ``static``: one instance of at least the size asked for, on the fixed layouts;
* ``dynamic``: the same, but when the queue's first job that fits nowhere has waited
  ``drain_after_s``, one GPU at a time is drained
  (:func:`~cotenant.policies.flexmig.drain_choice`; no job starts on it) and, once its jobs
  have ended, remade for the waiting jobs (``reconfig_s`` seconds, during which it serves
  nothing), as the paper frames a layout change: drain first;
* ``flex-mig``: free instances of one node whose sizes add up to the job's
  (:func:`~cotenant.policies.flexmig.one_to_many`); the layouts never change.

Metrics: makespan (last finish - first arrival), mean JCT (finish - arrival), mean queueing
(start - arrival), and over time the share of the cluster's compute slices that is
**fragmented** (not running a job while jobs wait: free instances too small for any waiting
job, and slices on GPUs being drained or remade) and **used** (slices jobs asked for, on the
instances they run on).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from cotenant.errors import InputError
from cotenant.model.gpu import CATALOG
from cotenant.model.mig import MigLayout, MigPlacement
from cotenant.model.training import TrainingJob
from cotenant.policies.flexmig import (
    FreeInstance,
    drain_choice,
    one_to_many,
    one_to_one,
    refill_layout,
    speed,
    static_layouts,
)
from cotenant.sim.engine import Engine, Event, Priority


class Allocation(enum.StrEnum):
    STATIC = "static"
    DYNAMIC = "dynamic"
    FLEXMIG = "flex-mig"


@dataclass(frozen=True)
class MigTrainingConfig:
    """The simulated cluster and the costs the policies pay."""

    gpus: int = 8
    """GPUs in the cluster."""
    gpus_per_node: int = 8
    """GPUs per node: a one-to-many job spans instances of one node only."""
    gpu_model: str = "A100-40GB"
    overhead: float = 0.05
    """Slowdown per instance beyond the first of a one-to-many job (the paper gives none)."""
    reconfig_s: float = 60.0
    """Seconds a drained GPU takes to be remade (dynamic)."""
    drain_after_s: float = 0.0
    """Dynamic: seconds the first job that fits nowhere waits before a GPU is drained for
    it (0: at once)."""

    def __post_init__(self) -> None:
        if self.gpus < 1 or self.gpus_per_node < 1:
            raise InputError("cluster", "gpus and gpus per node must be at least 1")
        if not 0.0 <= self.overhead < 10.0 or not 0.0 <= self.reconfig_s < 1e7 \
                or not 0.0 <= self.drain_after_s < 1e9:
            raise InputError("costs", "overhead must be in [0, 10), reconfig_s in [0, 1e7) "
                             "and drain_after_s in [0, 1e9)")
        model = CATALOG.get(self.gpu_model)
        model.require_mig("gpu model")


@dataclass(frozen=True)
class MigTrainingResult:
    """One policy's run; ``series`` holds (time s, fragmented share, used share, queued)."""

    allocation: str
    jobs: int
    makespan_s: float
    mean_jct_s: float
    mean_queue_s: float
    fragmented: float  # time-weighted mean share of slices, over the makespan
    used: float  # time-weighted mean share of slices
    reconfigurations: int
    multi_instance_jobs: int
    series: tuple[tuple[float, float, float, int], ...] = field(repr=False, default=())

    def summary(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "series"}


@dataclass
class _Gpu:
    node: int
    layout: MigLayout
    busy: dict[MigPlacement, str | None]
    draining: bool = False
    remade_at: float | None = None  # being remade until then


@dataclass
class _Running:
    job: TrainingJob
    instances: tuple[FreeInstance, ...]
    start: float


class _Cluster:
    def __init__(self, jobs: Sequence[TrainingJob], allocation: Allocation,
                 config: MigTrainingConfig, layouts: Sequence[MigLayout] | None) -> None:
        geometry = CATALOG.get(config.gpu_model).require_mig("gpu model")
        self.geometry = geometry
        self.config = config
        self.allocation = allocation
        if layouts is None:
            layouts = static_layouts(jobs, config.gpus, geometry)
        if len(layouts) != config.gpus:
            raise InputError("layouts", f"{len(layouts)} layouts for {config.gpus} GPUs")
        self.gpus = [_Gpu(g // config.gpus_per_node, lay, dict.fromkeys(lay.placements))
                     for g, lay in enumerate(layouts)]
        self.total = config.gpus * geometry.compute_slices
        self.queue: list[TrainingJob] = []
        self.running: dict[str, _Running] = {}
        self.started: dict[str, float] = {}
        self.finished: dict[str, float] = {}
        self.reconfigurations = 0
        self.multi = 0
        self.series: list[tuple[float, float, float, int]] = []
        self.check_at = -1.0

    # --- allocation ----------------------------------------------------------------------

    def free(self, node: int | None = None) -> list[FreeInstance]:
        return [FreeInstance(g, p) for g, gpu in enumerate(self.gpus)
                if not gpu.draining and gpu.remade_at is None
                and (node is None or gpu.node == node)
                for p, who in gpu.busy.items() if who is None]

    def place(self, job: TrainingJob) -> tuple[FreeInstance, ...] | None:
        if self.allocation is not Allocation.FLEXMIG:
            one = one_to_one(self.free(), job.slices)
            return None if one is None else (one,)
        best: tuple[tuple[int, int, int], tuple[FreeInstance, ...]] | None = None
        for node in sorted({gpu.node for gpu in self.gpus}):
            chosen = one_to_many(self.free(node), job.slices)
            if chosen is None:
                continue
            key = (len(chosen), sum(f.size for f in chosen) - job.slices,
                   len({f.gpu for f in chosen}))
            if best is None or key < best[0]:
                best = (key, chosen)
        return None if best is None else best[1]

    def start(self, job: TrainingJob, chosen: tuple[FreeInstance, ...], now: float) -> float:
        for f in chosen:
            self.gpus[f.gpu].busy[f.placement] = job.name
        self.running[job.name] = _Running(job, chosen, now)
        self.started[job.name] = now
        self.multi += len(chosen) > 1
        rate = speed(sum(f.size for f in chosen), job.slices, len(chosen),
                     self.config.overhead)
        return now + job.work_s / rate

    # --- events --------------------------------------------------------------------------

    def schedule(self, now: float) -> list[tuple[float, int, str, Any]]:
        out: list[tuple[float, int, str, Any]] = []
        smallest_failed = 8  # a job no smaller than one that failed fails too
        waiting: list[TrainingJob] = []
        for job in self.queue:
            chosen = None if job.slices >= smallest_failed else self.place(job)
            if chosen is None:
                smallest_failed = min(smallest_failed, job.slices)
                waiting.append(job)
                continue
            out.append((self.start(job, chosen, now), Priority.DEPARTURE, "finish", job.name))
        self.queue = waiting
        if self.allocation is Allocation.DYNAMIC and waiting:
            due = waiting[0].arrival_s + self.config.drain_after_s
            if now >= due:
                out += self.drain(now)
            elif due != self.check_at:  # look again when the first waiting job is due
                self.check_at = due
                out.append((due, Priority.SAMPLE, "check", None))
        self.sample(now)
        return out

    def drain(self, now: float) -> list[tuple[float, int, str, Any]]:
        """Drain one GPU for the waiting jobs, unless one is being drained or remade."""
        if any(g.draining or g.remade_at is not None for g in self.gpus):
            return []
        idle = [g for g, gpu in enumerate(self.gpus) if not any(gpu.busy.values())]
        if idle:
            return self.remake(idle[0], now)
        free = [sum(p.profile.compute_slices for p, who in gpu.busy.items() if who is None)
                for gpu in self.gpus]
        running = [len({w for w in gpu.busy.values() if w is not None}) for gpu in self.gpus]
        chosen = drain_choice(free, running, [True] * len(self.gpus))
        if chosen is not None:
            self.gpus[chosen].draining = True
        return []

    def remake(self, g: int, now: float) -> list[tuple[float, int, str, Any]]:
        gpu = self.gpus[g]
        gpu.layout = refill_layout(self.geometry, [j.slices for j in self.queue])
        gpu.busy = dict.fromkeys(gpu.layout.placements)
        gpu.draining = False
        gpu.remade_at = now + self.config.reconfig_s
        self.reconfigurations += 1
        return [(gpu.remade_at, Priority.DEPARTURE, "remade", g)]

    def finish(self, name: str, now: float) -> list[tuple[float, int, str, Any]]:
        run = self.running.pop(name)
        self.finished[name] = now
        out: list[tuple[float, int, str, Any]] = []
        for f in run.instances:
            gpu = self.gpus[f.gpu]
            gpu.busy[f.placement] = None
            if gpu.draining and not any(gpu.busy.values()):
                out += self.remake(f.gpu, now)
        return out

    def sample(self, now: float) -> None:
        used = sum(min(sum(f.size for f in r.instances), r.job.slices)
                   for r in self.running.values())
        busy = sum(sum(f.size for f in r.instances) for r in self.running.values())
        idle = self.total - busy if self.queue else 0
        self.series.append((now, idle / self.total, used / self.total, len(self.queue)))


def simulate(jobs: Sequence[TrainingJob], allocation: Allocation | str,
             config: MigTrainingConfig | None = None,
             layouts: Sequence[MigLayout] | None = None) -> MigTrainingResult:
    """Run ``jobs`` under ``allocation`` (module docstring), on ``layouts`` (default: the
    static mix for the jobs)."""
    config = config or MigTrainingConfig()
    allocation = Allocation(allocation)
    if not jobs:
        raise InputError("jobs", "no training job to simulate")
    cluster = _Cluster(jobs, allocation, config, layouts)
    engine = Engine()
    by_name = {j.name: j for j in jobs}
    if len(by_name) != len(jobs):
        raise InputError("jobs", "two jobs share a name")

    def arrive(event: Event) -> Iterable[tuple[float, int, str, Any]]:
        cluster.queue.append(by_name[event.payload])
        return cluster.schedule(event.time)

    def finish(event: Event) -> Iterable[tuple[float, int, str, Any]]:
        return cluster.finish(event.payload, event.time) + cluster.schedule(event.time)

    def remade(event: Event) -> Iterable[tuple[float, int, str, Any]]:
        cluster.gpus[event.payload].remade_at = None
        return cluster.schedule(event.time)

    def check(event: Event) -> Iterable[tuple[float, int, str, Any]]:
        return cluster.schedule(event.time)

    engine.on("check", check)
    engine.on("arrive", arrive)
    engine.on("finish", finish)
    engine.on("remade", remade)
    for job in sorted(jobs, key=lambda j: (j.arrival_s, j.name)):
        engine.schedule(job.arrival_s, Priority.ARRIVAL, "arrive", job.name)
    engine.run()
    if cluster.queue:  # only a job larger than any instance the layouts can hold
        names = ", ".join(j.name for j in cluster.queue[:3])
        raise InputError("jobs", f"{len(cluster.queue)} jobs never fit ({names})")
    return _result(jobs, cluster, allocation)


def _result(jobs: Sequence[TrainingJob], cluster: _Cluster,
            allocation: Allocation) -> MigTrainingResult:
    first = min(j.arrival_s for j in jobs)
    end = max(cluster.finished.values())
    span = max(end - first, 1e-9)
    frag = used = 0.0
    series = cluster.series
    for (t0, f0, u0, _), (t1, _, _, _) in pairwise(series):
        frag += f0 * (t1 - t0)
        used += u0 * (t1 - t0)
    n = len(jobs)
    return MigTrainingResult(
        allocation.value, n, end - first,
        sum(cluster.finished[j.name] - j.arrival_s for j in jobs) / n,
        sum(cluster.started[j.name] - j.arrival_s for j in jobs) / n,
        frag / span, used / span, cluster.reconfigurations, cluster.multi, tuple(series),
    )
