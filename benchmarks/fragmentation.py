"""Benchmark: the ATC'23 fragmentation experiment on the openb traces (the six published
policies and cotenant-pack x 10 seeds), optionally beside the offline optimum.

Reports, per trace, each policy's mean GPU allocation (%) at 100% arrived demand with the
published figure beside it, the wall time of the whole matrix and the peak resident memory of
the parent and worker processes; with ``--bound``, the offline optimum per seed (proven upper
bound, checked placement, seconds) and each policy's gap to it. Needs
``../shared/data/alibaba-gpu-v2023`` (or ``--data``).

    .venv/bin/python benchmarks/fragmentation.py                  # default trace
    .venv/bin/python benchmarks/fragmentation.py --traces all     # every variant in shared/
    .venv/bin/python benchmarks/fragmentation.py --traces all --bound --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import time
from pathlib import Path

import numpy as np

from cotenant.model.cluster import Cluster
from cotenant.model.workload import Pod
from cotenant.policies.placement.optimum.relaxation import relax
from cotenant.sim.bound import run_bounds, summarise_bounds
from cotenant.sim.experiment import run_matrix, summarise
from cotenant.sim.fragmentation import arrival_order, point_window
from cotenant.traces.openb import load_nodes, load_pods

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "alibaba-gpu-v2023"
POLICIES = ["random", "dot-product", "gpu-clustering", "gpu-packing", "best-fit", "fgd",
            "cotenant-pack"]
# Published: hkust-adsl/kubernetes-scheduler-simulator, expected_results, mean of 10 seeds.
PUBLISHED = {
    "default": [86.30, 90.62, 91.65, 91.78, 92.86, 95.23],
    "cpu050": [89.02, 93.03, 93.52, 93.46, 93.56, 95.00],
    "cpu100": [87.44, 91.73, 92.42, 92.50, 93.26, 95.21],
    "gpushare40": [84.86, 89.30, 89.76, 89.77, 91.44, 93.96],
    "gpushare60": [82.81, 86.82, 86.90, 87.15, 89.06, 91.25],
    "gpushare80": [80.62, 84.14, 84.50, 84.65, 86.66, 89.08],
    "multigpu20": [86.92, 91.85, 93.34, 93.50, 93.73, 95.53],
    "multigpu30": [86.63, 93.11, 94.55, 94.70, 94.57, 96.36],
    "multigpu40": [85.38, 94.04, 95.35, 95.59, 95.10, 96.91],
    "gpuspec10": [86.26, 90.17, 91.96, 92.24, 93.10, 94.66],
    "gpuspec20": [85.90, 88.29, 89.11, 89.28, 88.46, 94.66],
}
TRACES = [*PUBLISHED, "gpushare20"]  # gpushare20 is in shared/ without a published result


def peak_rss_mib() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return own, children


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default="default", help="comma list, or 'all'")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=42)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", type=Path, help="write results here")
    parser.add_argument("--data", type=Path, default=DATA, help="the openb trace directory")
    parser.add_argument("--bound", action="store_true", help="also the offline optimum")
    parser.add_argument("--bound-time-limit", type=float, default=10.0)
    parser.add_argument("--policies", help="comma list (default: all seven; 'none': only the "
                        "optimum)")
    parser.add_argument("--bound-keep", type=int, metavar="MILLI",
                        help="also the bound on placements that leave no pod of MILLI out")
    args = parser.parse_args()
    names = TRACES if args.traces == "all" else args.traces.split(",")
    policies = args.policies.split(",") if args.policies else POLICIES
    policies = [] if policies == ["none"] else policies
    cluster = Cluster(load_nodes(args.data / "openb_node_list_gpu_node.csv"))
    print(f"# {platform.node()} {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, python {platform.python_version()}, workers={args.workers}")
    results = {}
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    for name in names:
        pods = load_pods(args.data / f"openb_pod_list_{name}.csv")
        start = time.perf_counter()
        runs = run_matrix(cluster, pods, policies, seeds, workers=args.workers)
        wall = time.perf_counter() - start
        summary = summarise(runs)
        published = dict(zip(POLICIES, PUBLISHED.get(name, []), strict=False))
        own, children = peak_rss_mib()
        print(f"\n## {name}: {len(runs)} runs in {wall:.1f} s wall; peak RSS parent "
              f"{own:.0f} MiB, largest worker {children:.0f} MiB")
        entry: dict[str, object] = {"wall_s": round(wall, 2)}
        gaps: dict[str, float] = {}
        if args.bound:
            start = time.perf_counter()
            points = run_bounds(cluster, pods, seeds, [100], time_limit=args.bound_time_limit,
                                workers=args.workers)
            bound_wall = time.perf_counter() - start
            bound, = summarise_bounds(points)
            gaps = {s.policy: bound.upper_mean - s.alloc_mean for s in summary}
            print(f"offline optimum at 100%: upper bound {bound.upper_mean:.2f}, placement "
                  f"{bound.plan_mean:.2f} (exact on {bound.exact} of {bound.seeds} seeds, "
                  f"relaxation solved on {bound.solved}); {bound.seconds_mean:.1f} s per seed, "
                  f"{bound_wall:.1f} s wall")
            print("per seed (upper/placement): " + ", ".join(
                f"{p.seed}: {p.upper_percent:.2f}/{p.plan_percent:.2f}" for p in points))
            entry["bound"] = {**bound.as_dict(), "wall_s": round(bound_wall, 2), "per_seed": [
                {"seed": p.seed, "upper_percent": round(p.upper_percent, 3),
                 "plan_percent": round(p.plan_percent, 3), "kind": p.kind,
                 "seconds": round(p.seconds, 2)} for p in points]}
        if args.bound_keep:
            kept = [_kept_bound(cluster, pods, seed, args.bound_keep, args.bound_time_limit)
                    for seed in seeds]
            print(f"bound at 100% on placements that leave no {args.bound_keep}-milli pod out: "
                  f"{np.mean(kept):.2f} (per seed {', '.join(f'{k:.2f}' for k in kept)})")
            entry[f"bound_keeping_{args.bound_keep}"] = round(float(np.mean(kept)), 3)
        print("| policy | alloc % at 100% demand | std | published | diff | at 130% | gap |")
        print("|---|---|---|---|---|---|---|")
        rows = []
        for s in summary:
            pub = published.get(s.policy, float("nan"))
            gap = gaps.get(s.policy, float("nan"))
            print(f"| {s.policy} | {s.alloc_mean:.2f} | {s.alloc_std:.2f} | {_fmt(pub)} | "
                  f"{_fmt(s.alloc_mean - pub, '+.2f')} | {s.alloc_final:.2f} | {_fmt(gap)} |")
            rows.append({**s.as_dict(), "published": None if np.isnan(pub) else pub,
                         "gap_to_optimum": None if np.isnan(gap) else round(gap, 3)})
        entry["policies"] = rows
        results[name] = entry
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


def _kept_bound(cluster: Cluster, pods: list[Pod], seed: int, milli: int,
                time_limit: float) -> float:
    """The upper bound at 100% for one seed when every arrived pod of ``milli`` stays in."""
    capacity = cluster.total_gpu_milli
    order = arrival_order(pods, capacity, 1.3, np.random.default_rng(seed))
    arrived = np.cumsum([s.gpu_milli_total for s in order])
    last = int(point_window(arrived, capacity, 100).max()) + 1
    relaxed = relax(cluster, order[:last], time_limit,
                    must_place=lambda s: s.fractional and s.gpu_milli == milli)
    return 100.0 * relaxed.upper_milli / capacity


def _fmt(value: float, spec: str = ".2f") -> str:
    return "n/a" if np.isnan(value) else format(value, spec)


if __name__ == "__main__":
    main()
