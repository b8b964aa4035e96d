"""The GenAI request series: sparse rows become zeros, strays are counted, bad values refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from cotenant.errors import InputError
from cotenant.traces.requests import load_requests

HEAD = "timestamp_anon,value,container_ip,request_type\n"


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "qps.csv"
    path.write_text(HEAD + body)
    return path


def test_rows_land_on_the_grid_and_missing_slots_are_zero(tmp_path: Path) -> None:
    path = _write(tmp_path, "0,0.09,a,G\n57,0.18,a,G\n171,0.09,a,G\n57,0.09,b,G\n"
                            "114,0.5,,API Requests\n")
    got = load_requests(path)
    assert got.names == ("a", "b")
    assert got.interval_s == 57.0
    assert got.values.tolist() == [[0.09, 0.18, 0.0, 0.09], [0.0, 0.09, 0.0, 0.0]]
    assert got.zero_slots == 4
    assert got.rows == 4
    assert got.rejected == {"row without a container id": 1}


@pytest.mark.parametrize(("row", "where"), [
    ("0,-0.09,a,G\n", "qps.csv:2:value"),
    ("0,nan,a,G\n", "qps.csv:2:value"),
    ("x,0.09,a,G\n", "qps.csv:2:timestamp_anon"),
])
def test_bad_values_are_one_line_errors(tmp_path: Path, row: str, where: str) -> None:
    with pytest.raises(InputError) as err:
        load_requests(_write(tmp_path, row))
    assert where in str(err.value)


def test_a_file_that_names_no_container_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no row names a container"):
        load_requests(_write(tmp_path, "0,0.09,,API Requests\n"))
