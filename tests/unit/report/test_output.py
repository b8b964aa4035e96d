"""Reports written whole or not at all, and a failure naming the report's own file."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from cotenant.report.output import ReportDir, probe_directory, write_text_atomic


def full_disk(path: Path) -> None:
    path.write_bytes(b"")  # the file exists, empty, when the disk fills: as a plot would leave it
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_new_report_appears_whole(tmp_path: Path) -> None:
    target = tmp_path / "reports" / "run"
    with ReportDir(target) as report:
        report.write_text("data.json", "{}")
        assert not target.exists()  # nothing there until every file is complete
        report.write_text("index.html", "<html></html>")
    assert sorted(p.name for p in target.iterdir()) == ["data.json", "index.html"]
    assert [p.name for p in target.parent.iterdir()] == ["run"]  # no staging left behind


def test_a_full_disk_leaves_no_half_report_and_names_the_file(tmp_path: Path) -> None:
    target = tmp_path / "run"
    report = ReportDir(target)
    report.write_text("allocation.png", "png")
    with pytest.raises(OSError, match="No space left") as info:
        report.save("fragmentation.png", full_disk)
    assert info.value.filename == str(target / "fragmentation.png")
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []


def test_an_existing_directory_keeps_its_other_files(tmp_path: Path) -> None:
    target = tmp_path / "report"
    (target / "coloc").mkdir(parents=True)
    (target / "notes.txt").write_text("mine")
    (target / "index.html").write_text("old")
    with ReportDir(target) as report:
        report.write_text("index.html", "new")
    assert (target / "index.html").read_text() == "new"
    assert (target / "notes.txt").read_text() == "mine"
    assert (target / "coloc").is_dir()
    assert sorted(p.name for p in target.iterdir()) == ["coloc", "index.html", "notes.txt"]


def test_a_failure_into_an_existing_directory_keeps_the_old_report(tmp_path: Path) -> None:
    target = tmp_path / "report"
    target.mkdir()
    (target / "index.html").write_text("old")
    report = ReportDir(target)
    report.write_text("index.html", "new")
    with pytest.raises(OSError, match="No space left"):
        report.save("plot.png", full_disk)
    assert (target / "index.html").read_text() == "old"
    assert [p.name for p in target.iterdir()] == ["index.html"]


def test_a_published_report_is_readable_by_others(tmp_path: Path) -> None:
    """mkdtemp makes its directory 0700; the report keeps the umask's mode instead."""
    old = os.umask(0o022)
    try:
        with ReportDir(tmp_path / "run") as report:
            report.write_text("index.html", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "run").stat().st_mode & 0o777 == 0o755


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="no /proc here")
def test_the_probe_refuses_proc(tmp_path: Path) -> None:
    """os.access says root may write in /proc; making a directory there fails."""
    probe_directory(tmp_path)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(OSError, match=r"No such file|Permission|Read-only|not permitted"):
        probe_directory(Path("/proc"))


def test_a_file_is_replaced_whole(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text("old")
    path.chmod(0o640)
    write_text_atomic(path, "new")
    assert path.read_text() == "new"
    assert path.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["plan.yaml"]
