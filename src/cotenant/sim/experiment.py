"""Runs the fragmentation experiment over policies x seeds, as a sweep, and summarises it.

Each (policy, seed) run is independent and deterministic, so runs are spread by a sweep
executor (:mod:`cotenant.sim.sweep`: a local process pool by default, or a Ray cluster; the
cluster and pods are sent once per worker) and the results are the same whatever the executor
and the number of workers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
from cotenant.sim.sweep.executor import Executor, RunFailure, local_executor, results

Inputs = tuple[Cluster, Sequence[Pod], FragmentationConfig]


def run_one(inputs: Inputs, job: tuple[str, int]) -> FragmentationRun:
    """One (policy, seed) run of the experiment (a sweep's unit of work)."""
    cluster, pods, config = inputs
    return run_fragmentation(cluster, pods, job[0], job[1], config)


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
    executor: Executor | None = None,
) -> list[FragmentationRun]:
    """Every (policy, seed) run, ordered by policy then seed, by ``executor`` (default: a
    local pool of ``workers`` processes). A run that fails lets the others finish, then
    raises :class:`~cotenant.sim.sweep.executor.SweepError` naming it."""
    names = [PLACEMENT.canonical(p) for p in policies]  # fail fast on an unknown name
    check_gpu_demand(pods)  # here, not first in a worker
    jobs = [(p, s) for p in names for s in seeds]
    # the costly policies first, so the last jobs to finish are short ones
    order = sorted(range(len(jobs)), key=lambda i: not _costly(jobs[i][0]))

    def done(_: int, run: FragmentationRun | RunFailure) -> None:
        if on_done is not None and not isinstance(run, RunFailure):
            on_done(run)

    chosen = executor or local_executor(workers)
    outcomes = chosen.map(run_one, (cluster, pods, config), jobs, order=order, on_done=done)
    return results(outcomes, [f"policy {p} seed {s}" for p, s in jobs])
