"""Benchmark: Flex-MIG's one-to-many allocation against one-to-one static and dynamic MIG,
on the same training jobs and layouts (``cotenant.sim.mig_training``).

Jobs: openb's BE pods of one GPU or less (``../shared``; 2,947 jobs), else the documented
synthetic. Scenarios, each a table row per allocation:

* ``backlog``: every job at 0 on 8 A100-40GB (one node), the costs at their defaults
  (5% per extra instance, 60 s to remake a GPU, drain at once);
* ``overhead``: the backlog with Flex-MIG's per-instance overhead at 0-30%;
* ``drain``: the backlog and a 0.9 load with the dynamic baseline draining only after a
  job has waited 600 or 3,600 s;
* ``poisson``: Poisson arrivals at 0.7, 0.9 and 1.1 times the 8 GPUs' slices, seeds 0-2;
* ``wide``: the backlog on 64 GPUs (8 nodes), where the longest job (145 h) bounds the
  makespan.

    .venv/bin/python benchmarks/mig_training.py [--scenarios backlog,overhead,...]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from cotenant.model.training import TrainingJob
from cotenant.sim.mig_training import (
    Allocation,
    MigTrainingConfig,
    MigTrainingResult,
    simulate,
)
from cotenant.traces.mig_jobs import arrange, openb_jobs, synthetic_jobs
from cotenant.traces.openb import iter_pods

OPENB = (Path(__file__).resolve().parents[1].parent / "shared" / "data" / "alibaba-gpu-v2023"
         / "openb_pod_list_default.csv")
SCENARIOS = ("backlog", "overhead", "drain", "poisson", "wide")


def _versus(makespan: float, jct: float, base: MigTrainingResult | None) -> str:
    """Makespan and mean JCT below ``base``'s (positive: better)."""
    if base is None:
        return ""
    return f"{1 - makespan / base.makespan_s:+.1%} / {1 - jct / base.mean_jct_s:+.1%}"


def rows(label: str, jobs: Sequence[TrainingJob], config: MigTrainingConfig,
         allocations: Sequence[Allocation] = tuple(Allocation)) -> None:
    runs = {a: simulate(jobs, a, config) for a in allocations}
    static = runs.get(Allocation.STATIC)
    dynamic = runs.get(Allocation.DYNAMIC)
    for a, run in runs.items():
        vs = [_versus(run.makespan_s, run.mean_jct_s, base) for base in (static, dynamic)]
        print(f"| {label} | {a.value} | {run.makespan_s / 3600:.1f} | {run.mean_jct_s / 3600:.2f} "
              f"| {run.mean_queue_s / 3600:.2f} | {run.fragmented:.1%} | {run.used:.1%} | "
              f"{run.reconfigurations} | {run.multi_instance_jobs} | {vs[0]} | {vs[1]} |",
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--pods", type=Path, default=OPENB)
    args = parser.parse_args()
    if args.pods.exists():
        jobs, left = openb_jobs(iter_pods(args.pods))
        source = f"{args.pods.name}: {len(jobs)} BE jobs, left out {dict(left)}"
    else:
        jobs = synthetic_jobs(2947, np.random.default_rng(0))
        source = "2,947 synthetic jobs (openb's BE mix)"
    print(f"# {platform.platform()}, python {platform.python_version()}, {os.cpu_count()} "
          f"CPUs, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {source}")
    print("| scenario | allocation | makespan h | mean JCT h | mean queue h | fragmented | "
          "used | remakes | multi-instance jobs | makespan / JCT vs static | vs dynamic |")
    print("|---" * 11 + "|")
    chosen = args.scenarios.split(",")
    rng = np.random.default_rng(0)
    backlog = arrange(jobs, "batch", rng)
    base = MigTrainingConfig(gpus=8)
    if "backlog" in chosen:
        rows("backlog, 8 GPUs", backlog, base)
    if "overhead" in chosen:
        for overhead in (0.0, 0.1, 0.2, 0.3):
            rows(f"backlog, overhead {overhead:.0%}", backlog,
                 MigTrainingConfig(gpus=8, overhead=overhead), (Allocation.FLEXMIG,))
    if "drain" in chosen:
        loaded = arrange(jobs, "poisson", np.random.default_rng(0), load=0.9, cluster_slices=56)
        for wait in (600.0, 3600.0):
            config = MigTrainingConfig(gpus=8, drain_after_s=wait)
            rows(f"backlog, drain after {wait:g} s", backlog, config, (Allocation.DYNAMIC,))
            rows(f"load 0.9 seed 0, drain after {wait:g} s", loaded, config,
                 (Allocation.DYNAMIC,))
    if "poisson" in chosen:
        for load in (0.7, 0.9, 1.1):
            for seed in range(3):
                arrived = arrange(jobs, "poisson", np.random.default_rng(seed), load=load,
                                  cluster_slices=56)
                rows(f"load {load:g} seed {seed}", arrived, base)
    if "wide" in chosen:
        rows("backlog, 64 GPUs", backlog, MigTrainingConfig(gpus=64))


if __name__ == "__main__":
    main()
