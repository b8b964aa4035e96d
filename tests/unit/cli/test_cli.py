"""The ``cotenant`` command line, called in-process through ``main``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cotenant import __version__
from cotenant.cli.main import main
from cotenant.traces.openb import load_nodes, load_pods
from cotenant.traces.synthetic import fit_openb, load_params

SEVEN = {
    "random", "best-fit", "dot-product", "gpu-packing", "gpu-clustering", "fgd", "cotenant-pack"
}

PODS = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time\n"
    "a,1000,2048,1,500,,LS,Running,0,100,0\n"
    "b,2000,4096,2,1000,P100,BE,Running,10,50,10\n"
    "c,3000,4096,0,0,,LS,Running,20,,20\n"
)
NODES = (
    "sn,cpu_milli,memory_mib,gpu,model\n"
    "n0,64000,262144,2,P100\n"
    "n1,96000,393216,4,V100M32\n"
    "n2,32000,131072,0,\n"
)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run the CLI; return (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as info:
        main(list(argv))
    out, err = capsys.readouterr()
    code = info.value.code
    return (0 if code is None else int(code)), out, err


@pytest.fixture
def trace(tmp_path: Path) -> tuple[Path, Path]:
    pods = tmp_path / "pods.csv"
    pods.write_text(PODS, encoding="utf-8")
    nodes = tmp_path / "nodes.csv"
    nodes.write_text(NODES, encoding="utf-8")
    return pods, nodes


def assert_one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("cotenant: error: ")
    assert "Traceback" not in err
    return lines[0]


# --- small commands ------------------------------------------------------------------------------


def test_policies_lists_the_seven(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "policies")
    assert code == 0
    assert set(out.split()) == SEVEN
    assert len(out.split()) == 7


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "version")
    assert code == 0
    assert out.strip() == __version__


def test_unknown_policy_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "simulate", "-p", "nope", "--synthetic-pods", "10")
    assert code == 2
    assert out == ""
    line = assert_one_error_line(err)
    assert "'nope'" in line
    for name in SEVEN:
        assert name in line


@pytest.mark.parametrize(
    "argv", [("frobnicate",), ("simulate", "--seeds", "many"), ("mig", "layouts")]
)
def test_usage_errors_exit_2_without_traceback(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.strip()


# --- simulate: bad input ------------------------------------------------------------------------


def test_bad_pod_csv_is_one_line_naming_the_place(
    capsys: pytest.CaptureFixture[str], trace: tuple[Path, Path]
) -> None:
    pods, nodes = trace
    pods.write_text(PODS + "d,1000,2048,0,700,,LS,Running,0,1,0\n", encoding="utf-8")
    code, out, err = run(capsys, "simulate", "--pods", str(pods), "--nodes", str(nodes))
    assert code == 2
    assert out == ""
    line = assert_one_error_line(err)
    assert "pods.csv:5:gpu_milli" in line
    assert "700 with num_gpu 0" in line


def test_pods_without_node_list_hints_at_nodes(
    capsys: pytest.CaptureFixture[str], trace: tuple[Path, Path]
) -> None:
    pods, _ = trace
    code, _, err = run(capsys, "simulate", "--pods", str(pods))
    assert code == 2
    line = assert_one_error_line(err)
    assert "--nodes" in line


def test_missing_pod_list_says_so_not_the_node_list(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = tmp_path / "nowhere" / "pods.csv"
    code, _, err = run(capsys, "simulate", "--pods", str(missing))
    assert code == 2
    assert "no such pod list file" in err
    assert str(missing) in err
    assert len(err.strip().splitlines()) == 1


def test_report_at_beyond_demand(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(
        capsys,
        "simulate",
        "--synthetic-pods",
        "20",
        "--synthetic-nodes",
        "2",
        "--demand",
        "1.0",
        "--report-at",
        "150",
    )
    assert code == 2
    line = assert_one_error_line(err)
    assert "--report-at" in line
    assert "0..100" in line


# --- mig -----------------------------------------------------------------------------------------


def test_mig_validate_overlap(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "mig", "validate", "A100-40GB", "3g.20gb@0,4g.20gb@0")
    assert code == 2
    assert out == ""
    line = assert_one_error_line(err)
    assert "overlap" in line


def test_mig_validate_ok_places_profiles(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "mig", "validate", "A100-40GB", "3g.20gb,2g.10gb,1g.5gb")
    assert code == 0
    assert out.startswith("valid: ")
    for profile in ("3g.20gb@", "2g.10gb@", "1g.5gb@"):
        assert profile in out


def test_mig_layouts_a100(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "mig", "layouts", "A100-40GB")
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[-1] == "19 layouts"
    assert len(lines) == 20
    assert any(line.startswith("7 ") for line in lines[:-1])


def test_mig_layouts_on_gpu_without_mig(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "mig", "layouts", "T4")
    assert code == 2
    line = assert_one_error_line(err)
    assert "T4" in line
    assert "MIG" in line


def test_mig_unknown_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "mig", "profiles", "Z99")
    assert code == 2
    assert "unknown GPU model 'Z99'" in assert_one_error_line(err)


def test_mig_profiles_a100(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "mig", "profiles", "A100")
    assert code == 0
    assert "A100-40GB" in out
    assert "7g.40gb" in out


# --- simulate: runs ------------------------------------------------------------------------------

SMALL = ("--synthetic-pods", "300", "--synthetic-nodes", "20", "--seeds", "2", "--workers", "1")


def test_simulate_json_has_all_seven(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "simulate", *SMALL, "--json")
    assert code == 0
    data = json.loads(out)
    assert data["settings"]["nodes"] == 20
    assert data["settings"]["pods"] == 300
    assert data["settings"]["seeds"] == "42..43"
    policies = data["policies"]
    assert {p["policy"] for p in policies} == SEVEN
    assert len(policies) == 7
    for p in policies:
        assert 0.0 < p["alloc_percent_mean"] <= 100.0, p
        assert p["seeds"] == 2


def test_simulate_writes_report(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rep = tmp_path / "rep"
    rep.mkdir()  # see test_simulate_out_creates_missing_directory
    code, out, err = run(
        capsys, "simulate", *SMALL, "--json", "--out", str(rep), "-p", "fgd", "-p", "best-fit"
    )
    assert code == 0
    for name in ("index.html", "allocation.png", "fragmentation.png", "summary.json"):
        assert (rep / name).is_file(), name
        assert (rep / name).stat().st_size > 0, name
    assert (rep / "allocation.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = json.loads((rep / "summary.json").read_text())
    assert [p["policy"] for p in summary["policies"]] == ["fgd", "best-fit"]
    assert summary == json.loads(out)
    html = (rep / "index.html").read_text()
    assert "allocation.png" in html
    assert "report:" in err


def test_simulate_out_creates_missing_directory(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rep = tmp_path / "new" / "rep"
    code, out, _ = run(capsys, "simulate", *SMALL, "--json", "--out", str(rep), "-p", "fgd")
    assert code == 0
    assert json.loads((rep / "summary.json").read_text()) == json.loads(out)
    [fgd] = json.loads(out)["policies"]
    assert f"{fgd['alloc_percent_mean']:.2f}" in (rep / "index.html").read_text()


def test_simulate_bound_gives_each_policy_its_gap(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rep = tmp_path / "rep"
    code, out, _ = run(capsys, "simulate", *SMALL, "--json", "-p", "fgd", "-p", "random",
                       "--bound", "--bound-at", "50", "--out", str(rep))
    assert code == 0
    data = json.loads(out)
    optima = {b["percent"]: b for b in data["offline_optimum"]}
    assert sorted(optima) == [50, 100]
    at100 = optima[100]
    assert at100["seeds"] == 2
    assert at100["kind"] in ("exact", "bound")
    assert at100["plan_percent_mean"] <= at100["upper_percent_mean"] <= 100.0
    for p in data["policies"]:
        assert p["gap_to_optimum_points"] == pytest.approx(
            at100["upper_percent_mean"] - p["alloc_percent_mean"], abs=2e-3)
        assert p["gap_to_optimum_points"] >= 0.0
    assert "offline optimum" in (rep / "index.html").read_text()


def test_simulate_table_shows_the_optimum(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "simulate", *SMALL, "-p", "fgd", "--bound")
    assert code == 0
    assert "offline optimum" in out
    assert "gap to" in out


def test_simulate_bound_at_outside_the_run_is_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, "simulate", *SMALL, "--bound-at", "200")
    assert code == 2
    assert out == ""
    assert "--bound-at" in assert_one_error_line(err)


def test_replay_writes_report(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rep = tmp_path / "rep"
    rep.mkdir()
    code, _, _ = run(
        capsys,
        "simulate",
        "replay",
        "--synthetic-pods",
        "100",
        "--synthetic-nodes",
        "5",
        "-p",
        "fgd",
        "-p",
        "random",
        "--json",
        "--sample-every",
        "600",
        "--out",
        str(rep),
    )
    assert code == 0
    assert (rep / "replay.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = (rep / "index.html").read_text()
    assert "replay.png" in html
    assert "fgd" in html
    assert "random" in html


def test_simulate_on_csv_trace(
    capsys: pytest.CaptureFixture[str], trace: tuple[Path, Path]
) -> None:
    pods, nodes = trace
    code, out, _ = run(
        capsys,
        "simulate",
        "--pods",
        str(pods),
        "--nodes",
        str(nodes),
        "--seeds",
        "1",
        "--workers",
        "1",
        "-p",
        "best-fit",
        "--json",
    )
    assert code == 0
    data = json.loads(out)
    assert data["settings"]["nodes"] == 2
    assert data["settings"]["GPUs"] == 6
    assert data["settings"]["workload"] == (
        "openb trace pods.csv on nodes.csv (1 CPU-only nodes left out)"
    )


def test_replay_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "simulate",
        "replay",
        "--synthetic-pods",
        "200",
        "--synthetic-nodes",
        "10",
        "-p",
        "fgd",
        "--json",
    )
    assert code == 0
    data = json.loads(out)
    (row,) = data["policies"]
    assert row["policy"] == "fgd"
    assert row["arrivals"] == 200
    assert 0 <= row["failed"] <= row["arrivals"]
    # synthetic pods all leave, so every placed pod departs by the end
    assert row["departures"] == row["arrivals"] - row["failed"]
    assert 0.0 <= row["alloc_percent_mean"] <= row["alloc_percent_max"] <= 100.0


def test_replay_says_when_the_trace_asks_too_little_and_how_to_ask_more(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Pods that never overlap on a 100-GPU cluster: a peak of 1%, every policy alike."""
    rows = "".join(f"p{i},1000,2048,1,1000,,LS,Running,{100 * i},{100 * i + 50},0\n"
                   for i in range(20))
    pods = tmp_path / "pods.csv"
    pods.write_text(PODS.splitlines(keepends=True)[0] + rows, encoding="utf-8")
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
        f"n{i},96000,393216,4,V100M32\n" for i in range(25)), encoding="utf-8")
    code, out, _ = run(capsys, "simulate", "replay", "--pods", str(pods), "--nodes", str(nodes),
                       "-p", "fgd", "--sample-every", "10", "--json")
    assert code == 0
    data = json.loads(out)
    (note,) = data["notes"]
    assert "1 pod alive at once, asking for 1.00% of the cluster's GPUs" in note
    assert "--arrival-speedup" not in note  # 20 pods of 1 GPU never ask half of 100 GPUs
    assert "--cluster-fraction 0.02" in note
    assert data["policies"][0]["running_max"] == 1
    code, out, _ = run(capsys, "simulate", "replay", "--pods", str(pods), "--nodes", str(nodes),
                       "-p", "fgd", "--sample-every", "10", "--cluster-fraction", "0.04",
                       "--json")
    data = json.loads(out)
    assert data["settings"]["GPUs"] == 4
    assert data["notes"] == ["the trace's busiest moment: 1 pod alive at once, asking for "
                             "25.00% of the cluster's GPUs"]


# --- trace ---------------------------------------------------------------------------------------


def test_trace_check(capsys: pytest.CaptureFixture[str], trace: tuple[Path, Path]) -> None:
    pods, nodes = trace
    code, out, _ = run(capsys, "trace", "check", str(pods), "--nodes", str(nodes))
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[0] == "pods.csv: 3 pods, GPU demand 2.5 GPUs"
    assert lines[1] == (
        "nodes.csv: 2 GPU nodes, 6 GPUs, 1 CPU-only nodes (left out of simulations)"
    )
    assert lines[2] == "demand / capacity: 41.7%"


def test_trace_check_bad_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("name,cpu_milli\nx,1\n", encoding="utf-8")
    code, _, err = run(capsys, "trace", "check", str(bad))
    assert code == 2
    assert "bad.csv:1: missing column" in assert_one_error_line(err)


def test_trace_fit_writes_loadable_params(
    capsys: pytest.CaptureFixture[str], trace: tuple[Path, Path], tmp_path: Path
) -> None:
    pods, nodes = trace
    out_path = tmp_path / "params.json"
    code, out, _ = run(capsys, "trace", "fit", str(pods), str(nodes), "--out", str(out_path))
    assert code == 0
    assert "3 pod shapes, 2 node types" in out
    params = load_params(out_path)
    assert params == fit_openb(load_pods(pods), load_nodes(nodes), "pods.csv + nodes.csv")
    assert params.pods == 3
    assert params.nodes == 2


def test_simulate_with_fitted_params(
    capsys: pytest.CaptureFixture[str], trace: tuple[Path, Path], tmp_path: Path
) -> None:
    pods, nodes = trace
    out_path = tmp_path / "params.json"
    assert run(capsys, "trace", "fit", str(pods), str(nodes), "--out", str(out_path))[0] == 0
    code, out, _ = run(
        capsys,
        "simulate",
        "replay",
        "--params",
        str(out_path),
        "--synthetic-pods",
        "30",
        "--synthetic-nodes",
        "3",
        "-p",
        "best-fit",
        "--json",
    )
    assert code == 0
    data = json.loads(out)
    assert data["policies"][0]["arrivals"] == 30
    assert "pods.csv + nodes.csv" in data["workload"]


def test_missing_params_file_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(
        capsys,
        "simulate",
        "replay",
        "--params",
        str(tmp_path / "absent.json"),
        "--synthetic-pods",
        "10",
        "--synthetic-nodes",
        "2",
        "-p",
        "fgd",
        "--json",
    )
    assert code == 2
    line = assert_one_error_line(err)
    assert line.endswith(f"{tmp_path / 'absent.json'}: cannot read parameters: "
                         "No such file or directory")


def test_report_on_tiny_cluster_is_warning_free(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rep = tmp_path / "rep"
    rep.mkdir()
    code, out, _ = run(
        capsys,
        "simulate",
        "--synthetic-pods",
        "100",
        "--synthetic-nodes",
        "5",
        "--seeds",
        "1",
        "--workers",
        "1",
        "--json",
        "-p",
        "fgd",
        "--out",
        str(rep),
    )
    assert code == 0
    data = json.loads(out)
    assert data["settings"]["nodes"] == 5
    assert data["settings"]["pods"] == 100
    [fgd] = data["policies"]
    assert (fgd["policy"], fgd["seeds"], fgd["alloc_percent_std"]) == ("fgd", 1, 0.0)
    assert 0.0 < fgd["alloc_percent_mean"] <= 100.0
    assert 0.0 < fgd["alloc_percent_final"] <= 100.0
    # the fragmented share is part of the free share
    assert 0.0 <= fgd["frag_percent_mean"] <= 100.0 - fgd["alloc_percent_mean"]
    assert fgd["failed_pods_mean"] == int(fgd["failed_pods_mean"])  # one seed: a count
    assert sorted(p.name for p in rep.iterdir()) == [
        "allocation.png", "fragmentation.png", "index.html", "summary.json"]
