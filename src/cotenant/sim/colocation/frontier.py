"""Offline throughput against SLO violations: each sharing policy over its settings.

A single run compares policies at whatever violation rate their defaults give: time slicing
gets more offline work done than MuxFlow on a lightly loaded fleet, at many more missed SLOs.
The fair question is how much offline work each policy delivers *at a given violation rate*.
The static baselines have levers for fewer violations: share fewer GPUs (admit only services
whose peak load, or another quantile of it, is at most ``max_peak_load``; over the whole run,
foresight that favours them, or with ``history`` over the load seen so far), place offline
jobs under a hard memory limit
below the online peak (``memory_limit``: no online out-of-memory, fewer GPUs with room) and,
for fixed-split MPS, give the online side a bigger share. :func:`frontier` runs every
setting on one workload and seed, :func:`pareto` keeps the settings no other setting of the
same policy beats on both axes, and :func:`best_within` answers "the most offline work a
policy gets at no more than this violation rate".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cotenant.errors import InputError
from cotenant.policies.colocation import COLOCATION, ColocationPolicy
from cotenant.sim.colocation import run_colocation
from cotenant.sim.colocation.records import ColocationConfig, ColocationRun
from cotenant.sim.colocation.workload import ColocationWorkload

DEFAULT_SHARES: tuple[int, ...] = (90, 75, 50, 25)
DEFAULT_PEAKS: tuple[float, ...] = (
    0.2, 0.4, 0.6, 0.7, 0.8, 0.9, 0.92, 0.93, 0.94, 0.95, 0.96, 0.97, 1.0
)
"""Admission thresholds on a service's peak duty cycle. Finer above 0.9, where the busiest
services are (24 of the GenAI trace's 106 series peak there): one step there moves a
baseline's violations by 0.1-0.4 points, so a coarse grid would hide its best setting under
a budget."""


@dataclass(frozen=True)
class FrontierPoint:
    """One policy setting's totals."""

    policy: str
    setting: str
    utilisation_pct: float
    slo_violation_pct: float
    offline_throughput: float

    @classmethod
    def of(cls, run: ColocationRun, setting: str) -> FrontierPoint:
        """The run's means, unrounded (comparisons between settings use these)."""
        return cls(
            run.policy, setting, 100.0 * float(run.utilisation.mean()),
            100.0 * float(run.violation_rate.mean()), float(run.offline_throughput.mean()),
        )


def settings(
    shares: Sequence[int] = DEFAULT_SHARES, peaks: Sequence[float] = DEFAULT_PEAKS,
    quantiles: Sequence[float] = (1.0,),
    muxflow: ColocationPolicy | None = None,
    history: bool = False,
) -> list[tuple[str, ColocationPolicy]]:
    """Every (label, policy) the frontier runs: MuxFlow as it is (``muxflow``, default: the
    registry's); time slicing per admitted
    load, and fixed-split MPS per online share and admitted load, each without and with a
    memory limit. The admitted load is a threshold on each of ``quantiles`` of the service's
    load (1.0: its peak, labelled ``peak<=``; 0.99: ``p99<=``), over the whole run, or with
    ``history`` over the load seen so far (labels end in `` hist``)."""
    if not shares or not peaks or not quantiles:
        raise InputError("frontier", "needs at least one share, peak load and quantile")
    if muxflow is not None and muxflow.name != "muxflow":
        raise InputError("frontier", f"muxflow= takes a MuxFlow policy, not {muxflow.name!r}")
    out = [("default", muxflow or COLOCATION.create("muxflow"))]
    for lim in (False, True):
        tag = (" mem-limit" if lim else "") + (" hist" if history else "")
        for q in quantiles:
            stat = "peak" if q >= 1.0 else f"p{100 * q:g}"
            out += [
                (f"{stat}<={p:g}{tag}",
                 COLOCATION.create("time-slicing", max_peak_load=p, memory_limit=lim,
                                   admit_quantile=q, admit_history=history))
                for p in peaks
            ]
            out += [
                (f"share={s}% {stat}<={p:g}{tag}",
                 COLOCATION.create("mps-fixed", share=s, max_peak_load=p, memory_limit=lim,
                                   admit_quantile=q, admit_history=history))
                for s in shares for p in peaks
            ]
    return out


def frontier(
    work: ColocationWorkload,
    seed: int,
    config: ColocationConfig | None = None,
    shares: Sequence[int] = DEFAULT_SHARES,
    peaks: Sequence[float] = DEFAULT_PEAKS,
    on_run: Callable[[str, str], None] | None = None,
    quantiles: Sequence[float] = (1.0,),
    muxflow: ColocationPolicy | None = None,
    history: bool = False,
) -> list[FrontierPoint]:
    """Run every setting of :func:`settings` on ``work`` with ``seed``."""
    points = []
    for label, policy in settings(shares, peaks, quantiles, muxflow, history):
        if on_run is not None:
            on_run(policy.name, label)
        run = run_colocation(work, policy, seed, config or ColocationConfig())
        points.append(FrontierPoint.of(run, label))
    return points


def pareto(points: Sequence[FrontierPoint]) -> list[FrontierPoint]:
    """Per policy, the points no other point of that policy dominates (fewer or equal
    violations and more or equal throughput, one strictly), by rising violation rate."""
    keep = []
    for p in points:
        beaten = any(
            q.policy == p.policy
            and q.slo_violation_pct <= p.slo_violation_pct
            and q.offline_throughput >= p.offline_throughput
            and (q.slo_violation_pct, q.offline_throughput)
            != (p.slo_violation_pct, p.offline_throughput)
            for q in points
        )
        if not beaten:
            keep.append(p)
    return sorted(keep, key=lambda p: (p.policy, p.slo_violation_pct, p.offline_throughput))


def best_within(
    points: Sequence[FrontierPoint], policy: str, max_violation_pct: float
) -> FrontierPoint | None:
    """The setting of ``policy`` with the most offline throughput among those violating the
    SLO in at most ``max_violation_pct`` % of intervals; None when no setting does."""
    ok = [p for p in points if p.policy == policy and p.slo_violation_pct <= max_violation_pct]
    return max(ok, key=lambda p: p.offline_throughput, default=None)
