"""The runtime across real processes: an HP process's lease on the board holds a BE gate in
another, the bound and the rate floor hold on a real clock, and an HP process SIGKILLed
while it holds the lease never leaves BE held (the lease runs out by itself)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import cotenant
from cotenant.runtime import Board, BoardError, Gate, GateSettings, HpLease

SRC = str(Path(cotenant.__file__).resolve().parent.parent)
HP = """
import sys, time
sys.path.insert(0, {src!r})
from cotenant.runtime import Board, HpLease
lease = HpLease(Board({board!r}), {lease_s!r})
lease.touch()
print(lease.slot, flush=True)
while True:  # busy: renew the lease all the time
    lease.touch()
    time.sleep(0.001)
"""
SLACK_S = 1.0
"""Scheduling slack on a loaded machine (two cores, shared): the bounds it pads are told from
what they bound by far more (an HP process renewing forever, a 30 s bound)."""


@pytest.fixture
def board(tmp_path: Path) -> Iterator[Board]:
    b = Board(tmp_path / "gpu0.board")
    yield b
    b.close()


def start_hp(board: Board, lease_s: float) -> subprocess.Popen[str]:
    code = HP.format(src=SRC, board=str(board.path), lease_s=lease_s)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip().isdigit()  # it holds a slot and renews
    return proc


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)
    if proc.stdout is not None:
        proc.stdout.close()


def test_a_busy_hp_process_holds_be_for_the_bound_then_be_runs(board: Board) -> None:
    settings = GateSettings(lease_s=0.5, max_hold_s=0.2, floor=0.5)
    hp = start_hp(board, settings.lease_s)  # renews every ms: busy as long as it lives
    try:
        gate = Gate(board, settings)
        start = time.monotonic()
        waited = gate.check()
        assert 0.2 <= waited <= 0.2 + SLACK_S
        assert gate.stats.bounded == 1
        assert board.hp_until_ns() > time.monotonic_ns()  # HP still busy: the bound let go
        assert gate.check() == 0.0  # the floor's credit: as long as it waited
        assert time.monotonic() - start < 0.2 + SLACK_S
    finally:
        stop(hp)


def test_the_rate_floor_holds_beside_a_real_busy_hp_process(board: Board) -> None:
    settings = GateSettings(lease_s=0.5, max_hold_s=0.05, floor=0.25)
    hp = start_hp(board, settings.lease_s)
    try:
        gate = Gate(board, settings)
        start, ran = time.monotonic(), 0.0
        while time.monotonic() - start < 1.5:
            gate.check()
            t = time.monotonic()
            while time.monotonic() - t < 0.002:  # a 2 ms BE operator
                pass
            ran += time.monotonic() - t
        assert gate.stats.waits > 5
        assert ran / (time.monotonic() - start) >= 0.25 * 0.9
    finally:
        stop(hp)


def test_a_sigkilled_hp_process_never_leaves_be_held(board: Board) -> None:
    settings = GateSettings(lease_s=0.1, max_hold_s=30.0)
    hp = start_hp(board, settings.lease_s)
    gate = Gate(board, settings)
    try:
        assert board.hp_until_ns() > time.monotonic_ns()
        os.kill(hp.pid, signal.SIGKILL)  # dies holding the lease, no cleanup of any kind
        hp.wait(timeout=10)
        waited = gate.check()
        assert waited <= settings.lease_s + SLACK_S  # the lease ran out: not the 30 s bound
        assert gate.stats.bounded == 0
        assert gate.check() == 0.0
    finally:
        stop(hp)
    # the dead process's slot is free again
    assert HpLease(board, 0.1).slot == 0


def test_an_idle_hp_process_keeps_its_slot_and_holds_nothing(board: Board) -> None:
    first = HpLease(board, 0.05)
    first.touch()
    first.release()
    other = HpLease(board, 0.05, pid=os.getppid())  # another live process
    assert other.slot != first.slot
    gate = Gate(board, GateSettings())
    assert gate.check() == 0.0


def test_a_file_that_is_not_a_board_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.board"
    path.write_bytes(b"hello")
    with pytest.raises(BoardError, match="not a priority board"):
        Board(path)
    path.write_bytes(bytes(Board(tmp_path / "ok.board").path.stat().st_size))
    with pytest.raises(BoardError, match="bad magic"):
        Board(path)


def test_the_board_holds_slots_for_many_hp_processes_then_refuses(board: Board) -> None:
    from cotenant.runtime.lease import SLOTS  # noqa: PLC0415

    now = time.monotonic_ns()
    slots = set()
    for i in range(SLOTS):  # pids of no process: a slot is theirs while their lease runs
        slot = board.claim(10**7 + i, now)
        board.renew(slot, now + 50 * 10**9)  # within the longest lease
        slots.add(slot)
    assert len(slots) == SLOTS
    with pytest.raises(BoardError, match="all 32 HP slots are leased"):
        board.claim(os.getppid(), now)


def test_a_stale_slot_from_before_a_reboot_hides_no_live_lease(board: Board) -> None:
    now = time.monotonic_ns()
    board.renew(board.claim(10**7, now), now + 10 * 86400 * 10**9)  # beyond any lease
    live = HpLease(board, 5.0, pid=10**7 + 1)
    live.touch()
    gate = Gate(board, GateSettings(max_hold_s=0.05))
    assert gate.check() >= 0.05  # held by the live lease up to the bound
    assert gate.stats.bounded == 1


def test_a_stale_slot_is_claimed_again(board: Board) -> None:
    from cotenant.runtime.lease import SLOTS  # noqa: PLC0415

    now = time.monotonic_ns()
    for i in range(SLOTS):  # every slot held by a live-looking pid...
        board.renew(board.claim(10**7 + i, now), now + 50 * 10**9)
    board.renew(5, now + 10**15)  # ...slot 5's expiry from before a reboot
    assert board.claim(os.getppid(), now) == 5
    assert board.hp_until_ns() == now + 50 * 10**9  # the stale expiry went with its slot


def test_a_new_board_is_writable_by_every_users_workload_whatever_the_umask(
        tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        Board(tmp_path / "gpu0.board").close()
    finally:
        os.umask(old)
    assert (tmp_path / "gpu0.board").stat().st_mode & 0o777 == 0o666
