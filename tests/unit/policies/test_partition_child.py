"""The forked child of :mod:`cotenant.policies.partition.child`, by value, on both sides.

The child's side (``_child``, ``_attempt``) runs here in the test's own process, on a real
pipe, with ``os._exit`` and ``os.nice`` faked: what it writes and the code it exits with are
read back. The parent's side runs real forks; where a deadline matters the module's clock
(and ``select``) are fakes, so nothing depends on how fast this machine is. A child that
sends part of an answer, or an answer of the wrong kind, writes to its pipe itself."""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace

import pytest

from cotenant.errors import InputError
from cotenant.policies.partition import child
from cotenant.policies.partition.child import GRACE_S, LOWEST_PRIORITY, ChildError, Pending

PREFIX = "a solver's child process failed: "


class Exited(BaseException):
    """``os._exit`` as faked here: the code, and no exit."""


class Clock:
    """``time`` for the module: ``perf_counter`` reads ``now``, then moves it on ``step``."""

    def __init__(self, now: float, step: float = 0.0) -> None:
        self.now, self.step = now, step

    def perf_counter(self) -> float:
        now = self.now
        self.now += self.step
        return now


class Select:
    """``select`` for the module: nothing is ever ready; the clock moves on by each timeout."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.timeouts: list[float] = []

    def select(self, read: list[int], write: list[int], other: list[int],
               timeout: float) -> tuple[list[int], list[int], list[int]]:
        self.timeouts.append(timeout)
        assert len(self.timeouts) < 10, "waits again and again"
        self.clock.now += timeout
        return [], [], []


@pytest.fixture
def exits(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The codes ``os._exit`` was called with (it raises :class:`Exited`)."""
    codes: list[object] = []

    def fake_exit(code: object) -> None:
        codes.append(code)
        raise Exited(code)

    monkeypatch.setattr(os, "_exit", fake_exit)
    return codes


@pytest.fixture
def nices(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The increments ``os.nice`` was called with (this process's priority stays)."""
    calls: list[object] = []
    monkeypatch.setattr(os, "nice", lambda n: calls.append(n) or 0)
    return calls


@pytest.fixture
def pipes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, int]]]:
    """Each pipe ``Pending`` makes, as (a copy of its read end, its write end)."""
    made: list[tuple[int, int]] = []
    real_pipe = os.pipe

    def pipe() -> tuple[int, int]:
        read, write = real_pipe()
        made.append((os.dup(read), write))
        return read, write

    monkeypatch.setattr(os, "pipe", pipe)
    yield made
    for read, _ in made:
        os.close(read)


def drain(fd: int) -> bytes:
    """What is in the pipe now, without waiting."""
    os.set_blocking(fd, False)
    try:
        return os.read(fd, 1 << 16)
    except BlockingIOError:
        return b""


def run_child(work: Callable[[], object], nice: int, exits: list[object]) -> tuple[object, bytes]:
    """``_child`` run here: its exit code and what it wrote."""
    read, write = os.pipe()
    with pytest.raises(Exited):
        child._child(work, write, nice)
    data = drain(read)
    os.close(read)
    if exits[-1] != 0:  # it may not have closed its end
        with contextlib.suppress(OSError):
            os.close(write)
    return exits[-1], data


def _bad_input() -> None:
    raise InputError("spec.yaml:3:rate", "must be >= 0")


def _leave() -> None:
    sys.exit(5)


def _sleep() -> None:
    time.sleep(30)


def test_attempt_returns_the_answer_or_the_error() -> None:
    assert child._attempt(lambda: [6, 7]) == (True, [6, 7])
    ok, error = child._attempt(_bad_input)
    assert (ok, type(error), error.where) == (False, InputError, "spec.yaml:3:rate")
    ok, error = child._attempt(lambda: 1 // 0)
    assert (ok, type(error)) == (False, ChildError)
    assert str(error) == PREFIX + "ZeroDivisionError: integer division or modulo by zero"


def test_a_child_error_is_one_line_and_comes_back_through_a_pipe_as_itself() -> None:
    error = ChildError("ValueError: a\n  long\tmessage ")
    assert error.message == PREFIX + "ValueError: a long message"
    assert str(error) == error.one_line() == error.message
    back = pickle.loads(pickle.dumps(error))
    assert (type(back), str(back), back.message) == (ChildError, str(error), error.message)


def test_the_child_sends_its_answer_and_exits_0(exits: list[object],
                                                nices: list[object]) -> None:
    code, data = run_child(lambda: [6, 7], 0, exits)
    assert (code, pickle.loads(data), nices) == (0, (True, [6, 7]), [])
    code, data = run_child(lambda: 42, LOWEST_PRIORITY, exits)
    assert (code, pickle.loads(data), nices) == (0, (True, 42), [LOWEST_PRIORITY])


def test_the_child_sends_an_answer_it_cannot_pickle_as_an_error(exits: list[object]) -> None:
    code, data = run_child(threading.Lock, 0, exits)
    ok, error = pickle.loads(data)
    assert (code, ok, type(error)) == (0, False, ChildError)
    assert str(error) == PREFIX + "TypeError: cannot pickle '_thread.lock' object"


def test_a_child_whose_work_exits_sends_nothing_and_exits_1(exits: list[object]) -> None:
    assert run_child(_leave, 0, exits) == (1, b"")


def test_the_fork_runs_the_work_in_the_child_branch_at_its_nice(
    monkeypatch: pytest.MonkeyPatch, exits: list[object], nices: list[object],
    pipes: list[tuple[int, int]],
) -> None:
    """``fork`` answering 0 makes this process the child: it runs the work and exits."""
    monkeypatch.setattr(os, "fork", lambda: 0)
    with pytest.raises(Exited):
        Pending(lambda: "default", 5.0)
    with pytest.raises(Exited):
        Pending(lambda: "lowest", 5.0, nice=LOWEST_PRIORITY)
    assert (exits, nices) == ([0, 0], [LOWEST_PRIORITY])
    assert [pickle.loads(drain(read)) for read, _ in pipes] == [(True, "default"),
                                                               (True, "lowest")]


def test_a_real_child_runs_elsewhere_at_its_nice() -> None:
    here = os.nice(0)
    assert Pending(os.getpid, 10.0).result() not in (None, os.getpid())
    assert Pending(lambda: os.nice(0), 10.0).result() == here
    assert Pending(lambda: os.nice(0), 10.0, nice=3).result() == min(here + 3, 19)


def test_without_fork_the_work_runs_here_by_the_same_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(child, "CAN_FORK", False)
    monkeypatch.setattr(child, "time", Clock(100.0))
    pending = Pending(os.getpid, 2.0)
    assert pending.ends == 100.0 + 2.0 + GRACE_S
    assert Pending(os.getpid, 0.25).ends == 100.0 + 0.25 + GRACE_S
    assert Pending(os.getpid, -5.0).ends == 100.0 + 0.0 + GRACE_S
    pending.wait()
    assert pending.result() == os.getpid()
    with pytest.raises(ChildError, match="ZeroDivisionError"):
        Pending(lambda: 1 // 0, 1.0).result()
    pending.cancel()
    assert pending.result() is None


def test_wait_sleeps_to_the_nearest_deadline_and_ends_at_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock(100.0)
    fake = Select(clock)
    monkeypatch.setattr(child, "time", clock)
    monkeypatch.setattr(child, "select", fake)
    gone = Pending(_sleep, 5.0)
    first, later = Pending(_sleep, 0.2), Pending(_sleep, 1.0)
    try:
        gone.cancel()
        gone.wait(later)  # it has its answer (none): nothing to wait for
        assert fake.timeouts == []
        first.wait(later)  # until its own deadline, not later's
        assert fake.timeouts == pytest.approx([0.25])
        assert clock.now == first.ends
        assert first.result() is None
        assert gone.result() is None
    finally:
        for pending in (gone, first, later):
            pending.cancel()


def test_an_answer_cut_off_at_the_deadline_is_no_answer(
    monkeypatch: pytest.MonkeyPatch, pipes: list[tuple[int, int]],
) -> None:
    """The child sent part of its answer; the clock moves on 1 s a reading, past the
    deadline once that part is read."""
    def part() -> None:
        os.write(pipes[-1][1], pickle.dumps((True, "x" * 100))[:20])
        time.sleep(30)

    monkeypatch.setattr(child, "time", Clock(100.0, step=1.0))
    pending = Pending(part, 1.0)
    assert select.select([pending._fd], [], [], 10.0)[0]  # the part is there to read
    assert pending.result() is None


def test_a_child_that_dies_while_answering_is_a_one_line_error(
    pipes: list[tuple[int, int]],
) -> None:
    def part() -> None:
        os.write(pipes[-1][1], pickle.dumps((True, "x" * 100))[:20])
        os._exit(0)

    with pytest.raises(ChildError) as info:
        Pending(part, 10.0).result()
    assert str(info.value).startswith(PREFIX + "unreadable answer: ")  # pickle's words
    assert Pending(lambda: os._exit(3), 10.0).result() is None  # it died with no answer


def test_an_error_that_is_not_ours_comes_back_as_a_child_error(
    pipes: list[tuple[int, int]],
) -> None:
    def foreign() -> None:
        os.write(pipes[-1][1], pickle.dumps((False, ValueError("bad\n  thing"))))
        os._exit(0)

    with pytest.raises(ChildError) as info:
        Pending(foreign, 10.0).result()
    assert str(info.value) == PREFIX + "bad thing"


def test_a_child_reaped_elsewhere_still_answers_and_leaves_no_record() -> None:
    """As where SIGCHLD is ignored: the child is gone before it is killed."""
    pending = Pending(lambda: "answer", 10.0)
    pid = pending._pid
    os.waitpid(pid, 0)
    assert pending.result() == "answer"
    assert pid not in child._killed


def kills(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The signals ``os.kill`` sends (it still sends them)."""
    sent: list[tuple[int, int]] = []
    real_kill = os.kill

    def kill(pid: int, sig: int) -> None:
        sent.append((pid, sig))
        real_kill(pid, sig)

    monkeypatch.setattr(os, "kill", kill)
    return sent


def test_cancel_kills_at_once_and_the_child_is_reaped_once_ended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent = kills(monkeypatch)
    pending = Pending(_sleep, 10.0)
    pid = pending._pid
    pending.cancel()
    assert (sent, pending.result()) == ([(pid, signal.SIGKILL)], None)
    until = time.monotonic() + 10.0  # generous: its ending takes the kernel a moment
    while pid in child._killed and time.monotonic() < until:
        time.sleep(0.01)
        child._reap()
    assert pid not in child._killed
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def test_an_answer_never_asked_for_is_killed_when_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent = kills(monkeypatch)
    pending = Pending(_sleep, 10.0)
    pid = pending._pid
    del pending
    gc.collect()  # may also collect another test's Pending: only this one's kills count
    assert [s for s in sent if s[0] == pid] == [(pid, signal.SIGKILL)]


def test_dropping_one_at_interpreter_exit_raises_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pending = Pending(_sleep, 10.0)
    with monkeypatch.context() as patch:
        patch.setattr(child, "os", SimpleNamespace())  # os already torn down
        pending.__del__()
    pending.cancel()
    assert pending.result() is None


def test_a_fork_that_fails_leaves_no_pipe_open(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[int] = []
    real_pipe = os.pipe

    def pipe() -> tuple[int, int]:
        read, write = real_pipe()
        made.extend((read, write))
        return read, write

    def fork() -> int:
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "pipe", pipe)
    monkeypatch.setattr(os, "fork", fork)
    with pytest.raises(OSError, match="temporarily unavailable"):
        Pending(lambda: 1, 1.0)
    assert len(made) == 2
    for fd in made:
        with pytest.raises(OSError, match="Bad file descriptor"):
            os.fstat(fd)


def test_a_close_that_fails_still_kills_the_child(monkeypatch: pytest.MonkeyPatch) -> None:
    sent = kills(monkeypatch)
    pending = Pending(_sleep, 10.0)
    pid, fd = pending._pid, pending._fd
    real_close, failing = os.close, [True]

    def close(n: int) -> None:
        if failing:
            raise OSError(9, "Bad file descriptor")
        real_close(n)

    monkeypatch.setattr(os, "close", close)
    with pytest.raises(OSError, match="Bad file descriptor"):
        pending.cancel()
    failing.clear()
    os.close(fd)
    assert [s for s in sent if s[0] == pid] == [(pid, signal.SIGKILL)]
    assert pending._pid == 0
