"""A streaming CSV row reader that knows where it is, shared by the trace loaders.

Reads a plain ``.csv`` or the single CSV member of a ``.tar.gz`` (streamed out of the archive,
never extracted to disk). Rows come out as ``(line, {column: text})`` with the header checked
for the required columns, so loaders can name ``file:line:column`` in every error. Columns
are matched by header name, never by position.
"""

from __future__ import annotations

import gzip
import math
import re
import tarfile
import zlib
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import IO

from cotenant.errors import InputError
from cotenant.model.documents import csv_records

_LINE = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
"""One line and its ending, whichever of LF, CRLF and CR it is."""
GZIP_MAGIC = b"\x1f\x8b"


def _is_tar(path: Path) -> bool:
    return path.name.endswith((".tar.gz", ".tgz", ".tar"))


class CsvRows:
    """A CSV reader that knows where it is, for error messages."""

    def __init__(self, path: Path, required: tuple[str, ...]) -> None:
        self.path = path
        self.name = str(path)  # as the user gave it, in every message
        self.required = required

    def _open(self, stack: ExitStack) -> IO[bytes]:
        if self.path.is_fifo() or self.path.is_socket():  # reading would wait for a writer
            raise InputError(str(self.path), "is a pipe or socket, not a file")
        if not _is_tar(self.path):
            return stack.enter_context(self.path.open("rb"))
        archive = stack.enter_context(tarfile.open(self.path, "r:*"))  # noqa: SIM115 (in stack)
        members = [m for m in archive if m.isfile()]
        if len(members) != 1:
            raise InputError(
                self.name, f"archive holds {len(members)} files; expected exactly one CSV"
            )
        raw = archive.extractfile(members[0])
        if raw is None:  # pragma: no cover - isfile() members always extract
            raise InputError(self.name, "cannot read the archive member")
        self.name = f"{self.path}/{members[0].name}"
        return stack.enter_context(raw)

    def _lines(self, handle: IO[bytes]) -> Iterator[str]:
        """The file's lines as text (ended by LF, CRLF or a lone CR), decoded one at a time so
        that a byte that is not UTF-8 is named at its own line; a UTF-8 byte-order mark is
        dropped."""
        number = 0
        chunks = iter(handle)  # split at LF; a CR-only file comes as one chunk
        while True:
            try:
                chunk = next(chunks, None)
            except (EOFError, zlib.error, tarfile.TarError, gzip.BadGzipFile) as exc:
                raise InputError(f"{self.name}:{number + 1}", "the archive ends early or is "
                                 f"corrupt ({exc})") from exc
            if chunk is None:
                return
            if number == 0 and chunk.startswith(GZIP_MAGIC):
                raise InputError(self.name, "is gzip-compressed; only .tar.gz archives are "
                                 "read", hint="decompress it, or pack it as .tar.gz")
            for raw in _LINE.findall(chunk) if b"\r" in chunk else (chunk,):
                number += 1
                try:
                    yield raw.decode("utf-8-sig" if number == 1 else "utf-8")
                except UnicodeDecodeError as exc:
                    raise InputError(f"{self.name}:{number}", f"not UTF-8 text (byte "
                                     f"{exc.start + 1} of the line)") from exc

    def __iter__(self) -> Iterator[tuple[int, dict[str, str]]]:
        with ExitStack() as stack:
            try:
                handle = self._open(stack)
            except OSError as exc:
                raise InputError(str(self.path), f"cannot read: {exc.strerror or exc}") from exc
            except (tarfile.TarError, EOFError, zlib.error) as exc:
                why = str(exc) or "it ends early"
                raise InputError(str(self.path), f"not a readable tar archive: {why}") from exc
            records = csv_records(self._lines(handle), self.name)
            header = self._header(next(records, (1, []))[1])
            rows = 0
            for line, row in records:
                if len(row) != len(header):
                    raise InputError(
                        f"{self.name}:{line}",
                        f"malformed row: {len(row)} fields, header has {len(header)}",
                    )
                rows += 1
                yield line, dict(zip(header, row, strict=True))
            if rows == 0:
                raise InputError(f"{self.name}:2", "no data rows after the header")

    def _header(self, header: list[str]) -> list[str]:
        """The header row, checked: not empty, no column twice, every required column."""
        if not any(header):
            raise InputError(f"{self.name}:1", "file is empty; expected a CSV header")
        twice = sorted({h for h in header if header.count(h) > 1})
        if twice:
            raise InputError(f"{self.name}:1", f"column {', '.join(map(repr, twice))} appears "
                             "twice in the header")
        missing = [c for c in self.required if c not in header]
        if missing:
            raise InputError(
                f"{self.name}:1",
                f"missing column {', '.join(missing)}; required: {', '.join(self.required)}",
            )
        return header

    def where(self, line: int, column: str) -> str:
        return f"{self.name}:{line}:{column}"

    def number(self, line: int, row: dict[str, str], column: str) -> float:
        """The cell as a finite float, else an :class:`InputError` at ``file:line:column``."""
        text = row[column]
        try:
            value = float(text)
        except ValueError:
            raise InputError(self.where(line, column), f"{text!r} is not a number") from None
        if not math.isfinite(value):
            raise InputError(self.where(line, column), f"{text!r} is not a finite number")
        return value
