"""The calibration files as a user who replaces them sees them: each reader's malformed cell is
a one-line error naming its own file, line and column; a value past a cap is capped; a value
below a floor is floored. The shipped files have none of these, so each case puts one into a
copy of a table (``published.table`` stands in for the file)."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from cotenant.errors import InputError
from cotenant.perf import interference as interference_module
from cotenant.perf import mig_profiles, mps, published
from cotenant.perf.interference import _h200, _tally
from cotenant.perf.predictor import gavel_pairs, tally_pairs

Table = list[tuple[int, dict[str, str]]]

GAVEL_JOBS: Table = [
    (7, {"job": "a", "v100_steps_per_s": "3.0", "p100_steps_per_s": "1.5"}),
    (8, {"job": "b", "v100_steps_per_s": "4.0", "p100_steps_per_s": "1.0"}),
]
"""Two jobs: speed-ups 2 and 4, so solo features 0.5 and 1."""
GAVEL_PAIRS: Table = [
    (11, {"gpu": "V100", "row_job": "a", "col_job": "a", "row_norm_tput": "0.75"}),
    (12, {"gpu": "V100", "row_job": "a", "col_job": "b", "row_norm_tput": "1.5"}),
    (13, {"gpu": "V100", "row_job": "b", "col_job": "a", "row_norm_tput": "1.25"}),
    (14, {"gpu": "V100", "row_job": "b", "col_job": "b", "row_norm_tput": "0.5"}),
]
"""Every pair of the two jobs on a V100; a with b and b with a above the cap of 1."""


def use_tables(monkeypatch: pytest.MonkeyPatch, **tables: Table) -> None:
    """``published.table`` answering ``tables`` by file name (dots as underscores), the
    shipped files for any other name."""
    shipped: Callable[[str], Table] = published.table

    def table(name: str) -> Table:
        key = name.replace(".", "_")
        return tables[key] if key in tables else shipped(name)

    monkeypatch.setattr(published, "table", table)


def with_cell(rows: Table, index: int, column: str, value: str) -> Table:
    """``rows`` with one cell changed."""
    out = [(line, dict(row)) for line, row in rows]
    out[index][1][column] = value
    return out


def test_gavel_speeds_above_one_are_capped_at_one(monkeypatch: pytest.MonkeyPatch) -> None:
    use_tables(monkeypatch, gavel_jobs_csv=GAVEL_JOBS, gavel_pairs_csv=GAVEL_PAIRS)
    rows = gavel_pairs("V100")
    assert [(r.job_a, r.job_b, r.speed_a, r.speed_b) for r in rows] == [
        ("a", "a", 0.75, 0.75), ("a", "b", 1.0, 1.0), ("b", "b", 0.5, 0.5)]
    assert [(r.a.gpu_util, r.b.gpu_util) for r in rows] == [(0.5, 0.5), (0.5, 1.0), (1.0, 1.0)]


@pytest.mark.parametrize(("jobs", "pairs", "where"), [
    (with_cell(GAVEL_JOBS, 1, "v100_steps_per_s", "fast"), GAVEL_PAIRS,
     "gavel_jobs.csv:8:v100_steps_per_s"),
    (with_cell(GAVEL_JOBS, 0, "p100_steps_per_s", ""), GAVEL_PAIRS,
     "gavel_jobs.csv:7:p100_steps_per_s"),
    (GAVEL_JOBS, with_cell(GAVEL_PAIRS, 2, "row_norm_tput", "-0.5"),
     "gavel_pairs.csv:13:row_norm_tput"),
])
def test_a_malformed_gavel_cell_names_its_file_line_and_column(
        monkeypatch: pytest.MonkeyPatch, jobs: Table, pairs: Table, where: str) -> None:
    use_tables(monkeypatch, gavel_jobs_csv=jobs, gavel_pairs_csv=pairs)
    with pytest.raises(InputError) as info:
        gavel_pairs("V100")
    assert info.value.where == where


@pytest.mark.parametrize("column", ["v100_steps_per_s", "p100_steps_per_s"])
def test_a_gavel_job_with_no_speed_is_refused(monkeypatch: pytest.MonkeyPatch,
                                              column: str) -> None:
    use_tables(monkeypatch, gavel_jobs_csv=with_cell(GAVEL_JOBS, 1, column, "0"),
               gavel_pairs_csv=GAVEL_PAIRS)
    with pytest.raises(InputError) as info:
        gavel_pairs("V100")
    assert (info.value.where, info.value.rule) == (
        "gavel_jobs.csv:8", "a job's steps per second must be > 0 on both GPUs (its features "
        "are the V100 over P100 speed-up)")


def test_tally_speeds_above_one_are_capped_at_one(monkeypatch: pytest.MonkeyPatch) -> None:
    shipped = published.table("tally_pairs.csv")
    # the first pair's server faster beside the trainer (p99 ratio 0.5) and its trainer at
    # 1.5 x its solo throughput; the second pair's at 0.8 and 0.625 (below the caps)
    rows = with_cell(with_cell(shipped, 0, "hp_p99_ratio_mps", "0.5"), 0, "be_norm_tput_mps",
                     "1.5")
    rows = with_cell(with_cell(rows, 1, "hp_p99_ratio_mps", "1.25"), 1, "be_norm_tput_mps",
                     "0.625")
    use_tables(monkeypatch, tally_pairs_csv=rows)
    first, second = tally_pairs("mps")[:2]
    assert (first.speed_a, first.speed_b) == (1.0, 1.0)
    assert (second.speed_a, second.speed_b) == (0.8, 0.625)


def h200_table() -> Table:
    return [(line, dict(row)) for line, row in published.table("h200_colocation.csv")]


def test_a_malformed_h200_cell_names_its_file_line_and_column(
        monkeypatch: pytest.MonkeyPatch) -> None:
    shipped = h200_table()
    index = next(i for i, (_, row) in enumerate(shipped) if row["mechanism"] == "time-slicing")
    line = shipped[index][0]
    use_tables(monkeypatch, h200_colocation_csv=with_cell(shipped, index, "p99_ms", "n/a"))
    with pytest.raises(InputError) as info:
        interference_module.h200_rows()
    assert info.value.where == f"h200_colocation.csv:{line}:p99_ms"
    assert line == 14  # the line it is on in the shipped file, after its 11 comment lines


def test_h200_time_slicing_stretches_are_floored_at_one(monkeypatch: pytest.MonkeyPatch) -> None:
    shipped = h200_table()
    solo = next(float(row["service_ms"]) for _, row in shipped if row["mechanism"] == "solo")
    index = next(i for i, (_, row) in enumerate(shipped) if row["mechanism"] == "time-slicing")
    # time slicing only 1.02 x slower than alone: the jobs Tally saw stretched less than
    # ResNet-50 land below 1 and are floored there
    slower = with_cell(shipped, index, "service_ms", repr(1.02 * solo))
    use_tables(monkeypatch, h200_colocation_csv=slower)
    tally = _tally("mean")
    scaled = 1.02 * tally.ts_stretch / tally.ts_stretch[interference_module.RESNET50_TRAIN]
    assert scaled.min() < 1.0 < scaled.max()
    got = _h200("mean").ts_stretch
    np.testing.assert_allclose(got, np.maximum(1.0, scaled), rtol=1e-12)
    assert got[interference_module.RESNET50_TRAIN] == pytest.approx(1.02)
    assert got.min() == 1.0


def profile_lines() -> list[str]:
    path = Path(mig_profiles.__file__).parent / "data" / "mig_profiles.csv"
    return path.read_text("utf-8").splitlines()


def package_files(monkeypatch: pytest.MonkeyPatch, module: object, root: Path) -> None:
    """``module`` finds the package's data files under ``root`` instead of the package."""

    class Files:
        @staticmethod
        def files(package: str) -> Path:
            assert package == "cotenant.perf"
            return root

    monkeypatch.setattr(module, "resources", Files)


def use_profiles(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, lines: list[str]) -> None:
    """:func:`mig_profiles.default_table` reading ``lines`` as the shipped file."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "mig_profiles.csv").write_text("\n".join(lines) + "\n", "utf-8")
    package_files(monkeypatch, mig_profiles, tmp_path)


def test_a_malformed_shipped_profile_row_names_the_shipped_file(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    lines = profile_lines()
    first = next(n for n, line in enumerate(lines, 1)
                 if not line.startswith("#") and not line.startswith("model,"))
    lines[first - 1] = lines[first - 1].replace(",32,", ",-32,", 1)
    use_profiles(monkeypatch, tmp_path, lines)
    with pytest.raises(InputError) as info:
        mig_profiles.default_table()
    assert info.value.where == f"mig_profiles.csv:{first}:batch"
    assert info.value.rule == "'-32' is not a positive integer"


def test_the_tail_at_a_utilisation_of_exactly_one_is_infinite() -> None:
    # share 1 and serial fraction 0: speed 1, halved by the interference of 2, so a load of
    # 0.5 is a utilisation of exactly 1, an unstable queue
    assert mps.p99_ms(np.array([0.5]), np.array([1.0]), 0.0, 10.0, 2.0)[0] == np.inf
    # just below: finite, 10 ms / 0.5 x (1 + ln(100 x 0.999) / (2 x 0.001))
    rho = 0.999
    want = 20.0 * (1.0 + np.log(100.0 * rho) / (2.0 * (1.0 - rho)))
    got = mps.p99_ms(np.array([0.4995]), np.array([1.0]), 0.0, 10.0, 2.0)[0]
    assert got == pytest.approx(want, rel=1e-9)


def latin1_locale(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files opened without an encoding read as Latin-1, as under such a locale."""
    default = io.text_encoding
    monkeypatch.setattr(io, "text_encoding",
                        lambda encoding, stacklevel=2: encoding or "latin-1")
    assert default("utf-8") == "utf-8"


def test_a_replaced_table_is_read_as_utf8_under_any_locale(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "jobs.csv").write_text(
        "# measured in Zürich\njob,steps\nmüller_bs64,2.5\n", "utf-8")
    package_files(monkeypatch, published, tmp_path)
    latin1_locale(monkeypatch)
    assert published.table("jobs.csv") == [(3, {"job": "müller_bs64", "steps": "2.5"})]


def test_the_shipped_profiles_are_read_as_utf8_under_any_locale(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    lines = profile_lines()
    first = next(n for n, line in enumerate(lines, 1)
                 if not line.startswith("#") and not line.startswith("model,"))
    lines[first - 1] = lines[first - 1].replace(",32,", ",３２,", 1)  # full-width digits
    use_profiles(monkeypatch, tmp_path, lines)
    latin1_locale(monkeypatch)
    with pytest.raises(InputError) as info:
        mig_profiles.default_table()
    assert info.value.where == f"mig_profiles.csv:{first}:batch"
    assert info.value.rule == "'３２' is not a positive integer"
