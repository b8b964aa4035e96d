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

How: the agent makes one cgroup per workload, named by its token, below a root of its own
(:mod:`.cgroup_start` finds the root and starts a workload inside its cgroup). Only core
files are used and no controller is enabled, so a cgroup may sit below one that holds
processes.
"""
from __future__ import annotations

import contextlib
import errno
import os
import re
import signal
import time
from pathlib import Path, PurePosixPath

DEFAULT_NAME = "cotenant-workloads"
NAME = re.compile(r"[0-9a-f]{24}")
"""A workload cgroup's name: its token (``secrets.token_hex(12)``)."""
MOUNTINFO = Path("/proc/self/mountinfo")
OWN = Path("/proc/self/cgroup")


def _unescape(field: str) -> str:
    """A path from ``/proc/self/mountinfo``, where space, tab, newline and backslash are
    written as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def _mount(mountinfo: Path) -> tuple[Path, str] | None:
    """The first cgroup v2 mount: (where it is mounted, the path within the hierarchy that
    is mounted there: ``/`` unless a container was given a subtree)."""
    with contextlib.suppress(OSError):
        for line in mountinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            mount, sep, rest = line.partition(" - ")
            fields = mount.split()
            if sep and len(fields) > 4 and rest.split()[:1] == ["cgroup2"]:
                return Path(_unescape(fields[4])), _unescape(fields[3])
    return None


def mountpoint(mountinfo: Path = MOUNTINFO) -> Path | None:
    """Where the cgroup v2 hierarchy is mounted (``/sys/fs/cgroup``, or
    ``/sys/fs/cgroup/unified`` on a hybrid host); None where it is not."""
    found = _mount(mountinfo)
    return found[0] if found else None


def own_path(cgroup: Path = OWN) -> str | None:
    """The agent's own cgroup v2 as ``/proc/self/cgroup`` names it (``/`` at the top)."""
    with contextlib.suppress(OSError):
        for line in cgroup.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("0::"):
                return line[3:].strip()
    return None


def own_dir(mountinfo: Path = MOUNTINFO, cgroup: Path = OWN) -> Path | None:
    """The agent's own cgroup v2 as a directory: the mount point, then the agent's path
    below the root of what is mounted there (a container may see only its own subtree
    mounted while ``/proc/self/cgroup`` names the host's whole path). None without a mount,
    or where the agent's cgroup is not below it (outside its cgroup namespace: ``/..``)."""
    found, own = _mount(mountinfo), own_path(cgroup)
    if found is None or own is None:
        return None
    path, root = PurePosixPath(own), PurePosixPath(found[1])
    if ".." in path.parts or not path.is_relative_to(root):
        return None
    return found[0] / path.relative_to(root)


def is_workload_cgroup(path: Path, mount: Path | None) -> bool:
    """Whether ``path`` (from the leader book, say) is a workload cgroup: below the cgroup
    v2 mount ``mount``, named like one, and a cgroup. Anything else is never written to."""
    return (mount is not None and path.is_absolute() and NAME.fullmatch(path.name) is not None
            and path.is_relative_to(mount) and ".." not in path.parts
            and (path / "cgroup.procs").is_file())


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
    is not in ``keep``, and probes left behind. Other directories are not touched. The root
    is this agent's alone (:func:`default_name`; a ``--cgroups`` path must be)."""
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
