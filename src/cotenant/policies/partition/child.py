"""Work that must end by its deadline, run in a forked child process that is killed there.

HiGHS takes a time limit but checks it rarely in presolve and in the root node's heuristics:
measured on this project's 2-core VM, a 0.5 s limit took 5 s at 10,000 services and 1.8 s
at 1,000 large services. A thread cannot be stopped, and a process that exits waits for its
threads, so a solve left running in a thread keeps the process past its limit. A child
process can be killed. :class:`Pending` forks one (nothing is pickled on the way in: the
child has the parent's memory), the child sends its answer back through a pipe, and the
parent kills it when the deadline has passed: the caller gets no answer and goes on with its
best plan, on time, and no CPU is left to an abandoned solve.

``nice`` lowers the child's CPU priority: ``auto`` runs its heuristics at the lowest, so that
they do not take CPU time from the exact solve running beside them.

An error the work raises comes back as itself where it is a :class:`~cotenant.errors.
CotenantError` (an :class:`~cotenant.errors.InputError`, say); any other failure comes back
as a :class:`ChildError`, a ``CotenantError`` with a one-line message, so the CLI reports it
as it reports bad input, on one line, without a traceback.

Where ``fork`` is unavailable (not Linux or macOS) the work runs in this process, bounded
by HiGHS's own time limit only.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from cotenant.errors import CotenantError

T = TypeVar("T")

GRACE_S = 0.05
"""Seconds past its deadline a child may take before it is killed (its answer on the way)."""
LOWEST_PRIORITY = 19
"""The nice value of work that must only use CPU time nothing else wants."""
CAN_FORK = hasattr(os, "fork")


class ChildError(CotenantError):
    """The work failed in its child process with an error other than a ``CotenantError``,
    or its answer could not be sent back."""

    def __init__(self, message: str) -> None:
        super().__init__("a solver's child process failed: " + " ".join(message.split()))


class Pending(Generic[T]):
    """``work()`` started in a child process now; :meth:`result` waits for it at most until
    ``seconds`` (plus :data:`GRACE_S`) from now, then kills it."""

    def __init__(self, work: Callable[[], T], seconds: float, nice: int = 0) -> None:
        self.ends = time.perf_counter() + max(seconds, 0.0) + GRACE_S
        self._done: tuple[bool, object] | None = None
        self._pid = 0
        self._fd = -1
        self._chunks: list[bytes] = []
        self._open = True  # reading: no end of answer yet, and time left
        self._complete = False
        if not CAN_FORK:
            self._done = _attempt(work)
            return
        read, write = os.pipe()
        try:
            pid = os.fork()
        except BaseException:  # no child (out of processes or memory): no pipe left open
            os.close(read)
            os.close(write)
            raise
        if pid == 0:  # the child: never returns
            os.close(read)
            _child(work, write, nice)
        os.close(write)
        self._pid, self._fd = pid, read

    def wait(self, *others: Pending[Any]) -> None:
        """Wait until this child has answered or its time is up, reading ``others``'
        answers meanwhile as they come: a child whose answer is larger than a pipe holds
        (64 KiB) cannot finish writing it until it is read."""
        group = [p for p in (self, *others) if p._pid]
        while self._pid and self._open:
            now = time.perf_counter()
            for p in group:
                if p._open and p.ends <= now:
                    p._open = False  # out of time
            live = [p for p in group if p._open]
            if not self._open or not live:
                break
            wait = min(p.ends for p in live) - now
            ready, _, _ = select.select([p._fd for p in live], [], [], max(wait, 0.0))
            for p in live:
                if p._fd in ready:
                    chunk = os.read(p._fd, 1 << 20)
                    if chunk:
                        p._chunks.append(chunk)
                    else:
                        p._open, p._complete = False, True

    def result(self) -> T | None:
        """The child's answer; None where it did not answer in time (it is killed). An
        exception the child raised is raised here."""
        if self._done is None and self._pid:
            self.wait()
            self._stop()
            if self._complete and self._chunks:
                try:
                    self._done = pickle.loads(b"".join(self._chunks))
                except Exception as exc:  # a truncated answer: the child died writing it
                    self._done = (False, ChildError(f"unreadable answer: {exc}"))
        if self._done is None:
            return None
        ok, value = self._done
        if not ok:
            raise value if isinstance(value, CotenantError) else ChildError(str(value))
        return value  # type: ignore[return-value]

    def cancel(self) -> None:
        """Kill the child now: its answer is no longer needed."""
        if self._pid:
            self._stop()
        self._done = None

    def _stop(self) -> None:
        """Kill the child without waiting for it to be torn down (a solver holding hundreds
        of MiB takes a while to free them): it is reaped later (:func:`_reap`)."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self._pid, signal.SIGKILL)
        _killed.append(self._pid)
        self._pid = 0
        os.close(self._fd)  # after the kill: a close that fails leaves no child running
        _reap()

    def __del__(self) -> None:  # an answer never asked for: do not leave the child running
        if self._pid:
            with contextlib.suppress(Exception):  # at interpreter exit os may be gone
                self._stop()


_killed: list[int] = []


def _reap() -> None:
    """Collect the killed children that have ended (never waits)."""
    for pid in list(_killed):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            _killed.remove(pid)


def _attempt(work: Callable[[], T]) -> tuple[bool, object]:
    try:
        return True, work()
    except CotenantError as exc:
        return False, exc
    except Exception as exc:
        return False, ChildError(f"{type(exc).__name__}: {exc}")


def _child(work: Callable[[], object], fd: int, nice: int) -> None:
    code = 0
    try:
        if nice:
            os.nice(nice)
        answer = _attempt(work)
        try:
            data = pickle.dumps(answer)
        except Exception as exc:
            data = pickle.dumps((False, ChildError(f"{type(exc).__name__}: {exc}")))
        with os.fdopen(fd, "wb") as out:
            out.write(data)
    except BaseException:
        code = 1
    finally:
        os._exit(code)
