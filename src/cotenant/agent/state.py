"""The agent's memory: workloads and their history in SQLite (WAL), so nothing is lost when the
agent itself dies.

``workloads`` holds one row per workload: its spec (JSON), status, pid, restarts, when it may
start next, the SM share it should get and the share its running client got, and the faults
that count against its restart budget (:class:`~cotenant.policies.colocation.Recovery`).
``events`` is an append-only log (start, exit with fault class, restart, adopted, lost, MPS
failure, NVML error), the source of the per-workload fault counts in the metrics. A workload
row is never deleted: stopping one only changes its status.

The store is shared by the reconcile loop and the API's threads, so the connection is opened
with ``check_same_thread=False`` and every call holds one lock.
"""

from __future__ import annotations

import enum
import json
import sqlite3
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cotenant.agent.spec import WorkloadSpec
from cotenant.errors import InputError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS workloads (
    name TEXT PRIMARY KEY, spec TEXT NOT NULL, status TEXT NOT NULL, pid INTEGER,
    restarts INTEGER NOT NULL DEFAULT 0, next_start REAL NOT NULL DEFAULT 0,
    share_pct INTEGER, applied_pct INTEGER, since REAL NOT NULL DEFAULT 0,
    last_exit TEXT NOT NULL DEFAULT '', failures INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT, time REAL NOT NULL, workload TEXT NOT NULL,
    kind TEXT NOT NULL, fault TEXT, detail TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS fault_counts (
    workload TEXT NOT NULL, fault TEXT NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (workload, fault)
);
"""
_COUNT_EXITS = """
INSERT OR IGNORE INTO fault_counts (workload, fault, n)
SELECT workload, fault, COUNT(*) FROM events WHERE kind = 'exit' AND fault IS NOT NULL
GROUP BY workload, fault
"""

KEEP_EVENTS = 100_000
"""Rows the event log keeps (the newest); older ones go every :data:`PRUNE_EVERY` events."""
PRUNE_EVERY = 1_000
KEEP_FINISHED = 500
"""Finished workloads (stopped, completed, failed) kept in the state; the oldest beyond go when
a workload is added. Their events stay in the event log."""


class Status(enum.Enum):
    PENDING = "pending"  # to be started at next_start
    BACKOFF = "backoff"  # crashed; restarts at next_start
    RUNNING = "running"
    RESTARTING = "restarting"  # the agent is stopping it to start it again
    STOPPING = "stopping"  # a user asked it to stop
    STOPPED = "stopped"  # final: stopped on request or gracefully by a signal
    COMPLETED = "completed"  # final: exit 0
    FAILED = "failed"  # final: could not be started, or too many restarts

    @property
    def final(self) -> bool:
        return self in (Status.STOPPED, Status.COMPLETED, Status.FAILED)

    @property
    def has_process(self) -> bool:
        return self in (Status.RUNNING, Status.RESTARTING, Status.STOPPING)


@dataclass(frozen=True)
class WorkloadRecord:
    spec: WorkloadSpec
    status: Status
    pid: int | None = None
    restarts: int = 0
    next_start: float = 0.0
    share_pct: int | None = None
    applied_pct: int | None = None
    since: float = 0.0
    last_exit: str = ""
    failures: int = 0
    """Its own faults since its last stable run: what its restart budget counts (``restarts``
    counts every restart after a fault, those that were not its fault too)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.spec.to_dict(), "status": self.status.value, "pid": self.pid,
            "restarts": self.restarts, "share_pct": self.share_pct,
            "applied_pct": self.applied_pct, "last_exit": self.last_exit,
            "failures": self.failures,
        }


@dataclass(frozen=True)
class Event:
    time: float
    workload: str
    kind: str
    fault: str | None
    detail: str


class StateStore:
    """SQLite-backed workloads and events at ``path`` (``":memory:"`` for a throw-away one)."""

    def __init__(self, path: Path | str) -> None:
        if isinstance(path, Path):
            path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            counted = self._db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                                       "name = 'fault_counts'").fetchone() is not None
            self._db.executescript(_SCHEMA)
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(workloads)")}
            if "failures" not in columns:  # a state from before the restart budget's count
                self._db.execute("ALTER TABLE workloads ADD COLUMN failures INTEGER NOT NULL "
                                 "DEFAULT 0")
            if not counted:  # a state from before the counts had their own table
                self._db.execute(_COUNT_EXITS)
        except sqlite3.DatabaseError as exc:  # not SQLite, or a schema of something else
            self._db.close()
            raise InputError(str(path), f"is not the agent's state database ({exc})",
                             hint="move it aside, or give another --state-dir") from exc

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def journal_mode(self) -> str:
        with self._lock:
            return str(self._db.execute("PRAGMA journal_mode").fetchone()[0])

    def add(self, spec: WorkloadSpec, now: float) -> WorkloadRecord:
        """Add a workload (replacing a finished one of the same name) as pending."""
        existing = self.get(spec.name)
        if existing is not None and not existing.status.final:
            raise InputError(f"workload {spec.name!r}", f"already exists ({existing.status.value})",
                             hint="stop it first, or choose another name")
        record = WorkloadRecord(spec, Status.PENDING, next_start=now, share_pct=spec.sm_share,
                                since=now)
        final = tuple(s.value for s in Status if s.final)
        marks = ",".join("?" * len(final))
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO workloads VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                             _row(record))
            # keep the newest finished records only: every tick reads them all
            self._db.execute(
                f"DELETE FROM workloads WHERE status IN ({marks}) AND name NOT IN (SELECT name "
                f"FROM workloads WHERE status IN ({marks}) ORDER BY since DESC, name LIMIT ?)",
                (*final, *final, KEEP_FINISHED))
        return record

    def put(self, record: WorkloadRecord) -> None:
        with self._lock:
            self._db.execute("REPLACE INTO workloads VALUES (?,?,?,?,?,?,?,?,?,?,?)", _row(record))

    def update(self, record: WorkloadRecord, **changes: Any) -> WorkloadRecord:
        new = replace(record, **changes)
        self.put(new)
        return new

    def get(self, name: str) -> WorkloadRecord | None:
        with self._lock:
            row = self._db.execute("SELECT * FROM workloads WHERE name = ?", (name,)).fetchone()
        return None if row is None else _record(row)

    def count_active(self) -> int:
        """Workloads not yet in a final state."""
        final = tuple(s.value for s in Status if s.final)
        marks = ",".join("?" * len(final))
        with self._lock:
            row = self._db.execute(
                f"SELECT COUNT(*) FROM workloads WHERE status NOT IN ({marks})", final
            ).fetchone()
        return int(row[0])

    def all(self) -> list[WorkloadRecord]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM workloads ORDER BY name").fetchall()
        return [_record(r) for r in rows]

    def event(self, now: float, workload: str, kind: str, fault: str | None = None,
              detail: str = "") -> None:
        with self._lock:
            row = self._db.execute(
                "INSERT INTO events (time, workload, kind, fault, detail) VALUES (?,?,?,?,?)",
                (now, workload, kind, fault, detail),
            )
            if kind == "exit" and fault is not None:
                self._db.execute(
                    "INSERT INTO fault_counts VALUES (?, ?, 1) ON CONFLICT (workload, fault) "
                    "DO UPDATE SET n = n + 1", (workload, fault))
            last = row.lastrowid or 0
            if last % PRUNE_EVERY == 0:  # the log keeps its newest KEEP_EVENTS rows
                self._db.execute("DELETE FROM events WHERE id <= ?", (last - KEEP_EVENTS,))

    def events(self, workload: str | None = None) -> list[Event]:
        query = "SELECT time, workload, kind, fault, detail FROM events"
        args: tuple[str, ...] = ()
        if workload is not None:
            query, args = query + " WHERE workload = ?", (workload,)
        with self._lock:
            rows = self._db.execute(query + " ORDER BY id", args).fetchall()
        return [Event(*r) for r in rows]

    def fault_counts(self) -> dict[tuple[str, str], int]:
        """(workload, fault class) -> number of exits of that class, ever (kept apart from the
        event log, whose oldest rows go: Prometheus counters never fall)."""
        with self._lock:
            rows = self._db.execute("SELECT workload, fault, n FROM fault_counts").fetchall()
        return {(w, f): int(n) for w, f, n in rows}


def _row(r: WorkloadRecord) -> tuple[Any, ...]:
    return (r.spec.name, json.dumps(r.spec.to_dict()), r.status.value, r.pid, r.restarts,
            r.next_start, r.share_pct, r.applied_pct, r.since, r.last_exit, r.failures)


def _record(row: tuple[Any, ...]) -> WorkloadRecord:
    _name, spec, status, pid, restarts, next_start, share, applied, since, last_exit, \
        failures = row
    return WorkloadRecord(WorkloadSpec.from_dict(json.loads(spec)), Status(status), pid,
                          restarts, next_start, share, applied, since, last_exit, failures)
