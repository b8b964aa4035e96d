"""Benchmark: safe MIG reconfiguration (``policies/partition/reconfig.plan_steps``).

* ``pairs``: 200 random pairs of plans for two services (demands 0-2000 req/s each, rates of
  ``tests/unit/policies/test_reconfig.py``), from the greedy plan of the old demands to the
  MILP plan of the new ones, with 0-2 free GPUs beside: how often a safe order exists, per
  number of free GPUs, and how many GPUs drain per reconfiguration.
* ``large``: ``--services`` services of the planner benchmark's ``mixed`` family, from the
  greedy plan to the auto plan after a third of the demands grew 20%, no free GPU: the wall
  time of ``plan_steps`` (found or refused).

    .venv/bin/python benchmarks/reconfig.py                  # both, seed 0, 100 services
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np

from cotenant.errors import InfeasibleError
from cotenant.model.deployment import GpuPlan
from cotenant.model.gpu import CATALOG
from cotenant.model.mig import MigLayout
from cotenant.model.serving import ServingSpec
from cotenant.perf.mig_profiles import default_table
from cotenant.policies.partition import PARTITION, PartitionProblem
from cotenant.policies.partition.planner import plan_spec
from cotenant.policies.partition.reconfig import plan_steps

sys.path.insert(0, str(Path(__file__).parent))
from mig_planner import workload

PROFILES = ("1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")
RATES = [[100, 190, 260, 330, 650], [50, 100, 150, 200, 350]]


def _problem(demand: list[float]) -> PartitionProblem:
    geometry = CATALOG.get("A100-40GB").require_mig("benchmark")
    return PartitionProblem(geometry, ("a", "b"), np.array(demand), PROFILES,
                            np.array(RATES, dtype=np.float64))


def pairs(seed: int, count: int = 200) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    found: Counter[int] = Counter()
    tried: Counter[int] = Counter()
    drained = []
    methods: Counter[str] = Counter()
    for _ in range(count):
        before, after = list(rng.uniform(0, 2000, 2)), list(rng.uniform(0, 2000, 2))
        spare = int(rng.integers(0, 3))
        old = PARTITION.get("greedy")(_problem(before), 1.0)
        new = PARTITION.get("milp")(_problem(after), 5.0)
        tried[spare] += 1
        try:
            result = plan_steps(_problem(after), old.gpus + (GpuPlan(MigLayout(), ()),) * spare,
                                new.gpus)
        except InfeasibleError:
            continue
        found[spare] += 1
        drained.append(result.drained)
        methods[result.method] += 1
    return {
        "found": sum(found.values()), "pairs": count,
        "by_free_gpus": {k: f"{found[k]} of {tried[k]}" for k in sorted(tried)},
        "mean_drained": round(float(np.mean(drained)), 2),
        "found_by": dict(methods),
    }


def large(seed: int, services: int) -> dict[str, object]:
    table = default_table()
    spec = workload("A100-40GB", services, "mixed", seed)
    _, current = plan_spec(spec, table, "greedy")
    grown = ServingSpec(spec.gpu, tuple(
        replace(s, rate=round(s.rate * 1.2, 1)) if i % 3 == 0 else s
        for i, s in enumerate(spec.services)))
    problem, plan = plan_spec(grown, table, "auto", 2.0)
    t0 = time.perf_counter()
    try:
        found = plan_steps(problem, current.gpus, plan.gpus)
        outcome = f"{len(found.steps)} steps ({found.method})"
    except InfeasibleError as exc:
        outcome = f"refused: {exc.message[:300]}"
    return {"services": services, "gpus": f"{len(current.gpus)} -> {len(plan.gpus)}",
            "outcome": outcome, "plan_steps_s": round(time.perf_counter() - t0, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--services", type=int, default=100)
    args = parser.parse_args()
    out = {
        "machine": f"{platform.platform()}, python {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "pairs": pairs(args.seed),
        "large": large(args.seed, args.services),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
