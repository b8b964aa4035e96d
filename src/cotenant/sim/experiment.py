"""Runs the fragmentation experiment over policies x seeds, in parallel processes, and
summarises it.

Each (policy, seed) run is independent and deterministic, so runs are spread over a process
pool (the cluster and pods are sent once per worker) and the results are the same whatever the
number of workers.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass

import numpy as np

from cotenant.model.cluster import Cluster
from cotenant.model.workload import Pod
from cotenant.policies.placement import PLACEMENT
from cotenant.sim.fragmentation import (
    FragmentationConfig,
    FragmentationRun,
    check_gpu_demand,
    run_fragmentation,
)

_WORKER: dict[str, tuple[Cluster, Sequence[Pod], FragmentationConfig]] = {}


def _init_worker(cluster: Cluster, pods: Sequence[Pod], config: FragmentationConfig) -> None:
    _WORKER["args"] = (cluster, pods, config)


def _run_one(policy: str, seed: int) -> FragmentationRun:
    cluster, pods, config = _WORKER["args"]
    return run_fragmentation(cluster, pods, policy, seed, config)


@dataclass(frozen=True)
class PolicySummary:
    """One policy over all seeds."""

    policy: str
    seeds: int
    alloc_mean: float  # % of GPU capacity allocated at the report point
    alloc_std: float
    alloc_final: float  # at the end of the run (demand_multiple)
    failed_pods: float  # mean per run
    frag_mean: float  # fragmentation (% of capacity) at the report point

    def as_dict(self) -> dict[str, float | int | str | None]:
        """JSON-ready: a figure no run reached (see :meth:`FragmentationRun.alloc_at`) is None."""
        return {
            "policy": self.policy,
            "seeds": self.seeds,
            "alloc_percent_mean": _rounded(self.alloc_mean, 3),
            "alloc_percent_std": _rounded(self.alloc_std, 3),
            "alloc_percent_final": _rounded(self.alloc_final, 3),
            "failed_pods_mean": _rounded(self.failed_pods, 1),
            "frag_percent_mean": _rounded(self.frag_mean, 3),
        }

    @property
    def reached(self) -> bool:
        """Whether every run had an arrival near the report point."""
        return bool(np.isfinite(self.alloc_mean))


def _rounded(value: float, digits: int) -> float | None:
    return round(value, digits) if np.isfinite(value) else None


def summarise(runs: Sequence[FragmentationRun], at_percent: int = 100) -> list[PolicySummary]:
    """Per policy, in first-seen order: allocation at ``at_percent``% arrived demand."""
    out = []
    for policy in dict.fromkeys(r.policy for r in runs):
        mine = [r for r in runs if r.policy == policy]
        at = np.array([r.alloc_at(at_percent) for r in mine])
        final = np.array([r.final_alloc_percent for r in mine])
        frag = np.array([frag_at(r, at_percent) for r in mine])
        out.append(
            PolicySummary(
                policy,
                len(mine),
                float(at.mean()),
                float(at.std()),
                float(final.mean()),
                float(np.mean([r.failed_pods() for r in mine])),
                float(frag.mean()),
            )
        )
    return out


def frag_at(run: FragmentationRun, percent: int) -> float:
    """Fragmented share (%) of GPU capacity at the sample nearest ``percent``% demand; NaN,
    as :meth:`FragmentationRun.alloc_at`, when no sample was taken within 1% of it."""
    if run.frag_percent.size == 0:
        return float("nan")
    distance = np.abs(run.frag_percent - percent)
    i = int(distance.argmin())
    if distance[i] > 1:
        return float("nan")
    return 100.0 * float(run.frag_milli[i]) / run.capacity_milli


def _costly(policy: str) -> bool:
    """Whether a policy declares itself costly per node (:attr:`dedupe_states`)."""
    return bool(getattr(PLACEMENT.get(policy), "dedupe_states", False))


def run_matrix(
    cluster: Cluster,
    pods: Sequence[Pod],
    policies: Sequence[str],
    seeds: Sequence[int],
    config: FragmentationConfig = FragmentationConfig(),
    *,
    workers: int | None = None,
    on_done: Callable[[FragmentationRun], None] | None = None,
) -> list[FragmentationRun]:
    """Every (policy, seed) run, ordered by policy then seed."""
    names = [PLACEMENT.canonical(p) for p in policies]  # fail fast on an unknown name
    check_gpu_demand(pods)  # here, not first in a worker
    jobs = [(p, s) for p in names for s in seeds]
    workers = min(len(jobs), workers or os.cpu_count() or 1)
    results: dict[tuple[str, int], FragmentationRun] = {}
    if workers <= 1:
        for policy, seed in jobs:
            run = run_fragmentation(cluster, pods, policy, seed, config)
            results[(policy, seed)] = run
            if on_done:
                on_done(run)
    else:
        with ProcessPoolExecutor(
            workers, initializer=_init_worker, initargs=(cluster, pods, config)
        ) as pool:
            # the costly policies first, so the last jobs to finish are short ones
            costly = sorted(jobs, key=lambda job: not _costly(job[0]))
            futures = {pool.submit(_run_one, p, s): (p, s) for p, s in costly}
            for future in as_completed(futures):
                run = future.result()
                results[futures[future]] = run
                if on_done:
                    on_done(run)
    return [results[job] for job in jobs]
