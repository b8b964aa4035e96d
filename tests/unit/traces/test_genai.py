"""GenAI duty-cycle loading: resampling, short gaps filled, long gaps held, short series
rejected (all counted); bad rows name file, line, column and rule; the real trace adds up."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np
import pytest

from cotenant.errors import InputError
from cotenant.traces.genai import LoadReport, load_duty_cycles

GENAI = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "alibaba-genai-v2026"
DUTY = GENAI / "pod_gpu_duty_cycle_anon.tar.gz"
MEMORY = GENAI / "pod_gpu_memory_used_bytes_anon.tar.gz"
HEADER = "value,timestamp_anon,container_ip"


@pytest.fixture
def genai_dir() -> Path:
    if not DUTY.exists():
        pytest.skip("../shared/data/alibaba-genai-v2026 is absent")
    return GENAI


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files are named as given, so the tests give them relative to ``tmp_path``."""
    monkeypatch.chdir(tmp_path)


def write(tmp_path: Path, *lines: str, name: str = "duty.csv") -> Path:
    path = tmp_path / name
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return Path(name)  # the working directory is tmp_path


def rows(pod: str, points: list[tuple[float, float]]) -> list[str]:
    return [f"{v},{t},{pod}" for t, v in points]


def error(tmp_path: Path, *lines: str) -> InputError:
    with pytest.raises(InputError) as info:
        load_duty_cycles(write(tmp_path, *lines))
    return info.value


def test_resamples_onto_the_common_grid(tmp_path: Path) -> None:
    # a at 0,60,...,600 (ramps 0..100); b at 30, 90, ... (constant 50), rows interleaved
    a = rows("a", [(60.0 * k, 10.0 * k) for k in range(11)])
    b = rows("b", [(30.0 + 60 * k, 50.0) for k in range(10)])
    series, report = load_duty_cycles(write(tmp_path, HEADER, *b[::-1], *a))
    assert series.names == ("a", "b")
    assert series.start == 0.0
    assert series.interval_s == 60
    assert series.values.shape == (2, 11)
    np.testing.assert_allclose(series.values[0], np.linspace(0, 1, 11))
    # b is observed 30..570: grid 60..540 interpolated; 0 and 600 lie outside, held at mean
    np.testing.assert_allclose(series.values[1], 0.5)
    assert report == LoadReport(2, 2, {}, 0, 21, held_points=2, long_gaps=0)
    assert series.memory_mib is None


def test_short_gap_is_interpolated_and_counted(tmp_path: Path) -> None:
    pts = [(0.0, 0.0), (60.0, 0.0), (300.0, 80.0), (360.0, 80.0)]  # 3 steps missing
    series, report = load_duty_cycles(write(tmp_path, HEADER, *rows("a", pts)))
    np.testing.assert_allclose(series.values[0], [0, 0, 0.2, 0.4, 0.6, 0.8, 0.8])
    assert report.filled_points == 3
    assert report.held_points == 0


def test_long_gap_is_held_at_the_series_mean_and_counted(tmp_path: Path) -> None:
    pts = [(60.0 * k, 20.0) for k in range(5)] + [(60.0 * k, 60.0) for k in range(12, 17)]
    series, report = load_duty_cycles(write(tmp_path, HEADER, *rows("a", pts)), max_gap_intervals=5)
    values = series.values[0]
    assert values.shape == (17,)
    np.testing.assert_allclose(values[:5], 0.2)
    np.testing.assert_allclose(values[5:12], 0.4)  # 7 missing steps > 5: held at the mean
    np.testing.assert_allclose(values[12:], 0.6)
    assert (report.held_points, report.long_gaps, report.filled_points) == (7, 1, 0)
    # the same gap is short when the limit allows 7 steps: interpolated instead
    series, report = load_duty_cycles(write(tmp_path, HEADER, *rows("a", pts)), max_gap_intervals=7)
    assert (report.held_points, report.long_gaps, report.filled_points) == (0, 0, 7)
    np.testing.assert_allclose(series.values[0][4:13], np.linspace(0.2, 0.6, 9))


def test_short_series_is_rejected_and_counted(tmp_path: Path) -> None:
    lines = rows("long", [(60.0 * k, 10.0) for k in range(20)])
    lines += rows("brief", [(60.0 * k, 10.0) for k in range(5, 9)])
    series, report = load_duty_cycles(write(tmp_path, HEADER, *lines), min_coverage=0.5)
    assert series.names == ("long",)
    assert report.series_read == 2
    assert report.series_kept == 1
    assert report.rejected == {"covers under 50% of the grid": 1}
    assert report.series_kept + sum(report.rejected.values()) == report.series_read


def test_reads_the_csv_inside_a_tar_gz_and_memory_by_header_name(tmp_path: Path) -> None:
    body = "\n".join([HEADER, *rows("a", [(0.0, 10.0), (60.0, 30.0)])]) + "\n"
    archive = tmp_path / "duty.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        data = body.encode()
        info = tarfile.TarInfo("duty.csv")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    memory = write(
        tmp_path,
        "timestamp_anon,value,container_ip",
        f"0,{2 * 1024**3},a",
        f"60,{3 * 1024**3},a",
        name="mem.csv",
    )
    series, report = load_duty_cycles(archive, memory_path=memory)
    np.testing.assert_allclose(series.values, [[0.1, 0.3]])
    assert series.memory_mib is not None
    np.testing.assert_allclose(series.memory_mib, [3 * 1024.0])
    assert report.rows_read == 2


def test_memory_over_time_is_a_fraction_of_each_series_peak(tmp_path: Path) -> None:
    duty = write(tmp_path, HEADER, *rows("a", [(0.0, 5.0), (60.0, 5.0), (120.0, 5.0)]),
                 *rows("b", [(0.0, 1.0), (60.0, 1.0), (120.0, 1.0)]))
    gib = 1024**3
    memory = write(
        tmp_path, "timestamp_anon,value,container_ip",
        f"0,{1 * gib},a", f"120,{4 * gib},a", "0,0,b", "120,0,b", name="mem.csv",
    )
    series, report = load_duty_cycles(duty, memory_path=memory)
    assert series.memory_profile is not None
    assert series.memory_mib is not None
    # a: 1 GiB rising linearly to its 4 GiB peak over the grid (interpolated like the duty)
    np.testing.assert_allclose(series.memory_profile[0], [0.25, 0.625, 1.0])
    np.testing.assert_allclose(series.memory_mib[0], 4 * 1024.0)
    # b has only zero samples: no profile, and counted
    assert np.isnan(series.memory_mib[1])
    assert np.isnan(series.memory_profile[1]).all()
    assert report.memory_missing == 1


def test_every_memory_series_is_accounted_for(tmp_path: Path) -> None:
    duty = write(tmp_path, HEADER, *rows("a", [(0.0, 5.0), (60.0, 5.0), (120.0, 5.0)]),
                 *rows("short", [(0.0, 1.0)]))
    gib = 1024**3
    memory = write(
        tmp_path, "timestamp_anon,value,container_ip", f"0,{gib},a", f"0,{gib},short",
        f"0,{gib},stranger", f"60,{gib},stranger", name="mem.csv",
    )
    _, report = load_duty_cycles(duty, memory_path=memory, min_coverage=0.9)
    assert report.rejected == {"covers under 90% of the grid": 1}  # "short"
    assert (report.memory_rows_read, report.memory_series_read) == (4, 3)
    assert report.memory_of_rejected == 1
    assert report.memory_unmatched == 1
    assert "1 of containers the duty-cycle file lacks" in report.memory_summary("mem.csv")


def test_a_duty_cycle_file_given_as_memory_is_refused(tmp_path: Path) -> None:
    duty = write(tmp_path, HEADER, *rows("a", [(0.0, 5.0), (60.0, 80.0)]))
    with pytest.raises(InputError) as info:
        load_duty_cycles(duty, memory_path=duty)
    assert info.value.where == "duty.csv"
    assert "looks like a duty-cycle file" in info.value.rule


def test_memory_gaps_follow_the_duty_cycle_rules_and_are_counted(tmp_path: Path) -> None:
    duty = write(tmp_path, HEADER, *rows("a", [(60.0 * k, 5.0) for k in range(11)]))
    gib = 1024**3
    memory = write(  # a long gap (0 -> 600 s: 9 steps) and nothing else
        tmp_path, "timestamp_anon,value,container_ip", f"0,{2 * gib},a", f"600,{4 * gib},a",
        name="mem.csv",
    )
    series, report = load_duty_cycles(duty, memory_path=memory)
    assert series.memory_profile is not None
    np.testing.assert_allclose(series.memory_profile[0], [0.5] + [0.75] * 9 + [1.0])
    assert report.memory_held_points == 9
    assert report.memory_filled_points == 0
    short = write(  # a short gap (0 -> 180 s: 2 steps) is interpolated
        tmp_path, "timestamp_anon,value,container_ip", f"0,{2 * gib},a", f"180,{4 * gib},a",
        f"600,{4 * gib},a", name="short.csv",
    )
    series, report = load_duty_cycles(duty, memory_path=short)
    assert series.memory_profile is not None
    np.testing.assert_allclose(series.memory_profile[0][:4], [0.5, 2 / 3, 5 / 6, 1.0])
    assert report.memory_filled_points == 2


@pytest.mark.parametrize(
    ("row", "where", "rule"),
    [
        ("-5,60,a", "duty.csv:3:value", "negative"),
        ("100.5,60,a", "duty.csv:3:value", "over 100"),
        ("busy,60,a", "duty.csv:3:value", "not a number"),
        ("nan,60,a", "duty.csv:3:value", "not a finite number"),
        ("5,soon,a", "duty.csv:3:timestamp_anon", "not a number"),
        ("5,60,", "duty.csv:3:container_ip", "empty"),
        ("5,0,a", "duty.csv:3:timestamp_anon", "second sample"),
        ("5,60", "duty.csv:3", "malformed row"),
    ],
)
def test_bad_rows_name_file_line_column_and_rule(
    tmp_path: Path, row: str, where: str, rule: str
) -> None:
    exc = error(tmp_path, HEADER, "5,0,a", row)
    assert exc.where == where
    assert rule in exc.rule
    assert "\n" not in exc.one_line()


def test_empty_file_is_one_line(tmp_path: Path) -> None:
    exc = error(tmp_path)
    assert exc.one_line() == "duty.csv:1: file is empty; expected a CSV header"
    exc = error(tmp_path, HEADER)
    assert "no data rows" in exc.rule


def test_missing_column_is_named(tmp_path: Path) -> None:
    exc = error(tmp_path, "value,timestamp", "5,0")
    assert "container_ip" in exc.rule


def test_bad_parameters_are_input_errors(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER, "5,0,a")
    with pytest.raises(InputError, match="grid step"):
        load_duty_cycles(path, interval_s=0)
    with pytest.raises(InputError, match="min_coverage"):
        load_duty_cycles(path, min_coverage=2.0)


@pytest.mark.shared_data
def test_real_trace_reads_143_series_and_the_report_adds_up(genai_dir: Path) -> None:
    series, report = load_duty_cycles(DUTY, memory_path=MEMORY)
    assert report.series_read == 143
    assert report.rows_read == 157_417
    assert report.series_kept + sum(report.rejected.values()) == report.series_read
    assert report.series_kept == len(series.names) == series.values.shape[0]
    assert report.filled_points > 0
    assert report.held_points > 0
    assert series.values.shape[1] == 1369  # 82,080 s at 60 s steps
    assert series.values.min() >= 0.0
    assert series.values.max() <= 1.0
    assert 0.05 < series.values.mean() < 0.09  # the trace's mean duty is about 7%
    assert series.memory_mib is not None
    assert not np.isnan(series.memory_mib).any()
    # memory over time: series come near their peak (a spike between grid points is missed)
    # and sit well below it most of the time
    prof = series.memory_profile
    assert prof is not None
    assert prof.shape == series.values.shape
    assert prof.max(axis=1).min() > 0.75
    assert float(np.median(prof.max(axis=1))) == 1.0
    assert 0.5 < float(np.median(prof)) < 0.75
    assert report.memory_missing == 0
