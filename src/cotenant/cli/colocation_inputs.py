"""What ``cotenant simulate colocation`` builds from its options, and the notes it prints.

The workload (the openb trace or the synthetic default, with real or synthetic duty cycles),
the MuxFlow policy with the settings given on the command line, the line that says what
MuxFlow's SLO figures assume of its guard, and the frontier's verdict against MuxFlow.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cotenant.errors import InputError
from cotenant.policies.colocation import COLOCATION, ColocationPolicy
from cotenant.policies.colocation.share import DynamicShare
from cotenant.sim.colocation import P99_TAIL, guard_in_time
from cotenant.sim.colocation_frontier import FrontierPoint, best_within
from cotenant.sim.colocation_workload import (
    ColocationWorkload,
    build_workload,
    synthetic_workload,
)
from cotenant.traces.genai import load_duty_cycles, synthetic_duty_cycles
from cotenant.traces.source import load_workload


def muxflow_from_options(
    guard_reaction_s: float | None, load_window: int | None, min_online_share: int | None
) -> ColocationPolicy:
    """MuxFlow with the settings given on the command line, the registry's defaults else."""
    kwargs: dict[str, object] = {}
    if guard_reaction_s is not None:
        kwargs["guard_reaction_s"] = guard_reaction_s
    if load_window is not None:
        kwargs["load_window"] = load_window
    if min_online_share is not None:
        kwargs["share"] = DynamicShare(min_share=min_online_share)
    return COLOCATION.create("muxflow", **kwargs)


SYNTHETIC_GPUS = 2000  # online GPUs of the embedded default


def workload_from_options(
    pods: Path | None, nodes: Path | None, load: Path | None, memory: Path | None,
    rng: np.random.Generator,
    hours: float, gpus: int | None, offline_demand: float, arrivals: str, load_scale: float,
    slo_headroom: float, notes: list[str],
) -> ColocationWorkload:
    """The workload of the command's options: the openb pods and nodes given, else the
    synthetic one; the GenAI duty cycles (and memory) given, else synthetic ones. What was
    read, kept and rejected goes to ``notes``."""
    series = None
    if memory is not None and load is None:
        raise InputError("--memory", "--memory needs --load (the duty cycles it goes with)")
    if load is not None:
        series, report = load_duty_cycles(load, memory_path=memory)
        notes.append(
            f"load: {report.series_kept} of {report.series_read} series kept, rejected "
            f"{report.rejected or 'none'}; {report.filled_points} points filled across short "
            f"gaps, {report.held_points} held at the series mean ({report.long_gaps} long "
            "gaps, and outside each series' span)"
        )
        notes.append(
            "online memory: constant at its peak (no --memory)" if memory is None else
            f"online memory over time from {report.memory_summary(memory.name)}"
        )
    else:
        notes.append("online memory: over time, synthetic profiles fitted to the GenAI memory "
                     "trace (with --load, give --memory for the real ones)")
    interval_s = series.interval_s if series is not None else 60
    intervals = max(1, round(hours * 3600 / interval_s))
    if series is not None and intervals > series.n_intervals:
        notes.append(
            f"load: the series cover {series.n_intervals * interval_s / 3600:.1f} h; the "
            f"{hours:g} h horizon repeats them from their start"
        )
    if pods is None:
        if nodes is not None:
            raise InputError("--nodes", "--nodes needs --pods", hint="or leave both out")
        return synthetic_workload(
            rng, gpus=gpus or SYNTHETIC_GPUS, intervals=intervals, offline_demand=offline_demand,
            slo_headroom=slo_headroom, load=series, arrivals=arrivals, load_scale=load_scale,
        )
    if gpus is not None:
        raise InputError("--gpus", "sizes the synthetic workload; with --pods the online GPUs "
                         "are the trace's", hint="leave out --gpus, or --pods")
    source = load_workload(pods, nodes)
    if series is None:
        series = synthetic_duty_cycles(143, intervals, rng)
    return build_workload(
        source.cluster, source.pods, series, rng, intervals=intervals,
        offline_demand=offline_demand, slo_headroom=slo_headroom, arrivals=arrivals,
        load_scale=load_scale,
        description=f"{source.description}; load {load.name if load else 'synthetic'}",
    )


def guard_note(reaction_s: float, interval_s: float) -> str:
    """What MuxFlow's SLO figures assume of its guard, in one line."""
    limit = P99_TAIL * interval_s
    if guard_in_time(reaction_s, interval_s):
        return (f"MuxFlow's SLO figures assume its guard acts within {reaction_s:g} s, under "
                f"{limit:g} s ({P99_TAIL:.0%} of an interval); a slower guard leaves every "
                "interval whose p99 crossed the SLO a violation (--guard-reaction-s)")
    return (f"MuxFlow's guard acts after {reaction_s:g} s, {limit:g} s ({P99_TAIL:.0%} of an "
            "interval) or more: an interval whose p99 crossed the SLO stays a violation")


def verdict(points: list[FrontierPoint]) -> list[str]:
    """One line per baseline: its most offline work at MuxFlow's violation rate or fewer."""
    mux = next(p for p in points if p.policy == "muxflow")
    lines = []
    for name in ("time-slicing", "mps-fixed"):
        best = best_within(points, name, mux.slo_violation_pct)
        got = (f"{best.offline_throughput:.4f} ({best.setting})" if best is not None
               else "no setting gets there")
        lines.append(
            f"{name} at <= {mux.slo_violation_pct:.3f}% violations (MuxFlow's): {got}; "
            f"MuxFlow {mux.offline_throughput:.4f}"
        )
    return lines
