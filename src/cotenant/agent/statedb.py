"""The agent's state database on disk: its SQLite schema, how a state directory is opened
(WAL, owner-only files, the upgrades of states written by earlier versions) and the errors
opening it can raise.

The store (:mod:`cotenant.agent.state`) keeps every record in memory and writes through this;
this module holds what is about the file, so that the store holds only what is about records.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

from cotenant.agent.records import COLUMNS
from cotenant.errors import InputError, TemporaryError

SCHEMA = """
CREATE TABLE IF NOT EXISTS workloads (
    name TEXT PRIMARY KEY, spec TEXT NOT NULL, status TEXT NOT NULL, pid INTEGER,
    restarts INTEGER NOT NULL DEFAULT 0, next_start REAL NOT NULL DEFAULT 0,
    share_pct INTEGER, applied_pct INTEGER, since REAL NOT NULL DEFAULT 0,
    last_exit TEXT NOT NULL DEFAULT '', failures INTEGER NOT NULL DEFAULT 0,
    launch TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT, time REAL NOT NULL, workload TEXT NOT NULL,
    kind TEXT NOT NULL, fault TEXT, detail TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS fault_counts (
    workload TEXT NOT NULL, fault TEXT NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (workload, fault)
);
CREATE TABLE IF NOT EXISTS quarantine (
    name TEXT PRIMARY KEY, row TEXT NOT NULL, reason TEXT NOT NULL
);
"""
COUNT_EXITS = """
INSERT OR IGNORE INTO fault_counts (workload, fault, n)
SELECT workload, fault, COUNT(*) FROM events WHERE kind = 'exit' AND fault IS NOT NULL
GROUP BY workload, fault
"""
PUT = (f"INSERT OR REPLACE INTO workloads ({', '.join(COLUMNS)}) "
       f"VALUES ({','.join('?' * len(COLUMNS))})")
RETRY_S = 1.0
"""While writes fail, how often the store tries again (and the ``Retry-After`` it answers)."""


class StorageError(TemporaryError):
    """A write that had to reach the disk did not (disk full, database locked)."""


def open_database(path: Path | str, busy_timeout_s: float) -> sqlite3.Connection:
    """Open (creating, or upgrading from an earlier version's schema) the state database at
    ``path``: WAL, owner-only. Raises :class:`StorageError` where it may pass (locked, full,
    read-only) and :class:`~cotenant.errors.InputError` where it is not the agent's."""
    if isinstance(path, Path):
        private_file(path)
    db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None,
                         timeout=busy_timeout_s)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        counted = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                             "name = 'fault_counts'").fetchone() is not None
        db.executescript(SCHEMA)
        columns = {row[1] for row in db.execute("PRAGMA table_info(workloads)")}
        if "failures" not in columns:  # a state from before the restart budget's count
            db.execute("ALTER TABLE workloads ADD COLUMN failures INTEGER NOT NULL DEFAULT 0")
        if "launch" not in columns:  # a state from before write-ahead starts
            db.execute("ALTER TABLE workloads ADD COLUMN launch TEXT NOT NULL DEFAULT ''")
        if not counted:  # a state from before the counts had their own table
            db.execute(COUNT_EXITS)
    except sqlite3.OperationalError as exc:  # locked, full, read-only: may pass
        db.close()
        raise StorageError(f"state database {path}: {exc}", delay_s=RETRY_S,
                           hint="is another agent using this --state-dir?") from exc
    except sqlite3.DatabaseError as exc:  # not SQLite, or a schema of something else
        db.close()
        raise InputError(str(path), f"is not the agent's state database ({exc})",
                         hint="move it aside, or give another --state-dir") from exc
    if isinstance(path, Path):
        for suffix in ("", "-wal", "-shm"):  # SQLite gives them the database's mode
            with contextlib.suppress(OSError):
                Path(f"{path}{suffix}").chmod(0o600)
    return db


def private_file(path: Path) -> None:
    """Make ``path``'s directory owner-only (0700) and ``path`` an owner-only file (0600)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with contextlib.suppress(OSError):
        path.parent.chmod(0o700)
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))


def identity(path: Path) -> tuple[int, int] | None:
    """The file at ``path`` as (device, inode), None where there is none: a changed identity
    means the database was deleted or replaced under the agent."""
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_dev, info.st_ino
