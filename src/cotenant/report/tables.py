"""Result tables as plain rows (for JSON and HTML) and as rich tables (for the terminal)."""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.table import Table

from cotenant.sim.colocation_frontier import FrontierPoint, pareto
from cotenant.sim.experiment import PolicySummary

HEADERS = (
    "policy",
    "seeds",
    "alloc%@{at}",
    "std",
    "alloc%@end",
    "frag%@{at}",
    "failed",
)


def summary_rows(summary: Sequence[PolicySummary]) -> list[list[str]]:
    return [
        [
            s.policy,
            str(s.seeds),
            f"{s.alloc_mean:.2f}",
            f"{s.alloc_std:.2f}",
            f"{s.alloc_final:.2f}",
            f"{s.frag_mean:.2f}",
            f"{s.failed_pods:.0f}",
        ]
        for s in summary
    ]


def headers(at_percent: int) -> list[str]:
    return [h.format(at=at_percent) for h in HEADERS]


def summary_table(summary: Sequence[PolicySummary], at_percent: int, title: str) -> Table:
    table = Table(
        title=title,
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        caption=(
            f"GPU capacity allocated (alloc%) and fragmented (frag%) when arrived demand is "
            f"{at_percent}% of capacity, and allocated at the end"
        ),
    )
    for i, head in enumerate(headers(at_percent)):
        table.add_column(head, justify="left" if i == 0 else "right", no_wrap=True)
    best = max((s.alloc_mean for s in summary), default=0.0)
    for s, row in zip(summary, summary_rows(summary), strict=True):
        style = "bold green" if s.alloc_mean == best else None
        table.add_row(*row, style=style)
    return table


COLOCATION_HEADERS = (
    "policy", "util %", "SM act. %", "mem %", "SLO viol. %", "online OOM", "offline tput",
    "jobs done", "JCT min", "throttles", "evictions", "share changes", "faults",
)


def colocation_rows(rows: Sequence[dict[str, object]]) -> tuple[list[str], list[list[str]]]:
    """Headers and string rows of co-location summaries (``ColocationRun.summary()``)."""
    body = []
    for r in rows:
        faults = r["faults"]
        injected = sum(
            v for k, v in faults.items() if k.endswith(":injected")
        ) if isinstance(faults, dict) else 0
        body.append([
            str(r["policy"]), f"{r['utilisation_pct']:.2f}", f"{r['sm_activity_pct']:.2f}",
            f"{r['memory_used_pct']:.2f}", f"{r['slo_violation_pct']:.3f}",
            str(r.get("online_oom_intervals", 0)), f"{r['offline_throughput']:.4f}",
            str(r["jobs_completed"]),
            f"{r['jct_mean_min']:.1f}", str(r["throttles"]), str(r["evictions"]),
            str(r.get("share_changes", 0)), str(injected),
        ])
    return list(COLOCATION_HEADERS), body


def colocation_table(rows: Sequence[dict[str, object]]) -> Table:
    head, body = colocation_rows(rows)
    table = Table(
        title="Online/offline co-location", box=box.SIMPLE_HEAD, pad_edge=False,
        caption="utilisation = share of time a kernel runs (nvidia-smi); offline tput = "
        "offline work in whole-GPU equivalents per online GPU; online OOM = GPU-intervals the "
        "online service ran out of memory; share changes = running offline clients given a new "
        "MPS share (a restart each, unless --share-change-s is 0); faults = injected",
    )
    for h in head:
        table.add_column(h, justify="left" if h == "policy" else "right")
    for row in body:
        table.add_row(*row)
    return table


FRONTIER_HEADERS = ("policy", "setting", "util %", "SLO viol. %", "offline tput", "Pareto")


def frontier_rows(points: Sequence[FrontierPoint]) -> tuple[list[str], list[list[str]]]:
    """Headers and string rows of a frontier, Pareto points marked."""
    front = {(p.policy, p.setting) for p in pareto(points)}
    body = [
        [p.policy, p.setting, f"{p.utilisation_pct:.2f}", f"{p.slo_violation_pct:.3f}",
         f"{p.offline_throughput:.4f}", "yes" if (p.policy, p.setting) in front else ""]
        for p in points
    ]
    return list(FRONTIER_HEADERS), body


def frontier_table(points: Sequence[FrontierPoint]) -> Table:
    head, body = frontier_rows(points)
    table = Table(
        title="Offline throughput against SLO violations", box=box.SIMPLE_HEAD,
        pad_edge=False, caption="Pareto: no other setting of the policy has fewer or equal "
        "violations and more or equal offline work",
    )
    for h in head:
        table.add_column(h, justify="left" if h in ("policy", "setting") else "right")
    for row in body:
        table.add_row(*row)
    return table
