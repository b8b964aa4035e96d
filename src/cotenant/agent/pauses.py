"""Paused workloads: SIGSTOP now, SIGCONT at a given time, kept per workload and pid.

The compute guard pauses an offline client to free its SMs at once without a restart
(:mod:`cotenant.agent.colocation`); the supervisor owns the processes, so it owns this book.
Signals go to every process of the workload (the local backend freezes the workload's
cgroup for a SIGSTOP and thaws it for a SIGCONT, or finds its processes by its leader's
process group and a token in their environment), so a launcher's workers pause with it. A
pause is recorded against the pid it stopped: when that process exits (a fault, a kill)
the pause is dropped, never applied to the process that replaces it. A stopped process
holds every signal but SIGKILL until it is resumed, so whoever stops a paused workload
resumes it first (:meth:`Pauses.release`). The book lives in memory: an agent that stops
resumes what it paused, and one that starts resumes every offline process it adopts (the
last one may have been killed), so none stays stopped with no one left to resume it.
"""

from __future__ import annotations

import signal
from collections.abc import Callable

from cotenant.agent.backends.base import ProcessBackend
from cotenant.agent.state import StateStore


class Pauses:
    """Which workloads are paused, until when, and the signals that pause and resume them."""

    def __init__(self, backend: ProcessBackend, store: StateStore,
                 monotonic: Callable[[], float]) -> None:
        self.backend = backend
        self.store = store
        self.monotonic = monotonic
        self._paused: dict[str, tuple[int, float]] = {}  # name -> (pid, resume at: monotonic)

    def names(self) -> set[str]:
        return set(self._paused)

    def pause(self, name: str, pid: int, now: float, until: float) -> None:
        """Stop ``name``'s process ``pid`` until wall time ``until``, ``until - now`` seconds
        on the monotonic clock (pausing it again moves the time)."""
        if self._paused.get(name, (None, 0.0))[0] != pid:
            self.backend.send_signal(pid, signal.SIGSTOP)
        self._paused[name] = (pid, self.monotonic() + (until - now))
        self.store.event(now, name, "paused", detail=f"for {until - now:g} s")

    def release(self, name: str, now: float, why: str) -> None:
        """Resume ``name`` now if it is paused (SIGCONT to the process that was stopped)."""
        if name not in self._paused:
            return
        pid, _ = self._paused.pop(name)
        record = self.store.get(name)
        if record is not None and record.pid == pid:
            self.backend.send_signal(pid, signal.SIGCONT)
            self.store.event(now, name, "resumed", detail=why)

    def release_all(self, now: float, why: str) -> None:
        """Resume every paused workload (the agent is stopping: no one would resume them).
        One that fails (its signal, its record, its event) keeps none of the others stopped;
        the first failure is raised once all were tried."""
        first: Exception | None = None
        for name in list(self._paused):
            try:
                self.release(name, now, why)
            except Exception as exc:  # the rest are resumed all the same
                first = first or exc
        if first is not None:
            raise first

    def resume_due(self, now: float) -> None:
        """Resume what is due; forget pauses whose process has exited meanwhile."""
        for name, (pid, until) in list(self._paused.items()):
            record = self.store.get(name)
            if record is None or record.pid != pid:
                del self._paused[name]
            elif self.monotonic() >= until:
                self.release(name, now, "pause over")
