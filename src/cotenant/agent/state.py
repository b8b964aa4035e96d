"""The agent's memory: workloads and their history in SQLite (WAL), so nothing is lost when the
agent itself dies, and in memory, so that a storage fault never stops the supervision.

``workloads`` holds one row per workload: its spec (JSON), status, pid, restarts, when it may
start next, the SM share it should get and the share its running client got, the faults that
count against its restart budget (:class:`~cotenant.policies.colocation.Recovery`) and the
launch id of its current process (the write-ahead intent of a start: see
:mod:`cotenant.agent.supervisor`). ``events`` is an append-only log (start, exit with fault
class, restart, adopted, lost, MPS failure, NVML error), ``fault_counts`` the per-workload
fault counts of the metrics. A workload row is never deleted: stopping one only changes its
status. A row this version cannot read (a spec a later version's rules refuse) is moved to
``quarantine``: logged, shown in the agent's status, never fatal.

Every record lives in memory too, and reads come from there. A write that fails (disk full,
the database locked past ``busy_timeout_s``, the file deleted) degrades rather than kills:
the change stays in memory, the write is retried at every :meth:`StateStore.flush` (each
tick), errors are counted (``errors``) and ``degraded`` says why until a write succeeds. A
write the caller must know is on disk (a submit, a stop: ``durable=True``) raises
:class:`StorageError` instead, which the API answers with 503 and ``Retry-After``. A record
and the events of the same step (an exit and its count) are written in one transaction. The
state directory is made owner-only (0700) and the database files 0600: a spec's environment
may hold secrets.

The records are :mod:`cotenant.agent.records`, the file and its schema
:mod:`cotenant.agent.statedb`. The store is shared by the reconcile loop and the API's
threads: every call holds one lock, briefly (reads never wait for SQLite).
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from cotenant.agent.faultpoints import FaultPoints
from cotenant.agent.records import (
    COLUMNS,
    Event,
    EventRow,
    Status,
    WorkloadRecord,
    from_row,
    to_row,
)
from cotenant.agent.spec import WorkloadSpec
from cotenant.agent.statedb import PUT, RETRY_S, SCHEMA, StorageError, identity, open_database
from cotenant.errors import CotenantError, InputError

__all__ = ["BUSY_TIMEOUT_S", "KEEP_EVENTS", "KEEP_FINISHED", "MAX_PENDING_EVENTS", "PRUNE_EVERY",
           "RETRY_S", "Event", "StateStore", "Status", "StorageError", "WorkloadRecord"]

log = logging.getLogger(__name__)

KEEP_EVENTS = 100_000
"""Rows the event log keeps (the newest); older ones go every :data:`PRUNE_EVERY` events."""
PRUNE_EVERY = 1_000
KEEP_FINISHED = 500
"""Finished workloads (stopped, completed, failed) kept in the state; the oldest beyond go when
a workload is added. Their events stay in the event log."""
BUSY_TIMEOUT_S = 1.0
"""How long a write waits for a lock another process holds before it counts as failed."""
MAX_PENDING_EVENTS = 10_000
"""Events kept in memory while writes fail; beyond, the oldest are dropped (and counted)."""



class StateStore:
    """SQLite-backed workloads and events at ``path`` (``":memory:"`` for a throw-away one),
    with every record in memory (see the module docstring for what a storage fault does)."""

    def __init__(self, path: Path | str, *, points: FaultPoints | None = None,
                 busy_timeout_s: float = BUSY_TIMEOUT_S,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.points = points or FaultPoints()
        self.busy_timeout_s = busy_timeout_s
        self.monotonic = monotonic
        self._lock = threading.RLock()
        self._records: dict[str, WorkloadRecord] = {}
        self.version = 0
        """Counts the changes to the records in memory (a reader's cache key)."""
        self._dirty: set[str] = set()
        self._pending: list[EventRow] = []
        self._counts: dict[tuple[str, str], int] = {}
        self.quarantined: dict[str, str] = {}
        """Rows this version could not read: name -> why (moved to the ``quarantine`` table)."""
        self.errors = 0
        """Writes that failed since the agent started."""
        self.events_dropped = 0
        self.degraded = ""
        """Why writes are failing (the last error); empty while they succeed."""
        self._retry_at = -float("inf")
        self._identity: tuple[int, int] | None = None
        self._db = self._open()
        self._load()

    # --- opening -----------------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        db = open_database(self.path, self.busy_timeout_s)
        if isinstance(self.path, Path):
            self._identity = identity(self.path)
        return db

    def _load(self) -> None:
        rows = self._db.execute(f"SELECT {', '.join(COLUMNS)} FROM workloads").fetchall()
        bad: list[tuple[str, str, str]] = []
        for row in rows:
            try:
                record = from_row(row)
            except (CotenantError, ValueError, TypeError, KeyError) as exc:
                reason = exc.one_line() if isinstance(exc, CotenantError) else repr(exc)
                bad.append((str(row[0]), json.dumps(list(row)), reason[:300]))
                continue
            self._records[record.spec.name] = record
        for name, raw, reason in bad:
            log.warning("state: workload row %r quarantined: %s", name, reason)
            with contextlib.suppress(sqlite3.Error):
                self._transaction(partial(self._quarantine, name, raw, reason))
            self._pending.append((time.time(), name, "quarantined", None, reason))
        self.quarantined = {str(n): str(why) for n, why in self._db.execute(
            "SELECT name, reason FROM quarantine ORDER BY name")}
        self.quarantined.update((n, why) for n, _, why in bad)
        self._counts = {(w, f): int(n) for w, f, n in self._db.execute(
            "SELECT workload, fault, n FROM fault_counts")}

    def _quarantine(self, name: str, raw: str, reason: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO quarantine VALUES (?,?,?)", (name, raw, reason))
        self._db.execute("DELETE FROM workloads WHERE name = ?", (name,))

    def close(self) -> None:
        with self._lock:
            with contextlib.suppress(sqlite3.Error):
                self.flush()
            self._db.close()

    def journal_mode(self) -> str:
        with self._lock:
            return str(self._db.execute("PRAGMA journal_mode").fetchone()[0])

    # --- writing -----------------------------------------------------------------------------

    def _transaction(self, body: Callable[[], object]) -> None:
        """``body``'s statements in one transaction (all or none)."""
        self.points.hit("store.write")
        self._db.execute("BEGIN IMMEDIATE")
        try:
            body()
            self._db.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")
            raise

    def _write(self, rows: list[WorkloadRecord], events: list[EventRow], *,
               durable: bool) -> bool:
        """Write ``rows`` and ``events`` in one transaction: True once written. While writes
        fail they wait for the next retry in memory (False), unless ``durable``: then the
        write is tried now, and its failure raises :class:`StorageError`."""
        if not durable and self.degraded and self.monotonic() < self._retry_at:
            self._defer(rows, events)
            return False
        try:
            self._transaction(lambda: self._statements(rows, events))
        except sqlite3.Error as exc:
            self._failed(exc)
            if durable:
                raise StorageError(f"state not written ({exc})", delay_s=RETRY_S,
                                   hint="free disk space, or end what holds the state "
                                   "database's lock") from exc
            self._defer(rows, events)
            return False
        self._unquarantine(rows)
        if self.degraded:  # this one went through: try the rest at once
            self._recovered()
        return True

    def _unquarantine(self, rows: Iterable[WorkloadRecord]) -> None:
        """Written ``rows`` replace what was set aside under their names (adopted, submitted
        again)."""
        for record in rows:
            if self.quarantined.pop(record.spec.name, None) is not None:
                log.warning("state: workload %r has a readable row again; its quarantine "
                            "entry is cleared", record.spec.name)

    def drop_quarantined(self, name: str) -> bool:
        """Remove the set-aside row ``name`` (the operator stopped it); False where there is
        none. On disk before it returns (else :class:`StorageError`)."""
        with self._lock:
            if name not in self.quarantined:
                return False
            try:
                self._transaction(lambda: self._db.execute(
                    "DELETE FROM quarantine WHERE name = ?", (name,)))
            except sqlite3.Error as exc:
                self._failed(exc)
                raise StorageError(f"state not written ({exc})", delay_s=RETRY_S) from exc
            del self.quarantined[name]
            return True

    def _statements(self, rows: list[WorkloadRecord], events: list[EventRow],
                    gone: Iterable[str] = ()) -> None:
        for name in gone:
            self._db.execute("DELETE FROM workloads WHERE name = ?", (name,))
        for record in rows:
            self._db.execute(PUT, to_row(record))
            if record.spec.name in self.quarantined:  # the name has a readable row again
                self._db.execute("DELETE FROM quarantine WHERE name = ?", (record.spec.name,))
        for now, workload, kind, fault, detail in events:
            cursor = self._db.execute(
                "INSERT INTO events (time, workload, kind, fault, detail) VALUES (?,?,?,?,?)",
                (now, workload, kind, fault, detail))
            if kind == "exit" and fault is not None:
                self._db.execute(
                    "INSERT INTO fault_counts VALUES (?, ?, 1) ON CONFLICT (workload, fault) "
                    "DO UPDATE SET n = n + 1", (workload, fault))
            last = cursor.lastrowid or 0
            if last % PRUNE_EVERY == 0:  # the log keeps its newest KEEP_EVENTS rows
                self._db.execute("DELETE FROM events WHERE id <= ?", (last - KEEP_EVENTS,))

    def _defer(self, rows: list[WorkloadRecord], events: list[EventRow]) -> None:
        self._dirty |= {r.spec.name for r in rows}
        self._pending.extend(events)
        if len(self._pending) > MAX_PENDING_EVENTS:
            drop = len(self._pending) - MAX_PENDING_EVENTS
            del self._pending[:drop]
            self.events_dropped += drop

    def _failed(self, exc: sqlite3.Error) -> None:
        self.errors += 1
        if not self.degraded:
            log.warning("state: writes failing, supervising from memory: %s", exc)
        self.degraded = str(exc) or type(exc).__name__
        self._retry_at = self.monotonic() + RETRY_S

    def _recovered(self) -> None:
        log.warning("state: writes succeed again after: %s", self.degraded)
        self.degraded = ""
        self.flush()

    def flush(self) -> bool:
        """Write what failed to be written (in one transaction), and re-create a database
        file that was deleted under the agent from memory; True when nothing is left."""
        with self._lock:
            if isinstance(self.path, Path) and identity(self.path) != self._identity:
                self._reopen()
            if self.degraded and self.monotonic() < self._retry_at:
                return not self._dirty and not self._pending
            if not self._dirty and not self._pending:
                if not self.degraded:
                    return True
                # a write failed with nothing left to retry (an answered 503): try one, so
                # that ``degraded`` does not outlast the fault on an idle agent
                self._pending.append((time.time(), "node", "storage recovered", None,
                                      f"writes succeed again after: {self.degraded}"))
            rows = [self._records[n] for n in sorted(self._dirty) if n in self._records]
            gone = [n for n in self._dirty if n not in self._records]
            events, self._pending = self._pending, []
            self._dirty = set()
            try:
                self._transaction(partial(self._statements, rows, events, gone))
            except sqlite3.Error as exc:
                self._failed(exc)
                self._dirty |= {r.spec.name for r in rows} | set(gone)
                self._pending = events + self._pending
                return False
            self._unquarantine(rows)
            if self.degraded:
                log.warning("state: writes succeed again after: %s", self.degraded)
                self.degraded = ""
            return True

    def _reopen(self) -> None:
        """The database file is gone (or replaced): write everything in memory to a new one."""
        log.warning("state: %s was deleted or replaced; writing the state anew", self.path)
        with contextlib.suppress(sqlite3.Error):
            self._db.close()
        try:
            self._db = self._open()
        except CotenantError as exc:
            self._failed(sqlite3.OperationalError(exc.one_line()))
            self._identity = (-1, -1)  # tried again at the next flush
            self._db = sqlite3.connect(":memory:", check_same_thread=False,
                                       isolation_level=None)
            self._db.executescript(SCHEMA)
            return
        self._dirty |= set(self._records)
        self._pending.append((time.time(), "node", "state recreated",
                              None, f"{self.path} was deleted; written from memory"))
        self.errors += 1

    # --- records -----------------------------------------------------------------------------

    def add(self, spec: WorkloadSpec, now: float) -> WorkloadRecord:
        """Add a workload (replacing a finished one of the same name) as pending; on disk
        before it returns (else :class:`StorageError`)."""
        with self._lock:
            existing = self._records.get(spec.name)
            if existing is not None and not existing.status.final:
                raise InputError(f"workload {spec.name!r}",
                                 f"already exists ({existing.status.value})",
                                 hint="stop it first, or choose another name")
            record = WorkloadRecord(spec, Status.PENDING, next_start=now,
                                    share_pct=spec.sm_share, since=now)
            event = (now, spec.name, "submitted", None, " ".join(spec.argv))
            self._write([record], [event], durable=True)
            self._records[spec.name] = record
            self.version += 1
            self._keep_newest_finished()
            return record

    def _keep_newest_finished(self) -> None:
        """Keep the newest :data:`KEEP_FINISHED` finished records only: every tick reads
        them all."""
        finished = sorted((r for r in self._records.values() if r.status.final),
                          key=lambda r: (-r.since, r.spec.name))
        for old in finished[KEEP_FINISHED:]:
            del self._records[old.spec.name]
            self.version += 1
            self._dirty.add(old.spec.name)  # not in memory: deleted by the next flush
        if len(finished) > KEEP_FINISHED:
            self.flush()

    def put(self, record: WorkloadRecord, *, durable: bool = False) -> None:
        """Keep ``record``; written now, or (not ``durable``) retried while writes fail."""
        self.commit(record, durable=durable)

    def update(self, record: WorkloadRecord, *, durable: bool = False,
               **changes: Any) -> WorkloadRecord:
        new = replace(record, **changes)
        self.put(new, durable=durable)
        return new

    def commit(self, record: WorkloadRecord, events: tuple[EventRow, ...] = (), *,
               durable: bool = False) -> WorkloadRecord:
        """``record`` and ``events`` (the same step: an exit and its outcome) together, in
        one transaction. A ``durable`` write that fails changes nothing, in memory either."""
        with self._lock:
            if durable:
                self._write([record], list(events), durable=True)
            self._records[record.spec.name] = record
            self.version += 1
            self._count(events)
            if not durable:
                self._write([record], list(events), durable=False)
            return record

    def _count(self, events: tuple[EventRow, ...] | list[EventRow]) -> None:
        for _, workload, kind, fault, _ in events:
            if kind == "exit" and fault is not None:
                self._counts[workload, fault] = self._counts.get((workload, fault), 0) + 1

    def get(self, name: str) -> WorkloadRecord | None:
        with self._lock:
            return self._records.get(name)

    def count_active(self) -> int:
        """Workloads not yet in a final state."""
        with self._lock:
            return sum(not r.status.final for r in self._records.values())

    def all(self) -> list[WorkloadRecord]:
        with self._lock:
            return [self._records[n] for n in sorted(self._records)]

    # --- events ------------------------------------------------------------------------------

    def event(self, now: float, workload: str, kind: str, fault: str | None = None,
              detail: str = "") -> None:
        with self._lock:
            row = (now, workload, kind, fault, detail)
            self._count([row])
            self._write([], [row], durable=False)

    def events(self, workload: str | None = None) -> list[Event]:
        """The event log (those still waiting to be written last)."""
        query = "SELECT time, workload, kind, fault, detail FROM events"
        args: tuple[str, ...] = ()
        if workload is not None:
            query, args = query + " WHERE workload = ?", (workload,)
        with self._lock:
            try:
                rows = self._db.execute(query + " ORDER BY id", args).fetchall()
            except sqlite3.Error:
                rows = []
            waiting = [e for e in self._pending if workload is None or e[1] == workload]
        return [Event(*r) for r in [*rows, *waiting]]

    def fault_counts(self) -> dict[tuple[str, str], int]:
        """(workload, fault class) -> number of exits of that class, ever (kept apart from the
        event log, whose oldest rows go: Prometheus counters never fall)."""
        with self._lock:
            return dict(self._counts)
