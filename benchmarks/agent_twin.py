"""Benchmark: the node agent, driven by the real duty cycles, against the simulator's MuxFlow.

The simulator charges MuxFlow a restart for every MPS share change (``share_change_s``), and
its verdict on issue 3 turns on how many it makes. The simulator decides once a minute; the
agent decides every tick on a window of samples, and its compute guard pauses first and then
raises the online share by fixed steps. Do the two make the same number of changes?

This runs the agent's own code (``AgentService``: share controller, guard, supervisor) on the
fake node, one online service and one offline training job per GPU, for ``--gpus`` GPUs drawn
from the real run's workload (``../shared/data``; else the synthetic one) over ``--hours``:

* each minute the online fake's load is that minute's duty cycle (``--model``: the fake shows
  it busy longer on the SMs a busy offline client leaves it, as NVML would);
* every second the online p99 is computed from the same model the simulator uses
  (``perf.mps.p99_ms`` at the share the offline client leaves it, with the simulator's
  interference for the pair) and pushed to the guard, as a sidecar would; the agent ticks
  every second, and the second runs in the state the tick leaves. While the offline job
  starts or is paused the online service has the GPU to itself (the simulator keeps it at
  its share and interference then: a difference in the agent's favour on p99);
* the offline job never ends; a start and a restart cost it 30 s (it exits at once on
  SIGTERM, then warms up for 30 s), the simulator's ``offline_start_s`` and
  ``share_change_s``; its work is ``perf.mps.offline_speed`` of its share while it runs
  kernels.

The simulator runs the same GPUs, series, models and SLOs with one never-ending job per GPU
from the start and no faults; every job has the one training profile whose memory traffic is
nearest the mean, and the agent's share policy is sized with that pair's interference, so
both sides size shares alike. Both report share changes, guard throttles, evictions and
offline work per co-located GPU-hour, and the share of GPU-minutes over the SLO (a minute
counts when its p99 is over for at least 1% of it, as in the simulator): the agent's guard
acts at the next 1 s tick, so the simulator is also run with ``guard_reaction_s`` = 1 for
that comparison (at its 0.5 s default the simulator's guard saves the minute).

    .venv/bin/python benchmarks/agent_twin.py [--gpus 16] [--hours 2] [--start-hour 1]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from cotenant.agent.backends import FakeNode, ManualClock
from cotenant.agent.latency import INLINE
from cotenant.agent.service import AgentService
from cotenant.agent.state import Status
from cotenant.perf import mps
from cotenant.policies.colocation import COLOCATION
from cotenant.policies.colocation.share import DynamicShare
from cotenant.sim.colocation import run_colocation
from cotenant.sim.colocation_faults import FaultRates
from cotenant.sim.colocation_records import ColocationConfig
from cotenant.sim.colocation_workload import ColocationWorkload, synthetic_workload

sys.path.insert(0, str(Path(__file__).resolve().parent))
import colocation as coloc  # the real run's workload, built as it builds it

CHECKPOINT_S, WARMUP_S = 0.0, 30.0  # a start and a share change: 30 s, as simulated
TICK_S = 1.0
JOB_MIB = 1000.0


def workload(seed: int, gpus: int, hours: float,
             start_hour: float = 0.0) -> tuple[ColocationWorkload, str]:
    """``gpus`` GPUs of the real run (else synthetic) over ``hours`` from ``start_hour``, one
    endless job each."""
    if coloc.PODS.exists() and coloc.LOAD.exists():
        full, source = coloc._real_workload(seed), "real (openb + GenAI duty cycles)"
    else:
        full = synthetic_workload(np.random.default_rng(seed), gpus=max(gpus, 64),
                                  intervals=round((start_hour + hours) * 60))
        source = "synthetic (../shared/data absent)"
    pick = np.sort(np.random.default_rng(seed).choice(full.gpus, gpus, replace=False))
    # one job profile for all, the one whose memory traffic is nearest the mean: the
    # simulator's matching then cannot pair GPUs and jobs differently from the twin
    util = np.asarray(mps.TRAINING_MEM_UTIL)
    profile = int(np.argmin(np.abs(util - util.mean())))
    first = round(start_hour * 3600 / full.interval_s)
    cut = slice(first, first + round(hours * 3600 / full.interval_s))
    if cut.stop > full.intervals:
        raise SystemExit(f"--start-hour + --hours passes the {full.intervals} intervals")
    memory = None if full.memory_profile is None else full.memory_profile[:, cut]
    sub = dataclasses.replace(
        full, gpu_memory_mib=full.gpu_memory_mib[pick], model=full.model[pick],
        online_memory_mib=full.online_memory_mib[pick], slo_ms=full.slo_ms[pick],
        series=full.series[pick], load=full.load[:, cut], memory_profile=memory,
        job_memory_mib=np.full(gpus, JOB_MIB), job_work_s=np.full(gpus, 1e12),
        job_profile=np.full(gpus, profile, np.int64), job_arrival=np.zeros(gpus, np.int64),
    )
    return sub, source


def simulate(work: ColocationWorkload, seed: int) -> dict[str, float]:
    config = ColocationConfig(faults=FaultRates(0.0, 0.0, 0.0, 0.0),
                              offline_start_s=CHECKPOINT_S + WARMUP_S,
                              share_change_s=CHECKPOINT_S + WARMUP_S)
    run = run_colocation(work, "muxflow", seed, config)
    # the twin's guard acts at the next 1 s tick: the simulator with that reaction time
    slow = run_colocation(work, COLOCATION.create("muxflow", guard_reaction_s=TICK_S), seed,
                          config)
    hours = float(run.running.sum()) * work.interval_s / 3600.0
    return {"colocated_gpu_hours": round(hours, 2),
            "share_changes_per_gpu_hour": round(run.share_changes / hours, 2),
            "throttles_per_gpu_hour": round(run.throttles / hours, 2),
            "evictions_per_gpu_hour": round(run.evictions / hours, 2),
            "offline_tput": round(float(run.offline_throughput.mean()), 4),
            "slo_violation_pct": round(100.0 * float(run.violation_rate.mean()), 3),
            "slo_violation_pct_guard_1s": round(100.0 * float(slow.violation_rate.mean()), 3)}


def pair_interference(work: ColocationWorkload) -> float:
    """The simulator's slowdown of an online service beside the (one) job profile."""
    util = np.asarray(mps.TRAINING_MEM_UTIL)
    scale = util[int(work.job_profile[0])] / util.mean()
    return float(1.0 + (mps.MPS_LIMITED_INTERFERENCE - 1.0) * scale)


def twin(work: ColocationWorkload) -> dict[str, float]:
    """The agent on the fake node, ticked every second: each second is credited with the
    state after the tick, so a restart costs the job 30 s and a pause its length."""
    n, steps = work.gpus, work.intervals
    clock = ManualClock(0.0)
    node = FakeNode.build("A100-80GB", n, clock)
    models = [mps.ONLINE_MODELS[m] for m in work.model]
    serial, l100 = mps.ONLINE_SERIAL[work.model], mps.ONLINE_L100[work.model]
    beside = pair_interference(work)
    policy = DynamicShare(interference=beside)  # sized as the simulator sizes the pair
    first = work.load[work.series, 0]
    with tempfile.TemporaryDirectory() as tmp:
        service = AgentService(node, Path(tmp), policy, clock=clock, executor=INLINE)
        try:
            need = policy.needed(work.model, first, work.slo_ms)
            for i in range(n):
                service.submit({"name": f"web{i}", "role": "online", "gpu": i,
                                "model": models[i], "slo_ms": float(work.slo_ms[i]),
                                "argv": ["fake-workload", "--util-pct", "0",
                                         "--model", models[i]]})
                service.submit({"name": f"train{i}", "role": "offline", "gpu": i,
                                "sm_share": int(max(1, 100 - min(need[i], 100))),
                                "argv": ["fake-workload", "--util-pct", "90",
                                         "--term-delay-s", str(CHECKPOINT_S),
                                         "--warmup-s", str(WARMUP_S)]})
            state = _co_running(service, node, n, beside)
            work_s = over_s = colocated_s = 0.0
            over_minute = np.zeros(n, dtype=bool)
            minutes_over = 0
            for second in range(steps * work.interval_s):
                minute = second // work.interval_s
                load = work.load[work.series, minute]
                if second % work.interval_s == 0:
                    for i in range(n):
                        web = service.store.get(f"web{i}")
                        if web is not None and web.pid is not None:
                            node.set_util(web.pid, 100.0 * float(load[i]))
                # the p99 of the state the second starts in, pushed to the guard, which may
                # act at once; then the tick; then the second runs in the state they leave
                share, inter, _, _ = state
                p99 = mps.p99_ms(load, share, serial, l100, inter)
                over_s += float((p99 > work.slo_ms).sum())
                over_minute |= p99 > work.slo_ms  # a second over: past 1% of the minute
                if second % work.interval_s == work.interval_s - 1:
                    minutes_over += int(over_minute.sum())
                    over_minute[:] = False
                for i in range(n):
                    web = service.store.get(f"web{i}")
                    if web is not None and web.status is Status.RUNNING:
                        service.report_p99(f"web{i}", {"p99_ms": float(min(p99[i], 1e6))})
                service.tick()
                state = _co_running(service, node, n, beside)
                colocated_s += state[2]
                work_s += state[3]
                clock.advance(1.0)
            changes = sum(1 for e in service.store.events() if e.kind == "share change")
            hours = colocated_s / 3600.0
            total = n * steps * work.interval_s
            return {"colocated_gpu_hours": round(hours, 2),
                    "share_changes_per_gpu_hour": round(changes / hours, 2),
                    "pauses_per_gpu_hour": round(service.guard.pauses / hours, 2),
                    "throttles_per_gpu_hour": round(service.guard.throttles / hours, 2),
                    "evictions_per_gpu_hour": round(service.guard.evictions / hours, 2),
                    "offline_tput": round(work_s / total, 4),
                    "online_seconds_over_slo_pct": round(100.0 * over_s / total, 3),
                    "slo_violation_pct": round(100.0 * minutes_over / (n * steps), 3)}
        finally:
            service.close()


def _co_running(service: AgentService, node: FakeNode, n: int,
                beside: float) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Per GPU the online share and slowdown now, the GPUs with an offline job in place
    (co-located), and the offline work of one second (whole-GPU seconds)."""
    records = {r.spec.name: r for r in service.store.all()}
    util = {p.pid: p.sm_util_pct or 0.0 for g in node.gpus() for p in g.processes}
    paused = service.supervisor.paused()
    share, inter = np.ones(n), np.ones(n)
    colocated = work = 0.0
    for i in range(n):
        train = records[f"train{i}"]
        if train.status is not Status.RUNNING or train.applied_pct is None:
            continue
        colocated += 1.0
        if (train.pid is not None and util.get(train.pid, 0.0) > 0.0
                and train.spec.name not in paused):  # running kernels, not starting
            share[i] = max(1, 100 - train.applied_pct) / 100.0
            inter[i] = beside
            work += float(mps.offline_speed(train.applied_pct / 100.0))
    return share, inter, colocated, work


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=16)
    parser.add_argument("--hours", type=float, default=2.0)
    parser.add_argument("--start-hour", type=float, default=1.0,
                        help="where in the day to start (the GenAI load is busiest 01-09 UTC)")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    work, source = workload(args.seed, args.gpus, args.hours, args.start_hour)
    out: dict[str, object] = {
        "machine": f"{platform.platform()}, {os.cpu_count()} CPUs, {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "workload": source, "gpus": args.gpus, "hours": args.hours,
        "start_hour": args.start_hour, "seed": args.seed,
        "mean_duty_cycle": round(float(work.load[work.series].mean()), 4),
    }
    started = time.perf_counter()
    out["simulator"] = simulate(work, args.seed)
    out["agent"] = twin(work)
    out["wall_s"] = round(time.perf_counter() - started, 1)
    out["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
