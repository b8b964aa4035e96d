"""Report directories written whole or not at all.

A report is several files (a page, its figures, its data). Written one by one into the
target, a full disk or a failing plot leaves half a report behind: figures without the page,
an empty PNG. :class:`ReportDir` builds every file in a staging directory beside the target,
on the same file system, and moves the set into place only once each file is complete: a new
target by one rename, an existing one file by file (each an atomic replace, the page last, so
other files already in the directory are left alone). A failure removes the staging
directory and names the report's file, not the staging copy.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

PAGE = "index.html"


class ReportDir:
    """The files of one report, staged until :meth:`publish` (or the end of a ``with``)."""

    def __init__(self, target: Path) -> None:
        self.target = target
        if target.is_dir():
            where = target  # already there: stage inside it, where it is writable
        else:
            where = target.absolute().parent
            try:
                where.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise _named(exc, where) from None
        try:
            self.staging = Path(tempfile.mkdtemp(prefix=f".{target.name or 'report'}.", dir=where))
            self.staging.chmod(0o777 & ~_umask())  # mkdtemp's 0700 would outlive the rename
        except OSError as exc:
            raise _named(exc, target) from None
        self.names: list[str] = []

    def __enter__(self) -> ReportDir:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if kind is None:
            self.publish()
        else:
            self.discard()

    def save(self, name: str, write: Callable[[Path], object]) -> str:
        """Have ``write`` write the file ``name`` (it gets the staging path); returns
        ``name``. An error names the file as it will be in the report."""
        try:
            write(self.staging / name)
        except OSError as exc:
            self.discard()
            raise _named(exc, self.target / name) from None
        self.names.append(name)
        return name

    def write_text(self, name: str, text: str) -> str:
        """Write ``text`` (UTF-8) as the file ``name``."""
        return self.save(name, lambda path: path.write_text(text, encoding="utf-8"))

    def publish(self) -> Path:
        """Move the staged files into the target; the page (``index.html``) last. Returns
        the target's page, or the target where the report has none."""
        if not self.target.exists():
            try:
                os.rename(self.staging, self.target)
            except OSError as exc:
                self.discard()
                raise _named(exc, self.target) from None
        else:
            for name in sorted(self.names, key=lambda n: n == PAGE):
                try:
                    os.replace(self.staging / name, self.target / name)
                except OSError as exc:
                    self.discard()
                    raise _named(exc, self.target / name) from None
            self.discard()
        page = self.target / PAGE
        return page if PAGE in self.names else self.target

    def discard(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _named(exc: OSError, path: Path) -> OSError:
    """``exc`` naming ``path`` (a write's error names no file, a staged one the wrong one)."""
    return OSError(exc.errno, exc.strerror or str(exc), str(path))


def probe_directory(directory: Path) -> None:
    """Make and remove an empty directory in ``directory``: the only sure test that files can
    be made there (``os.access`` says yes to root on ``/proc`` or a read-only mount)."""
    made = tempfile.mkdtemp(prefix=".cotenant-probe.", dir=directory)
    os.rmdir(made)


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file beside it, replaced into place
    whole: a reader never sees half a file, and a failure leaves the old one."""
    fd, staged = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.absolute().parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(staged, path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~_umask())
        os.replace(staged, path)
    except OSError as exc:
        Path(staged).unlink(missing_ok=True)
        raise _named(exc, path) from None
