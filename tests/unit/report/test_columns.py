"""Every report column shows its own figure: fixtures give each field a distinct value, so a
column that shows its neighbour's figure (SM activity as utilisation, frag. % as alloc. %)
fails here."""

from __future__ import annotations

from collections.abc import Sequence

from cotenant.report.colocation import (
    BUDGET_CAPTION,
    budget_rows,
    colocation_rows,
    frontier_rows,
    frontier_tables,
    pareto_rows,
)
from cotenant.report.tables import (
    REPLAY_CAPTION,
    bound_caption,
    counts,
    fitted_tables,
    replay_rows,
    replay_tables,
    summary_caption,
    summary_rows,
    summary_tables,
)
from cotenant.sim.bound import BoundSummary
from cotenant.sim.colocation.frontier import FrontierPoint
from cotenant.sim.experiment import PolicySummary


def by_header(headers: Sequence[str], row: Sequence[str]) -> dict[str, str]:
    assert len(headers) == len(row)
    return dict(zip(headers, row, strict=True))


COLOCATION = {
    "policy": "mps", "utilisation_pct": 81.25, "sm_activity_pct": 47.5,
    "memory_used_pct": 62.75, "slo_violation_pct": 1.125, "added_violation_pct": 0.375,
    "gpu_minute_violation_pct": 2.625, "online_oom_intervals": 1234,
    "offline_throughput": 0.4375, "jobs_completed": 5678, "jct_mean_min": 12.5,
    "jct_common_min": 9.5, "pauses": 11, "throttles": 22, "evictions": 33, "share_changes": 44,
    "faults": {"crash:injected": 5, "crash:restarted": 5, "xid:injected": 2},
}


def test_each_colocation_column_shows_its_own_figure() -> None:
    headers, [row] = colocation_rows([COLOCATION])
    assert by_header(headers, row) == {
        "policy": "mps", "GPU util %": "81.25", "SM activity %": "47.50", "memory %": "62.75",
        "late req. %": "1.125", "added late %": "0.375", "late GPU-min %": "2.625",
        "online OOM": "1,234", "offline work": "0.4375", "jobs done": "5,678",
        "JCT mean (min)": "12.5", "JCT common (min)": "9.5", "pauses": "11", "throttles": "22",
        "evictions": "33", "share changes": "44", "faults": "7",  # injected only: 5 + 2
    }


POINT = FrontierPoint("mps", "cap 50%", utilisation_pct=71.25, sm_activity_pct=38.5,
                      slo_violation_pct=2.125, added_violation_pct=0.625,
                      gpu_minute_violation_pct=3.5, offline_throughput=0.3125)


def test_each_frontier_column_shows_its_own_figure() -> None:
    headers, [row] = frontier_rows([POINT])
    assert by_header(headers, row) == {
        "policy": "mps", "setting": "cap 50%", "GPU util %": "71.25", "SM activity %": "38.50",
        "late req. %": "2.125", "added late %": "0.625", "offline work": "0.3125",
        "Pareto": "yes",
    }
    headers, [row] = pareto_rows([POINT])
    assert by_header(headers, row) == {
        "policy": "mps", "setting": "cap 50%", "GPU util %": "71.25", "SM activity %": "38.50",
        "late req. %": "2.125", "added late %": "0.625", "offline work": "0.3125",
    }


def test_each_fragmentation_summary_column_shows_its_own_figure() -> None:
    summary = PolicySummary("fgd", seeds=3, alloc_mean=91.25, alloc_std=1.5,
                            alloc_final=88.75, failed_pods=12.0, frag_mean=4.125)
    [row] = summary_rows([summary])
    assert row == ["fgd", "3", "91.25", "1.50", "88.75", "4.12", "12.0"]
    # policy, seeds, alloc. % at x%, std, alloc. % at end, frag. % at x%, failed pods


def test_the_optimum_row_and_the_gap_column() -> None:
    summary = PolicySummary("fgd", 2, 91.25, 1.5, 88.75, 12.0, 4.125)
    bound = BoundSummary(percent=90, seeds=2, upper_mean=95.5, plan_mean=94.0, exact=1, solved=2,
                         seconds_mean=0.5)
    rows = summary_rows([summary], bound)
    assert rows[0][-1] == "4.25"  # 95.5 - 91.25
    assert rows[1] == ["offline optimum (bound)", "2", "95.50", "", "", "", "", ""]


def test_each_replay_column_shows_its_own_figure() -> None:
    row = {"policy": "best-fit", "arrivals": 12345, "failed": 67, "departures": 8910,
           "alloc_percent_mean": 55.125, "alloc_percent_max": 77.5,
           "frag_percent_mean": 6.25, "running_max": 432}
    headers, [cells] = replay_rows([row])
    assert by_header(headers, cells) == {
        "policy": "best-fit", "arrivals": "12,345", "failed": "67", "departures": "8,910",
        "alloc. % mean": "55.125", "alloc. % peak": "77.500", "frag. % mean": "6.250",
        "running pods peak": "432",
    }


def test_each_budget_cell_shows_its_policys_figures() -> None:
    verdict = [
        {"budget_added_pct": 0.5, "winner": "mps",
         "best": {"mps": {"offline_throughput": 0.4375, "added_violation_pct": 0.125,
                          "setting": "cap 40%"},
                  "tally": {"offline_throughput": 0.3125, "added_violation_pct": 0.25,
                            "setting": "p99 x1.5"}}},
        {"budget_added_pct": 0.1, "winner": None, "best": {"mps": None, "tally": None}},
    ]
    headers, body = budget_rows(verdict)
    assert headers == ["added late requests at most", "most offline work", "mps", "tally"]
    assert body == [
        ["+0.5 points", "mps", "0.4375 (+0.125, cap 40%)", "0.3125 (+0.250, p99 x1.5)"],
        ["+0.1 points", "none", "none", "none"],
    ]


def test_the_summary_tables_headers_captions_and_best_row() -> None:
    a = PolicySummary("fgd", 2, 91.25, 1.5, 88.75, 12.0, 4.125)
    b = PolicySummary("random", 2, 85.5, 2.0, 80.0, 30.0, 9.0)
    [table] = summary_tables([a, b], 90, "Fragmentation", 200)
    assert table.title == "Fragmentation"
    assert [str(c.header) for c in table.columns] == [
        "policy", "seeds", "alloc. % at 90%", "std", "alloc. % at end", "frag. % at 90%",
        "failed pods"]
    assert [c.justify for c in table.columns] == ["left"] + ["right"] * 6
    assert [r.style for r in table.rows] == ["bold green", None]  # the best allocation
    assert table.caption == summary_caption(90)
    assert "arrived demand is 90% of capacity" in summary_caption(90)
    unreached = PolicySummary("big", 2, float("nan"), 0.0, 50.0, 0.0, float("nan"))
    [table] = summary_tables([a, unreached], 90, "F", 200)
    assert str(table.caption).endswith("n/a: no pod arrived within 1% of 90% demand (pods "
                                       "large against the cluster jump past it): try another "
                                       "--report-at")
    bound = BoundSummary(percent=90, seeds=2, upper_mean=95.5, plan_mean=94.0, exact=1,
                         solved=2, seconds_mean=0.5)
    [table] = summary_tables([a], 90, "F", 300, bound)
    assert str(table.columns[-1].header) == "gap to optimum"
    assert [r.style for r in table.rows] == ["bold green", "dim"]
    assert str(table.caption).endswith("; " + bound_caption(bound))
    assert bound_caption(bound) == (
        "offline optimum: no placement of the pods arrived by then allocates more (a proven "
        "upper bound, mean over seeds (placements: 94.00); a placement reaches it on 1 of 2 "
        "seeds); gap to optimum: optimum - alloc., in points")
    exact = BoundSummary(percent=90, seeds=2, upper_mean=95.5, plan_mean=95.5, exact=2,
                         solved=2, seconds_mean=0.5)
    assert "mean over seeds; a placement reaches it on every seed)" in bound_caption(exact)


def test_the_replay_and_frontier_tables_are_titled_and_captioned() -> None:
    row = {"policy": "best-fit", "arrivals": 1, "failed": 0, "departures": 0,
           "alloc_percent_mean": 1.0, "alloc_percent_max": 2.0, "frag_percent_mean": 0.5,
           "running_max": 1}
    [table] = replay_tables([row], 200)
    assert (table.title, table.caption) == ("Time replay", REPLAY_CAPTION)
    verdict = [{"budget_added_pct": 0.5, "winner": "mps",
                "best": {"mps": {"offline_throughput": 0.5, "added_violation_pct": 0.1,
                                 "setting": "s"}}}]
    [table] = frontier_tables(verdict, 12, 200)
    assert table.title == "Offline work within a late-request budget (12 settings run)"
    assert table.caption == BUDGET_CAPTION + ": --json, or frontier.json with --out"
    assert [c.justify for c in table.columns] == ["left", "left", "right"]


def test_counts_read_as_a_reader_writes_them() -> None:
    assert counts({"no GPU": 37, "CPU": 2}) == "no GPU: 37; CPU: 2"
    assert counts({}) == "none"


def test_a_split_table_is_titled_once_and_captioned_at_the_end() -> None:
    head = ["policy", "a long header one", "a long header two", "three"]
    body = [["fgd", "1", "2", "3"], ["random", "4", "5", "6"]]
    tables = fitted_tables(head, body, 30, title="T", caption="C",
                           styles=["bold", None])
    assert len(tables) > 1
    assert [t.title for t in tables] == ["T"] + [None] * (len(tables) - 1)
    assert [t.caption for t in tables] == [None] * (len(tables) - 1) + ["C"]
    assert all(str(t.columns[0].header) == "policy" for t in tables)
    assert all([r.style for r in t.rows] == ["bold", None] for t in tables)
    assert [c.width for c in tables[0].columns][:1] == [6]  # its widest cell, "random"
