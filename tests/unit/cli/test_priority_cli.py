"""``cotenant simulate priority``: flags, scenario files, JSON, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.cli.test_cli import run


def test_json_has_every_scheduler_with_be_against_tgs(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "simulate", "priority", "--requests", "20", "--json")
    assert code == 0
    data = json.loads(out)
    rows = {r["scheduler"]: r for r in data["schedulers"]}
    assert set(rows) == {"tally", "tgs", "time-slicing", "mps", "mps-priority", "reef", "orion"}
    assert rows["tgs"]["be_vs_tgs"] == 1.0
    assert rows["tally"]["p99_overhead_pct"] < rows["time-slicing"]["p99_overhead_pct"]


def test_a_scenario_file_with_flags_over_it(capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path) -> None:
    trace = tmp_path / "hp.csv"
    trace.write_text("duration_us,gap_us\n" + "50,5\n" * 20, encoding="utf-8")
    path = tmp_path / "s.yaml"
    path.write_text("apiVersion: cotenant/v1alpha1\nkind: PriorityScenario\nhp: bert\n"
                    "be: pytorch_bert\nhpTrace: hp.csv\nrequests: 10\n"
                    "schedulers: [{name: tally, limit_us: 10}, time-slicing]\n",
                    encoding="utf-8")
    code, out, _ = run(capsys, "simulate", "priority", "--config", str(path), "--json",
                       "--requests", "15")
    assert code == 0
    data = json.loads(out)
    assert [r["scheduler"] for r in data["schedulers"]] == ["tally(limit_us=10)", "time-slicing"]
    assert data["schedulers"][0]["mean_alone_ms"] == pytest.approx(1.1)


def test_the_table_names_the_pair(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "simulate", "priority", "-s", "tally", "--requests", "5",
                       "--be", "pytorch_whisper")
    assert code == 0
    assert "pytorch_whisper" in out
    assert "tally" in out


@pytest.mark.parametrize(("argv", "match"), [
    (["-s", "fifo"], "unknown priority scheduler 'fifo'; valid: mps, "),
    (["--be", "resnet9"], "unknown Tally job 'resnet9'"),
    (["--load", "1.5"], "load: 1.5 must be in (0, 1)"),
    (["--arrivals", "bursty"], "unknown arrival process 'bursty'"),
])
def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str],
                                          argv: list[str], match: str) -> None:
    code, _, err = run(capsys, "simulate", "priority", *argv)
    assert code == 2
    assert match in err
    assert len(err.strip().splitlines()) == 1


def test_negative_kernel_durations_are_refused(capsys: pytest.CaptureFixture[str],
                                               tmp_path: Path) -> None:
    trace = tmp_path / "be.csv"
    trace.write_text("duration_us,gap_us\n10,0\n-4,0\n", encoding="utf-8")
    code, _, err = run(capsys, "simulate", "priority", "--be-trace", str(trace))
    assert code == 2
    assert f"{trace}:3:duration_us: -4 must be a finite number >= 0" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(("doc", "match"), [
    ("kind: PriorityScenario\n", "apiVersion: must be"),
    ("apiVersion: cotenant/v1alpha1\nkind: Other\n", "kind: must be 'PriorityScenario'"),
    ("apiVersion: cotenant/v1alpha1\nkind: PriorityScenario\nbatch: 3\n", "batch: unknown key"),
    ("apiVersion: cotenant/v1alpha1\nkind: PriorityScenario\nrequests: many\n",
     "requests: must be a int"),
    ("apiVersion: cotenant/v1alpha1\nkind: PriorityScenario\nschedulers: [{name: tally, "
     "slice: 3}]\n", "schedulers[0]: scheduler 'tally' takes no such parameter"),
])
def test_bad_scenarios_name_the_key(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                    doc: str, match: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(doc, encoding="utf-8")
    code, _, err = run(capsys, "simulate", "priority", "--config", str(path))
    assert code == 2
    assert match in err


HEAD = "apiVersion: cotenant/v1alpha1\nkind: PriorityScenario\nrequests: 5\n"


@pytest.mark.parametrize(("body", "match"), [
    ("schedulers: [{name: time-slicing, timeslice_us: 0}]",
     "s.yaml.schedulers[0].timeslice_us: 0 must be a finite number of microseconds >= 1"),
    ("schedulers: [{name: tgs, window_us: 0}]",
     "s.yaml.schedulers[0].window_us: 0 must be a finite number of microseconds >= 1"),
    ("schedulers: [mps, {name: tally, limit_us: -5}]",
     "s.yaml.schedulers[1].limit_us: -5 must be a finite number of microseconds > 0"),
    ("schedulers: [{name: tgs, decrease: 5}]",
     "s.yaml.schedulers[0].decrease: 5 must be a fraction in [0, 1]"),
    ("schedulers: [{name: tgs, increase: -0.1}]",
     "s.yaml.schedulers[0].increase: -0.1 must be a fraction in [0, 1]"),
    ("schedulers: [{name: tally, transform_overhead: -1}]",
     "s.yaml.schedulers[0].transform_overhead: -1 must be a finite number >= 0"),
    ("schedulers: [{name: reef, reset_us: .nan}]",
     "s.yaml.schedulers[0].reset_us: nan must be a finite number of microseconds >= 0"),
    ("schedulers: [{name: tally, idle_wait_us: .inf}]",
     "s.yaml.schedulers[0].idle_wait_us: inf must be a finite number of microseconds >= 0"),
    ("schedulers: [{name: tally, untransformed_after_us: -1}]",
     "s.yaml.schedulers[0].untransformed_after_us: -1 must be a number of microseconds >= 0"),
    ("schedulers: [{name: tgs, tolerance: fast}]",
     "s.yaml.schedulers[0].tolerance: 'fast' must be a finite number >= 0"),
    ("seed: -3", "s.yaml.seed: -3 must be >= 0"),
])
def test_out_of_range_parameters_are_one_line_errors(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, body: str, match: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + body + "\n", encoding="utf-8")
    code, _, err = run(capsys, "simulate", "priority", "--config", str(path))
    assert code == 2
    assert match in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_parameters_at_the_edge_of_their_range_run(capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + "schedulers: [{name: tgs, decrease: 0, increase: 1, "
                    "window_us: 1000}, {name: tally, untransformed_after_us: .inf, "
                    "transform_overhead: 0}, {name: reef, reset_us: 0}]\n", encoding="utf-8")
    code, out, _ = run(capsys, "simulate", "priority", "--config", str(path), "--json")
    assert code == 0
    assert len(json.loads(out)["schedulers"]) == 3


@pytest.mark.parametrize(("rows", "match"), [
    ("duration_us,gap_us\n10,0\n1e-300,0\n",
     ":3:duration_us: 1e-300 must be >= 0.001 (the simulator's resolution"),
    ("duration_us,gap_us,stream\n10,0,1\n",
     ":1: unknown column(s) 'stream'; known: duration_us, gap_us, kind"),
    ("duration_us, gap_us\n10,0\n", ":1: unknown column(s) ' gap_us'"),
])
def test_bad_traces_are_one_line_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                        rows: str, match: str) -> None:
    trace = tmp_path / "hp.csv"
    trace.write_text(rows, encoding="utf-8")
    code, _, err = run(capsys, "simulate", "priority", "--hp-trace", str(trace), "-s", "tally")
    assert code == 2
    assert f"{trace}{match}" in err
    assert len(err.strip().splitlines()) == 1


def test_a_be_trace_needs_a_be_job(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    trace = tmp_path / "be.csv"
    trace.write_text("duration_us\n100\n", encoding="utf-8")
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + "be: null\nbeTrace: be.csv\n", encoding="utf-8")
    code, _, err = run(capsys, "simulate", "priority", "--config", str(path))
    assert code == 2
    assert "beTrace: needs a BE job" in err


def test_the_table_names_the_traces(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    hp, be = tmp_path / "my_hp.csv", tmp_path / "my_be.csv"
    hp.write_text("duration_us,gap_us\n" + "50,5\n" * 10, encoding="utf-8")
    be.write_text("duration_us\n" + "400\n" * 10, encoding="utf-8")
    code, out, _ = run(capsys, "simulate", "priority", "-s", "tally", "--requests", "5",
                       "--hp-trace", str(hp), "--be-trace", str(be))
    assert code == 0
    assert "my_hp.csv" in out
    assert "my_be.csv" in out


def test_be_against_tgs_uses_a_tgs_with_parameters(capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + "schedulers: [tally, {name: tgs, window_us: 5000}]\n",
                    encoding="utf-8")
    code, out, _ = run(capsys, "simulate", "priority", "--config", str(path), "--json")
    assert code == 0
    rows = json.loads(out)["schedulers"]
    assert rows[1]["scheduler"] == "tgs(window_us=5000)"
    assert rows[1]["be_vs_tgs"] == 1.0
    assert rows[0]["be_vs_tgs"] == pytest.approx(rows[0]["be_norm_tput"]
                                                 / rows[1]["be_norm_tput"], abs=2e-3)
