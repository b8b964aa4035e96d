"""Values the CLI refuses before any work starts, each with one line on stderr and exit 2:
usage errors, numbers that are not finite, negative seeds, report paths that cannot be made."""

from __future__ import annotations

import errno
import gzip
import json
import tarfile
from collections.abc import Callable
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
        (["simulate", "--demand", "nan"], "Invalid value for '--demand': nan is not a finite"),
        (["simulate", "colocation", "--hours", "-inf"], "'--hours': -inf is not a finite"),
        (["simulate", "colocation", "--hours", "9000"], "less than or equal to 8784"),
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
        ["simulate", "colocation", "--slo-multiple", "inf"],
        ["simulate", "colocation", "--reaction-s", "inf"],
        ["simulate", "colocation", "--load-scale", "nan"],
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


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="no /proc here")
@pytest.mark.parametrize(
    "command",
    [["simulate"], ["simulate", "replay"], ["simulate", "colocation"], ["plan", "mig", "x.yaml"]],
)
def test_out_where_nothing_can_be_made_fails_before_the_run(
    capsys: Capsys, command: list[str]
) -> None:
    """/proc's mode lets root write; only trying shows it cannot: refused at once, not after
    the run."""
    code, out, err = run(capsys, *command, "--out", "/proc/x")
    assert code == 2
    assert out == ""
    line = assert_one_error_line(err)
    assert line.startswith("cotenant: error: --out: cannot write in /proc")


def test_a_full_disk_while_writing_the_report_names_the_file_and_leaves_nothing(
    capsys: Capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(runs: object, path: Path, title: str) -> Path:
        path.write_bytes(b"")  # an empty PNG, as a full disk leaves it
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("cotenant.cli.simulate.fragmentation_plot", full)
    target = tmp_path / "report"
    code, _, err = run(capsys, "simulate", "--synthetic-pods", "200", "--synthetic-nodes", "10",
                       "--seeds", "1", "-p", "fgd", "--workers", "1", "--out", str(target))
    assert code == 1
    line = err.strip().splitlines()[-1]  # after the runs' count and the bar
    assert "Traceback" not in err
    assert line == f"cotenant: error: {target / 'fragmentation.png'}: No space left on device"
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []


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


POD_HEADER = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
              "deletion_time,scheduled_time\n")
SPEC_HEAD = "apiVersion: cotenant/v1alpha1\nkind: ServingPlan\ngpu: A100-40GB\n"


def _write(tmp_path: Path, name: str, text: str | bytes) -> str:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return str(path)


def _truncated_tar(tmp_path: Path) -> str:
    src = tmp_path / "pods.csv"
    src.write_text(POD_HEADER + "".join(f"p{i},1000,1000,1,1000,,LS,Running,0,10,0\n"
                                        for i in range(3000)), encoding="utf-8")
    archive = tmp_path / "pods.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(src, arcname="pods.csv")
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 2])
    return str(archive)


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda t: ["simulate", "--pods", _write(t, "p.csv", POD_HEADER
                    + "p1,1000,1000,0,0,,LS,Running,0,10,0\n"), "--nodes",
                    _write(t, "n.csv", SMALL_NODES), "--seeds", "1"],
         "pods: no pod asks for a GPU"),
        (lambda t: ["simulate", "replay", "--pods", _write(t, "p.csv", POD_HEADER
                    + "p1,1000,1000,1,1000,,LS,Running,0,100000000000,0\n"), "--nodes",
                    _write(t, "n.csv", SMALL_NODES)],
         "--sample-every: 3600 s over the trace's 100,000,000,000 s is more than"),
        (lambda t: ["trace", "check", _write(t, "p.csv", POD_HEADER
                    + "p1,1e30,1000,1,1000,,LS,Running,0,10,0\n")],
         "p.csv:2:cpu_milli: 1e30 is out of range"),
        (lambda t: ["trace", "check", _write(t, "p.csv", POD_HEADER
                    + "p1,1000,1000,1,1000,,LS,Running,0,10,0\n"), "--nodes",
                    _write(t, "n.csv", "sn,cpu_milli,memory_mib,gpu,model\nn1,64000,1000,0,\n")],
         None),  # no GPU node: a line saying so, not a division by zero
        (lambda t: ["plan", "mig", _write(t, "s.yaml", SPEC_HEAD + "services:\n- {name: a, "
                    "model: resnet50, rate: 1.0e+300, sloMs: 50}\n")],
         "s.yaml.services: the rates need at least"),
        (lambda t: ["plan", "mig", _write(t, "s.yaml", SPEC_HEAD + "services:\n- {name: a, "
                    "model: resnet50, rate: " + "9" * 400 + ", sloMs: 50}\n")],
         "s.yaml.services[0].rate: is too large a number"),
        (lambda t: ["plan", "mig", _write(t, "s.yaml", SPEC_HEAD + "1: x\nfoo: y\n")],
         "s.yaml.1: unknown key"),
        (lambda t: ["plan", "mig", _write(t, "s.yaml", "[" * 100_000)],
         "s.yaml: not valid YAML: nested too deeply"),
        (lambda t: ["agent", "submit", _write(t, "w.json", "[" * 100_000)],
         "w.json: not valid JSON: nested too deeply"),
        (lambda t: ["agent", "status", "--url", "http://127.0.0.1:abc", "--token-file",
                    _write(t, "token", "secret\n")],
         "--url http://127.0.0.1:abc: nonnumeric port"),
        (lambda t: ["agent", "run", "--backend", "fake", "--policy", ":",
                    "--state-dir", str(t)],
         "unknown co-location policy ':'"),
        (lambda t: ["mig", "validate", "A100-40GB", "3g.20gb@\u00b2"],
         "start must be a slice number"),
        (lambda t: ["mig", "validate", "A100-40GB", "3g.20gb@0,,1g.5gb@6"],
         "an empty item between commas"),
        (lambda t: ["mig", "export", "--backend", "fake", "--gpus", "A100-40GB:99999999"],
         "count must be an integer 1..64"),
        (lambda t: ["trace", "check", _truncated_tar(t)],
         "pods.tar.gz: not a readable tar archive"),
        (lambda t: ["trace", "check", _write(t, "p.csv.gz", gzip.compress(POD_HEADER.encode()))],
         "p.csv.gz: is gzip-compressed"),
        (lambda t: ["trace", "genai", _write(t, "d.csv", "value,timestamp_anon,container_ip\n"
                                             "10,0,a\n20,1e15,a\n")],
         "d.csv: timestamps span 1e+15 s"),
    ],
)
def test_extreme_input_is_one_line_not_a_traceback_or_a_hang(
    capsys: Capsys, tmp_path: Path, make: Callable[[Path], list[str]], needle: str | None
) -> None:
    code, out, err = run(capsys, *make(tmp_path))
    if needle is None:
        assert code == 0, err
        assert "no GPU in the node list" in out
        return
    assert code == 2, err
    assert needle in assert_one_error_line(err)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["simulate", "-p", "fgd", "-p", "FGD"], "--policy: fgd given twice"),
        (["simulate", "colocation", "-p", "muxflow", "-p", "muxflow"],
         "--policy: muxflow given twice"),
        (["simulate", "colocation", "--frontier", "-p", "muxflow"],
         "--frontier: runs every policy setting itself"),
    ],
)
def test_options_that_would_be_ignored_are_refused(
    capsys: Capsys, argv: list[str], needle: str
) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert needle in assert_one_error_line(err)


def test_a_spec_with_current_and_current_option_is_refused(
    capsys: Capsys, tmp_path: Path
) -> None:
    running = "- gpu: 0\n  instances: [{instance: 7g.40gb@0, service: a}]\n"
    spec = _write(tmp_path, "s.yaml", SPEC_HEAD + "services:\n- {name: a, model: resnet50, "
                  "rate: 100, sloMs: 50}\ncurrent:\n" + running)
    current = _write(tmp_path, "c.yaml", "apiVersion: cotenant/v1alpha1\nkind: Deployment\n"
                     "gpu: A100-40GB\ngpus:\n" + running)
    code, _, err = run(capsys, "plan", "mig", spec, "--current", current)
    assert code == 2
    assert f"--current: {spec} has its own current: block" in assert_one_error_line(err)


def test_a_profile_table_is_parsed_strictly_and_may_cover_some_profiles(
    capsys: Capsys, tmp_path: Path
) -> None:
    header = "model,gpu,profile,batch,throughput_rps,latency_ms,source\n"
    row = "resnet50,A100-40GB,2g.10gb,32,643.86,49.7,measured\n"
    spec = _write(tmp_path, "s.yaml", SPEC_HEAD + "services:\n- {name: a, model: resnet50, "
                  "rate: 100, sloMs: 50}\n")
    for text, needle in (
        (header, "p.csv:2: no data rows after the header"),
        (header + 'resnet50,A100-40GB,1g.5gb,32,327,97,"unclosed\n' + row,
         "p.csv:2: malformed CSV row"),
        (header.encode() + row.encode() * 3 + b"bad\xff,x\n", "p.csv:5: not UTF-8 text"),
    ):
        code, _, err = run(capsys, "plan", "mig", spec, "--profiles", _write(tmp_path, "p.csv",
                                                                           text))
        assert code == 2
        assert needle in assert_one_error_line(err)
    code, out, err = run(capsys, "plan", "mig", spec, "--profiles", _write(tmp_path, "p.csv",
                                                                         header + row), "--json")
    assert code == 0, err
    assert json.loads(out)["gpus"] == 1  # planned on the one profile measured
    spec = _write(tmp_path, "s.yaml", SPEC_HEAD + "services:\n- {name: a, model: bert, "
                  "rate: 100, sloMs: 50}\n")
    code, _, err = run(capsys, "plan", "mig", spec, "--profiles", str(tmp_path / "p.csv"))
    assert code == 2
    assert "unknown DNN model 'bert' in " in err
    assert "p.csv; valid: resnet50" in err
