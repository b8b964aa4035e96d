"""Every report column shows its own figure: fixtures give each field a distinct value, so a
column that shows its neighbour's figure (SM activity as utilisation, frag. % as alloc. %)
fails here."""

from __future__ import annotations

from collections.abc import Sequence

from cotenant.report.colocation import budget_rows, colocation_rows, frontier_rows, pareto_rows
from cotenant.report.tables import replay_rows, summary_rows
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
