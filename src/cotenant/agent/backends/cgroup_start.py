"""Start a workload inside its own cgroup v2 from its first instruction, and find the root
its cgroups go below (:mod:`.cgroups` says why a cgroup per workload).

The root: by default ``cotenant-workloads-<hash of the state directory>`` inside the agent's
own cgroup (the subtree that systemd's ``Delegate=yes`` hands a service), so that two agents
run from one cgroup never share one; ``--cgroups PATH`` names another, which must be the
agent's alone (at start it thaws the workload cgroups there and removes the empty ones that
it does not know); ``--cgroups off`` keeps to the token.

The start: the workload starts through a small Python trampoline, which moves itself into
the cgroup and then ``exec``s the argv: its first instruction already runs inside (moving
the child after ``fork`` would race with its own forks, and ``preexec_fn`` is unsafe in a
threaded agent). The trampoline runs in the agent's environment, isolated (``-I -S``), and
gets the workload's environment through a pipe, so it passes to the workload byte for byte
(a shell would drop names that are not identifiers, and reset ``IFS``), and a
``PYTHONHOME`` meant for the workload cannot break it. A start cut short once the
trampoline runs (an interrupt) kills it and everything in its cgroup: a workload that the
agent has not recorded must not go on running.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cotenant.agent.backends.cgroups import (
    DEFAULT_NAME,
    kill,
    own_dir,
    procs,
    remove,
)
from cotenant.errors import InputError, TemporaryError

# argv: the cgroup, the fd its environment comes on, the fd to report a failure on (closed
# by a successful exec), then the workload's argv, exec'd as given (PATH looked up in its
# own environment, argv[0] kept), as Popen would do it
_JOIN = """
import os, sys
cgroup, env_fd, err_fd, argv = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
os.set_inheritable(err_fd, False)
data = b""
while chunk := os.read(env_fd, 65536):
    data += chunk
os.close(env_fd)
env = dict(item.split(b"=", 1) for item in data.split(b"\\0") if item)
try:
    with open(os.path.join(cgroup, "cgroup.procs"), "w") as procs:
        procs.write("0")
except OSError as exc:
    os.write(err_fd, b"join %d " % exc.errno + os.fsencode(exc.strerror or ""))
    sys.exit(126)
try:
    os.execvpe(argv[0], argv, env)
except Exception as exc:
    text = str(getattr(exc, "strerror", None) or exc).encode("utf-8", "replace")
    os.write(err_fd, b"exec %d " % (getattr(exc, "errno", None) or 0) + text)
    sys.exit(127)
"""


def usable(root: Path) -> bool:
    """Whether the agent can run a process in a cgroup below ``root``: it makes one, starts
    the trampoline into it, and removes it. A missing ``root`` is made only inside a cgroup
    (and removed again if it is no use)."""
    made = not root.is_dir()
    probe = root / f"probe-{secrets.token_hex(4)}"
    try:
        if made:
            if not (root.parent / "cgroup.procs").is_file():
                return False
            root.mkdir()
        probe.mkdir()
    except OSError:
        return False
    ok = False
    try:
        ok = (probe / "cgroup.freeze").exists() and popen(
            [sys.executable, "-I", "-S", "-c", ""], dict(os.environ), probe,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).wait(30) == 0
    except (OSError, ValueError, subprocess.SubprocessError, TemporaryError):
        pass
    finally:
        if not ok:  # a probe still running (past its 30 s) goes with its cgroup
            kill(probe)
        remove(probe)
    if made and not ok:
        with contextlib.suppress(OSError):
            root.rmdir()
    return ok


def default_name(state_dir: Path) -> str:
    """The default root's name for the agent of ``state_dir``: ``cotenant-workloads-`` and
    8 hex digits of the state directory's path, so that two agents run from one cgroup (a
    login shell, a test) never share a root, whose cgroups each would thaw and tidy as its
    own."""
    digest = hashlib.sha256(os.fsencode(state_dir.absolute())).hexdigest()[:8]
    return f"{DEFAULT_NAME}-{digest}"


def open_root(spec: str, state_dir: Path) -> Path | None:
    """The root for ``--cgroups``: ``off`` -> None; ``auto`` -> the default (see
    :func:`default_name`) where it is usable, else None (the token alone); a path -> that
    path, which must be usable, and the agent's alone."""
    if spec == "off":
        return None
    if spec == "auto":
        own = own_dir()
        if own is None:
            return None
        root = own / default_name(state_dir)
        return root if usable(root) else None
    root = Path(spec).absolute()
    if not usable(root):
        raise InputError("--cgroups", f"{spec}: cannot run a process in a cgroup v2 made "
                         "there", hint="give a directory inside a cgroup v2 mount that this "
                         "user may write, whose processes it may move (as root, or systemd's "
                         "Delegate=yes), or 'auto' or 'off'")
    return root


def environ_bytes(env: Mapping[str, str]) -> bytes:
    """``env`` as the trampoline reads it: ``NAME=value`` items, each ended by a NUL. A
    :class:`UnicodeEncodeError` for a string the file-system encoding cannot carry (a lone
    surrogate, say): the spec refuses those."""
    return b"".join(os.fsencode(k) + b"=" + os.fsencode(v) + b"\0" for k, v in env.items())


def popen(argv: Sequence[str], env: Mapping[str, str], cgroup: Path,
          **kwargs: Any) -> subprocess.Popen[bytes]:
    """Start ``argv`` with environment ``env`` inside ``cgroup`` from its first instruction
    (see the module docstring); ``kwargs`` go to :class:`subprocess.Popen`. It returns once
    the workload's program runs, as :class:`subprocess.Popen` does; an ``exec`` that fails
    raises its :class:`OSError` (as Popen's would), one that could not join the cgroup a
    :class:`TemporaryError`. The environment holds no NUL and no name with ``=`` (the spec
    refuses them). Whatever cuts the start short once the trampoline runs (an interrupt
    while it reads the environment, say) kills it and all else in ``cgroup`` first: a
    workload nobody knows of never goes on running."""
    data = environ_bytes(env)  # before any pipe or process: nothing to undo if it fails
    fds: list[int] = []
    try:
        fds += _pipe()
        fds += _pipe()
        env_read, env_write, err_read, err_write = fds
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _JOIN, str(cgroup), str(env_read),
             str(err_write), *argv],
            env={k: v for k, v in os.environ.items() if not k.startswith("COTENANT_")},
            pass_fds=(env_read, err_write), shell=False, **kwargs)
    except BaseException:
        _close(fds)
        raise
    _close([env_read, err_write])
    left = [env_write, err_read]
    try:
        _send(env_write, data)
        _close([left.pop(0)])  # its EOF lets the trampoline go on
        failure = _receive(err_read)  # EOF: the exec succeeded (or the trampoline died)
    except BaseException:
        discard(proc, cgroup)
        raise
    finally:
        _close(left)
    if not failure:
        return proc
    proc.wait()
    kind, code, text = [*failure.decode("utf-8", "replace").split(" ", 2), "", ""][:3]
    if kind == "join":
        raise TemporaryError(f"cannot join cgroup {cgroup}: {text}", delay_s=5.0,
                             hint="is the cgroup root still there? --cgroups off runs "
                             "workloads without one")
    raise OSError(int(code) if code.isdigit() else 0, text)


def discard(proc: subprocess.Popen[bytes], cgroup: Path) -> None:
    """Kill ``proc``, started into ``cgroup`` but not handed over, and everything else in
    the cgroup; reap it, and give the others up to a second to go (for :func:`remove`)."""
    with contextlib.suppress(OSError):
        proc.kill()
    kill(cgroup)
    proc.wait()
    for _ in range(100):
        if not procs(cgroup):
            return
        time.sleep(0.01)


def _pipe() -> tuple[int, int]:
    """A pipe whose ends are not fds 0-2: an agent started with those closed gets them from
    :func:`os.pipe`, and the child's stdin, stdout and stderr would then replace them."""
    ends = list(os.pipe())
    try:
        for i, fd in enumerate(ends):
            if fd < 3:
                ends[i] = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
                os.close(fd)
    except BaseException:
        _close(ends)
        raise
    return ends[0], ends[1]


def _close(fds: Sequence[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _send(fd: int, data: bytes) -> None:
    """All of ``data`` to the pipe ``fd``; a trampoline that died takes none."""
    view = memoryview(data)
    with contextlib.suppress(BrokenPipeError):
        while view:
            view = view[os.write(fd, view):]


def _receive(fd: int) -> bytes:
    """What the pipe ``fd`` holds up to its EOF."""
    data = b""
    while chunk := os.read(fd, 4096):
        data += chunk
    return data
