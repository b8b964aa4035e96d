"""The co-location reports' tables and figures: the policies side by side (per policy over
simulated time: utilisation, SM activity, memory, late requests, out-of-memory, offline work)
and the frontier (offline work against the late requests each setting adds, summarised by
budget). Kept apart from the other reports so that they do not import the co-location
simulator."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D
from rich.table import Table

from cotenant.report.plots import decimal_log_axis, legend_below, save
from cotenant.report.tables import fitted_tables, fixed, number
from cotenant.sim.colocation.frontier import FrontierPoint, pareto
from cotenant.sim.colocation.records import ColocationRun

COLOCATION_HEADERS = (
    "policy", "GPU util %", "SM activity %", "memory %", "late req. %", "added late %",
    "late GPU-min %", "online OOM", "offline work", "jobs done", "JCT mean (min)",
    "JCT common (min)", "pauses", "throttles", "evictions", "share changes", "faults",
)
COLOCATION_CAPTION = (
    "GPU util = share of time a kernel runs (as nvidia-smi shows it); SM activity = share of "
    "SMs busy; late req. = online requests over their SLO; added late = that less the "
    "dedicated deployment's (the trace's own overload), in points; late GPU-min = GPU-minutes "
    "whose p99 was over the SLO; online OOM = GPU-intervals the online service ran out of "
    "memory; offline work = offline throughput in whole-GPU equivalents per online GPU; JCT "
    "mean = mean job completion time from arrival over the policy's own finished jobs, JCT "
    "common = over the jobs every policy finished (the one set they compare on); share "
    "changes = offline clients restarted with a new MPS cap; faults = injected"
)


def colocation_rows(rows: Sequence[dict[str, object]]) -> tuple[list[str], list[list[str]]]:
    """Headers and string rows of co-location summaries (``ColocationRun.summary()``, with
    ``added_violation_pct`` over dedicated where the caller has it)."""
    body = []
    for r in rows:
        faults = r["faults"]
        injected = sum(
            v for k, v in faults.items() if k.endswith(":injected")
        ) if isinstance(faults, dict) else 0
        counts = [r.get(k, 0) for k in ("pauses", "throttles", "evictions", "share_changes")]
        body.append([
            str(r["policy"]), f"{r['utilisation_pct']:.2f}", f"{r['sm_activity_pct']:.2f}",
            f"{r['memory_used_pct']:.2f}", f"{r['slo_violation_pct']:.3f}",
            fixed(number(r.get("added_violation_pct")), 3),
            f"{r['gpu_minute_violation_pct']:.3f}",
            f"{r.get('online_oom_intervals', 0):,}", f"{r['offline_throughput']:.4f}",
            f"{r['jobs_completed']:,}",
            fixed(number(r["jct_mean_min"]), 1), fixed(number(r.get("jct_common_min")), 1),
            *(f"{c:,}" for c in counts), f"{injected:,}",
        ])
    return list(COLOCATION_HEADERS), body


def colocation_tables(rows: Sequence[dict[str, object]], width: int) -> list[Table]:
    """Co-location summaries for a console ``width`` wide."""
    head, body = colocation_rows(rows)
    return fitted_tables(head, body, width, title="Online/offline co-location",
                         caption=COLOCATION_CAPTION)


FRONTIER_HEADERS = ("policy", "setting", "GPU util %", "SM activity %", "late req. %",
                    "added late %", "offline work", "Pareto")
FRONTIER_CAPTION = (
    "added late = online requests over their SLO less the dedicated deployment's, in points; "
    "offline work = offline throughput in whole-GPU equivalents per online GPU; Pareto: no "
    "other setting of the policy adds fewer or equal late requests and does more or equal "
    "offline work"
)


def frontier_rows(points: Sequence[FrontierPoint]) -> tuple[list[str], list[list[str]]]:
    """Headers and string rows of every setting of a frontier, Pareto points marked."""
    front = {(p.policy, p.setting) for p in pareto(points)}
    body = [
        [p.policy, p.setting, f"{p.utilisation_pct:.2f}", f"{p.sm_activity_pct:.2f}",
         f"{p.slo_violation_pct:.3f}", f"{p.added_violation_pct:.3f}",
         f"{p.offline_throughput:.4f}", "yes" if (p.policy, p.setting) in front else ""]
        for p in points
    ]
    return list(FRONTIER_HEADERS), body


def pareto_rows(points: Sequence[FrontierPoint]) -> tuple[list[str], list[list[str]]]:
    """The Pareto settings alone, settings with equal results on one row (``+3 equal``)."""
    groups: dict[tuple[str, float, float], list[FrontierPoint]] = {}
    for p in pareto(points):
        groups.setdefault((p.policy, p.added_violation_pct, p.offline_throughput), []).append(p)
    body = []
    for (policy, added, work), same in groups.items():
        first = same[0]
        extra = f" (+{len(same) - 1} equal)" if len(same) > 1 else ""
        body.append([policy, first.setting + extra, f"{first.utilisation_pct:.2f}",
                     f"{first.sm_activity_pct:.2f}", f"{first.slo_violation_pct:.3f}",
                     f"{added:.3f}", f"{work:.4f}"])
    return list(FRONTIER_HEADERS[:-1]), body


BUDGET_CAPTION = (
    "Each cell: the policy's most offline work (whole-GPU equivalents per online GPU) among "
    "its settings that add at most the row's late requests to the dedicated deployment's, "
    "with the points it adds and the setting; none: no setting stays within. Every setting "
    "is in the JSON"
)


def budget_rows(verdict: Sequence[Mapping[str, object]]) -> tuple[list[str], list[list[str]]]:
    """The frontier summarised by budget, from :func:`cotenant.sim.colocation.frontier.verdict`
    (one row per budget of added late requests, one column per policy, the winner marked)."""
    policies = sorted({name for v in verdict for name in v["best"]})  # type: ignore[attr-defined]
    body = []
    for v in verdict:
        best: Mapping[str, Mapping[str, object] | None] = v["best"]  # type: ignore[assignment]
        row = [f"+{v['budget_added_pct']:g} points", str(v["winner"] or "none")]
        for name in policies:
            b = best.get(name)
            row.append("none" if b is None else
                       f"{b['offline_throughput']:.4f} (+{b['added_violation_pct']:.3f}, "
                       f"{b['setting']})")
        body.append(row)
    return ["added late requests at most", "most offline work", *policies], body


def frontier_tables(verdict: Sequence[Mapping[str, object]], settings: int,
                    width: int) -> list[Table]:
    """The frontier's summary by budget for a console ``width`` wide (every setting is in the
    JSON)."""
    head, body = budget_rows(verdict)
    return fitted_tables(
        head, body, width, title=f"Offline work within a late-request budget ({settings} "
        "settings run)", caption=f"{BUDGET_CAPTION}: --json, or frontier.json with --out",
        left=tuple(head[:2]), keys=2,
    )


def colocation_plot(runs: Sequence[ColocationRun], path: Path, title: str) -> Path:
    """Per policy over simulated time (hourly means of the per-interval values): GPU
    utilisation, SM activity, memory used, late requests, online out-of-memory, offline
    throughput; one legend under the panels."""
    fig, axes = plt.subplots(2, 3, figsize=(15, 8), layout="constrained")
    panels = [
        ("utilisation", 100.0, "GPU utilisation", "% of time a kernel runs"),
        ("sm_activity", 100.0, "SM activity", "% of SMs busy"),
        ("memory_used", 100.0, "GPU memory used", "% of GPU memory"),
        ("late_share", 100.0, "online requests over their SLO", "% of requests"),
        ("oom_rate", 100.0, "online services out of memory", "% of online GPUs"),
        ("offline_throughput", 1.0, "offline throughput", "whole-GPU equivalents per online GPU"),
    ]
    for run in runs:
        per_hour = max(1, round(3600 / run.interval_s))
        starts = np.arange(0, len(run.utilisation), per_hour)
        sizes = np.diff(np.append(starts, len(run.utilisation)))
        for ax, (name, scale, _, _) in zip(axes.flat, panels, strict=True):
            values = (np.divide(run.late_requests, run.requests, out=np.zeros(len(run.requests)),
                                where=run.requests > 0) if name == "late_share"
                      else np.asarray(getattr(run, name), dtype=np.float64))
            ax.plot((starts + sizes / 2) / per_hour,  # each hour's mean at its middle
                    scale * np.add.reduceat(values, starts) / sizes, label=run.policy)
    for ax, (_, _, name, unit) in zip(axes.flat, panels, strict=True):
        ax.set_title(name)
        ax.set_ylabel(unit)
        ax.set_xlabel("simulated time (hours)")
        ax.grid(alpha=0.3)
    fig.suptitle(f"{title} (hourly means)")
    legend_below(fig, axes[0, 0])
    return save(fig, path)


def frontier_plot(points: Sequence[FrontierPoint], path: Path, title: str) -> Path:
    """Offline throughput against added late requests, every setting as a dot and each
    policy's Pareto front as a line (late requests on a log axis labelled in decimals)."""
    fig, ax = plt.subplots(figsize=(8, 5), layout="constrained")
    front = pareto(points)
    for i, policy in enumerate(dict.fromkeys(p.policy for p in points)):
        colour = f"C{i}"
        mine = [p for p in points if p.policy == policy]
        ax.scatter([max(p.added_violation_pct, 1e-3) for p in mine],
                   [p.offline_throughput for p in mine], color=colour, alpha=0.35, s=18)
        line = [p for p in front if p.policy == policy]
        ax.plot([max(p.added_violation_pct, 1e-3) for p in line],
                [p.offline_throughput for p in line], color=colour, marker="o", label=policy)
    ax.set_xscale("log")
    decimal_log_axis(ax)
    ax.set_xlabel("late requests added to the dedicated deployment's "
                  "(percentage points, log scale)")
    ax.set_ylabel("offline throughput (whole-GPU equivalents per online GPU)")
    ax.grid(alpha=0.3, which="both")
    ax.set_title(title)
    faint = Line2D([], [], color="grey", marker="o", linestyle="", alpha=0.35,
                   label="other settings (beaten on both axes)")
    ax.legend(handles=[*ax.get_legend_handles_labels()[0], faint], fontsize=8,
              title="Pareto front per policy", title_fontsize=8)
    return save(fig, path)
