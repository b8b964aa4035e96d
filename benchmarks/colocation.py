"""Benchmark: online/offline co-location on the real run, a busier fleet, and at scale.

Every part builds a :class:`ColocationScenario`, as ``simulate colocation --config`` does.

* ``frontier``: the real run (the openb GPU nodes, the default pod list's LS pods online and
  BE pods offline, the GenAI duty cycles and memory, 24 h) with every setting of every policy
  (:func:`cotenant.sim.colocation.frontier.settings`) against the dedicated floor;
  ``--load-scale`` for a busier fleet (``scaled`` finds the scale at which dedicated sits at
  MuxFlow's reported 26% utilisation). Needs ``../shared/data``.
* ``scaled``: the load scale at which the dedicated deployment's utilisation is 26%, found
  by bisection.
* ``reaction``: MuxFlow and cotenant-priority as the guard's reaction goes from 0 to 3 s.
* ``sensitivity``: the best setting of each policy per budget, per calibration source and
  statistic, on a 3-hour slice of the real run (the frontier's guarded and dynamic settings,
  :func:`key_settings`).
* ``slo``: the same at SLO multiples 3, 5 and 10.
* ``bursts``: the same with flat minutes, the duty cycles' burst fit and the requests' fit.
* ``matching``: MuxFlow and cotenant-priority with max-weight, greedy and random pairing.
* ``signal``: the real run's MPS key settings with the load they are shown counted from the
  request rate (the default under MPS), each service's own, and the whole GPU's utilisation.
* ``scale``: 20,000 synthetic online GPUs x 24 h (six sub-steps a minute), wall time.

``--load-signal`` sets ``world.loadSignal`` for ``frontier`` (default ``auto``).

    .venv/bin/python benchmarks/colocation.py --only frontier [--load-scale 3.7]
    .venv/bin/python benchmarks/colocation.py --only scale [--gpus 20000 --hours 24]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import time
from dataclasses import replace
from pathlib import Path

from cotenant.policies.colocation import COLOCATION, ColocationPolicy, Matching, Mechanism
from cotenant.sim.colocation.frontier import frontier, settings, verdict
from cotenant.sim.colocation.inputs import workload_of
from cotenant.sim.colocation.load_signal import LoadSignal
from cotenant.sim.colocation.records import ColocationConfig
from cotenant.sim.colocation.run import run_colocation
from cotenant.sim.colocation.scenario import ColocationScenario, WorkloadSpec, WorldSpec
from cotenant.sim.colocation.workload import ColocationWorkload

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
OPENB = SHARED / "alibaba-gpu-v2023"
GENAI = SHARED / "alibaba-genai-v2026"
SLICE_H = 3.0
"""Hours of the real run the sensitivity runs simulate (00:00-03:00 of the trace's day)."""
MUXFLOW_UTIL = 0.26
"""MuxFlow's online GPUs before sharing: 26% utilisation (the paper's abstract)."""


def real_scenario(seed: int, load_scale: float = 1.0, hours: float = 24.0,
                  load_signal: str = "auto") -> ColocationScenario:
    return ColocationScenario(seed=seed, workload=WorkloadSpec(
        pods=OPENB / "openb_pod_list_default.csv", nodes=OPENB / "openb_node_list_gpu_node.csv",
        load=GENAI / "pod_gpu_duty_cycle_anon.tar.gz",
        memory=GENAI / "pod_gpu_memory_used_bytes_anon.tar.gz", hours=hours,
        load_scale=load_scale), world=WorldSpec(load_signal=load_signal))


def _work(s: ColocationScenario) -> ColocationWorkload:
    notes: list[str] = []
    return workload_of(s, notes)


def run_frontier(s: ColocationScenario,
                 runs: list[tuple[str, ColocationPolicy]] | None = None) -> dict[str, object]:
    work = _work(s)
    started = time.perf_counter()
    floor, points = frontier(work, s.seed, s.config(), runs)
    dedicated = run_colocation(work, "dedicated", s.seed, s.config())
    return {"gpus": work.gpus, "load_scale": s.workload.load_scale,
            "dedicated_late_pct": floor,
            "dedicated_utilisation_pct": 100 * float(dedicated.utilisation.mean()),
            "dedicated_sm_activity_pct": 100 * float(dedicated.sm_activity.mean()),
            "points": [vars(p) for p in points], "verdict": verdict(points),
            "wall_s": round(time.perf_counter() - started, 1)}


def scaled(seed: int) -> dict[str, object]:
    """The load scale at which dedicated's utilisation is MuxFlow's 26%."""
    lo, hi, trail = 1.0, 8.0, []
    for _ in range(8):
        mid = (lo + hi) / 2
        s = real_scenario(seed, mid)
        util = float(run_colocation(_work(s), "dedicated", seed, s.config()).utilisation.mean())
        trail.append((round(mid, 4), round(100 * util, 2)))
        lo, hi = (mid, hi) if util < MUXFLOW_UTIL else (lo, mid)
    return {"load_scale": round((lo + hi) / 2, 3), "trail": trail}


def reaction(seed: int) -> list[dict[str, object]]:
    s = real_scenario(seed, hours=SLICE_H)
    work, out = _work(s), list[dict[str, object]]()
    floor = run_colocation(work, "dedicated", seed, s.config()).violation_pct
    for name in ("muxflow", "cotenant-priority"):
        for r in (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.5, 3.0):
            run = run_colocation(work, name, seed, replace(s.config(), reaction_s=r))
            out.append({"policy": name, "reaction_s": r,
                        "added_late_pct": run.violation_pct - floor,
                        "offline_throughput": float(run.offline_throughput.mean())})
    return out


def key_settings() -> list[tuple[str, ColocationPolicy]]:
    """A cheaper frontier: the dynamic policies, and every baseline admitting all GPUs with
    the memory limit, alone (priority) or with each guard at each trigger (fixed-split MPS at
    a 75% online share)."""
    dynamic = ("muxflow", "cotenant-pause", "cotenant-priority")
    return [(label, p) for label, p in settings()
            if p.name in dynamic or (p.admission.admits_all and p.memory_limit and (
                p.guard is not None or p.name == "priority")
                and ("share=" not in label or "share=75%" in label))]


def sensitivity(seed: int) -> list[dict[str, object]]:
    s = real_scenario(seed, hours=SLICE_H)
    work, out = _work(s), list[dict[str, object]]()
    for source, stat in (("tally", "mean"), ("tally", "min"), ("tally", "max"),
                         ("h200", "mean")):
        cfg = ColocationConfig(calibration=source, statistic=stat)
        floor, points = frontier(work, seed, cfg, key_settings())
        out.append({"calibration": source, "statistic": stat, "floor": floor,
                    "verdict": verdict(points)})
    return out


def load_signals(seed: int) -> list[dict[str, object]]:
    """The MPS key settings on the real run under each load signal they could be shown."""
    s = real_scenario(seed)
    work, out = _work(s), list[dict[str, object]]()
    runs = [(label, p) for label, p in key_settings() if p.mechanism is Mechanism.MPS]
    for signal in ("requests", "service", "whole-gpu"):
        started = time.perf_counter()
        floor, points = frontier(work, seed, replace(s.config(), load_signal=signal), runs)
        out.append({"load_signal": signal, "floor": floor, "points": [vars(p) for p in points],
                    "verdict": verdict(points), "wall_s": round(time.perf_counter() - started, 1)})
    return out


def workload_sweep(seed: int, field: str, values: tuple[float, ...]) -> list[dict[str, object]]:
    """The key frontier on the 3-hour slice with one workload ``field`` at each of ``values``."""
    out: list[dict[str, object]] = []
    for value in values:
        s = real_scenario(seed, hours=SLICE_H).override(**{field: value})
        floor, points = frontier(_work(s), seed, s.config(), key_settings())
        out.append({field: value, "floor": floor, "verdict": verdict(points)})
    return out


def bursts(seed: int) -> list[dict[str, object]]:
    """Flat minutes, the duty cycles' fit (default) and the request series' (burstier)."""
    return workload_sweep(seed, "burst_alpha", (float("inf"), 1.29, 0.677))


def slo(seed: int) -> list[dict[str, object]]:
    return workload_sweep(seed, "slo_multiple", (3.0, 5.0, 10.0))


def matching(seed: int) -> list[dict[str, object]]:
    s = real_scenario(seed)
    work, out = _work(s), list[dict[str, object]]()
    floor = run_colocation(work, "dedicated", seed, s.config()).violation_pct
    for name in ("muxflow", "cotenant-priority"):
        for m in Matching:
            if m is Matching.NONE:
                continue
            run = run_colocation(work, COLOCATION.create(name, matching=m), seed, s.config())
            out.append({"policy": name, "matching": m.value,
                        "added_late_pct": run.violation_pct - floor,
                        "offline_throughput": float(run.offline_throughput.mean()),
                        "jobs_completed": run.jobs_completed})
    return out


def scale(seed: int, gpus: int, hours: float) -> dict[str, object]:
    s = ColocationScenario(seed=seed, workload=WorkloadSpec(gpus=gpus, hours=hours))
    started = time.perf_counter()
    work = _work(s)
    built = time.perf_counter() - started
    out: dict[str, object] = {"gpus": gpus, "hours": hours, "build_s": round(built, 1)}
    for name in ("dedicated", "muxflow", "cotenant-priority"):
        t0 = time.perf_counter()
        run_colocation(work, name, seed, s.config())
        out[f"{name}_s"] = round(time.perf_counter() - t0, 1)
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", required=True, choices=(
        "frontier", "scaled", "reaction", "sensitivity", "slo", "bursts", "matching",
        "signal", "scale"))
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--load-scale", type=float, default=1.0)
    parser.add_argument("--gpus", type=int, default=20_000)
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--load-signal", default="auto", choices=[x.value for x in LoadSignal],
                        help="frontier: the load the policies are shown (world.loadSignal)")
    parser.add_argument("--out", type=Path, help="write the JSON here too")
    parser.add_argument("--key", action="store_true",
                        help="frontier: the 37 key settings only (key_settings)")
    args = parser.parse_args()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    result: object
    if args.only == "frontier":
        result = run_frontier(real_scenario(args.seed, args.load_scale,
                                            load_signal=args.load_signal),
                              key_settings() if args.key else None)
    elif args.only == "scaled":
        result = scaled(args.seed)
    elif args.only == "scale":
        result = scale(args.seed, args.gpus, args.hours)
    else:
        result = {"reaction": reaction, "sensitivity": sensitivity, "slo": slo,
                  "bursts": bursts, "matching": matching, "signal": load_signals,
                  }[args.only](args.seed)
    text = json.dumps({"started": started, "machine": f"{platform.machine()}, "
                       f"{os.cpu_count()} CPUs, Python {platform.python_version()}",
                       "runs": len(settings()) + 1 if args.only == "frontier" else None,
                       "result": result}, indent=1, default=float)
    if args.out is not None:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
