"""The shipped Tally tables are the one source of the MPS model's Tally constants."""

from __future__ import annotations

import pytest

from cotenant.errors import InputError
from cotenant.perf import mps, published


def test_mps_constants_come_from_the_shipped_tables() -> None:
    # calibration.md section 3 reports these means (two decimals) and the 1.27 minimum
    assert mps.P99_RATIO == {"mps": 3.90, "mps-priority": 2.96, "time-slicing": 2.38}
    assert mps.BE_NORMALISED_TPUT == {"mps": 0.87, "mps-priority": 0.85, "time-slicing": 0.54}
    assert mps.MPS_LIMITED_INTERFERENCE == 1.27
    training = [j for j in published.tally_jobs() if j.kind == "training"]
    assert len(training) == len(mps.TRAINING_GPU_UTIL) == 6
    assert mps.TRAINING_GPU_UTIL[0] == 0.49994  # exact decimals, not 49.994 / 100
    assert tuple(j.memory_mb for j in training) == mps.TRAINING_MEMORY_MB
    assert pytest.approx((1475.0 + 15915.0) / 2 / 40960.0) == mps.SERVER_MEMORY_FRACTION
    assert len(published.tally_pairs()) == 12


def test_a_bad_cell_is_a_one_line_error_naming_file_line_and_column() -> None:
    with pytest.raises(InputError, match=r"tally_jobs.csv:7:gpu_util_pct") as bad:
        published.number("tally_jobs.csv", 7, {"gpu_util_pct": "n/a"}, "gpu_util_pct")
    assert "\n" not in str(bad.value)
    with pytest.raises(InputError, match="finite"):
        published.number("tally_jobs.csv", 7, {"gpu_util_pct": "-3"}, "gpu_util_pct")
    with pytest.raises(InputError, match="not a number"):
        published.number("tally_jobs.csv", 7, {}, "gpu_util_pct")
