"""Terminal tables: split to fit the console, never a figure cut short."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from cotenant.report.colocation import colocation_tables
from cotenant.report.tables import column_groups, fitted_tables

ROW = {
    "policy": "time-slicing", "utilisation_pct": 83.7012, "sm_activity_pct": 61.2345,
    "memory_used_pct": 86.5899, "slo_violation_pct": 4.15712, "added_violation_pct": 3.21987,
    "gpu_minute_violation_pct": 7.65432, "online_oom_intervals": 142981,
    "offline_throughput": 0.90571, "jobs_completed": 260887, "jct_mean_min": 354.04,
    "pauses": 31415, "throttles": 894834, "evictions": 52638, "share_changes": 1138400,
    "faults": {"crash:injected": 593, "crash:restarted": 593, "xid:injected": 67},
}
FIGURES = ("time-slicing", "83.70", "61.23", "86.59", "4.157", "3.220", "7.654", "142,981",
           "0.9057", "260,887", "354.0", "31,415", "894,834", "52,638", "1,138,400", "660")


def render(width: int) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, color_system=None)
    console.print(*colocation_tables([ROW], console.width))
    return out.getvalue()


@pytest.mark.parametrize("width", [60, 80, 100])
def test_a_narrow_console_gets_the_columns_split_with_every_figure_whole(width: int) -> None:
    text = render(width)
    assert "…" not in text
    assert max(len(line.rstrip()) for line in text.splitlines()) <= width
    for figure in FIGURES:
        assert figure in text, figure
    assert text.count("time-slicing") >= 2  # the key column is repeated in each table


def test_a_wide_console_gets_one_table() -> None:
    text = render(200)
    assert text.count("time-slicing") == 1
    assert text.count("Online/offline co-location") == 1


def test_groups_keep_the_key_columns_and_the_order() -> None:
    widths = [12, 5, 5, 5, 30, 5]
    assert column_groups(widths, 500) == [[0, 1, 2, 3, 4, 5]]
    groups = column_groups(widths, 40, keys=1)
    assert all(g[0] == 0 for g in groups)
    assert [i for g in groups for i in g[1:]] == [1, 2, 3, 4, 5]
    assert groups[1] == [0, 4]  # 2 + 12 + 3 + 30 = 47 > 40: alone, however narrow
    assert column_groups(widths, 40, keys=2)[0][:2] == [0, 1]


def test_headers_wrap_at_spaces_before_cells_narrow() -> None:
    out = io.StringIO()
    console = Console(file=out, width=80, color_system=None)
    console.print(*fitted_tables(["policy", "SLO viol. %"], [["muxflow", "0.037"]], 80,
                                 title="t"))
    lines = out.getvalue().splitlines()
    assert any(line.rstrip().endswith("SLO") for line in lines)
    assert any("muxflow" in line and line.rstrip().endswith("0.037") for line in lines)
