"""Benchmark: online/offline co-location (issue 3), the real run and the scale run.

* ``real``: the openb GPU nodes with the default pod list's LS pods (online) and BE pods
  (offline), the GenAI per-pod duty cycles as online load and their memory used over time
  (as a fraction of each pod's peak) shaping online memory, 24 simulated hours at 1 minute,
  the four policies; checks the issue's targets (MuxFlow >= 3x dedicated utilisation, SLO
  violations < 1% of intervals, more offline throughput than mps-fixed and time slicing).
  Needs ``../shared/data``.
* ``scale``: 20,000 synthetic online GPUs x 24 h x 1 min, MuxFlow (the matching is the hot
  path), wall time against the 60 s target.
* ``frontier``: the real run's workload, MuxFlow and every setting of the static baselines
  (online share, admitted peak load or another quantile of it, memory limit): offline
  throughput against SLO violations.
* ``knobs``: MuxFlow on the real run's workload as its share policy's knobs vary (hysteresis
  step, SLO margin, floor under the online share): how much offline work they buy, and at
  what violations.
* ``sweep``: the real run with the duty cycles scaled by 1-4x (a busier online fleet).
* ``restart``: the real run as the offline start-up time (paid on placement and on every MPS
  share change) goes from 0 to 60 s, with shares changed in place (30 s starts only), and
  MuxFlow with 30 s starts as a share change costs 10 to 25 s (where it breaks even with the
  baselines' frontier; the agent measures the real cost, ``cotenant agent status``).
* ``seeds``: the real run's four policies on ``--seeds`` workload seeds from ``--seed`` on
  (each seed draws the GPUs' load series, models, SLOs, offline jobs and faults anew): how
  far the comparison between policies moves with the draw.

    .venv/bin/python benchmarks/colocation.py            # real + scale
    .venv/bin/python benchmarks/colocation.py --only scale
    .venv/bin/python benchmarks/colocation.py --only sensitivity   # guard reaction x window
    .venv/bin/python benchmarks/colocation.py --only frontier [--load-scale 3] \
        [--admit-quantiles 1 0.99 0.9] [--admit-from-history]
    .venv/bin/python benchmarks/colocation.py --only admission   # foresight vs history
    .venv/bin/python benchmarks/colocation.py --only knobs   # MuxFlow's share knobs
    .venv/bin/python benchmarks/colocation.py --only sweep
    .venv/bin/python benchmarks/colocation.py --only restart   # offline start-up time
    .venv/bin/python benchmarks/colocation.py --only seeds --seeds 5
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import resource
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from cotenant.policies.colocation import COLOCATION, ColocationPolicy
from cotenant.policies.colocation.share import DynamicShare
from cotenant.sim.colocation import run_colocation
from cotenant.sim.colocation_frontier import best_within, frontier, pareto, settings
from cotenant.sim.colocation_records import ColocationConfig, common_finished, common_jct
from cotenant.sim.colocation_workload import (
    ADMIT_WARMUP,
    ColocationWorkload,
    build_workload,
    synthetic_workload,
)
from cotenant.traces.genai import LoadReport, LoadSeries, load_duty_cycles
from cotenant.traces.source import Workload, load_workload

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
PODS = SHARED / "alibaba-gpu-v2023" / "openb_pod_list_default.csv"
LOAD = SHARED / "alibaba-genai-v2026" / "pod_gpu_duty_cycle_anon.tar.gz"
MEMORY = SHARED / "alibaba-genai-v2026" / "pod_gpu_memory_used_bytes_anon.tar.gz"
POLICIES = ("dedicated", "mps-fixed", "time-slicing", "muxflow")


def real(seed: int) -> dict[str, object]:
    source, (series, report) = _real_inputs()
    started = time.perf_counter()
    work = build_workload(
        source.cluster, source.pods, series, np.random.default_rng(seed), intervals=1440,
        description=source.description,
    )
    rows = {}
    runs = []
    for name in POLICIES:
        t0 = time.perf_counter()
        runs.append(run_colocation(work, name, seed))
        summary = runs[-1].summary()
        summary["wall_s"] = round(time.perf_counter() - t0, 2)
        rows[name] = summary
    for name, jct in common_jct(runs).items():  # one set of jobs for every policy
        rows[name]["jct_common_min"] = jct
    common = common_finished(runs)
    for run in runs:  # which jobs each finished: their mean memory and work
        done = ~np.isnan(run.job_wait_min) if run.job_wait_min is not None else None
        if done is not None and done.any():
            rows[run.policy]["finished_jobs_mean_memory_mib"] = round(
                float(work.job_memory_mib[done].mean()))
            rows[run.policy]["finished_jobs_mean_work_min"] = round(
                float(work.job_work_s[done].mean()) / 60.0, 1)
    mux, ded = rows["muxflow"], rows["dedicated"]
    util_x = float(mux["utilisation_pct"]) / float(ded["utilisation_pct"])  # type: ignore[arg-type]
    targets = {
        "muxflow_util_over_dedicated": round(util_x, 2),
        "util_at_least_3x": util_x >= 3.0,
        "muxflow_violations_under_1pct": float(mux["slo_violation_pct"]) < 1.0,  # type: ignore[arg-type]
    }
    for other in ("mps-fixed", "time-slicing"):
        o = rows[other]
        targets[f"more_offline_tput_than_{other}"] = (
            float(mux["offline_throughput"]) > float(o["offline_throughput"])  # type: ignore[arg-type]
        )
        targets[f"violations_at_most_{other}"] = (
            float(mux["slo_violation_pct"]) <= float(o["slo_violation_pct"])  # type: ignore[arg-type]
        )
    return {
        "workload": work.description,
        "online_gpus": work.gpus,
        "offline_jobs": work.jobs,
        "rejected": work.rejected,
        "jobs_every_sharing_policy_finished": 0 if common is None else int(common.sum()),
        "load": {"kept": report.series_kept, "read": report.series_read,
                 "rejected": report.rejected, "memory_missing": report.memory_missing},
        "policies": rows,
        "targets": targets,
        "total_wall_s": round(time.perf_counter() - started, 2),
    }


def restart(seed: int) -> list[dict[str, object]]:
    """The real run as the offline start-up time varies (0 = MPS shares change for free), with
    MuxFlow's restart-aware defaults and its earlier eager hysteresis (5-point step, 10%
    margin, drops of at most 10 points)."""
    work = _real_workload(seed)
    eager = COLOCATION.create("muxflow", share=DynamicShare(margin=0.1, step=5, max_drop=10))
    rows = []
    mux = COLOCATION.create("muxflow")
    runs: list[tuple[float, float, tuple[tuple[str, ColocationPolicy], ...]]] = [
        (start, start, (("mps-fixed", COLOCATION.create("mps-fixed")),
                        ("time-slicing", COLOCATION.create("time-slicing")),
                        ("muxflow", mux), ("muxflow eager", eager)))
        for start in (0.0, 10.0, 30.0, 60.0)
    ]
    runs.append((30.0, 0.0, (("muxflow", mux), ("muxflow eager", eager))))  # in-place shares
    # where MuxFlow breaks even with the baselines' frontier (measured with 30 s starts)
    runs.extend((30.0, change, (("muxflow", mux),)) for change in (10.0, 15.0, 20.0, 25.0))
    for start, change, policies in runs:
        config = ColocationConfig(offline_start_s=start, share_change_s=change)
        for label, policy in policies:
            s = run_colocation(work, policy, seed, config).summary()
            rows.append({
                "offline_start_s": start, "share_change_s": change, "policy": label,
                **{k: s[k] for k in ("utilisation_pct", "slo_violation_pct",
                                     "offline_throughput", "share_changes", "throttles",
                                     "colocated_gpu_intervals")},
            })
    return rows


def sensitivity(seed: int) -> list[dict[str, object]]:
    """MuxFlow on the real run as the guard's reaction time and the load window vary, then
    with a 5 s guard (the agent reading the p99 every 5 s) and a floor on the online share."""
    work = _real_workload(seed)
    rows = []
    grid = [(window, reaction, 10) for window in (1, 15, 60) for reaction in (0.5, 1.0)]
    grid += [(1, 5.0, 10), (1, 5.0, 50), (1, 5.0, 70), (1, 5.0, 90), (15, 5.0, 50),
             (60, 5.0, 30), (240, 5.0, 10)]
    for window, reaction, floor in grid:
        policy = COLOCATION.create("muxflow", share=DynamicShare(min_share=floor),
                                   load_window=window, guard_reaction_s=reaction)
        s = run_colocation(work, policy, seed).summary()
        rows.append({
            "load_window": window, "guard_reaction_s": reaction, "min_online_share": floor,
            **{k: s[k] for k in ("utilisation_pct", "slo_violation_pct", "offline_throughput",
                                 "throttles", "evictions", "share_changes")},
        })
    return rows


@cache
def _real_inputs() -> tuple[Workload, tuple[LoadSeries, LoadReport]]:
    """The openb pods and the GenAI duty cycles with memory over time, read once per process."""
    return load_workload(PODS), load_duty_cycles(LOAD, memory_path=MEMORY)


def _real_workload(seed: int, load_scale: float = 1.0) -> ColocationWorkload:
    source, (series, _) = _real_inputs()
    return build_workload(
        source.cluster, source.pods, series, np.random.default_rng(seed), intervals=1440,
        load_scale=load_scale,
    )


def frontier_run(
    seed: int, load_scale: float = 1.0, quantiles: tuple[float, ...] = (1.0,),
    history: bool = False,
) -> dict[str, object]:
    t0 = time.perf_counter()
    points = frontier(_real_workload(seed, load_scale), seed, quantiles=quantiles,
                      history=history)
    mux = next(p for p in points if p.policy == "muxflow")
    budgets = (mux.slo_violation_pct, 0.5, 1.0, 2.0)
    best = {
        name: {
            f"<= {b:.3f}%": (None if (p := best_within(points, name, b)) is None
                             else {"setting": p.setting, "tput": p.offline_throughput,
                                   "viol": p.slo_violation_pct})
            for b in budgets
        }
        for name in ("time-slicing", "mps-fixed")
    }
    return {
        "load_scale": load_scale,
        "admit_quantiles": list(quantiles),
        "admit_from_history": history,
        "points": [vars(p) for p in points],
        "pareto": [f"{p.policy} {p.setting}" for p in pareto(points)],
        "muxflow": vars(mux),
        "best_baseline_within": best,
        "wall_s": round(time.perf_counter() - t0, 1),
    }


@dataclass(frozen=True)
class _Span:
    """One policy setting's means over a span of the run."""

    setting: str
    viol_pct: float
    tput: float


def _verdict(mux: _Span, ts: list[_Span]) -> dict[str, object]:
    best = {}
    for budget in (mux.viol_pct, 0.5, 1.0):
        top = max((r for r in ts if r.viol_pct <= budget), key=lambda r: r.tput, default=None)
        best[f"<= {budget:.3f}%"] = None if top is None else vars(top)
    first = min((r for r in ts if r.tput > mux.tput), key=lambda r: r.viol_pct, default=None)
    return {"muxflow": vars(mux), "best_within": best,
            "passes_muxflow_from": None if first is None else vars(first)}


def admission(seed: int) -> dict[str, object]:
    """Time slicing with a memory limit at every admitted load, admitted by the whole run's
    load (foresight) and by the load seen so far (history, no sharing in its first hour),
    against MuxFlow: over the whole run and over the intervals after the first hour, where
    both admissions can share. Per admission and span, the baseline's best within MuxFlow's
    violation rate, 0.5% and 1%, and the fewest violations at which it does more offline
    work."""
    t0 = time.perf_counter()
    work = _real_workload(seed)
    spans: dict[str, dict[str, list[_Span]]] = {}
    mux: dict[str, _Span] = {}
    for history in (False, True):
        tag = "history" if history else "foresight"
        for label, policy in settings(quantiles=(1.0, 0.99, 0.9), history=history):
            is_ts = policy.name == "time-slicing" and "mem-limit" in label
            if not is_ts and (policy.name != "muxflow" or history):
                continue
            run = run_colocation(work, policy, seed)
            for span, start in (("whole run", 0), ("after 1 h", ADMIT_WARMUP)):
                row = _Span(label, 100 * float(run.violation_rate[start:].mean()),
                            float(run.offline_throughput[start:].mean()))
                if is_ts:
                    spans.setdefault(tag, {}).setdefault(span, []).append(row)
                else:
                    mux[span] = row
    verdict = {f"{tag}, {span}": _verdict(mux[span], rows)
               for tag, by_span in spans.items() for span, rows in by_span.items()}
    return {"verdict": verdict,
            "points": {tag: {span: [vars(r) for r in rows] for span, rows in by_span.items()}
                       for tag, by_span in spans.items()},
            "wall_s": round(time.perf_counter() - t0, 1)}


def knobs(seed: int) -> list[dict[str, object]]:
    """MuxFlow on the real run as its share policy's step, margin and floor vary."""
    work = _real_workload(seed)
    rows = []
    for step, margin, floor in itertools.product((10, 30, 60), (0.0, 0.05), (1, 10)):
        share = DynamicShare(step=step, margin=margin, min_share=floor)
        s = run_colocation(work, COLOCATION.create("muxflow", share=share), seed).summary()
        rows.append({
            "step": step, "margin": margin, "min_online_share": floor,
            **{k: s[k] for k in ("utilisation_pct", "slo_violation_pct", "offline_throughput",
                                 "share_changes", "throttles")},
        })
    return rows


def sweep(seed: int) -> list[dict[str, object]]:
    rows = []
    for k in (1.0, 2.0, 3.0, 4.0):
        work = _real_workload(seed, k)
        for name in POLICIES:
            s = run_colocation(work, name, seed).summary()
            rows.append({
                "load_scale": k, "mean_duty": round(float(work.load[work.series].mean()), 3),
                **{f: s[f] for f in ("policy", "utilisation_pct", "slo_violation_pct",
                                     "online_oom_intervals", "offline_throughput")},
            })
    return rows


def seeds(first: int, count: int) -> dict[str, object]:
    """The real run's policies on ``count`` seeds: per seed, and MuxFlow's margin over each
    baseline (offline throughput and violation points) as min / mean / max."""
    keys = ("utilisation_pct", "slo_violation_pct", "offline_throughput", "share_changes")
    runs: list[dict[str, object]] = []
    for seed in range(first, first + count):
        work = _real_workload(seed)
        row: dict[str, object] = {"seed": seed}
        for name in POLICIES:
            s = run_colocation(work, name, seed).summary()
            row[name] = {k: s[k] for k in keys}
        runs.append(row)

    def value(run: dict[str, object], policy: str, key: str) -> float:
        return float(run[policy][key])  # type: ignore[index]

    margins: dict[str, object] = {}
    for other in ("mps-fixed", "time-slicing"):
        for key in ("offline_throughput", "slo_violation_pct"):
            d = [value(r, "muxflow", key) - value(r, other, key) for r in runs]
            margins[f"muxflow - {other}: {key}"] = {
                "min": round(min(d), 4), "mean": round(float(np.mean(d)), 4),
                "max": round(max(d), 4),
            }
    return {"runs": runs, "margins": margins}


def scale(seed: int, gpus: int, hours: float) -> dict[str, object]:
    t0 = time.perf_counter()
    work = synthetic_workload(np.random.default_rng(seed), gpus=gpus, intervals=round(hours * 60))
    build_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    summary = run_colocation(work, "muxflow", seed).summary()
    sim_s = time.perf_counter() - t1
    return {
        "gpus": work.gpus,
        "intervals": work.intervals,
        "offline_jobs": work.jobs,
        "build_s": round(build_s, 2),
        "simulate_s": round(sim_s, 2),
        "under_60s": sim_s < 60.0,
        "muxflow": summary,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only",
        choices=("real", "scale", "sensitivity", "frontier", "admission", "knobs", "sweep",
                 "restart", "seeds"),
    )
    parser.add_argument("--seeds", type=int, default=5, help="--only seeds: how many")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--gpus", type=int, default=20_000)
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument(
        "--load-scale", type=float, default=1.0, help="--only frontier: duty cycles times this"
    )
    parser.add_argument(
        "--admit-quantiles", type=float, nargs="+", default=[1.0],
        help="--only frontier: admit the baselines by these quantiles of the load (1: peak)",
    )
    parser.add_argument(
        "--admit-from-history", action="store_true",
        help="--only frontier: admit the baselines by the load seen so far, not the whole run's",
    )
    args = parser.parse_args()
    out: dict[str, object] = {
        "machine": f"{platform.platform()}, {os.cpu_count()} CPUs, {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    if args.only in (None, "real"):
        if PODS.exists() and LOAD.exists():
            out["real"] = real(args.seed)
        else:
            out["real"] = "skipped: ../shared/data is absent"
    if args.only == "sensitivity":
        out["sensitivity"] = sensitivity(args.seed)
    if args.only == "frontier":
        out["frontier"] = frontier_run(args.seed, args.load_scale,
                                       tuple(args.admit_quantiles), args.admit_from_history)
    if args.only == "admission":
        out["admission"] = admission(args.seed)
    if args.only == "knobs":
        out["knobs"] = knobs(args.seed)
    if args.only == "sweep":
        out["sweep"] = sweep(args.seed)
    if args.only == "restart":
        out["restart"] = restart(args.seed)
    if args.only == "seeds":
        out["seeds"] = seeds(args.seed, args.seeds)
    if args.only in (None, "scale"):
        out["scale"] = scale(args.seed, args.gpus, args.hours)
    out["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(out, indent=2, default=str))


if __name__ == "__main__":
    main()
