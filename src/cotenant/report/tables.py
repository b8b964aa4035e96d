"""Result tables as plain rows (for JSON and HTML) and as rich tables (for the terminal).

A terminal table never cuts a figure short: where the columns do not fit the console's width,
the table is split into several, each repeating the key columns (the policy), and a header
wraps at its spaces before any cell is narrowed. Rich alone would shorten every cell to
"12.0…" on an 80-column terminal or in a CI log.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence

from rich import box
from rich.table import Table

from cotenant.sim.colocation.frontier import FrontierPoint, pareto
from cotenant.sim.experiment import PolicySummary

HEADERS = (
    "policy",
    "seeds",
    "alloc. % at {at}%",
    "std",
    "alloc. % at end",
    "frag. % at {at}%",
    "failed pods",
)


def summary_rows(summary: Sequence[PolicySummary]) -> list[list[str]]:
    return [
        [
            s.policy,
            str(s.seeds),
            *(_fixed(v, 2) for v in (s.alloc_mean, s.alloc_std, s.alloc_final, s.frag_mean)),
            _fixed(s.failed_pods, 1),  # a mean over seeds, as the JSON has it
        ]
        for s in summary
    ]


def counts(mapping: Mapping[str, object]) -> str:
    """``{reason: count}`` as a reader writes it: ``reason: 37; other: 2`` (``none`` if empty)."""
    return "; ".join(f"{k}: {v}" for k, v in mapping.items()) or "none"


def _float(value: object) -> float:
    """A summary figure as a float; None (nothing to measure) as NaN."""
    return float(value) if isinstance(value, int | float) else math.nan


def _fixed(value: float, digits: int) -> str:
    return f"{value:.{digits}f}" if math.isfinite(value) else "n/a"


GAP = 3
"""Columns between two cells of a ``box.SIMPLE_HEAD`` table: the padding either side and the
(blank) rule."""
EDGES = 2
"""The table's (blank) left and right edges."""


def _cell_width(head: str, cells: Sequence[str]) -> int:
    """A column's width: its widest cell, or its header's longest word (headers wrap)."""
    return max([*(len(word) for word in head.split()), *(len(c) for c in cells), 1])


def column_groups(widths: Sequence[int], width: int, keys: int = 1) -> list[list[int]]:
    """The columns of each table when a table of ``widths`` is split to fit ``width``: the
    ``keys`` first columns in every table, then as many of the rest, in order, as fit (at
    least one, however narrow the console)."""
    key_width = EDGES + sum(widths[:keys]) + GAP * max(keys - 1, 0)
    groups: list[list[int]] = []
    group: list[int] = []
    used = key_width
    for i in range(keys, len(widths)):
        if group and used + GAP + widths[i] > width:
            groups.append(group)
            group, used = [], key_width
        group.append(i)
        used += GAP + widths[i]
    groups.append(group)
    return [list(range(keys)) + g for g in groups]


def fitted_tables(
    head: Sequence[str], body: Sequence[Sequence[str]], width: int, *, title: str,
    caption: str | None = None, left: Collection[str] = ("policy",), keys: int = 1,
    styles: Sequence[str | None] | None = None,
) -> list[Table]:
    """Rich tables of ``head`` and ``body`` that fit ``width`` without shortening a cell:
    one where it fits, else several (see :func:`column_groups`), titled once and captioned
    at the end."""
    widths = [_cell_width(h, [row[i] for row in body]) for i, h in enumerate(head)]
    groups = column_groups(widths, width, keys)
    tables = []
    for n, group in enumerate(groups):
        table = Table(
            title=title if n == 0 else None, box=box.SIMPLE_HEAD, pad_edge=False,
            caption=caption if n == len(groups) - 1 else None,
        )
        for i in group:
            table.add_column(head[i], justify="left" if head[i] in left else "right",
                             width=widths[i])
        for r, row in enumerate(body):
            table.add_row(*(row[i] for i in group), style=styles[r] if styles else None)
        tables.append(table)
    return tables


def headers(at_percent: int) -> list[str]:
    return [h.format(at=at_percent) for h in HEADERS]


def summary_caption(at_percent: int) -> str:
    return (f"alloc. % and frag. %: the share of GPU capacity allocated and fragmented when the "
            f"arrived demand is {at_percent}% of capacity, mean over seeds (std: its standard "
            "deviation, in points); at end: allocated when all pods have arrived; failed pods: "
            "pods no node could take, mean over seeds")


def summary_tables(summary: Sequence[PolicySummary], at_percent: int, title: str,
                   width: int) -> list[Table]:
    """The fragmentation summary for a console ``width`` wide, the best policy in green."""
    best = max((s.alloc_mean for s in summary if s.reached), default=0.0)
    caption = summary_caption(at_percent)
    if not all(s.reached for s in summary):
        caption += (f"; n/a: no pod arrived within 1% of {at_percent}% demand (pods large "
                    "against the cluster jump past it): try another --report-at")
    return fitted_tables(
        headers(at_percent), summary_rows(summary), width, title=title, caption=caption,
        styles=["bold green" if s.alloc_mean == best else None for s in summary],
    )


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
            _fixed(_float(r.get("added_violation_pct")), 3),
            f"{r['gpu_minute_violation_pct']:.3f}",
            str(r.get("online_oom_intervals", 0)), f"{r['offline_throughput']:.4f}",
            str(r["jobs_completed"]),
            _fixed(_float(r["jct_mean_min"]), 1), _fixed(_float(r.get("jct_common_min")), 1),
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


REPLAY_HEADERS = ("policy", "arrivals", "failed", "departures", "alloc. % mean", "alloc. % peak",
                  "frag. % mean", "running pods peak")
REPLAY_CAPTION = (
    "alloc. % and frag. %: the share of the cluster's GPU capacity allocated and fragmented "
    "(FGD's measure), over the samples taken every --sample-every seconds (a peak between two "
    "samples is missed); failed: pods no node could take when they arrived; "
    "running pods: pods placed and not yet gone"
)


def replay_rows(rows: Sequence[Mapping[str, object]]) -> tuple[list[str], list[list[str]]]:
    """Headers and string rows of time-replay summaries (``cotenant simulate replay``)."""
    keys = ("arrivals", "failed", "departures")
    body = [
        [str(r["policy"]), *(f"{r[k]:,}" for k in keys),
         *(_fixed(_float(r[k]), 3) for k in ("alloc_percent_mean", "alloc_percent_max",
                                             "frag_percent_mean")),
         f"{r['running_max']:,}"]
        for r in rows
    ]
    return list(REPLAY_HEADERS), body


def replay_tables(rows: Sequence[Mapping[str, object]], width: int) -> list[Table]:
    head, body = replay_rows(rows)
    return fitted_tables(head, body, width, title="Time replay", caption=REPLAY_CAPTION)
