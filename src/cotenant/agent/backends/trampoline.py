"""The wrapper every real workload runs under, so that its exit status outlives the agent.

``python -I trampoline.py EXIT_FILE ARGV...`` starts ``ARGV`` (no shell) as its child, waits
for it and writes how it ended to ``EXIT_FILE`` (``exit N`` or ``signal N``; written to a
temporary file, then renamed, mode 0600), then ends the same way (the same code, or killed by
the same signal), so a parent that reaps it sees what the workload did. An agent that starts
after the one that spawned the workload died cannot reap it: it reads the file instead
(:mod:`.local`), so a job that exited 0 while no agent ran is ``completed``, not run again.

The agent signals every process of a workload (its cgroup, group or token), the workload
itself included; the wrapper ignores SIGTERM, SIGINT and SIGHUP (with a handler, which the
child does not inherit) so that it is still there to write the status. It runs by path
with ``-I`` and imports nothing of cotenant: it starts in tens of milliseconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

_IGNORED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _note(*_: object) -> None:
    """The child has the signal too: wait for it to end."""


def write_status(path: str, text: str) -> None:
    temp = f"{path}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.replace(temp, path)


def main(args: list[str]) -> int:
    if len(args) < 2:
        sys.stderr.write("trampoline: usage: EXIT_FILE ARGV...\n")
        return 2
    path, argv = args[0], args[1:]
    for signum in _IGNORED:
        signal.signal(signum, _note)
    try:
        child = subprocess.Popen(argv, shell=False)
    except OSError as exc:
        sys.stderr.write(f"cannot start {argv[0]!r}: {exc.strerror or exc}\n")
        write_status(path, "exit 127")
        return 127
    code = child.wait()
    write_status(path, f"signal {-code}" if code < 0 else f"exit {code}")
    if code < 0:
        for signum in _IGNORED:
            signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
