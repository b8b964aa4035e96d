"""Reading a MIG profile table from CSV: every refusal names its file, line and column and
states its rule word for word; data survives as written (quoted line breaks included)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cotenant.errors import InputError, UnknownNameError
from cotenant.model.gpu import CATALOG
from cotenant.perf.mig_profiles import COLUMNS, default_table, load_csv

HEADER = "model,gpu,profile,batch,throughput_rps,latency_ms,source\n"
EXPECTED = ",".join(COLUMNS)


def write(tmp_path: Path, data: str | bytes) -> Path:
    path = tmp_path / "t.csv"
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8", newline="")
    return path


def refusal(path: Path) -> InputError:
    with pytest.raises(InputError) as info:
        load_csv(path)
    return info.value


def test_an_unreadable_or_undecodable_file_is_named_with_its_line(tmp_path: Path) -> None:
    missing = tmp_path / "none.csv"
    error = refusal(missing)
    assert (error.where, error.rule) == (str(missing), "cannot read: No such file or directory")
    path = write(tmp_path, b"\n" + HEADER.encode() + b"m,A100,1g.5gb,8,\xff,20,s\n")
    error = refusal(path)
    assert (error.where, error.rule) == (f"{path}:3", "not UTF-8 text")


def test_the_header_must_hold_each_column_once(tmp_path: Path) -> None:
    path = write(tmp_path, "")
    error = refusal(path)
    assert error.where == f"{path}:1:model"
    assert error.rule == f"missing column; expected header {EXPECTED}"
    path = write(tmp_path, HEADER.replace("\n", ",source\n"))
    error = refusal(path)
    assert error.where == f"{path}:1:source"
    assert error.rule == f"unknown or repeated column; expected {EXPECTED}"
    path = write(tmp_path, HEADER)
    error = refusal(path)
    assert (error.where, error.rule) == (f"{path}:2", "no data rows after the header")


def test_a_malformed_row_or_a_repeat_is_refused_at_its_line(tmp_path: Path) -> None:
    error = refusal(write(tmp_path, HEADER + 'm,"A100-40GB,1g.5gb,8,1,1,s\n'))
    assert error.where.endswith("t.csv:2")
    assert error.rule.startswith("malformed CSV row")
    row = "m,A100-40GB,1g.5gb,8,100,20,s\n"
    error = refusal(write(tmp_path, HEADER + row + row))
    assert error.hint == "keep one"


@pytest.mark.parametrize(("cells", "column", "rule"), [
    (",A100-40GB,1g.5gb,8,1,1", "model", "empty model name"),
    ("m,A100-40GB,1g.5gb,eight,1,1", "batch", "'eight' is not a positive integer"),
    ("m,A100-40GB,1g.5gb,0,1,1", "batch", "'0' is not a positive integer"),
    ("m,A100-40GB,1g.5gb,\u0663,1,1", "batch", "'\u0663' is not a positive integer"),
    ("m,A100-40GB,1g.5gb,8,0,1", "throughput_rps", "'0' must be a finite number > 0"),
    ("m,A100-40GB,1g.5gb,8,1,-0.5", "latency_ms", "'-0.5' is negative; must be > 0"),
    ("m,A100-40GB,1g.5gb,8,inf,1", "throughput_rps", "'inf' must be a finite number > 0"),
])
def test_a_bad_cell_is_refused_by_its_rule(tmp_path: Path, cells: str, column: str,
                                           rule: str) -> None:
    error = refusal(write(tmp_path, HEADER + cells + ",s\n"))
    assert error.where.endswith(f"t.csv:2:{column}")
    assert error.rule == rule


def test_an_unknown_gpu_or_profile_lists_the_valid_ones(tmp_path: Path) -> None:
    error = refusal(write(tmp_path, HEADER + "m,B200,1g.5gb,8,1,1,s\n"))
    assert error.rule == f"unknown GPU model 'B200'; valid: {', '.join(CATALOG.mig_names())}"
    error = refusal(write(tmp_path, HEADER + "m,A30,3g.20gb,8,1,1,s\n"))
    assert error.where.endswith("t.csv:2:profile")
    names = ", ".join(p.name for p in CATALOG.get("A30").require_mig("test").profiles)
    assert error.rule == f"'3g.20gb' is not a MIG profile of A30; valid: {names}"


def test_values_are_read_as_written(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + 'm,A100,1g.5gb,8,100,0.5,"line one\r\nline two"\r\n')
    table = load_csv(path)
    (point,) = table.points
    assert (point.batch, point.throughput, point.latency_ms) == (8, 100.0, 0.5)
    assert point.source == "line one\r\nline two"
    with pytest.raises(UnknownNameError) as info:
        table.check("x", "A100")
    assert str(info.value) == f"unknown DNN model 'x' in {path}; valid: m"


def test_old_mac_line_ends_read_as_lines(tmp_path: Path) -> None:
    text = HEADER + "m,A100,1g.5gb,8,100,20,s\n" + "m,A100,1g.5gb,16,150,30,s\n"
    points = load_csv(write(tmp_path, text.replace("\n", "\r"))).points
    assert [(p.batch, p.throughput) for p in points] == [(8, 100.0), (16, 150.0)]


def test_the_shipped_table_names_itself_in_errors() -> None:
    with pytest.raises(UnknownNameError, match=r"^unknown DNN model 'x' in the shipped "
                                               r"profiles; valid: alexnet, "):
        default_table().check("x", "A100-40GB")
