"""Benchmark: the MIG planner's wall time and memory against the number of services.

Each row writes a ServingPlan of N services of one family (the planner benchmark's
generator, ``benchmarks/mig_planner.py``: ``small``, ``mixed``, ``large``; and ``tiny``:
demands of 1-50 req/s with SLOs 20 times the model's best latency, so that one 1g instance
serves each and 100,000 services fit in the 20,000-GPU bound) and runs ``cotenant plan mig
SPEC --json`` in a child process, end to end: reading the spec, building the problem,
solving, checking.
It reports the child's wall time, the command's own time (from the CLI's imports done to
its exit: reading, building, solving, checking, printing), its peak resident memory
(``VmHWM`` of ``/proc/self/status``: ``ru_maxrss`` would count the parent's memory at the
fork), the largest peak of the solver child processes it forked (HiGHS runs in them, so
that it can be killed at the limit; 0 where none ran; the two peaks together bound the
memory the command took), exit status (2: a one-line error, whose text is shown), GPUs,
bound, solver and the solver's own seconds.

    .venv/bin/python benchmarks/mig_scale.py [--sizes 1000,3000,10000,30000,100000]
        [--families small,tiny,mixed] [--time-limits 1,10] [--solver auto]
        [--src OTHER/src]   # the same rows with another checkout's code (a baseline)
        [--json-spec]       # the spec written as JSON, which plan mig reads ten times faster
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from cotenant.model.gpu import CATALOG
from cotenant.model.serving import Service, ServingSpec
from cotenant.perf.mig_profiles import default_table

sys.path.insert(0, str(Path(__file__).parent))
from mig_planner import workload

TINY_SLO = 20.0


def spec_text(n: int, family: str, seed: int, as_json: bool = False) -> str:
    if family == "tiny":
        table = default_table()
        rng = np.random.default_rng(seed)
        models = table.models()
        services = []
        for i in range(n):
            model = models[int(rng.integers(len(models)))]
            slo = round(table.best_latency(model, "A100-40GB") * TINY_SLO, 1)
            services.append(Service(f"svc-{i}", model, round(float(rng.uniform(1, 50)), 1),
                                    slo))
        spec = ServingSpec(CATALOG.get("A100-40GB"), tuple(services))
    else:
        spec = workload("A100-40GB", n, family, seed)
    doc = {"apiVersion": "cotenant/v1alpha1", "kind": "ServingPlan", "gpu": "A100-40GB",
           "services": [{"name": s.name, "model": s.model, "rate": s.rate, "sloMs": s.slo_ms}
                        for s in spec.services]}
    return json.dumps(doc) if as_json else yaml.safe_dump(doc, sort_keys=False)


def run(spec: Path, solver: str, limit: float, src: str | None) -> dict[str, object]:
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src
    argv = [sys.executable, "-c", CHILD, "plan", "mig", str(spec), "--json", "--solver",
            solver, "--time-limit", str(limit)]
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, env=env, check=False)
    wall = time.perf_counter() - start
    lines = done.stderr.decode(errors="replace").strip().splitlines()
    peak = [x.split()[1:] for x in lines if x.startswith("PEAK_KIB ")]
    lines = [x for x in lines if x.strip() and not x.startswith("PEAK_KIB ")]
    row: dict[str, object] = {"exit": done.returncode, "wall_s": round(wall, 2),
                              "peak_mib": round(int(peak[-1][0]) / 1024) if peak else "",
                              "command_s": round(float(peak[-1][1]), 2) if peak else "",
                              "solver_mib": round(int(peak[-1][2]) / 1024) if peak else ""}
    if done.returncode == 0:
        data = json.loads(done.stdout)
        row.update(gpus=data["gpus"], bound=data["lower_bound"], solver=data["solver"],
                   solve_s=data["seconds"])
    else:
        row["error"] = lines[-1][:160] if lines else ""
        row["error_lines"] = len(lines)
    return row


CHILD = """
import atexit, os, resource, sys, time
from cotenant.cli.main import main
t0 = time.perf_counter()
def peak():
    hwm = [l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:")]
    took = time.perf_counter() - t0
    while True:  # the solver children not yet reaped (the planner does not wait for them)
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    sys.stderr.write("\\nPEAK_KIB %s %.3f %d\\n" % (hwm[0], took, kids))
atexit.register(peak)
main()
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,3000,10000,30000,100000")
    parser.add_argument("--families", default="small,tiny,mixed")
    parser.add_argument("--time-limits", default="1,10")
    parser.add_argument("--solver", default="auto")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--src", default=None, help="PYTHONPATH of another checkout's src")
    parser.add_argument("--json-spec", action="store_true",
                        help="write the spec as JSON (read by the JSON parser)")
    args = parser.parse_args()
    print(f"# {platform.platform()}, python {platform.python_version()}, "
          f"{os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
          f"{', code from ' + args.src if args.src else ''}")
    print("| family | services | time limit s | exit | wall s | command s | peak MiB | "
          "solver child peak MiB | GPUs | bound | solver | solve s |")
    print("|---" * 12 + "|")
    with tempfile.TemporaryDirectory() as tmp:
        for family in args.families.split(","):
            for n in (int(x) for x in args.sizes.split(",")):
                spec = Path(tmp) / f"{family}-{n}.{'json' if args.json_spec else 'yaml'}"
                spec.write_text(spec_text(n, family, args.seed, args.json_spec),
                                encoding="utf-8")
                for limit in (float(x) for x in args.time_limits.split(",")):
                    row = run(spec, args.solver, limit, args.src)
                    extra = (f"{row.get('gpus', '')} | {row.get('bound', '')} | "
                             f"{row.get('solver', '')} | {row.get('solve_s', '')}")
                    if row["exit"] != 0:
                        extra = f"{row.get('error', '')} ({row.get('error_lines')} lines) | | |"
                    print(f"| {family} | {n:,} | {limit:g} | {row['exit']} | {row['wall_s']} | "
                          f"{row['command_s']} | {row['peak_mib']} | {row['solver_mib']} | "
                          f"{extra} |", flush=True)


if __name__ == "__main__":
    main()
