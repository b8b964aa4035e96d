"""The workload leaders this host's agent started, kept on disk so that a new agent knows them.

After an agent restart the state store still holds each workload's pid, but a pid says
little: the process may have died and its number gone to another process (after a reboot,
certainly). So for every leader it spawns, the local backend records here its token, its
start time (``/proc/<pid>/stat`` field 22, in clock ticks since boot) and the kernel's boot
id. A pid is then that leader only while all three still hold (the token for finding its
other processes; the start time and boot id, which no environment rewrite can change, for
its identity), and the cgroup it runs in, if any (:mod:`.cgroups`), which finds its
processes better than the token. An entry goes when its leader is reaped. The book is one
JSON file, replaced whole on each change (write to a temporary file, then rename); a missing
or unreadable one is an empty book. One agent per state directory, as for the state store.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from cotenant.agent.backends import procfs


@dataclass(frozen=True)
class Leader:
    token: str
    start: int
    boot: str
    cgroup: str = ""  # none: a book from before cgroups, or a workload spawned without one
    log: str = ""  # its output (the last line classifies an exit its wrapper recorded)


class LeaderBook:
    """``pid -> Leader`` for the leaders spawned from one state directory."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.boot = procfs.boot_id()  # read once: it cannot change while the agent runs
        self._book: dict[int, Leader] = {}
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            raw = json.loads(path.read_text(encoding="utf-8"))
            self._book = {int(pid): Leader(str(e["token"]), int(e["start"]), str(e["boot"]),
                                           str(e.get("cgroup", "")), str(e.get("log", "")))
                          for pid, e in raw.items()}

    def add(self, pid: int, token: str, cgroup: Path | None = None,
            log: Path | None = None) -> None:
        start = procfs.start_time(pid)
        if start is None or self.boot is None:
            return  # already gone, or no /proc: nothing to know it by later
        self._book[pid] = Leader(token, start, self.boot, str(cgroup) if cgroup else "",
                                 str(log) if log else "")
        self._save()

    def remove(self, pid: int) -> None:
        if self._book.pop(pid, None) is not None:
            self._save()

    def pids(self) -> list[int]:
        return list(self._book)

    def get(self, pid: int) -> Leader | None:
        return self._book.get(pid)

    def cgroups(self) -> set[str]:
        """The names of the cgroups the book's leaders run in."""
        return {Path(e.cgroup).name for e in self._book.values() if e.cgroup}

    def is_alive(self, pid: int) -> bool:
        """Whether ``pid`` is still, and alive, the leader recorded under it (one read of
        its ``stat``: it runs every tick for each adopted workload)."""
        entry = self._book.get(pid)
        return (entry is not None and entry.boot == self.boot
                and procfs.start_time(pid) == entry.start)

    def _save(self) -> None:
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temp = self.path.with_suffix(".tmp")
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(json.dumps({str(p): asdict(e) for p, e in self._book.items()}))
            os.replace(temp, self.path)
