"""One cgroup v2 per workload: find, pause and kill all of a workload's processes at once.

Why: a token in the environment and the leader's process group (:mod:`.procfs`) miss a
worker that leaves the leader's session *and* rewrites its environment; a pause sent as
SIGSTOP to each process misses one forked while the signals go out; and a pid can go to
another process between a scan of ``/proc`` and the kill. A cgroup closes all three: a
process is born in its parent's cgroup and only a process allowed to write another cgroup's
``cgroup.procs`` can move it out; ``cgroup.procs`` lists the members in one read, with no
pid reuse (a new process with an old number is not in the cgroup); ``cgroup.freeze`` stops
them all, children forked later included; ``cgroup.kill`` (Linux 5.14) kills them all.

How: the agent makes one cgroup per workload, named by its token, below a root. By default
the root is ``cotenant-workloads`` inside the agent's own cgroup (the subtree that systemd's
``Delegate=yes`` hands a service); ``--cgroups PATH`` names another, ``--cgroups off``
keeps to the token. Only core files are used and no controller is enabled, so a cgroup may
sit below one that holds processes. The workload starts through ``/bin/sh``, which moves
itself into the cgroup and then ``exec``s the argv. The argv reaches the shell as positional
arguments, which it never parses, so the command is still never interpreted by a shell; and
the workload's first instruction already runs inside its cgroup (moving the child after
``fork`` would race with its own forks, and ``preexec_fn`` is unsafe in a threaded agent).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
from pathlib import Path

from cotenant.errors import InputError

DEFAULT_NAME = "cotenant-workloads"
# $1: the cgroup; the rest: the workload's argv, exec'd as given (PATH lookup and argv[0]
# as Popen would do them)
_JOIN = ('echo 0 > "$1/cgroup.procs" || { echo "cotenant: cannot join cgroup $1" >&2; '
         'exit 126; }; shift; exec "$@"')


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
    """Whether the agent can make cgroups below ``root`` that have the files it needs; it
    makes one to see, and removes it. A missing ``root`` is made only inside a cgroup (and
    removed again if it is no use)."""
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
        ok = (probe / "cgroup.freeze").exists() and os.access(probe / "cgroup.procs", os.W_OK)
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
    root = Path(spec)
    if not usable(root):
        raise InputError("--cgroups", f"{spec}: cannot make cgroup v2 children with "
                         "cgroup.freeze there", hint="give a directory inside a cgroup v2 "
                         "mount that this user may write (systemd: Delegate=yes), or 'auto' "
                         "or 'off'")
    return root


def join_argv(argv: list[str], cgroup: Path) -> list[str]:
    """``argv`` wrapped so that it runs inside ``cgroup`` from its first instruction."""
    return ["/bin/sh", "-c", _JOIN, "sh", str(cgroup), *argv]


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


def freeze(cgroup: Path, frozen: bool) -> bool:
    """Freeze (or thaw) every process of ``cgroup``, those forked later included; whether
    the cgroup took it. A frozen process keeps every signal until thawed, but SIGKILL."""
    try:
        (cgroup / "cgroup.freeze").write_text("1" if frozen else "0")
    except OSError:
        return False
    return True


def kill(cgroup: Path) -> bool:
    """SIGKILL every process of ``cgroup`` at once, frozen ones too (``cgroup.kill``, Linux
    5.14); without that file each listed process is killed (a few passes for new forks).
    Whether any of it could be done."""
    with contextlib.suppress(OSError):
        (cgroup / "cgroup.kill").write_text("1")
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
    """Remove ``cgroup`` and the cgroups below it once they are empty (else leave them)."""
    for path, _, _ in sorted(os.walk(cgroup), key=lambda item: -len(item[0])):
        with contextlib.suppress(OSError):
            Path(path).rmdir()


def prune(root: Path, keep: set[str]) -> None:
    """Remove the empty workload cgroups below ``root`` whose name is not in ``keep`` (those
    an earlier agent left when it died before its workloads were reaped)."""
    with contextlib.suppress(OSError):
        for child in root.iterdir():
            if child.is_dir() and child.name not in keep and not procs(child):
                remove(child)
