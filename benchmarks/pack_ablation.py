"""Benchmark: cotenant-pack with each of its terms switched off, against FGD, on the openb
traces (mean GPU allocation, % of capacity, at 100% arrived demand).

The seeds default to 1000-1002, which the reported study (seeds 42-51) does not use: these
are the runs the weights were chosen on. Needs ``../shared/data/alibaba-gpu-v2023`` (or
``--data``).

    .venv/bin/python benchmarks/pack_ablation.py --traces default,gpuspec10
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from cotenant.model.cluster import Cluster
from cotenant.model.workload import Pod, PodShape
from cotenant.policies.placement.pack import CotenantPackPolicy, PackWeights
from cotenant.sim.fragmentation import run_fragmentation
from cotenant.traces.openb import load_nodes, load_pods

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "alibaba-gpu-v2023"
FINAL = PackWeights()
VARIANTS = {
    "cotenant-pack": FINAL,
    "without FGD's gain": dataclasses.replace(FINAL, gain=0.0),
    "without reduced cost": dataclasses.replace(FINAL, packing=0.0),
    "without stranding": dataclasses.replace(FINAL, stranded=0.0),
    "without pressure": dataclasses.replace(FINAL, pressure=0.0),
    "stranding 50": dataclasses.replace(FINAL, stranded=50.0),
    "reduced cost 100": dataclasses.replace(FINAL, packing=100.0),
}


def _factory(variant: str) -> object:
    def make(workload: Sequence[PodShape] = (), **_: object) -> CotenantPackPolicy:
        return CotenantPackPolicy(workload, weights=VARIANTS[variant])

    return make


for _i, _name in enumerate(VARIANTS):  # module:attr names the registry can resolve
    globals()[f"variant_{_i}"] = _factory(_name)


def _one(args: tuple[Cluster, list[Pod], str, int]) -> float:
    cluster, pods, policy, seed = args
    return run_fragmentation(cluster, pods, policy, seed).alloc_at(100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default="default,gpuspec10")
    parser.add_argument("--seeds", default="1000,1001,1002")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    cluster = Cluster(load_nodes(args.data / "openb_node_list_gpu_node.csv"))
    module = "benchmarks.pack_ablation" if __name__ != "__main__" else "__main__"
    names = {"fgd": "fgd"} | {v: f"{module}:variant_{i}" for i, v in enumerate(VARIANTS)}
    print(f"# {platform.node()}, {os.cpu_count()} CPUs, seeds {args.seeds}")
    print("| trace | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    with ProcessPoolExecutor(args.workers) as pool:
        for trace in args.traces.split(","):
            pods = load_pods(args.data / f"openb_pod_list_{trace}.csv")
            means = []
            for policy in names.values():
                jobs = [(cluster, pods, policy, s) for s in seeds]
                means.append(float(np.mean(list(pool.map(_one, jobs)))))
            print(f"| {trace} | " + " | ".join(f"{m:.2f}" for m in means) + " |")


if __name__ == "__main__":
    main()
