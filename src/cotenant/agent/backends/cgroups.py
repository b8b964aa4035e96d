"""One cgroup v2 per workload: find, pause and kill all of a workload's processes at once.

Why: a token in the environment and the leader's process group (:mod:`.procfs`) miss a
worker that leaves the leader's session *and* rewrites its environment; a pause sent as
SIGSTOP to each process misses one forked while the signals go out; and the scan of
``/proc`` they need grows with the host (140 ms at a thousand processes, see
``benchmarks/pause.py``). A cgroup closes these: a process is born in its parent's cgroup and
stays there unless something allowed to write another cgroup's ``cgroup.procs`` moves it
(a workload running as root could; one of another user cannot); ``cgroup.procs`` lists the
members in one read; ``cgroup.freeze`` stops them all, children forked later included, and
``cgroup.kill`` (Linux 5.14) kills them all, both without naming a pid that may since have
gone to another process. Other signals still go pid by pid, from that list.

How: the agent makes one cgroup per workload, named by its token, below a root. By default
the root is ``cotenant-workloads`` inside the agent's own cgroup (the subtree that systemd's
``Delegate=yes`` hands a service); ``--cgroups PATH`` names another, which should be the
agent's alone (it removes the empty workload cgroups there that it does not know), and
``--cgroups off`` keeps to the token. Only core files are used and no controller is
enabled, so a cgroup may sit below one that holds processes. The workload starts through a
small Python trampoline, which moves itself into the cgroup and then ``exec``s the argv:
its first instruction already runs inside (moving the child after ``fork`` would race with
its own forks, and ``preexec_fn`` is unsafe in a threaded agent). The trampoline runs in the
agent's environment, isolated (``-I -S``), and gets the workload's environment through a
pipe, so it passes to the workload byte for byte (a shell would drop names that are not
identifiers, and reset ``IFS``), and a ``PYTHONHOME`` meant for the workload cannot break
it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cotenant.errors import InputError, TemporaryError

DEFAULT_NAME = "cotenant-workloads"
NAME = re.compile(r"[0-9a-f]{24}")
"""A workload cgroup's name: its token (``secrets.token_hex(12)``)."""

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
except OSError as exc:
    os.write(err_fd, b"exec %d " % exc.errno + os.fsencode(exc.strerror or ""))
    sys.exit(127)
"""


def _unescape(field: str) -> str:
    """A path from ``/proc/self/mountinfo``, where space, tab, newline and backslash are
    written as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def mountpoint(mountinfo: Path = Path("/proc/self/mountinfo")) -> Path | None:
    """Where the cgroup v2 hierarchy is mounted (``/sys/fs/cgroup``, or
    ``/sys/fs/cgroup/unified`` on a hybrid host); None where it is not."""
    with contextlib.suppress(OSError):
        for line in mountinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            mount, sep, rest = line.partition(" - ")
            fields = mount.split()
            if sep and len(fields) > 4 and rest.split()[:1] == ["cgroup2"]:
                return Path(_unescape(fields[4]))
    return None


def own_path(cgroup: Path = Path("/proc/self/cgroup")) -> str | None:
    """The agent's own cgroup v2, relative to the mount (``/`` at the top)."""
    with contextlib.suppress(OSError):
        for line in cgroup.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("0::"):
                return line[3:].strip()
    return None


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
    try:
        ok = (probe / "cgroup.freeze").exists() and popen(
            [sys.executable, "-I", "-S", "-c", ""], dict(os.environ), probe,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).wait(30) == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    finally:
        with contextlib.suppress(OSError):
            probe.rmdir()
    if made and not ok:
        with contextlib.suppress(OSError):
            root.rmdir()
    return ok


def open_root(spec: str) -> Path | None:
    """The root for ``--cgroups``: ``off`` -> None; ``auto`` -> the default where it is
    usable, else None (the token alone); a path -> that path, which must be usable."""
    if spec == "off":
        return None
    if spec == "auto":
        mount, own = mountpoint(), own_path()
        if mount is None or own is None:
            return None
        root = mount / own.lstrip("/") / DEFAULT_NAME
        return root if usable(root) else None
    root = Path(spec).absolute()
    if not usable(root):
        raise InputError("--cgroups", f"{spec}: cannot run a process in a cgroup v2 made "
                         "there", hint="give a directory inside a cgroup v2 mount that this "
                         "user may write, whose processes it may move (as root, or systemd's "
                         "Delegate=yes), or 'auto' or 'off'")
    return root


def is_workload_cgroup(path: Path, mount: Path | None) -> bool:
    """Whether ``path`` (from the leader book, say) is a workload cgroup: below the cgroup
    v2 mount ``mount``, named like one, and a cgroup. Anything else is never written to."""
    return (mount is not None and path.is_absolute() and NAME.fullmatch(path.name) is not None
            and path.is_relative_to(mount) and ".." not in path.parts
            and (path / "cgroup.procs").is_file())


def popen(argv: Sequence[str], env: Mapping[str, str], cgroup: Path,
          **kwargs: Any) -> subprocess.Popen[bytes]:
    """Start ``argv`` with environment ``env`` inside ``cgroup`` from its first instruction
    (see the module docstring); ``kwargs`` go to :class:`subprocess.Popen`. It returns once
    the workload's program runs, as :class:`subprocess.Popen` does; an ``exec`` that fails
    raises its :class:`OSError` (as Popen's would), one that could not join the cgroup a
    :class:`TemporaryError`. The environment holds no NUL and no name with ``=`` (the spec
    refuses them)."""
    env_read, env_write = os.pipe()
    err_read, err_write = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _JOIN, str(cgroup), str(env_read),
             str(err_write), *argv],
            env={k: v for k, v in os.environ.items() if not k.startswith("COTENANT_")},
            pass_fds=(env_read, err_write), shell=False, **kwargs)
    except BaseException:
        os.close(env_write)
        os.close(err_read)
        raise
    finally:
        os.close(env_read)
        os.close(err_write)
    data = b"".join(os.fsencode(k) + b"=" + os.fsencode(v) + b"\0" for k, v in env.items())
    with contextlib.suppress(BrokenPipeError), os.fdopen(env_write, "wb") as pipe:
        pipe.write(data)
    with os.fdopen(err_read, "rb") as pipe:
        failure = pipe.read()  # EOF: the exec succeeded (or the trampoline died: its status)
    if not failure:
        return proc
    proc.wait()
    kind, code, text = [*failure.decode("utf-8", "replace").split(" ", 2), "", ""][:3]
    if kind == "join":
        raise TemporaryError(f"cannot join cgroup {cgroup}: {text}", delay_s=5.0,
                             hint="is the cgroup root still there? --cgroups off runs "
                             "workloads without one")
    raise OSError(int(code) if code.isdigit() else 0, text)


def procs(cgroup: Path) -> list[int] | None:
    """The processes in ``cgroup`` and the cgroups below it (a workload may make its own);
    None when it does not exist. Zombies are not listed."""
    if not cgroup.is_dir():
        return None
    found: list[int] = []
    for path, _, _ in os.walk(cgroup):
        with contextlib.suppress(OSError, ValueError):
            found.extend(int(p) for p in (Path(path) / "cgroup.procs").read_text().split())
    me = os.getpid()
    return [p for p in found if p != me]


def _write(path: Path, text: str) -> bool:
    """Write to an existing cgroup file (never create one); whether it took."""
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError:
        return False
    try:
        os.write(fd, text.encode())
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def freeze(cgroup: Path, frozen: bool) -> bool:
    """Freeze (or thaw) every process of ``cgroup``, those forked later included; whether
    the cgroup took it. A frozen process keeps every signal until thawed, but SIGKILL."""
    return _write(cgroup / "cgroup.freeze", "1" if frozen else "0")


def kill(cgroup: Path) -> bool:
    """SIGKILL every process of ``cgroup`` at once, frozen ones too (``cgroup.kill``, Linux
    5.14); without that file each listed process is killed (a few passes for new forks).
    Whether any of it could be done."""
    if _write(cgroup / "cgroup.kill", "1"):
        return True
    for _ in range(3):
        members = procs(cgroup)
        if not members:
            return members is not None
        for pid in members:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    return True


def remove(cgroup: Path) -> None:
    """Remove ``cgroup`` and the cgroups below it once they are empty (else leave them). A
    process just reaped can keep its cgroup busy for a moment: an empty one is tried again
    for up to 0.1 s."""
    for path, _, _ in sorted(os.walk(cgroup), key=lambda item: -len(item[0])):
        for _ in range(10):
            try:
                Path(path).rmdir()
            except OSError as exc:
                if exc.errno == errno.EBUSY and not procs(Path(path)):
                    time.sleep(0.01)
                    continue
            break


def recover(root: Path, keep: set[str]) -> None:
    """At agent start: thaw every workload cgroup below ``root`` (an agent that died may
    have left one frozen, and its book may be lost), and remove the empty ones whose name
    is not in ``keep``, and probes left behind. Other directories are not touched."""
    with contextlib.suppress(OSError):
        for child in root.iterdir():
            if not child.is_dir():
                continue
            if child.name.startswith("probe-"):
                remove(child)
            elif NAME.fullmatch(child.name):
                freeze(child, False)
                if child.name not in keep and not procs(child):
                    remove(child)
