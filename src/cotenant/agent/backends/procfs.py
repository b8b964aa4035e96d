"""Find a workload's processes on a Linux host through ``/proc``, by a token in their
environment.

A workload's command is rarely one process: a shell runs a trainer, torchrun runs one worker
per GPU, each in a session of its own (torch elastic starts workers with
``start_new_session``), so neither the process group nor the tree below a launcher that has
died holds them all. What they share is their environment: the agent puts
``COTENANT_PROCESS_TOKEN=<token>`` into the workload's environment, children inherit it, and
:func:`members` finds every live process that carries it, orphans included (with the
leader's process group, which catches what lost its environment). Only processes the agent
may read (its own user's) show a token; one that execs with a new environment, or rewrites
it (``setproctitle`` does), shows none. Each call reads ``/proc`` once: milliseconds on a
node with a few hundred processes, so the backend calls it only to signal a workload and
while one drains.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

TOKEN_VAR = "COTENANT_PROCESS_TOKEN"
STATE_VAR = "COTENANT_STATE"
"""The agent's state (its log directory) a workload was started from."""
_AGENT_VARS = (TOKEN_VAR, STATE_VAR, "COTENANT_LAUNCH", "COTENANT_WORKLOAD", "COTENANT_SPEC")
"""What the agent gives each workload, never passed on from its own environment."""
PROC = Path("/proc")


def available() -> bool:
    """Whether this host has a ``/proc`` to look in (Linux)."""
    return (PROC / "self" / "environ").exists()


def _environ(pid: int) -> bytes | None:
    try:
        return (PROC / str(pid) / "environ").read_bytes()
    except OSError:  # gone, a zombie's empty file, or another user's
        return None


def environ(pid: int) -> dict[str, str] | None:
    """``pid``'s environment (as it started, or as it rewrote it); None where unreadable."""
    data = _environ(pid)
    if not data:
        return None
    pairs = (item.decode("utf-8", "replace").partition("=") for item in data.split(b"\0"))
    return {k: v for k, sep, v in pairs if sep}


def token_of(pid: int) -> str | None:
    """The token in ``pid``'s environment, None when it has none or cannot be read."""
    data = _environ(pid)
    if not data:
        return None
    prefix = f"{TOKEN_VAR}=".encode()
    for item in data.split(b"\0"):
        if item.startswith(prefix):
            return item[len(prefix):].decode("utf-8", "replace")
    return None


GPU_SELECTION = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_MPS_")
"""Variables that choose a GPU or an MPS daemon: the agent sets them per workload."""


def clean_environ() -> dict[str, str]:
    """The agent's environment less any token it inherited (an agent started from inside a
    workload must not make its own workloads, or its MPS daemons, part of that one) and less
    any GPU selection it inherited: an MPS client that keeps a ``CUDA_VISIBLE_DEVICES`` its
    daemon has remapped fails, and a workload must land on the GPU the agent chose."""
    return {k: v for k, v in os.environ.items()
            if k not in _AGENT_VARS and not k.startswith(GPU_SELECTION)}


def _fields(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` after the name (the first is the state, field 3);
    None once it is gone. Read as bytes: a name is any bytes, cut at 15 (maybe inside a
    UTF-8 character), and may hold spaces or parentheses."""
    try:
        data = (PROC / str(pid) / "stat").read_bytes()
        return data[data.rindex(b")") + 2:].split()
    except (OSError, ValueError):
        return None


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, process group id) of ``pid``; None once it is gone."""
    fields = _fields(pid)
    if fields is None or len(fields) < 3 or not fields[2].lstrip(b"-").isdigit():
        return None
    return fields[0].decode("ascii", "replace"), int(fields[2])


def start_time(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (field 22); None once it is gone or
    a zombie."""
    fields = _fields(pid)
    ok = (fields is not None and len(fields) > 19 and fields[19].isdigit()
          and fields[0] != b"Z")
    return int(fields[19]) if ok and fields is not None else None


def boot_id() -> str | None:
    """The kernel's id of this boot (None without ``/proc``)."""
    try:
        return (PROC / "sys" / "kernel" / "random" / "boot_id").read_text().strip()
    except OSError:
        return None


def state(pid: int) -> str | None:
    """``pid``'s state letter (``Z``: a zombie); None once it is gone."""
    found = _stat(pid)
    return found[0] if found is not None else None


def members(token: str, group: int | None = None) -> list[int]:
    """Every live process (not a zombie) whose environment carries ``token``, or that is in
    process group ``group``; never the agent itself. One pass over ``/proc``."""
    item = f"{TOKEN_VAR}={token}".encode()
    me = os.getpid()
    found = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        pid = int(entry.name)
        info = _stat(pid)
        if info is None or info[0] == "Z":
            continue
        if info[1] == group:
            found.append(pid)
            continue
        data = _environ(pid)
        if data and item in data.split(b"\0"):
            found.append(pid)
    return found


def launch_leaders(state_dir: str) -> dict[str, tuple[int, dict[str, str]]]:
    """The live processes started from ``state_dir`` (:data:`STATE_VAR`), one per launch id:
    the one whose parent carries no such launch (the leader), with its environment. One
    pass over ``/proc``."""
    found: dict[int, dict[str, str]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        data = _environ(pid)
        if not data or f"{STATE_VAR}={state_dir}".encode() not in data.split(b"\0"):
            continue
        env = environ(pid)
        if env and env.get("COTENANT_LAUNCH") and state(pid) not in ("Z", None):
            found[pid] = env
    leaders: dict[str, tuple[int, dict[str, str]]] = {}
    for pid, env in sorted(found.items()):
        parent = found.get(_ppid(pid) or -1)
        if parent is None or parent.get("COTENANT_LAUNCH") != env["COTENANT_LAUNCH"]:
            leaders.setdefault(env["COTENANT_LAUNCH"], (pid, env))
    return leaders


def _ppid(pid: int) -> int | None:
    fields = _fields(pid)
    return int(fields[1]) if fields is not None and len(fields) > 1 and fields[1].isdigit() \
        else None


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (not a zombie); one of another user's counts."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return state(pid) not in ("Z", None) if available() else True


def kill(pids: list[int], signum: int) -> None:
    """Send ``signum`` to each of ``pids`` that still exists (never to the agent itself)."""
    me = os.getpid()
    for pid in pids:
        if pid != me:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)
