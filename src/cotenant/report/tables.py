"""Result tables as plain rows (for JSON and HTML) and as rich tables (for the terminal): the
fitting of any table to the console, and the placement experiment's and the replay's rows
(the co-location rows are in :mod:`cotenant.report.colocation`).

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

from cotenant.sim.bound import BoundSummary, gap_to_bound
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


def summary_rows(
    summary: Sequence[PolicySummary], bound: BoundSummary | None = None
) -> list[list[str]]:
    """One row per policy; with ``bound``, a gap column and a last row for the optimum."""
    rows = [
        [
            s.policy,
            str(s.seeds),
            *(fixed(v, 2) for v in (s.alloc_mean, s.alloc_std, s.alloc_final, s.frag_mean)),
            fixed(s.failed_pods, 1),  # a mean over seeds, as the JSON has it
        ]
        for s in summary
    ]
    if bound is None:
        return rows
    for row, s in zip(rows, summary, strict=True):
        row.append(fixed(gap_to_bound(s, bound), 2))
    rows.append([f"offline optimum ({bound.kind})", str(bound.seeds),
                 fixed(bound.upper_mean, 2), "", "", "", "", ""])
    return rows


def counts(mapping: Mapping[str, object]) -> str:
    """``{reason: count}`` as a reader writes it: ``reason: 37; other: 2`` (``none`` if empty)."""
    return "; ".join(f"{k}: {v}" for k, v in mapping.items()) or "none"


def number(value: object) -> float:
    """A summary figure as a float; None (nothing to measure) as NaN."""
    return float(value) if isinstance(value, int | float) else math.nan


def fixed(value: float, digits: int) -> str:
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


def headers(at_percent: int, bound: bool = False) -> list[str]:
    gap = ("gap to optimum",) if bound else ()
    return [h.format(at=at_percent) for h in (*HEADERS, *gap)]


def bound_caption(bound: BoundSummary) -> str:
    """What the optimum row and the gap column mean."""
    how = (f"a placement reaches it on {bound.exact} of {bound.seeds} seeds"
           if bound.exact < bound.seeds else "a placement reaches it on every seed")
    plan = "" if bound.exact == bound.seeds else f" (placements: {fixed(bound.plan_mean, 2)})"
    return (f"offline optimum: no placement of the pods arrived by then allocates more (a "
            f"proven upper bound, mean over seeds{plan}; {how}); gap to optimum: optimum - "
            "alloc., in points")


def summary_caption(at_percent: int) -> str:
    return (f"alloc. % and frag. %: the share of GPU capacity allocated and fragmented when the "
            f"arrived demand is {at_percent}% of capacity, mean over seeds (std: its standard "
            "deviation, in points); at end: allocated when all pods have arrived; failed pods: "
            "pods no node could take, mean over seeds")


def summary_tables(summary: Sequence[PolicySummary], at_percent: int, title: str,
                   width: int, bound: BoundSummary | None = None) -> list[Table]:
    """The fragmentation summary for a console ``width`` wide, the best policy in green;
    with ``bound``, each policy's gap to the offline optimum and a row for it."""
    best = max((s.alloc_mean for s in summary if s.reached), default=0.0)
    caption = summary_caption(at_percent)
    if not all(s.reached for s in summary):
        caption += (f"; n/a: no pod arrived within 1% of {at_percent}% demand (pods large "
                    "against the cluster jump past it): try another --report-at")
    styles: list[str | None] = ["bold green" if s.alloc_mean == best else None
                                for s in summary]
    if bound is not None:
        caption += "; " + bound_caption(bound)
        styles.append("dim")
    return fitted_tables(
        headers(at_percent, bound is not None), summary_rows(summary, bound), width,
        title=title, caption=caption, styles=styles,
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
         *(fixed(number(r[k]), 3) for k in ("alloc_percent_mean", "alloc_percent_max",
                                             "frag_percent_mean")),
         f"{r['running_max']:,}"]
        for r in rows
    ]
    return list(REPLAY_HEADERS), body


def replay_tables(rows: Sequence[Mapping[str, object]], width: int) -> list[Table]:
    head, body = replay_rows(rows)
    return fitted_tables(head, body, width, title="Time replay", caption=REPLAY_CAPTION)
