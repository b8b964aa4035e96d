"""Benchmark: sweeps on a local Ray cluster against the local process pool and one process.

* ``overhead``: what starting a local Ray cluster costs, and each executor's cost per run:
  ``--tasks`` runs that each keep one CPU busy for a fixed time (0, 10 ms, 100 ms, 1 s), on
  one process, the local pool and Ray (both one worker per CPU). The overhead per run is
  ``wall x workers / runs - duration``; where it is small beside a run's duration, Ray's
  extra machines pay.
* ``sweeps``: real sweeps on each executor, each timed from a cold start (Ray's start
  included, and shown apart): the placement study (seven policies x ``--seeds`` seeds on the
  embedded synthetic workload) and the first ``--settings`` of the co-location frontier's
  settings (the dynamic policies', then the baselines') plus dedicated on the synthetic
  workload (``--gpus`` online GPUs x ``--hours``). The results are checked
  to be equal on every executor. ``--repeat`` runs the executors in turn that many times
  (a machine shared with other work slows whichever runs in a busy spell).

    .venv/bin/python benchmarks/ray_sweep.py --only overhead
    .venv/bin/python benchmarks/ray_sweep.py --only sweeps [--gpus 2000 --hours 6]

Needs the ``ray`` extra (``pip install 'cotenant[ray]'``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from cotenant.integrations.ray.executor import RayExecutor, import_ray
from cotenant.sim.colocation.frontier import frontier, settings
from cotenant.sim.colocation.inputs import workload_of
from cotenant.sim.colocation.scenario import ColocationScenario, WorkloadSpec
from cotenant.sim.experiment import run_matrix
from cotenant.sim.sweep.executor import Executor, LocalExecutor, SerialExecutor
from cotenant.traces.source import load_workload

POLICIES = ["random", "dot-product", "gpu-clustering", "gpu-packing", "best-fit", "fgd",
            "cotenant-pack"]
DURATIONS_S = (0.0, 0.01, 0.1, 1.0)


def busy(_: object, seconds: float) -> float:
    """Keep one CPU busy for ``seconds`` (a run of that length, without its memory)."""
    end = time.perf_counter() + seconds
    spins = 0
    while time.perf_counter() < end:
        spins += 1
    return float(spins)


def _timed(run: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    out = run(*args)
    return time.perf_counter() - started, out


def ray_start(cpus: int) -> tuple[float, RayExecutor]:
    """A new local Ray cluster of ``cpus`` CPUs and the seconds to a first finished task."""
    started = time.perf_counter()
    executor = RayExecutor("local", num_cpus=cpus)
    executor.map(busy, None, [0.0])  # a worker process up and answering
    return time.perf_counter() - started, executor


def overhead(tasks: int, cpus: int) -> dict[str, object]:
    import_started = time.perf_counter()
    import_ray()
    imported = time.perf_counter() - import_started
    start_s, ray_executor = ray_start(cpus)
    rows = []
    try:
        for duration in DURATIONS_S:
            n = tasks if duration < 1.0 else max(2 * cpus, tasks // 20)
            items = [duration] * n
            row: dict[str, object] = {"duration_s": duration, "runs": n}
            executors: list[tuple[str, Executor]] = [
                ("one process", SerialExecutor()), ("local pool", LocalExecutor(cpus)),
                ("ray", ray_executor)]
            for name, executor in executors:
                if name == "one process" and duration >= 0.1:
                    continue  # the pool shows the same work; one process only takes longer
                wall, _ = _timed(executor.map, busy, None, items)
                workers = 1 if name == "one process" else cpus
                row[f"{name} wall_s"] = round(wall, 3)
                row[f"{name} overhead_ms_per_run"] = round(
                    1000 * (wall * workers / n - duration), 2)
            rows.append(row)
    finally:
        shutdown_s, _ = _timed(ray_executor.close)
    return {"ray_import_s": round(imported, 2), "ray_start_s": round(start_s, 2),
            "ray_shutdown_s": round(shutdown_s, 2), "cpus": cpus, "rows": rows}


def _same_runs(a: list[Any], b: list[Any]) -> bool:
    return all(x.policy == y.policy and x.seed == y.seed
               and np.array_equal(x.used_milli, y.used_milli)
               and np.array_equal(x.frag_milli, y.frag_milli) for x, y in zip(a, b, strict=True))


def sweeps(cpus: int, seeds: int, gpus: int, hours: float, settings_n: int,
           repeat: int) -> dict[str, object]:
    source = load_workload()
    seed_list = list(range(42, 42 + seeds))
    scenario = ColocationScenario(seed=42, workload=WorkloadSpec(gpus=gpus, hours=hours))
    work = workload_of(scenario, [])
    runs = settings()[:settings_n]
    out: dict[str, object] = {"placement_runs": len(POLICIES) * seeds,
                              "frontier_runs": len(runs) + 1, "gpus": gpus, "hours": hours}

    def placement(executor: Executor) -> list[Any]:
        return run_matrix(source.cluster, source.pods, POLICIES, seed_list,
                          executor=executor)

    def front(executor: Executor) -> Any:
        return frontier(work, 42, scenario.config(), runs, executor=executor)

    for name, job in (("placement", placement), ("frontier", front)):
        walls: dict[str, list[float]] = {"one_process_s": [], "local_pool_s": [],
                                          "ray_start_s": [], "ray_s": []}
        same = True
        for _ in range(repeat):  # the executors in turn, so a busy spell hits each alike
            serial_s, reference = _timed(job, SerialExecutor())
            pool_s, pooled = _timed(job, LocalExecutor(cpus))
            start_s, executor = ray_start(cpus)
            try:
                ray_s, on_ray = _timed(job, executor)
            finally:
                executor.close()
            same = same and (_same_runs(reference, pooled) and _same_runs(reference, on_ray)
                             if name == "placement" else reference == pooled == on_ray)
            for key, value in zip(walls, (serial_s, pool_s, start_s, ray_s), strict=True):
                walls[key].append(round(value, 1))
        out[name] = {**{key: {"min": min(v), "median": float(np.median(v)), "all": v}
                        for key, v in walls.items()}, "same_results": same}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", required=True, choices=("overhead", "sweeps"))
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--gpus", type=int, default=2000)
    parser.add_argument("--hours", type=float, default=6.0)
    parser.add_argument("--settings", type=int, default=21)
    parser.add_argument("--repeat", type=int, default=1,
                        help="sweeps: rounds of every executor in turn (min and median)")
    args = parser.parse_args()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_before = os.getloadavg()[0]
    result = (overhead(args.tasks, args.cpus) if args.only == "overhead"
              else sweeps(args.cpus, args.seeds, args.gpus, args.hours, args.settings,
                          args.repeat))
    ray = import_ray()
    print(json.dumps({"started": started, "machine": f"{platform.machine()}, "
                      f"{os.cpu_count()} CPUs, Python {platform.python_version()}, "
                      f"Ray {ray.__version__}, load average {load_before:.1f} at the start, "
                      f"{os.getloadavg()[0]:.1f} at the end", "result": result}, indent=1))


if __name__ == "__main__":
    main()
