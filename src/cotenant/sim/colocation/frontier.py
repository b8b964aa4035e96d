"""Offline work against late requests: every policy over its settings, the fair comparison.

Policies whose defaults sit at different SLO-miss rates cannot be compared by one run each. The
frontier runs every setting of every sharing policy on one workload and seed, with the same
protections offered to all: a memory limit, the same compute guard (under time slicing its
throttle is the offline job's duty cap, TGS-like; under priority it pauses or evicts) and
admission from the load seen so far. :func:`pareto` keeps each policy's settings that no other
of its settings beats on both axes; :func:`best_within` answers "the most offline work a
policy gets while adding at most this many late requests to the dedicated deployment's own".

The miss rate compared is per request, as *added* to the dedicated deployment's on the same
workload: the trace's own overloads (a service busy all of a burst misses alone on its GPU)
are the floor every policy stands on, and no sharing policy can go under it.

The runs are independent, so they go to a sweep executor (:mod:`cotenant.sim.sweep`; by
default one after the other in this process); the workload is sent once per worker and the
points are the same whichever executor runs them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from cotenant.errors import InputError
from cotenant.policies.colocation import COLOCATION, ColocationPolicy
from cotenant.policies.colocation.registry import GUARDS as GUARD_SETTINGS
from cotenant.sim.colocation.records import ColocationConfig, ColocationRun
from cotenant.sim.colocation.run import run_colocation
from cotenant.sim.colocation.workload import ColocationWorkload
from cotenant.sim.sweep.executor import Executor, RunFailure, SerialExecutor, results

DEFAULT_SHARES: tuple[int, ...] = (25, 50, 75)
DEFAULT_MAX_LOADS: tuple[float, ...] = (1.0, 0.8)
"""Admission thresholds on the 99th percentile of a service's load seen so far (1: admit all)."""
ADMISSION_QUANTILE = 0.99
DEFAULT_WINDOWS_S: tuple[float, ...] = (60.0, 300.0, 900.0)
"""Load windows of the dynamic share sizing (MuxFlow and ours): a longer one changes the
share, and restarts the co-runner, less often."""
DEFAULT_THRESHOLDS: tuple[float, ...] = (0.95, 0.6, 0.4)
"""Guard triggers (fraction of the SLO), offered alike to cotenant-priority and to every
baseline's guard; the first is every guard's default."""
GUARDS = ("muxflow", "pause", "adaptive")
"""Every guard is offered to every baseline (memory limit on)."""
BUDGETS_PCT: tuple[float, ...] = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0)
"""Added late requests (percentage points over dedicated) the verdict compares at."""


@dataclass(frozen=True)
class FrontierPoint:
    """One policy setting's totals (unrounded; comparisons use these)."""

    policy: str
    setting: str
    utilisation_pct: float
    sm_activity_pct: float
    slo_violation_pct: float
    added_violation_pct: float
    gpu_minute_violation_pct: float
    offline_throughput: float

    @classmethod
    def of(cls, run: ColocationRun, setting: str, floor_pct: float) -> FrontierPoint:
        return cls(run.policy, setting, 100.0 * float(run.utilisation.mean()),
                   100.0 * float(run.sm_activity.mean()), run.violation_pct,
                   run.violation_pct - floor_pct, 100.0 * float(run.minute_violation.mean()),
                   float(run.offline_throughput.mean()))


def settings(
    shares: Sequence[int] = DEFAULT_SHARES, max_loads: Sequence[float] = DEFAULT_MAX_LOADS,
    windows_s: Sequence[float] = DEFAULT_WINDOWS_S,
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
) -> list[tuple[str, ColocationPolicy]]:
    """Every (label, policy) the frontier runs (dedicated, the reference, is run apart): the
    dynamic-share policies per load window; cotenant-priority per guard trigger; every
    baseline bare and with a memory limit, per admission threshold, and with each guard, the
    guards admitting every GPU at each of the same triggers cotenant-priority is offered."""
    if not shares or not max_loads or not windows_s or not thresholds:
        raise InputError("frontier", "needs at least one share, admission load, window and "
                         "threshold")
    out: list[tuple[str, ColocationPolicy]] = []
    for name in ("muxflow", "cotenant-pause"):
        out += [(f"window={w:g}s", COLOCATION.create(name, load_window_s=w)) for w in windows_s]
    out += [(f"threshold={th:g}", COLOCATION.create("cotenant-priority", threshold=th))
            for th in thresholds]
    variants: list[tuple[str, dict[str, object]]] = [("bare", {})]
    for limit in max_loads:
        adm: dict[str, object] = {"max_load": limit, "quantile": ADMISSION_QUANTILE,
                                  "memory_limit": True}
        tag = f" p99<={limit:g}" if limit < 1.0 else ""
        variants.append((f"mem-limit{tag}", adm))
        for g in GUARDS:
            triggers = thresholds if limit >= 1.0 else thresholds[:1]
            variants += [(f"mem-limit+{g} guard{tag}" + (f" threshold={th:g}" if th != 0.95
                                                          else ""),
                          {**adm, "guard": replace(GUARD_SETTINGS[g], threshold=th)})
                         for th in triggers]
    for label, kw in variants:
        out += [(f"share={s}% {label}", COLOCATION.create("mps-fixed", share=s, **kw))
                for s in shares]
        out.append((label, COLOCATION.create("time-slicing", **kw)))
        out.append((label, COLOCATION.create("priority", **kw)))
    return out


def frontier(
    work: ColocationWorkload, seed: int, config: ColocationConfig | None = None,
    runs: Sequence[tuple[str, ColocationPolicy]] | None = None,
    on_run: Callable[[str, str], None] | None = None,
    executor: Executor | None = None,
) -> tuple[float, list[FrontierPoint]]:
    """The dedicated floor (percent of requests late) and every setting's point.
    ``on_run(policy, label)`` is told of each run as it finishes (dedicated, the reference,
    labelled ``reference``). A run that fails lets the others finish, then raises
    :class:`~cotenant.sim.sweep.executor.SweepError` naming its setting."""
    cfg = config or ColocationConfig()
    jobs = [("reference", COLOCATION.create("dedicated")),
            *(runs if runs is not None else settings())]

    def done(i: int, _: FrontierPoint | RunFailure) -> None:
        if on_run is not None:
            on_run(jobs[i][1].name, jobs[i][0])

    outcomes = (executor or SerialExecutor()).map(
        frontier_run, (work, seed, cfg), jobs, on_done=done)
    got = results(outcomes, [f"{p.name} {label}" for label, p in jobs])
    floor = got[0].slo_violation_pct
    return floor, [replace(p, added_violation_pct=p.slo_violation_pct - floor) for p in got[1:]]


def frontier_run(inputs: tuple[ColocationWorkload, int, ColocationConfig],
                 job: tuple[str, ColocationPolicy]) -> FrontierPoint:
    """One setting's point, its added late requests not yet set (the floor is another run)."""
    work, seed, cfg = inputs
    label, policy = job
    return FrontierPoint.of(run_colocation(work, policy, seed, cfg), label, 0.0)


def pareto(points: Sequence[FrontierPoint]) -> list[FrontierPoint]:
    """Per policy, the points no other point of that policy dominates (fewer or equal added
    misses and more or equal throughput, one strictly), by rising misses."""
    keep = []
    for p in points:
        beaten = any(
            q.policy == p.policy
            and q.added_violation_pct <= p.added_violation_pct
            and q.offline_throughput >= p.offline_throughput
            and (q.added_violation_pct, q.offline_throughput)
            != (p.added_violation_pct, p.offline_throughput)
            for q in points
        )
        if not beaten:
            keep.append(p)
    return sorted(keep, key=lambda p: (p.policy, p.added_violation_pct, p.offline_throughput))


def best_within(points: Sequence[FrontierPoint], policy: str,
                budget_pct: float) -> FrontierPoint | None:
    """The setting of ``policy`` with the most offline work among those adding at most
    ``budget_pct`` points of late requests; None when none does."""
    ok = [p for p in points if p.policy == policy and p.added_violation_pct <= budget_pct]
    return max(ok, key=lambda p: p.offline_throughput, default=None)


def verdict(points: Sequence[FrontierPoint],
            budgets: Sequence[float] = BUDGETS_PCT) -> list[dict[str, object]]:
    """Per budget, each policy's best setting within it and the policy with the most work."""
    policies = sorted({p.policy for p in points})
    out: list[dict[str, object]] = []
    for budget in budgets:
        best = {name: best_within(points, name, budget) for name in policies}
        found = {k: v for k, v in best.items() if v is not None}
        winner = max(found.values(), key=lambda p: p.offline_throughput, default=None)
        out.append({
            "budget_added_pct": budget,
            "best": {k: (None if v is None else {"setting": v.setting,
                                                 "offline_throughput": v.offline_throughput,
                                                 "added_violation_pct": v.added_violation_pct})
                     for k, v in best.items()},
            "winner": None if winner is None else winner.policy,
        })
    return out
