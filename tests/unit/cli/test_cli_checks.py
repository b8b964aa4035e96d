"""Values the CLI refuses before any work starts, each with one line on stderr and exit 2:
usage errors, numbers that are not finite, negative seeds, report paths that cannot be made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cotenant.traces.synthetic import default_params
from tests.unit.cli.test_cli import assert_one_error_line, run

Capsys = pytest.CaptureFixture[str]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["frobnicate"], "No such command 'frobnicate'"),
        (["simulate", "--seeds", "0"], "simulate: Invalid value for '--seeds'"),
        (["simulate", "--seeds", "many"], "valid integer"),
        (["simulate", "--bogus"], "No such option: --bogus"),
        (["mig", "validate"], "Missing argument 'gpu'"),
        (["simulate", "--seed-start", "-5"], "'--seed-start'"),
        (["simulate", "replay", "--seed", "-1"], "'--seed'"),
        (["simulate", "colocation", "--seed", "-3"], "'--seed'"),
        (["simulate", "--demand", "1e300"], "less than or equal to 100"),
        (["simulate", "colocation", "--hours", "inf"], "less than or equal to 8784"),
        (["simulate", "colocation", "--gpus", "100000000"], "less than or equal to 1000000"),
        (["agent", "run", "--backend", "fake", "--interval", "0"], "'--interval'"),
        (["agent", "run", "--backend", "fake", "--ticks", "-1"], "'--ticks'"),
    ],
)
def test_usage_errors_are_one_line(capsys: Capsys, argv: list[str], needle: str) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    line = assert_one_error_line(err)
    assert needle in line
    assert "--help" in line  # where to read more


def test_a_bare_group_still_shows_its_help(capsys: Capsys) -> None:
    code, out, err = run(capsys, "mig")
    assert code == 2
    assert "layouts" in out + err
    assert "validate" in out + err
    assert "error" not in out + err


@pytest.mark.parametrize(
    "argv",
    [
        ["simulate", "replay", "--sample-every", "inf"],
        ["simulate", "colocation", "--slo-headroom", "inf"],
        ["simulate", "colocation", "--fault-scale", "inf"],
        ["simulate", "colocation", "--offline-start-s", "inf"],
        ["simulate", "colocation", "--load-scale", "nan"],
        ["simulate", "colocation", "--frontier", "--admit-quantile", "nan"],
        ["agent", "run", "--backend", "fake", "--share-window-s", "inf"],
        ["agent", "report", "svc", "--p99-ms", "inf"],
        ["plan", "mig", "spec.yaml", "--time-limit", "inf"],
    ],
)
def test_numbers_must_be_finite(capsys: Capsys, argv: list[str]) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    option = next(a for a in reversed(argv) if a.startswith("--"))
    assert f"{option}: " in assert_one_error_line(err)
    assert "must be a finite number" in err


@pytest.mark.parametrize(
    "command",
    [["simulate"], ["simulate", "replay"], ["simulate", "colocation"]],
)
def test_out_that_is_a_file_fails_before_the_run(
    capsys: Capsys, tmp_path: Path, command: list[str]
) -> None:
    taken = tmp_path / "taken"
    taken.write_text("mine", encoding="utf-8")
    for out_dir, rule in ((taken, "exists and is not a directory"),
                          (taken / "report", "is not a directory, so")):
        code, out, err = run(capsys, *command, "--out", str(out_dir))
        assert code == 2
        assert out == ""  # no run happened
        line = assert_one_error_line(err)
        assert line.startswith("cotenant: error: --out: ")
        assert rule in line
    assert taken.read_text(encoding="utf-8") == "mine"


@pytest.mark.parametrize(
    ("argv", "rule"),
    [
        (["mig", "export", "--backend", "fake", "--out", "{dir}"], "is a directory"),
        (["mig", "export", "--backend", "fake", "--out", "{dir}/no/x.yaml"], "does not exist"),
        (["plan", "mig", "spec.yaml", "--save", "{dir}"], "is a directory"),
        (["plan", "mig", "spec.yaml", "--mig-parted", "{dir}"], "is a directory"),
        (["trace", "fit", "p.csv", "n.csv", "--out", "{dir}"], "is a directory"),
    ],
)
def test_output_files_are_checked_first(
    capsys: Capsys, tmp_path: Path, argv: list[str], rule: str
) -> None:
    code, _, err = run(capsys, *(a.replace("{dir}", str(tmp_path)) for a in argv))
    assert code == 2
    assert rule in assert_one_error_line(err)


def test_a_dangling_symlink_is_refused_as_output(capsys: Capsys, tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "gone")
    for argv in (["simulate", "--out", str(link)],
                 ["mig", "export", "--backend", "fake", "--out", str(link)]):
        code, _, err = run(capsys, *argv)
        assert code == 2
        assert "is a symbolic link to" in assert_one_error_line(err)


def test_an_existing_output_file_is_overwritten(capsys: Capsys, tmp_path: Path) -> None:
    out = tmp_path / "mig.yaml"
    out.write_text("old\n", encoding="utf-8")
    code, _, _ = run(capsys, "mig", "export", "--backend", "fake", "--out", str(out))
    assert code == 0
    assert "mig-configs" in out.read_text(encoding="utf-8")


def test_bad_params_file_is_one_line(capsys: Capsys, tmp_path: Path) -> None:
    data = json.loads(default_params().to_json())
    data["shape_weights"][0] = -0.5
    params = tmp_path / "params.json"
    params.write_text(json.dumps(data), encoding="utf-8")
    code, _, err = run(capsys, "simulate", "--params", str(params), "--seeds", "1")
    assert code == 2
    assert "params.json:shape_weights[0]: -0.5 must be >= 0" in assert_one_error_line(err)


BIG_POD_TRACE = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n"
    "a,1000,2048,1,500,,LS,Running,0,100,0\n"
    "b,2000,4096,16,1000,,BE,Running,10,50,10\n"
)
SMALL_NODES = (
    "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\nn1,96000,393216,4,V100M32\n"
)


def test_pods_no_node_can_hold_are_reported_and_json_stays_valid(
    capsys: Capsys, tmp_path: Path
) -> None:
    pods, nodes = tmp_path / "pods.csv", tmp_path / "nodes.csv"
    pods.write_text(BIG_POD_TRACE, encoding="utf-8")
    nodes.write_text(SMALL_NODES, encoding="utf-8")
    code, out, _ = run(capsys, "trace", "check", str(pods), "--nodes", str(nodes))
    assert code == 0
    assert ("placeable: 1 of 2 pods fit no node, even empty, and can only fail (first: b asks "
            "for 16 GPUs; a node it may use has at most 4)") in out
    code, out, _ = run(capsys, "simulate", "--pods", str(pods), "--nodes", str(nodes),
                       "--seeds", "1", "-p", "fgd", "--json")
    assert code == 0
    data = json.loads(out)  # strict: NaN would not parse back as a number
    assert "1 of 2 pods fit no node" in data["settings"]["workload"]
    # the 16-GPU pod jumps arrived demand from 8% past 130%: no arrival near 100%
    assert data["policies"][0]["alloc_percent_mean"] is None
    code, out, _ = run(capsys, "simulate", "--pods", str(pods), "--nodes", str(nodes),
                       "--seeds", "1", "-p", "fgd")
    assert code == 0
    assert "n/a" in out
    assert "no pod arrived within 1% of 100% demand" in " ".join(out.split())
    # a lone 16-GPU pod above the target demand: runs that draw no pod at all, plots included
    pods.write_text(BIG_POD_TRACE.replace("a,1000,2048,1,500,,LS,Running,0,100,0\n", ""),
                    encoding="utf-8")
    code, _, err = run(capsys, "simulate", "--pods", str(pods), "--nodes", str(nodes),
                       "--seeds", "2", "-p", "fgd", "--out", str(tmp_path / "report"))
    assert code == 0, err
    assert (tmp_path / "report" / "fragmentation.png").exists()
