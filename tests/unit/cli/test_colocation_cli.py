"""``cotenant simulate colocation``: JSON, report files, openb input, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cotenant.sim.colocation_frontier import DEFAULT_PEAKS, DEFAULT_SHARES
from tests.unit.cli.test_cli import NODES, PODS, run


def test_default_synthetic_run_prints_json_for_every_policy(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run(
        capsys, "simulate", "colocation", "--gpus", "40", "--hours", "1", "--json",
        "--out", str(tmp_path),
    )
    assert code == 0
    data = json.loads(out)
    names = [p["policy"] for p in data["policies"]]
    assert names == ["dedicated", "mps-fixed", "time-slicing", "muxflow"]
    assert data["settings"]["online GPUs"] == 40
    common = {p["policy"]: p["jct_common_min"] for p in data["policies"]}
    assert common["dedicated"] is None  # it runs no offline job
    assert all(common[n] is not None for n in names[1:])  # one set of jobs for the others
    assert (tmp_path / "index.html").exists()
    assert (tmp_path / "colocation.png").exists()


def test_openb_files_and_one_policy(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pods, nodes = tmp_path / "pods.csv", tmp_path / "nodes.csv"
    pods.write_text(PODS)
    nodes.write_text(NODES)
    code, out, _ = run(
        capsys, "simulate", "colocation", "--pods", str(pods), "--nodes", str(nodes),
        "-p", "muxflow", "-p", "mps", "--mps-share", "70", "--hours", "0.5", "--json",
    )
    assert code == 0
    data = json.loads(out)
    assert [p["policy"] for p in data["policies"]] == ["muxflow", "mps-fixed"]
    assert data["settings"]["mps-fixed online share (%)"] == 70
    assert data["settings"]["online GPUs"] == 1  # one LS pod with one GPU


def test_unknown_policy_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "simulate", "colocation", "-p", "nope")
    assert code == 2
    assert "unknown co-location policy 'nope'" in err
    assert len(err.strip().splitlines()) == 1


def test_frontier_reports_every_setting_and_the_verdict(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run(
        capsys, "simulate", "colocation", "--gpus", "30", "--hours", "0.5", "--frontier",
        "--json", "--out", str(tmp_path),
    )
    assert code == 0
    data = json.loads(out)
    policies = [p["policy"] for p in data["points"]]
    assert policies[0] == "muxflow"
    peaks = len(DEFAULT_PEAKS)  # each without and with a memory limit
    assert policies.count("time-slicing") == 2 * peaks
    assert policies.count("mps-fixed") == 2 * peaks * len(DEFAULT_SHARES)
    assert sum(p["setting"].endswith("mem-limit") for p in data["points"]) == peaks * (
        1 + len(DEFAULT_SHARES)
    )
    assert any(n.startswith("time-slicing at <=") for n in data["notes"])
    assert (tmp_path / "frontier.png").exists()
    assert (tmp_path / "frontier.json").exists()


def test_frontier_admits_by_the_quantiles_asked_for(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(
        capsys, "simulate", "colocation", "--gpus", "20", "--hours", "0.25", "--frontier",
        "--admit-quantile", "1", "--admit-quantile", "0.99", "--json",
    )
    assert code == 0
    data = json.loads(out)
    assert data["settings"]["admission quantiles"] == "1, 0.99"
    settings = [p["setting"] for p in data["points"]]
    assert len(settings) == 1 + 2 * 2 * len(DEFAULT_PEAKS) * (1 + len(DEFAULT_SHARES))
    assert "p99<=0.9 mem-limit" in settings
    assert "share=50% peak<=0.9" in settings
    for argv, needle in ((["--frontier", "--admit-quantile", "1.5"], "(0, 1]"),
                         (["--admit-quantile", "0.9"], "is a --frontier setting")):
        code, _, err = run(capsys, "simulate", "colocation", *argv)
        assert code == 2
        assert "--admit-quantile" in err
        assert needle in err
        assert len(err.strip().splitlines()) == 1


def test_arrivals_and_load_scale_reach_the_workload(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(
        capsys, "simulate", "colocation", "--gpus", "20", "--hours", "0.5", "-p", "ts",
        "--arrivals", "start", "--load-scale", "2", "--json",
    )
    assert code == 0
    data = json.loads(out)
    assert data["settings"]["offline arrivals"] == "start"
    assert data["settings"]["load scale"] == 2.0
    code, _, err = run(capsys, "simulate", "colocation", "--arrivals", "later")
    assert code == 2
    assert "--arrivals" in err
    assert len(err.strip().splitlines()) == 1


def test_load_and_memory_files_drive_online_memory(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    duty, memory = tmp_path / "duty.csv", tmp_path / "mem.csv"
    times = range(0, 7200, 60)
    duty.write_text("value,timestamp_anon,container_ip\n"
                    + "".join(f"{5 + t % 7},{t},a\n" for t in times))
    memory.write_text("timestamp_anon,value,container_ip\n"
                      + "".join(f"{t},{(1 + (t // 60) % 3) * 1024**3},a\n" for t in times))
    code, _, err = run(capsys, "simulate", "colocation", "--memory", str(memory))
    assert code == 2
    assert "--memory needs --load" in err
    assert len(err.strip().splitlines()) == 1
    code, out, _ = run(
        capsys, "simulate", "colocation", "--gpus", "20", "--hours", "1", "--load", str(duty),
        "--memory", str(memory), "-p", "ts", "-p", "muxflow", "--json",
    )
    assert code == 0
    data = json.loads(out)
    assert any(n.startswith("online memory over time from mem.csv") for n in data["notes"])
    ooms = {p["policy"]: p["online_oom_intervals"] for p in data["policies"]}
    assert ooms["time-slicing"] > 0  # memory cycling 1-3 GiB: placed by free memory, it OOMs
    assert ooms["muxflow"] == 0
    # two hours of load over a one-hour horizon: no repetition, and the notes say nothing of it
    assert not any("repeats them" in n for n in data["notes"])
    code, out, _ = run(
        capsys, "simulate", "colocation", "--gpus", "20", "--hours", "3", "--load", str(duty),
        "-p", "ts", "--json",
    )
    assert code == 0
    assert "load: the series cover 2.0 h; the 3 h horizon repeats them from their start" in (
        json.loads(out)["notes"])


def test_gpus_sizes_only_the_synthetic_workload(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pods, nodes = tmp_path / "pods.csv", tmp_path / "nodes.csv"
    pods.write_text(PODS)
    nodes.write_text(NODES)
    code, _, err = run(capsys, "simulate", "colocation", "--pods", str(pods), "--nodes",
                       str(nodes), "--gpus", "10")
    assert code == 2
    assert "--gpus: sizes the synthetic workload" in err


def test_offline_start_time_is_an_option_and_changes_the_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def muxflow(start: str) -> dict[str, float]:
        code, out, _ = run(
            capsys, "simulate", "colocation", "--gpus", "40", "--hours", "1", "-p", "muxflow",
            "--offline-start-s", start, "--share-change-s", start, "--json",
        )
        assert code == 0
        data = json.loads(out)
        assert data["settings"]["offline start (s)"] == float(start)
        assert data["settings"]["share change (s)"] == float(start)
        row: dict[str, float] = data["policies"][0]
        return row

    free, slow = muxflow("0"), muxflow("60")
    assert free["share_changes"] > 0
    assert slow["offline_throughput"] < free["offline_throughput"]
    code, _, err = run(capsys, "simulate", "colocation", "--offline-start-s", "-5")
    assert code == 2
    assert "offline-start-s" in err


def test_the_guard_reaction_is_an_option_stated_in_the_notes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def muxflow(*argv: str) -> tuple[dict[str, object], dict[str, float], list[str]]:
        code, out, _ = run(capsys, "simulate", "colocation", "--gpus", "40", "--hours", "1",
                           "-p", "muxflow", "--json", *argv)
        assert code == 0
        data = json.loads(out)
        return data["settings"], data["policies"][0], data["notes"]

    settings, fast, notes = muxflow()
    assert settings["MuxFlow guard reaction (s)"] == 0.5
    assert settings["MuxFlow load window (intervals)"] == 1
    assert "assume its guard acts within 0.5 s, under 0.6 s" in notes[-1]
    settings, slow, notes = muxflow("--guard-reaction-s", "5", "--load-window", "3")
    assert settings["MuxFlow guard reaction (s)"] == 5.0
    assert settings["MuxFlow load window (intervals)"] == 3
    assert "acts after 5 s, 0.6 s (1% of an interval) or more" in notes[-1]
    assert slow["slo_violation_pct"] > fast["slo_violation_pct"]
    code, out, _ = run(capsys, "simulate", "colocation", "--gpus", "10", "--hours", "0.25",
                       "-p", "dedicated", "--json")
    assert not any("guard" in n for n in json.loads(out)["notes"])  # no MuxFlow, no note
    for argv, needle in (
        (["--guard-reaction-s", "inf"], "--guard-reaction-s: inf must be a finite number"),
        (["-p", "dedicated", "--guard-reaction-s", "0.5"], "MuxFlow does not run"),
        (["-p", "ts", "--min-online-share", "50"], "MuxFlow does not run"),
    ):
        code, _, err = run(capsys, "simulate", "colocation", *argv)
        assert code == 2
        assert needle in err
        assert len(err.strip().splitlines()) == 1


def test_a_floor_on_the_online_share_trades_offline_work_for_slo_under_a_slow_guard(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def muxflow(*argv: str) -> tuple[dict[str, object], dict[str, float]]:
        code, out, _ = run(capsys, "simulate", "colocation", "--gpus", "40", "--hours", "2",
                           "-p", "muxflow", "--guard-reaction-s", "5", "--json", *argv)
        assert code == 0
        data = json.loads(out)
        return data["settings"], data["policies"][0]

    settings, bare = muxflow()
    assert settings["MuxFlow minimum online share (%)"] == 10  # DynamicShare's default
    settings, floored = muxflow("--min-online-share", "90")
    assert settings["MuxFlow minimum online share (%)"] == 90
    assert floored["slo_violation_pct"] < bare["slo_violation_pct"]
    assert floored["offline_throughput"] < bare["offline_throughput"]


def test_the_frontier_runs_muxflow_with_the_guard_asked_for(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def mux_point(reaction: str) -> dict[str, float]:
        code, out, _ = run(capsys, "simulate", "colocation", "--gpus", "20", "--hours", "0.5",
                           "--frontier", "--guard-reaction-s", reaction, "--json")
        assert code == 0
        point: dict[str, float] = json.loads(out)["points"][0]
        assert point["policy"] == "muxflow"
        return point

    fast, slow = mux_point("0.5"), mux_point("5")
    assert slow["slo_violation_pct"] > fast["slo_violation_pct"]
    assert slow["offline_throughput"] == fast["offline_throughput"]


def test_the_frontier_admits_by_history_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "simulate", "colocation", "--gpus", "20", "--hours", "2",
                       "--frontier", "--admit-from-history", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["settings"]["admission by"] == "the load seen so far"
    assert all(p["setting"].endswith(" hist") for p in data["points"][1:])
    code, _, err = run(capsys, "simulate", "colocation", "--admit-from-history")
    assert code == 2
    assert "--admit-from-history: is a --frontier setting" in err
    assert len(err.strip().splitlines()) == 1


def test_no_finished_job_has_no_completion_time(capsys: pytest.CaptureFixture[str]) -> None:
    """Dedicated GPUs run no offline job: its JCT is null in JSON and n/a in the table."""
    code, out, _ = run(capsys, "simulate", "colocation", "--gpus", "5", "--hours", "0.1",
                       "-p", "dedicated", "--json")
    assert code == 0
    policy = json.loads(out)["policies"][0]
    assert policy["jobs_completed"] == 0
    assert policy["jct_mean_min"] is None
    code, out, _ = run(capsys, "simulate", "colocation", "--gpus", "5", "--hours", "0.1",
                       "-p", "dedicated")
    assert code == 0
    assert "n/a" in out
