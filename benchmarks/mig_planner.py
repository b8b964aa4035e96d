"""Benchmark: MIG partition optimisers on generated serving workloads.

Families (fixed seeds): 10, 50, 100 and 500 services drawn from the calibrated models of the
default profile table, with demands log-uniform over two orders of magnitude and SLOs of 2-6x
the model's best latency on the GPU. ``mixed``: demands 30-3000 req/s; ``small``: 5-500 req/s,
where small services dominate (most need less than a whole GPU); ``large``: 1000-100000
req/s, where most services fill several whole GPUs. For each workload: GPUs used
by every optimiser, the MILP optimum or bound, solve times. ``auto`` (the default) runs with
its default budget, and so does ``milp@auto`` (the exact solver given the same time, to
check that ``auto`` is never worse); the reference MILP gets ``--time-limit``; genetic and
MCTS get ``--search-limit``. Spec seeds are ``--seed-base + 1000 n + seed`` (0: the specs
of earlier runs).

    .venv/bin/python benchmarks/mig_planner.py [--gpu A100-40GB] [--seeds 2] [--seed-base 0]
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from cotenant.model.gpu import CATALOG
from cotenant.model.serving import Service, ServingSpec
from cotenant.perf.mig_profiles import default_table
from cotenant.policies.partition import PARTITION, verify
from cotenant.policies.partition.planner import DEFAULT_TIME_LIMIT, build_problem

FAMILIES = {"mixed": (30.0, 3000.0), "small": (5.0, 500.0), "large": (1000.0, 100000.0)}


def workload(gpu: str, n: int, family: str, seed: int) -> ServingSpec:
    table = default_table()
    rng = np.random.default_rng(seed)
    lo, hi = FAMILIES[family]
    models = table.models()
    services = []
    for i in range(n):
        model = models[int(rng.integers(len(models)))]
        slo = table.best_latency(model, gpu) * float(rng.uniform(2.0, 6.0))
        rate = float(np.exp(rng.uniform(np.log(lo), np.log(hi))))
        services.append(Service(f"svc-{i}", model, round(rate, 1), round(slo, 1)))
    return ServingSpec(CATALOG.get(gpu), tuple(services))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="A100-40GB")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--search-limit", type=float, default=5.0)
    parser.add_argument("--sizes", default="10,50,100,500")
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--seed-base", type=int, default=0)
    args = parser.parse_args()
    table = default_table()
    print(f"# {platform.node()}, python {platform.python_version()}, GPU model {args.gpu}")
    solvers = ("whole-gpu", "greedy", "genetic", "mcts", "lp-round", "auto", "milp@auto",
               "milp")
    limits = {"milp": args.time_limit, "genetic": args.search_limit, "mcts": args.search_limit}
    print(f"# auto budget {DEFAULT_TIME_LIMIT:g} s, MILP {args.time_limit:g} s, "
          f"genetic/MCTS {args.search_limit:g} s")
    print("| family | services | seed | whole-gpu | greedy | genetic | mcts | lp-round | auto | "
          "milp@auto | milp | bound | milp optimal | auto gap to best | auto s | genetic s | "
          "mcts s | milp s | saving vs whole-gpu |")
    print("|---" * 19 + "|")
    overall: list[float] = []
    worse = seconds = 0.0
    runs = 0
    for family in args.families.split(","):
        gaps, savings = [], []
        for n in (int(x) for x in args.sizes.split(",")):
            for seed in range(args.seeds):
                spec = workload(args.gpu, n, family, args.seed_base + 1000 * n + seed)
                problem = build_problem(spec, table)
                plans = {}
                for solver in solvers:
                    limit = limits.get(solver, DEFAULT_TIME_LIMIT)
                    start = time.perf_counter()
                    plan = PARTITION.get(solver.split("@")[0])(problem, limit)
                    plans[solver] = (plan, time.perf_counter() - start)
                    verify(problem, plan)
                milp, auto, whole = plans["milp"][0], plans["auto"][0], plans["whole-gpu"][0]
                # the best plan any optimiser found (the optimum where the MILP proved it)
                best = min(p.gpu_count for p, _ in plans.values())
                gap = (auto.gpu_count - best) / best
                saving = 1 - auto.gpu_count / whole.gpu_count
                gaps.append(gap)
                runs += 1
                worse += auto.gpu_count > plans["milp@auto"][0].gpu_count
                seconds = max(seconds, plans["auto"][1])
                if n == 100:
                    overall.append(gap)
                savings.append(saving)
                counts = " | ".join(str(plans[s][0].gpu_count) for s in solvers)
                print(f"| {family} | {n} | {seed} | {counts} | "
                      f"{milp.lower_bound} | {milp.optimal} | {gap:.2%} | "
                      f"{plans['auto'][1]:.2f} | {plans['genetic'][1]:.2f} | "
                      f"{plans['mcts'][1]:.2f} | {plans['milp'][1]:.2f} | {saving:.1%} |",
                      flush=True)
        print(f"\n{family}: mean gap of auto to the best plan {np.mean(gaps):.2%}; mean saving "
              f"vs whole GPUs {np.mean(savings):.1%} (min {np.min(savings):.1%})\n", flush=True)
    if overall:
        print(f"all families at 100 services: mean gap of auto to the best plan "
              f"{np.mean(overall):.2%}, largest {np.max(overall):.2%}")
    print(f"auto worse than the exact solver given the same {DEFAULT_TIME_LIMIT:g} s: "
          f"{int(worse)} of {runs}; auto's longest run {seconds:.2f} s")


if __name__ == "__main__":
    main()
