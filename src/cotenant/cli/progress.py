"""Progress for runs that take more than a moment: one line up front saying how much work a
sweep will do, then a bar with the time spent and an estimate of the time left, on stderr.

Both stay off stdout, so ``--json`` output is clean; with ``--json`` into a pipe or file the
bar is hidden too (there is no one watching the terminal), the count line is not.
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


def progress_bar(json_out: bool) -> Progress:
    """A bar on stderr: what runs now, done of total, time spent and time left (estimated
    from the pace so far)."""
    err = Console(stderr=True)
    return Progress(
        TextColumn("[progress.description]{task.description}"), BarColumn(),
        MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("left"),
        TimeRemainingColumn(), console=err, disable=json_out and not err.is_terminal,
    )


def announce(line: str) -> None:
    """Say, before a sweep starts, how many runs it will make (on stderr)."""
    Console(stderr=True, highlight=False).print(line)


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and the noun, plural where ``n`` is not 1: ``1 run``, ``60 runs``."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
