"""Executors: how the independent runs of a sweep are spread, and what one that fails leaves.

A sweep is a function ``fn(shared, item)`` over items, where ``shared`` (a cluster and its
pods, a built workload) is the same for every run: an executor sends it once per worker, not
once per run. :class:`SerialExecutor` runs in this process, :class:`LocalExecutor` over a
process pool; the Ray executor (:mod:`cotenant.integrations.ray`) over a Ray cluster. Each
run is deterministic in its item, so every executor gives the same results, bit for bit,
whatever the number of workers and the order they finish in.

A run that raises does not stop the others: it comes back as a :class:`RunFailure` (its
index, the error on one line, the traceback) in the place of its result, and ``on_done`` is
told of it as it is of a result, as each run finishes. An interrupt (Ctrl-C) stops the
local pool at once: its queued runs are cancelled and its workers ended, and the
``KeyboardInterrupt`` goes on to the caller, which has had every finished run through
``on_done``.
"""

from __future__ import annotations

import os
import threading
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import BrokenExecutor, Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from cotenant.errors import CotenantError

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class RunFailure:
    """A run that raised: where it was in the sweep, the error on one line, the traceback."""

    index: int
    error: str
    detail: str = ""


class SweepError(CotenantError):
    """Some runs of a sweep failed (the others finished); each named with its settings."""

    exit_code = 1

    def __init__(self, failures: Sequence[tuple[str, RunFailure]], total: int) -> None:
        shown = "; ".join(f"{where}: {f.error}" for where, f in failures[:3])
        more = f" (and {len(failures) - 3} more)" if len(failures) > 3 else ""
        super().__init__(f"{len(failures)} of {total} runs failed: {shown}{more}")
        self.failures = tuple(f for _, f in failures)


Done = Callable[[int, Any], None]
"""Told of each run as it finishes: its index and its result or :class:`RunFailure`."""


class Executor(Protocol):
    """Runs ``fn(shared, item)`` for every item; results (or failures) in item order."""

    @property
    def workers(self) -> int:
        """Runs at once (for the count line before a sweep)."""
        ...

    def map(self, fn: Callable[[Any, T], R], shared: object, items: Sequence[T], *,
            order: Sequence[int] | None = None,
            on_done: Done | None = None) -> list[R | RunFailure]:
        """Every run; ``order`` (indices) is the order to start them in (default: as given)."""
        ...


def guarded(fn: Callable[[Any, T], R], shared: object, item: T,
            index: int) -> R | RunFailure:
    """``fn(shared, item)``, or the :class:`RunFailure` it raised (run where the work runs,
    so a failure travels back as data, whatever the executor)."""
    try:
        return fn(shared, item)
    except Exception as exc:  # one run's failure must not stop the sweep
        return RunFailure(index, one_line(exc), traceback.format_exc())


def one_line(exc: BaseException) -> str:
    if isinstance(exc, CotenantError):
        return exc.one_line()
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def start_order(n: int, order: Sequence[int] | None) -> list[int]:
    """``order`` checked to be a permutation of ``range(n)``; that range where None."""
    if order is None:
        return list(range(n))
    out = list(order)
    if sorted(out) != list(range(n)):
        raise CotenantError(f"a sweep's start order must name each of its {n} runs once")
    return out


class SerialExecutor:
    """Every run in this process, one after the other."""

    workers = 1

    def map(self, fn: Callable[[Any, T], R], shared: object, items: Sequence[T], *,
            order: Sequence[int] | None = None,
            on_done: Done | None = None) -> list[R | RunFailure]:
        out: dict[int, R | RunFailure] = {}
        for i in start_order(len(items), order):
            out[i] = guarded(fn, shared, items[i], i)
            if on_done is not None:
                on_done(i, out[i])
        return [out[i] for i in range(len(items))]


_SHARED: dict[str, object] = {}


def _install(shared: object) -> None:
    _SHARED["shared"] = shared


def _pooled(fn: Callable[[Any, T], R], item: T, index: int) -> R | RunFailure:
    return guarded(fn, _SHARED["shared"], item, index)


class LocalExecutor:
    """A pool of ``workers`` processes on this machine (default: one per CPU); ``shared`` is
    sent to each worker once, when it starts."""

    def __init__(self, workers: int | None = None) -> None:
        self._workers = max(1, workers or os.cpu_count() or 1)

    @property
    def workers(self) -> int:
        return self._workers

    def map(self, fn: Callable[[Any, T], R], shared: object, items: Sequence[T], *,
            order: Sequence[int] | None = None,
            on_done: Done | None = None) -> list[R | RunFailure]:
        sequence = start_order(len(items), order)
        workers = min(self._workers, len(items))
        if workers <= 1:
            return SerialExecutor().map(fn, shared, items, order=sequence, on_done=on_done)
        out: dict[int, R | RunFailure] = {}
        pool = ProcessPoolExecutor(workers, initializer=_install, initargs=(shared,))
        futures: dict[Future[R | RunFailure], int] = {}
        try:
            for i in sequence:
                futures[pool.submit(_pooled, fn, items[i], i)] = i
            for future in as_completed(futures):
                i = futures[future]
                try:
                    out[i] = future.result()
                except (BrokenExecutor, OSError) as exc:  # a worker died (killed, no memory)
                    out[i] = RunFailure(i, f"worker process lost: {one_line(exc)}")
                if on_done is not None:
                    on_done(i, out[i])
        except BaseException:  # Ctrl-C, or on_done raised: the queued runs must not go on
            abandon(pool)
            raise
        pool.shutdown(wait=True)
        return [out[i] for i in range(len(items))]


def abandon(pool: ProcessPoolExecutor) -> None:
    """Stop ``pool`` now: its queued runs are cancelled and its workers terminated (a run
    under way is cut short), where ``shutdown(wait=True)`` would finish every queued run."""
    # no public handle on either; the manager thread is joined so that it has closed its
    # pipes before the interpreter's exit hook writes to them
    workers = list((pool._processes or {}).values())
    manager: threading.Thread | None = getattr(pool, "_executor_manager_thread", None)
    for process in workers:  # first: ended even should the pool's own shutdown block
        if process.is_alive():
            process.terminate()
    pool.shutdown(wait=False, cancel_futures=True)
    for process in workers:
        process.join(timeout=5)
    if manager is not None:
        manager.join(timeout=10)


def local_executor(workers: int | None = None) -> Executor:
    """The default: a process pool of ``workers`` (one per CPU), in-process for one."""
    chosen = LocalExecutor(workers)
    return SerialExecutor() if chosen.workers <= 1 else chosen


def results(outcomes: Sequence[R | RunFailure], labels: Sequence[str]) -> list[R]:
    """The results, or a :class:`SweepError` naming each failed run by its label."""
    failed = [(labels[o.index], o) for o in outcomes if isinstance(o, RunFailure)]
    if failed:
        raise SweepError(failed, len(outcomes))
    return [o for o in outcomes if not isinstance(o, RunFailure)]
