"""``cotenant simulate colocation``: scenario files, flags over them, JSON, reports, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.cli.test_cli import NODES, PODS, run

SCENARIO = """apiVersion: cotenant/v1alpha1
kind: ColocationScenario
seed: 3
workload: {gpus: 30, hours: 0.5}
policies: [dedicated, {name: priority, guard: adaptive, memory_limit: true}, muxflow]
"""


def test_default_policies_in_json_with_the_dedicated_floor(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "simulate", "colocation", "--gpus", "30", "--hours", "0.5",
                       "--json", "--out", str(tmp_path))
    assert code == 0
    data = json.loads(out)
    rows = {p["policy"]: p for p in data["policies"]}
    assert list(rows) == ["dedicated", "mps-fixed", "time-slicing", "priority", "muxflow",
                          "cotenant-pause", "cotenant-priority"]
    assert rows["dedicated"]["added_violation_pct"] == 0.0
    for row in rows.values():
        assert row["added_violation_pct"] == pytest.approx(
            row["slo_violation_pct"] - rows["dedicated"]["slo_violation_pct"], abs=2e-3)
    assert data["settings"]["online GPUs"] == 30
    assert (tmp_path / "index.html").exists()
    assert (tmp_path / "colocation.png").exists()


def test_a_scenario_file_with_flags_over_it(capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    code, out, _ = run(capsys, "simulate", "colocation", "--config", str(path), "--gpus", "20",
                       "--calibration", "h200", "--load-signal", "whole-gpu", "--json")
    assert code == 0
    data = json.loads(out)
    assert [p["policy"] for p in data["policies"]] == ["dedicated", "priority", "muxflow"]
    assert data["settings"]["online GPUs"] == 20
    assert data["settings"]["calibration"] == "h200 (mean)"
    assert data["settings"]["load signal"] == "whole-gpu"


def test_openb_files_and_one_policy(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pods, nodes = tmp_path / "pods.csv", tmp_path / "nodes.csv"
    pods.write_text(PODS)
    nodes.write_text(NODES)
    code, out, _ = run(capsys, "simulate", "colocation", "--pods", str(pods), "--nodes",
                       str(nodes), "-p", "muxflow", "--hours", "0.5", "--json")
    assert code == 0
    data = json.loads(out)
    assert [p["policy"] for p in data["policies"]] == ["muxflow"]
    assert data["settings"]["online GPUs"] == 1


@pytest.mark.parametrize(("args", "says"), [
    (["-p", "nope"], "unknown co-location policy 'nope'"),
    (["--gpus", "0"], "--gpus"),
    (["--calibration", "nope"], "world.calibration"),
    (["--load-signal", "exact"], "world.loadSignal"),
    (["--slo-multiple", "0.5"], "workload.slo_multiple"),
])
def test_bad_input_is_one_line(capsys: pytest.CaptureFixture[str], args: list[str],
                               says: str) -> None:
    code, _, err = run(capsys, "simulate", "colocation", *args)
    assert code == 2
    assert says in err
    assert len(err.strip().splitlines()) == 1


def test_a_scenario_with_an_unknown_key_is_one_line(capsys: pytest.CaptureFixture[str],
                                                    tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.replace("seed: 3", "seed: 3\nbogus: 1"))
    code, _, err = run(capsys, "simulate", "colocation", "--config", str(path))
    assert code == 2
    assert "bogus: unknown key" in err


def test_the_frontier_reports_points_and_a_verdict(capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    code, out, err = run(capsys, "simulate", "colocation", "--gpus", "12", "--hours", "0.2",
                         "--frontier", "--json", "--out", str(tmp_path))
    assert code == 0
    data = json.loads(out)
    assert len(data["points"]) == 84
    assert {v["budget_added_pct"] for v in data["verdict"]} >= {0.1, 1.0}
    assert "85 runs" in err
    assert (tmp_path / "frontier.json").exists()
