"""Find a workload's processes on a Linux host through ``/proc``, by a token in their
environment.

A workload's command is rarely one process: a shell runs a trainer, torchrun runs one worker
per GPU, each in a session of its own (torch elastic starts workers with
``start_new_session``), so neither the process group nor the tree below a launcher that has
died holds them all. What they share is their environment: the agent puts
``COTENANT_PROCESS_TOKEN=<token>`` into the workload's environment, children inherit it, and
:func:`members` finds every live process that carries it, orphans included. A token also
tells a workload's pid from an unrelated process that reused it after an agent restart
(:func:`token_of`). Only processes the agent may read (its own user's) are seen; a process
that wipes its environment on exec is not.
"""

from __future__ import annotations

import os
from pathlib import Path

TOKEN_VAR = "COTENANT_PROCESS_TOKEN"
PROC = Path("/proc")


def available() -> bool:
    """Whether this host has a ``/proc`` to look in (Linux)."""
    return (PROC / "self" / "environ").exists()


def _environ(pid: int) -> bytes | None:
    try:
        return (PROC / str(pid) / "environ").read_bytes()
    except OSError:  # gone, a zombie's empty file, or another user's
        return None


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


def _state(pid: int) -> str | None:
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split(" ", 1)[0]


def members(token: str) -> list[int]:
    """Every live process (not a zombie) whose environment carries ``token``, never the
    agent itself."""
    item = f"{TOKEN_VAR}={token}".encode()
    me = os.getpid()
    found = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        data = _environ(int(entry.name))
        if data and item in data.split(b"\0") and _state(int(entry.name)) != "Z":
            found.append(int(entry.name))
    return found
