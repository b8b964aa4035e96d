"""Kernel traces: one-line errors for bad cells, the units they describe."""

from __future__ import annotations

import pytest

from cotenant.errors import InputError
from cotenant.traces.kernels import parse_kernel_trace


def test_a_trace_reads_durations_gaps_and_kinds() -> None:
    u = parse_kernel_trace("# a request\nduration_us,gap_us,kind\n10,2,1\n5,,0\n3,0,\n", "t")
    assert u.duration_us.tolist() == [10.0, 5.0, 3.0]
    assert u.gap_us.tolist() == [2.0, 0.0, 0.0]
    assert u.kind.tolist() == [1, 0, -1]
    assert u.length_us == 20.0


def test_the_shortest_kernel_is_the_resolution() -> None:
    assert parse_kernel_trace("duration_us\n0.001\n", "t").duration_us.tolist() == [0.001]


@pytest.mark.parametrize(("text", "match"), [
    ("duration_us,gap_us\n5,1\n-3,0\n", r"^t:3:duration_us: -3 must be a finite number >= 0"),
    ("duration_us,gap_us\n5,-1\n", r"^t:2:gap_us: -1 must be"),
    ("duration_us\n0\n", r"^t:2:duration_us: 0 must be >= 0.001"),
    ("duration_us\n0.0009\n", r"^t:2:duration_us: 0.0009 must be >= 0.001"),
    ("duration_us,gap_us,kind,sm\n4,0,1,8\n", r"^t:1: unknown column\(s\) 'sm'; known: "),
    ("duration_us\nabc\n", r"'abc' is not a number"),
    ("duration_us,kind\n4,2\n", r"t:2:kind: 2 must be one of"),
    ("gap_us\n4\n", r"needs a duration_us column"),
    ("# only a comment\n", r"has no kernels"),
    ("duration_us\nnan\n", r"finite"),
])
def test_bad_traces_are_one_line_errors(text: str, match: str) -> None:
    with pytest.raises(InputError, match=match) as bad:
        parse_kernel_trace(text, "t")
    assert "\n" not in bad.value.one_line()
