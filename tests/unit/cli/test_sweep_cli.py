"""``cotenant sweep run``: a sweep file to a table, JSON, a streamed report; a failed run is
named and the rest finish; the executor options."""

from __future__ import annotations

import json
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
def test_executor_options_that_contradict(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                          argv: list[str], message: str) -> None:
    code, _, stderr = run(capsys, "sweep", "run", str(_file(tmp_path)), *argv)
    assert code == 2
    assert message in stderr


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
