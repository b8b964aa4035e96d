"""The wrapper every real workload runs under, so that its exit status outlives the agent.

``python -I trampoline.py EXIT_FILE ARGV...`` starts ``ARGV`` (no shell) as its child, waits
for it and writes how it ended to ``EXIT_FILE`` (``exit N`` or ``signal N``; written to a
temporary file, then renamed, mode 0600), then ends the same way (the same code, or killed by
the same signal), so a parent that reaps it sees what the workload did. Where the file cannot
be written (a full disk, its directory removed) it still ends as its child did, and puts
the status in one line on stderr (the workload's log) instead, for an agent to read. An
agent that starts after the one that spawned the workload died cannot reap it: it reads the
file (or that line) instead (:mod:`.local`), so a job that exited 0 while no agent ran is
``completed``, not run again.

The agent signals every process of a workload (its cgroup, group or token), the workload
itself included; the wrapper catches SIGTERM, SIGINT and SIGHUP (with a handler, which the
child does not inherit) so that it is still there to write the status, and passes each on
to its child: the agent's list of the workload's processes may predate the child (a stop
while the wrapper starts it), so the wrapper cannot count on the child having it too. The
agent starts it with those signals blocked (:func:`blocked`), so that one sent while it
starts up waits for the handler; one that came before the child existed is passed on to it
once it does. It runs
by path with ``-I`` and imports nothing of cotenant: it starts in tens of milliseconds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

_IGNORED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_early: list[int] = []  # signals that came before the child existed
_child: subprocess.Popen[bytes] | None = None


def _note(signum: int, _frame: object) -> None:  # a handler is given an int
    """Pass the signal on to the child (a second copy of one the agent sent it too is
    harmless; a stop it missed would be lost); before the child exists, keep it for it."""
    if _child is None:
        _early.append(signum)
    else:
        with contextlib.suppress(OSError):
            _child.send_signal(signum)  # a no-op once it has been reaped


@contextlib.contextmanager
def blocked() -> Iterator[None]:
    """The calling thread with :data:`_IGNORED` blocked: a process it starts inherits the
    mask, and the wrapper unblocks them once its handler is in place."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _IGNORED)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


LOST_PREFIX = "cotenant-trampoline: exit status not written"


def write_status(path: str, text: str) -> bool:
    """Write ``text`` to ``path`` (via ``path.tmp``); False where it cannot be written (a
    full disk, a removed directory): then it says so on stderr (the workload's log), with
    the status, and leaves no temporary file behind. The wrapper's own exit still carries
    the child's status either way."""
    temp = f"{path}.tmp"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.replace(temp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(f"{LOST_PREFIX} ({exc.strerror or exc}): {text}\n")
            sys.stderr.flush()
        return False
    return True


def main(args: list[str]) -> int:
    if len(args) < 2:
        sys.stderr.write("trampoline: usage: EXIT_FILE ARGV...\n")
        return 2
    global _child  # noqa: PLW0603 - the handler's view of the child
    path, argv = args[0], args[1:]
    for signum in _IGNORED:
        signal.signal(signum, _note)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _IGNORED)  # the child starts unblocked
    try:
        child = subprocess.Popen(argv, shell=False)
    except OSError as exc:
        sys.stderr.write(f"cannot start {argv[0]!r}: {exc.strerror or exc}\n")
        write_status(path, "exit 127")
        return 127
    _child = child
    for early in _early:  # a stop that came while it started
        with contextlib.suppress(OSError):
            child.send_signal(early)
    code = child.wait()
    write_status(path, f"signal {-code}" if code < 0 else f"exit {code}")
    if code < 0:
        for signum in _IGNORED:
            signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
