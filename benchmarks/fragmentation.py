"""Benchmark: the ATC'23 fragmentation experiment on the openb traces (6 policies x 10 seeds).

Reports, per trace, each policy's mean GPU allocation (%) at 100% arrived demand with the
published figure beside it, the wall time of the whole matrix and the peak resident memory of
the parent and worker processes. Needs ``../shared/data/alibaba-gpu-v2023``.

    .venv/bin/python benchmarks/fragmentation.py                  # default trace
    .venv/bin/python benchmarks/fragmentation.py --traces all     # every variant in shared/
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import time
from pathlib import Path

from cotenant.model.cluster import Cluster
from cotenant.sim.experiment import run_matrix, summarise
from cotenant.traces.openb import load_nodes, load_pods

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "alibaba-gpu-v2023"
POLICIES = ["random", "dot-product", "gpu-clustering", "gpu-packing", "best-fit", "fgd"]
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


def peak_rss_mib() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return own, children


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default="default", help="comma list, or 'all'")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", type=Path, help="write results here")
    args = parser.parse_args()
    names = list(PUBLISHED) if args.traces == "all" else args.traces.split(",")
    cluster = Cluster(load_nodes(DATA / "openb_node_list_gpu_node.csv"))
    print(f"# {platform.node()} {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, python {platform.python_version()}, workers={args.workers}")
    results = {}
    for name in names:
        pods = load_pods(DATA / f"openb_pod_list_{name}.csv")
        start = time.perf_counter()
        runs = run_matrix(cluster, pods, POLICIES, range(42, 42 + args.seeds),
                          workers=args.workers)
        wall = time.perf_counter() - start
        summary = summarise(runs)
        published = PUBLISHED.get(name, [float("nan")] * len(POLICIES))
        own, children = peak_rss_mib()
        print(f"\n## {name}: {len(runs)} runs in {wall:.1f} s wall; peak RSS parent "
              f"{own:.0f} MiB, largest worker {children:.0f} MiB")
        print("| policy | alloc % at 100% demand | std | published | diff | at 130% |")
        print("|---|---|---|---|---|---|")
        rows = []
        for s, pub in zip(summary, published, strict=True):
            print(f"| {s.policy} | {s.alloc_mean:.2f} | {s.alloc_std:.2f} | {pub:.2f} | "
                  f"{s.alloc_mean - pub:+.2f} | {s.alloc_final:.2f} |")
            rows.append({**s.as_dict(), "published": pub})
        results[name] = {"wall_s": round(wall, 2), "policies": rows}
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
