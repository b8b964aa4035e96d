"""``cotenant perf predictor`` and ``cotenant trace genai``, called in-process."""

from __future__ import annotations

import json

import pytest

from tests.unit.cli.test_cli import run


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
