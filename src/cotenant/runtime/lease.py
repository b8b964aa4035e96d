"""The shared-memory board one GPU's processes meet on: HP leases, the agent's hold, BE beats.

One small file per GPU, mapped into every participating process (``mmap`` of a file in the
agent's state directory: the pages are shared through the page cache, so a store by one
process is seen by the next load of another). Its layout, all little-endian 8-byte integers:

* a header: a magic word and version, the agent's *hold* (no BE operator starts before this
  monotonic time, ns), and the BE side's last *beat* (monotonic ns) and pid, which tell the
  agent that a BE process on this GPU runs the runtime (so a pause can go through it);
* ``SLOTS`` HP lease slots, the pids first, then the expiries (monotonic ns).

An HP process claims a slot (under ``flock``, the only locked step) and from then on only
stores into it: each time it works it moves its slot's expiry to ``now + lease``. The BE side
reads every expiry in one unpack and is held while any lies in the future. A lease is never a
latch: an HP process that crashes, hangs or is SIGKILLed stops renewing, and its lease runs
out ``lease`` later whatever state it died in. Every time here is ``time.monotonic_ns`` -
``CLOCK_MONOTONIC``, which no wall-clock step moves: one clock for every process of a Linux
machine that shares the agent's time namespace (a process in another time namespace reads
it with an offset, and the board's times are then wrong for it). A slot whose lease ran out
and whose holder is gone is free to claim again.

Each field is one aligned 8-byte store by its single writer (the slot's owner, the agent, the
BE process); a reader that raced a store sees the old or the new value, and either is a state
the board was in.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import struct
import time
from collections.abc import Iterator
from pathlib import Path

from .gate import MAX_LEASE_S

MAGIC = 0x31304F4952505443  # b"CTPRIO01", little-endian
SLOTS = 32
"""HP processes one GPU's board holds at once (a serving process and its workers)."""
_HEADER = struct.Struct("<qqqq")  # magic, hold_until_ns, be_beat_ns, be_pid
_PIDS = struct.Struct(f"<{SLOTS}q")
_EXPIRIES = struct.Struct(f"<{SLOTS}q")
_PIDS_AT = _HEADER.size
_EXPIRIES_AT = _PIDS_AT + _PIDS.size
SIZE = _EXPIRIES_AT + _EXPIRIES.size
_HOLD_AT, _BEAT_AT, _BE_PID_AT = 8, 16, 24
_Q = struct.Struct("<q")
_MAX_LEASE_NS = int(MAX_LEASE_S * 1_000_000_000)


class BoardError(Exception):
    """The board cannot be used: not a board file, or every slot is leased."""


class Board:
    """One GPU's board, mapped from ``path`` (created, sized and stamped if new)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            with _locked(fd):
                size = os.fstat(fd).st_size
                if size == 0:  # new: every user's workload may take a lease (not the umask's)
                    os.fchmod(fd, 0o666)
                    os.ftruncate(fd, SIZE)
                    os.pwrite(fd, _Q.pack(MAGIC), 0)
                elif size != SIZE:
                    raise BoardError(f"{self.path}: {size} bytes, not a priority board "
                                     f"({SIZE} bytes)")
                self._map = mmap.mmap(fd, SIZE)
                stat = os.fstat(fd)
                self._file = (stat.st_dev, stat.st_ino)
        finally:
            os.close(fd)
        if _Q.unpack_from(self._map, 0)[0] != MAGIC:
            self._map.close()
            raise BoardError(f"{self.path}: not a priority board (bad magic)")

    def close(self) -> None:
        self._map.close()

    # --- read by the BE side ----------------------------------------------------------------

    def hp_until_ns(self, before_ns: int | None = None) -> int:
        """The latest HP lease expiry (monotonic ns; 0: none), of those up to ``before_ns``
        where given: a slot whose expiry lies beyond any lease (a time from before a reboot)
        is filtered out slot by slot, so it cannot hide the live leases beside it."""
        expiries = _EXPIRIES.unpack_from(self._map, _EXPIRIES_AT)
        return int(max((e for e in expiries if before_ns is None or e <= before_ns), default=0))

    def hold_until_ns(self) -> int:
        """The agent's hold: no BE operator starts before this (monotonic ns)."""
        return int(_Q.unpack_from(self._map, _HOLD_AT)[0])

    def beat(self, pid: int, now_ns: int) -> None:
        """The BE side's sign of life: a runtime-gated process ``pid`` runs here."""
        _Q.pack_into(self._map, _BE_PID_AT, pid)
        _Q.pack_into(self._map, _BEAT_AT, now_ns)

    # --- written by the agent ---------------------------------------------------------------

    def set_hold(self, until_ns: int) -> None:
        _Q.pack_into(self._map, _HOLD_AT, until_ns)

    def reset(self, now_ns: int, max_lease_ns: int) -> None:
        """Start afresh (the agent opens the board): no hold, no beat, and no lease that
        lies further ahead than any lease can (a time from before a reboot)."""
        self.set_hold(0)
        _Q.pack_into(self._map, _BEAT_AT, 0)
        expiries = _EXPIRIES.unpack_from(self._map, _EXPIRIES_AT)
        for slot, expiry in enumerate(expiries):
            if expiry - now_ns > max_lease_ns:
                self.renew(slot, 0)

    def last_beat_ns(self) -> int:
        return int(_Q.unpack_from(self._map, _BEAT_AT)[0])

    # --- the HP side's slots ----------------------------------------------------------------

    def claim(self, pid: int, now_ns: int) -> int:
        """A slot for HP process ``pid``: its own if it holds one, else a free one - never
        used, whose lease has run out and whose holder is gone (a crashed HP process's), or
        whose expiry lies beyond any lease (:data:`~.gate.MAX_LEASE_S`: from before a reboot).
        The path must still be the file this board mapped (:class:`BoardError` if it was
        replaced; ``OSError`` if it is gone or cannot be opened)."""
        fd = os.open(self.path, os.O_RDWR)
        try:
            stat = os.fstat(fd)
            if (stat.st_dev, stat.st_ino) != self._file:  # the lock would be another file's
                raise BoardError(f"{self.path}: the board was replaced since this process "
                                 "mapped it (a new agent's board is not the one its BE "
                                 "side reads)")
            with _locked(fd):
                pids = _PIDS.unpack_from(self._map, _PIDS_AT)
                expiries = _EXPIRIES.unpack_from(self._map, _EXPIRIES_AT)
                if pid in pids:
                    return pids.index(pid)
                for slot, (holder, expiry) in enumerate(zip(pids, expiries, strict=True)):
                    stale = expiry - now_ns > _MAX_LEASE_NS  # before a reboot: no holder
                    if stale or (expiry <= now_ns and not _alive(holder)):
                        self.renew(slot, 0)
                        _Q.pack_into(self._map, _PIDS_AT + 8 * slot, pid)
                        return slot
        finally:
            os.close(fd)
        raise BoardError(f"{self.path}: all {SLOTS} HP slots are leased")

    def renew(self, slot: int, until_ns: int) -> None:
        """Slot ``slot``'s lease now runs until ``until_ns`` (0: released)."""
        _Q.pack_into(self._map, _EXPIRIES_AT + 8 * slot, until_ns)


class HpLease:
    """An HP process's lease on its GPU's board: :meth:`touch` whenever it works."""

    def __init__(self, board: Board, lease_s: float, *, pid: int | None = None) -> None:
        self.board = board
        self.lease_ns = int(lease_s * 1e9)
        self.pid = os.getpid() if pid is None else pid
        self.slot = board.claim(self.pid, time.monotonic_ns())
        self._until = 0

    def touch(self) -> None:
        """HP works now: BE is held until ``lease`` from now (one store, and only when the
        expiry moves by more than a twentieth of the lease, so a busy loop costs little)."""
        until = time.monotonic_ns() + self.lease_ns
        if until - self._until > self.lease_ns // 20:
            self._until = until
            self.board.renew(self.slot, until)

    def release(self) -> None:
        """HP is idle now: BE need not wait out the lease."""
        self._until = 0
        self.board.renew(self.slot, 0)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: alive
        return True
    return True


@contextlib.contextmanager
def _locked(fd: int) -> Iterator[None]:
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
