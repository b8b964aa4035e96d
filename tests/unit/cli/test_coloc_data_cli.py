"""``cotenant perf predictor`` and ``cotenant trace genai``, called in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.cli.test_cli import assert_one_error_line, run


def test_perf_predictor_prints_held_out_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "perf", "predictor")
    assert code == 0
    assert "tally-a100-mps" in out
    assert "base MAE" in out


def test_perf_predictor_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "perf", "predictor", "--json")
    assert code == 0
    data = json.loads(out)
    assert len(data["default"]["coef"]) == 6
    first = data["held_out"][0]
    assert first["dataset"] == "tally-a100-mps"
    assert first["beats_baseline"] == (first["mae"] < first["baseline_mae"])


def duty_csv(tmp_path: Path, *rows: str) -> Path:
    path = tmp_path / "duty.csv"
    path.write_text("value,timestamp_anon,container_ip\n" + "".join(f"{r}\n" for r in rows))
    return path


GOOD = [f"{10 * (k % 3)},{60 * k},a" for k in range(30)] + [f"5,{60 * k},b" for k in range(3)]


def test_trace_genai_reports_kept_and_rejected(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run(capsys, "trace", "genai", str(duty_csv(tmp_path, *GOOD)))
    assert code == 0
    assert "33 rows, 2 series; kept 1, rejected 1 covers under 50% of the grid" in out
    assert "duty cycle: mean 10.0%" in out


def test_trace_genai_json_and_fit(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    params = tmp_path / "params.json"
    path = duty_csv(tmp_path, *GOOD)
    code, out, _ = run(capsys, "trace", "genai", str(path), "--json", "--out", str(params))
    assert code == 0
    data = json.loads(out)
    assert data["report"]["series_read"] == 2
    assert data["report"]["rejected"] == {"covers under 50% of the grid": 1}
    assert data["stats"]["intervals"] == 30
    assert json.loads(params.read_text())["format"] == "cotenant/genai-params/v1"


def test_trace_genai_bad_value_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run(capsys, "trace", "genai", str(duty_csv(tmp_path, "5,0,a", "-3,60,a")))
    assert code == 2
    assert out == ""
    line = assert_one_error_line(err)
    assert "duty.csv:3:value" in line
    assert "negative" in line
