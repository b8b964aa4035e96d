"""``cotenant sweep run``: a sweep file to a table, JSON, a streamed report; a failed run is
named and the rest finish; the executor options."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cotenant.sim.sweep.simulators import SIMULATORS, Plan
from cotenant.sim.sweep.spec import Sweep
from tests.unit.cli.test_cli import run

SWEEP = """apiVersion: cotenant/v1alpha1
kind: Sweep
simulator: {simulator}
base: {{workload: {{gpus: 20, hours: 0.5}}}}
grid:
  policy: [dedicated, {{name: mps-fixed, share: 50}}]
seeds: [1, 2]
"""


@SIMULATORS.register("test-every-second-fails")
class _EverySecondFails:
    """A simulator whose runs of seed 2 raise (for the failure path)."""

    def plan(self, sweep: Sweep) -> Plan:
        points = sweep.points()
        return Plan(points, [("test-every-second-fails", 0, p["seed"]) for p in points], [None],
                    "nothing", ("seed",))

    def run(self, inputs: Any, task: Any) -> dict[str, object]:
        if task == 2:
            raise RuntimeError("seed 2 cannot run")
        return {"seed": task}


PLANNED: list[str] = []


@SIMULATORS.register("test-records-its-plan")
class _RecordsItsPlan:
    """A simulator that notes when its inputs are built (to see what is checked first)."""

    def plan(self, sweep: Sweep) -> Plan:
        PLANNED.append(sweep.simulator)
        points = sweep.points()
        return Plan(points, [("test-records-its-plan", 0, p["seed"]) for p in points], [None],
                    "nothing", ("seed",))

    def run(self, inputs: Any, task: Any) -> dict[str, object]:
        return {"seed": task}


def _file(tmp_path: Path, simulator: str = "colocation") -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP.format(simulator=simulator), encoding="utf-8")
    return path


def test_a_sweep_to_json_and_a_report_streamed_run_by_run(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "report"
    code, stdout, stderr = run(capsys, "sweep", "run", str(_file(tmp_path)), "--workers", "2",
                               "--json", "--out", str(out))
    assert code == 0, stderr
    data = json.loads(stdout)
    assert [r["settings"]["seed"] for r in data["runs"]] == [1, 2, 1, 2]
    assert [r["summary"]["policy"] for r in data["runs"]] == ["dedicated"] * 2 + ["mps-fixed"] * 2
    assert "4 runs of the colocation simulator" in stderr
    assert "on 2 processes" in stderr
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(x["index"] for x in lines) == [0, 1, 2, 3]
    assert {x["index"]: x["summary"] for x in lines} == {
        r["index"]: r["summary"] for r in data["runs"]}
    assert json.loads((out / "sweep.json").read_text())["runs"] == data["runs"]
    assert "mps-fixed(share=50)" in (out / "index.html").read_text()


def test_a_failed_run_is_named_with_its_settings_and_the_rest_are_written(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "report"
    code, stdout, stderr = run(capsys, "sweep", "run",
                               str(_file(tmp_path, "test-every-second-fails")),
                               "--workers", "1", "--out", str(out))
    assert code == 1
    assert ("run 1 (policy=dedicated seed=2) failed: RuntimeError: seed 2 cannot run"
            in stderr)
    assert stderr.strip().endswith("cotenant: error: 2 of 4 runs failed: policy=dedicated "
                                   "seed=2: RuntimeError: seed 2 cannot run; "
                                   "policy=mps-fixed(share=50) seed=2: RuntimeError: seed 2 "
                                   "cannot run")
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert [x.get("error") for x in lines] == [None, "RuntimeError: seed 2 cannot run"] * 2
    assert "4 runs" in stdout


@pytest.mark.parametrize(("argv", "message"), [
    (["--workers", "2", "--ray", "auto"], "--workers: sizes the local pool"),
    (["--ray", " "], "--ray: must be auto, local or a cluster's address"),
])
def test_executor_options_that_contradict_are_refused_before_any_input_is_built(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str],
        message: str) -> None:
    PLANNED.clear()
    code, _, stderr = run(capsys, "sweep", "run",
                          str(_file(tmp_path, "test-records-its-plan")), *argv)
    assert code == 2
    assert message in stderr
    assert PLANNED == []  # the options were checked first
    code, _, _ = run(capsys, "sweep", "run", str(_file(tmp_path, "test-records-its-plan")))
    assert (code, PLANNED) == (0, ["test-records-its-plan"])


def _closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.mark.parametrize("form", ["127.0.0.1:{port}", "ray://127.0.0.1:{port}", "auto"])
def test_a_ray_address_nothing_answers_at_fails_at_once_with_one_line(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        form: str) -> None:
    port = _closed_port()
    target = f"127.0.0.1:{port}"
    monkeypatch.setenv("RAY_ADDRESS", target)  # what auto follows
    PLANNED.clear()
    code, _, stderr = run(capsys, "sweep", "run", str(_file(tmp_path, "test-records-its-plan")),
                          "--ray", form.format(port=port))
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert f"--ray: no Ray cluster answers at {form.format(port=port)}" in lines[0] \
        or f"--ray: no Ray cluster answers at {target} (from RAY_ADDRESS" in lines[0]
    assert PLANNED == []


def test_a_ray_address_that_is_no_address_is_refused(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, stderr = run(capsys, "sweep", "run", str(_file(tmp_path)), "--ray", "head:http")
    assert code == 2
    assert "--ray: 'head:http' is not a cluster's address" in stderr


LONG_SWEEP = """apiVersion: cotenant/v1alpha1
kind: Sweep
simulator: colocation
base: {workload: {gpus: 500, hours: 4}}
grid:
  policy: [dedicated]
seeds: {start: 1, count: 200}
"""


def test_ctrl_c_stops_a_local_pool_sweep_at_once_and_keeps_what_finished(
        tmp_path: Path) -> None:
    sweep, out = tmp_path / "long.yaml", tmp_path / "report"
    sweep.write_text(LONG_SWEEP, encoding="utf-8")
    stream = out / "results.jsonl"
    # Ctrl-C as at a terminal, whatever this process was started with (a shell's background
    # job ignores SIGINT, and its children inherit that); in a session of its own, so that
    # its workers can be killed with it
    proc = subprocess.Popen(
        [sys.executable, "-c", "import signal; signal.signal(signal.SIGINT, "
         "signal.default_int_handler); from cotenant.cli.main import main; main()",
         "sweep", "run", str(sweep), "--workers", "2", "--json", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (stream.exists() and stream.read_text().count("\n") >= 2):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no run finished in 120 s"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        # 200 runs take minutes on two processes: only cancelling the queued ones ends it
        # in this time (before, every queued run still ran after Ctrl-C)
        stdout, stderr = proc.communicate(timeout=30)
    finally:  # never wait for ever: a worker left behind holds the pipes open
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=10)
    assert proc.returncode == 130, stderr
    kept = [json.loads(x) for x in stream.read_text().splitlines()]
    assert 2 <= len(kept) < 200
    assert "Traceback" not in stderr, stderr
    lines = [x for x in stderr.splitlines() if x.strip()]
    assert lines[-1] == (f"interrupted: {len(kept)} of 200 runs had finished, kept in "
                         f"{stream}")
    assert "Traceback" not in stderr, stderr
    assert stdout == ""  # no table or JSON for a sweep cut short
    assert not (out / "sweep.json").exists()


def test_workers_for_the_side_by_side_colocation_run_is_refused(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, _, stderr = run(capsys, "simulate", "colocation", "--gpus", "10", "--workers", "2")
    assert code == 2
    assert "spread the frontier's runs" in stderr


def test_a_missing_sweep_file_is_one_line(capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    code, _, stderr = run(capsys, "sweep", "run", str(tmp_path / "none.yaml"))
    assert code == 2
    assert "none.yaml: cannot be read" in stderr
