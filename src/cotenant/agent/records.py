"""What the agent records of a workload: its status, its record (spec, pid, restarts, shares,
launch id) and its events, and how a record maps to a row of the state database's
``workloads`` table.

Kept apart from the store (:mod:`cotenant.agent.state`) because every part of the agent reads
records while only the store writes them.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any

from cotenant.agent.spec import WorkloadSpec


class Status(enum.Enum):
    PENDING = "pending"  # to be started at next_start
    BACKOFF = "backoff"  # crashed; restarts at next_start
    STARTING = "starting"  # intent: a process with this launch id may exist
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
    launch: str = ""
    """The launch id of its current (or starting) process, in that process's environment."""

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


EventRow = tuple[float, str, str, str | None, str]
"""An event as written: (time, workload, kind, fault class or None, detail)."""

COLUMNS = ("name", "spec", "status", "pid", "restarts", "next_start", "share_pct",
           "applied_pct", "since", "last_exit", "failures", "launch")
"""The ``workloads`` table's columns, in the order of :func:`to_row`."""


def to_row(r: WorkloadRecord) -> tuple[Any, ...]:
    """``r`` as a ``workloads`` row (its spec as JSON)."""
    return (r.spec.name, json.dumps(r.spec.to_dict()), r.status.value, r.pid, r.restarts,
            r.next_start, r.share_pct, r.applied_pct, r.since, r.last_exit, r.failures,
            r.launch)


def from_row(row: tuple[Any, ...]) -> WorkloadRecord:
    """The record of a ``workloads`` row; raises where the spec or status is unreadable
    (:class:`~cotenant.errors.CotenantError`, ``ValueError``, ``TypeError``, ``KeyError``)."""
    _name, spec, status, pid, restarts, next_start, share, applied, since, last_exit, \
        failures, launch = row
    return WorkloadRecord(WorkloadSpec.from_dict(json.loads(spec)), Status(status), pid,
                          restarts, next_start, share, applied, since, last_exit, failures,
                          launch)
