"""Result tables as plain rows (for JSON and HTML) and as rich tables (for the terminal)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from cotenant.sim.experiment import PolicySummary

HEADERS = (
    "policy",
    "seeds",
    "GPU alloc % @ {at}% demand",
    "std",
    "alloc % at end",
    "fragmented % @ {at}%",
    "failed pods",
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
    table = Table(title=title)
    for i, head in enumerate(headers(at_percent)):
        table.add_column(head, justify="left" if i == 0 else "right")
    best = max((s.alloc_mean for s in summary), default=0.0)
    for s, row in zip(summary, summary_rows(summary), strict=True):
        style = "bold green" if s.alloc_mean == best else None
        table.add_row(*row, style=style)
    return table
