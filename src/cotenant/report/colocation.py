"""The co-location reports' tables and figures: the policies side by side and the frontier.
Kept apart from the other reports so that they do not import the co-location simulator."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from rich.table import Table

from cotenant.report.plots import save
from cotenant.report.tables import fitted_tables, fixed, number
from cotenant.sim.colocation.frontier import FrontierPoint, pareto
from cotenant.sim.colocation.records import ColocationRun

COLOCATION_HEADERS = (
    "policy", "util %", "SM act. %", "mem %", "late req. %", "added late %", "late GPU-min %",
    "online OOM", "offline tput", "jobs done", "JCT mean (min)", "JCT common (min)", "pauses",
    "throttles", "evictions", "share changes", "faults",
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
        body.append([
            str(r["policy"]), f"{r['utilisation_pct']:.2f}", f"{r['sm_activity_pct']:.2f}",
            f"{r['memory_used_pct']:.2f}", f"{r['slo_violation_pct']:.3f}",
            fixed(number(r.get("added_violation_pct")), 3),
            f"{r['gpu_minute_violation_pct']:.3f}",
            str(r.get("online_oom_intervals", 0)), f"{r['offline_throughput']:.4f}",
            str(r["jobs_completed"]),
            fixed(number(r["jct_mean_min"]), 1), fixed(number(r.get("jct_common_min")), 1),
            str(r.get("pauses", 0)), str(r.get("throttles", 0)), str(r.get("evictions", 0)),
            str(r.get("share_changes", 0)), str(injected),
        ])
    return list(COLOCATION_HEADERS), body


def colocation_tables(rows: Sequence[dict[str, object]], width: int) -> list[Table]:
    """Co-location summaries for a console ``width`` wide."""
    head, body = colocation_rows(rows)
    return fitted_tables(
        head, body, width, title="Online/offline co-location",
        caption="utilisation = share of time a kernel runs (nvidia-smi); SM act. = share of "
        "SMs busy; late req. = requests over their SLO; added late = that less the dedicated "
        "deployment's (the trace's own overload); late GPU-min = GPU-minutes whose p99 was "
        "over the SLO; offline tput = offline work in whole-GPU equivalents per online GPU; "
        "online OOM = GPU-intervals the online service ran out of memory; JCT mean = over the "
        "policy's own finished jobs, JCT common = over the jobs every policy finished; share "
        "changes = offline clients restarted with a new MPS cap; faults = injected",
    )


FRONTIER_HEADERS = ("policy", "setting", "util %", "SM act. %", "late req. %", "added late %",
                    "offline tput", "Pareto")


def frontier_rows(points: Sequence[FrontierPoint]) -> tuple[list[str], list[list[str]]]:
    """Headers and string rows of a frontier, Pareto points marked."""
    front = {(p.policy, p.setting) for p in pareto(points)}
    body = [
        [p.policy, p.setting, f"{p.utilisation_pct:.2f}", f"{p.sm_activity_pct:.2f}",
         f"{p.slo_violation_pct:.3f}", f"{p.added_violation_pct:.3f}",
         f"{p.offline_throughput:.4f}", "yes" if (p.policy, p.setting) in front else ""]
        for p in points
    ]
    return list(FRONTIER_HEADERS), body


def frontier_tables(points: Sequence[FrontierPoint], width: int) -> list[Table]:
    """A frontier for a console ``width`` wide, keyed by policy and setting."""
    head, body = frontier_rows(points)
    return fitted_tables(
        head, body, width, title="Offline work against late requests",
        caption="added late = requests over their SLO less the dedicated deployment's; Pareto: "
        "no other setting of the policy adds fewer or equal late requests and does more or "
        "equal offline work", left=("policy", "setting"), keys=2,
    )


def colocation_plot(runs: Sequence[ColocationRun], path: Path, title: str) -> Path:
    """Per policy over simulated time (hourly means of the per-interval values): GPU
    utilisation, SM activity, memory used, SLO violations, online out-of-memory, offline
    throughput."""
    fig, axes = plt.subplots(2, 3, figsize=(15, 8))
    panels = [
        ("utilisation", 100.0, "GPU utilisation (% of time a kernel runs)"),
        ("sm_activity", 100.0, "SM activity (%)"),
        ("memory_used", 100.0, "GPU memory used (%)"),
        ("late_share", 100.0, "online requests over their SLO (%)"),
        ("oom_rate", 100.0, "online services out of memory (%)"),
        ("offline_throughput", 1.0, "offline throughput (GPU-equivalents per GPU)"),
    ]
    for run in runs:
        per_hour = max(1, round(3600 / run.interval_s))
        starts = np.arange(0, len(run.utilisation), per_hour)
        sizes = np.diff(np.append(starts, len(run.utilisation)))
        for ax, (name, scale, _) in zip(axes.flat, panels, strict=True):
            values = (np.divide(run.late_requests, run.requests, out=np.zeros(len(run.requests)),
                                where=run.requests > 0) if name == "late_share"
                      else np.asarray(getattr(run, name), dtype=np.float64))
            ax.plot((starts + sizes / 2) / per_hour,  # each hour's mean at its middle
                    scale * np.add.reduceat(values, starts) / sizes, label=run.policy)
    for ax, (_, _, label) in zip(axes.flat, panels, strict=True):
        ax.set_ylabel(label)
        ax.set_xlabel("simulated time (hours)")
        ax.grid(alpha=0.3)
    axes[0, 0].set_title(title)
    axes[1, 2].legend(fontsize=8)
    return save(fig, path)


def frontier_plot(points: Sequence[FrontierPoint], path: Path, title: str) -> Path:
    """Offline throughput against added late requests, every setting as a dot and each
    policy's Pareto front as a line (late requests on a log axis)."""
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    front = pareto(points)
    for i, policy in enumerate(dict.fromkeys(p.policy for p in points)):
        colour = f"C{i}"
        mine = [p for p in points if p.policy == policy]
        ax.scatter([max(p.added_violation_pct, 1e-3) for p in mine],
                   [p.offline_throughput for p in mine], color=colour, alpha=0.45, s=18)
        line = [p for p in front if p.policy == policy]
        ax.plot([max(p.added_violation_pct, 1e-3) for p in line],
                [p.offline_throughput for p in line], color=colour, marker="o", label=policy)
    ax.set_xscale("log")
    ax.set_xlabel("requests late beyond the dedicated deployment's (percentage points, log)")
    ax.set_ylabel("offline throughput (GPU-equivalents per GPU)")
    ax.grid(alpha=0.3, which="both")
    ax.set_title(title)
    ax.legend(fontsize=8)
    return save(fig, path)
