"""The workload a :class:`ColocationScenario` names: the openb trace or the synthetic default,
with the GenAI duty cycles (and memory) or synthetic ones; what was read, kept and rejected
goes to the caller's notes."""

from __future__ import annotations

from cotenant.sim.colocation.scenario import ColocationScenario
from cotenant.sim.colocation.workload import (
    ColocationWorkload,
    build_workload,
    synthetic_workload,
)
from cotenant.traces.genai import load_duty_cycles, synthetic_duty_cycles
from cotenant.traces.source import load_workload

SYNTHETIC_GPUS = 2000
"""Online GPUs of the embedded default."""


def workload_of(scenario: ColocationScenario, notes: list[str]) -> ColocationWorkload:
    """Build the scenario's workload from its seed."""
    w, rng = scenario.workload, scenario.rng()
    series = None
    if w.load is not None:
        series, report = load_duty_cycles(w.load, memory_path=w.memory)
        notes.append(
            f"load: {report.series_kept} of {report.series_read} series kept, rejected "
            f"({'; '.join(f'{k}: {v}' for k, v in report.rejected.items()) or 'none'}); "
            f"{report.filled_points} points filled across short "
            f"gaps, {report.held_points} held at the series mean ({report.long_gaps} long "
            "gaps, and outside each series' span)")
        notes.append("online memory: constant at its peak (no memory file)" if w.memory is None
                     else f"online memory over time from {report.memory_summary(w.memory.name)}")
    else:
        notes.append("online memory: over time, synthetic profiles fitted to the GenAI memory "
                     "trace (with a load file, give its memory file for the real ones)")
    interval_s = series.interval_s if series is not None else 60
    intervals = max(1, round(w.hours * 3600 / interval_s))
    if series is not None and intervals > series.n_intervals:
        notes.append(f"load: the series cover {series.n_intervals * interval_s / 3600:.1f} h; "
                     f"the {w.hours:g} h horizon repeats them from their start")
    common = {"offline_demand": w.offline_demand, "slo_multiple": w.slo_multiple,
                  "arrivals": w.arrivals, "load_scale": w.load_scale, "substeps": w.substeps,
                  "burst_alpha": w.burst_alpha}
    if w.pods is None:
        return synthetic_workload(rng, gpus=w.gpus or SYNTHETIC_GPUS, intervals=intervals,
                                  load=series, **common)  # type: ignore[arg-type]
    source = load_workload(w.pods, w.nodes)
    if series is None:
        series = synthetic_duty_cycles(143, intervals, rng)
    return build_workload(
        source.cluster, source.pods, series, rng, intervals=intervals,
        description=f"{source.description}; load {w.load.name if w.load else 'synthetic'}",
        **common,  # type: ignore[arg-type]
    )
