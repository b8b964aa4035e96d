"""Real process control for a Linux host (used by the nvml backend).

:class:`PopenProcesses` starts workloads with :class:`subprocess.Popen` from an argv *list*
(``shell=False`` always; a string is refused), each in its own session, with a token in its
environment (:mod:`.procfs`) and, where the agent may make one, in a cgroup v2 of its own
(:mod:`.cgroups`), which together find all its processes; stdout and stderr go to a log file
whose last line becomes the exit message used to classify failures. With ``wrap`` (the nvml
and laptop backends) each workload runs under :mod:`.trampoline`, which writes its exit status
to a file: an agent that restarts reads it for a workload that ended while no agent ran
(else that status is lost). Logs, exit files and the leaders book are owner-only (0600 in a
0700 directory). The MPS control daemons are :mod:`.mpsctl`'s.
"""

from __future__ import annotations

import contextlib
import math
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cotenant.agent.backends import cgroup_start, cgroups, procfs, trampoline
from cotenant.agent.backends.base import Launched, ProcessStatus, ProcState, launched_from
from cotenant.agent.backends.commands import check_argv, start_error
from cotenant.agent.backends.leaders import Leader, LeaderBook

_TAIL_BYTES = 4096


def last_line(path: Path) -> str:
    """The last non-empty line of ``path`` (empty if unreadable)."""
    try:
        with path.open("rb") as handle:
            handle.seek(max(0, path.stat().st_size - _TAIL_BYTES))
            lines = handle.read().decode("utf-8", "replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1] if lines else ""


TRAMPOLINE = Path(__file__).with_name("trampoline.py")


@dataclass
class _Child:
    popen: subprocess.Popen[bytes]
    log: Path
    token: str
    cgroup: Path | None
    launched: Launched | None = None


_KILL_WAIT_S = 30.0  # after a drain's SIGKILL: the most it waits for the processes to go


class PopenProcesses:
    """Processes of this host, started from argv lists.

    Given a ``cgroup_root``, each workload runs in a cgroup v2 of its own below it
    (:mod:`.cgroups`): its processes are the cgroup's, a pause freezes the cgroup and a
    SIGKILL kills it whole. Without one, a workload's processes are its leader's process
    group together with every process that carries its token (:mod:`.procfs`): the group
    reaches whatever the leader starts in it, even a process that has lost its environment
    (``setproctitle`` overwrites it), and the token reaches what left the group (torchrun's
    workers). Signals go to all of them. When the leader exits, the rest are drained:
    SIGTERM and SIGCONT (or a thaw) at once (no SIGTERM where they were just sent one;
    SIGCONT in case they are paused), SIGKILL after
    ``drain_grace_s``, and only once they are gone (or 30 s after the SIGKILL) is the
    workload reported exited, with the leader's status, and the leader reaped, so its pid,
    and with it its group id, cannot be reused while any of them lives.

    Every leader is recorded on disk (:mod:`.leaders`), so after an agent restart a pid from
    the state is taken for its workload only while it is the very process recorded (same
    start time, same boot); when it is gone, its status is lost and the rest drain by token.
    A pid this backend never started (an NVML-reported worker the MIG drain stops, or a
    workload from before the book) is signalled alone and runs while it lives. Without
    ``/proc`` (and no cgroup) only the leader's group is signalled. The book keeps each
    leader's cgroup, which is used while it exists whatever ``cgroup_root`` a later agent
    has (if it is a workload cgroup below the mount: the book is a file)."""

    def __init__(self, log_dir: Path, drain_grace_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic,
                 cgroup_root: Path | None = None, wrap: bool = False) -> None:
        self.log_dir = log_dir
        self.wrap = wrap
        self.drain_grace_s = drain_grace_s
        self.clock = clock
        self.tracked = procfs.available()
        self.cgroup_root = cgroup_root
        self.leaders = LeaderBook(log_dir / "leaders.json")
        self._mount = cgroups.mountpoint()  # a cgroup from the book must lie below it
        if cgroup_root is not None:  # what an agent that died left frozen, or empty
            cgroups.recover(cgroup_root, self.leaders.cgroups())
        self._children: dict[int, _Child] = {}
        self._finished: dict[int, ProcessStatus] = {}  # reaped leaders: their last status
        self._draining: dict[int, tuple[float, bool]] = {}  # leader -> (deadline, killed)
        self._stopped: dict[int, float] = {}  # leader pid -> when it was last sent SIGTERM
        self._count = 0

    def spawn(self, argv: Sequence[str], env: Mapping[str, str], gpu: int) -> int:
        args = check_argv(list(argv) if isinstance(argv, tuple) else argv)
        if self.wrap:
            _check_program(args[0], env)
        self._count += 1
        log = self.log_dir / f"gpu{gpu}-{os.getpid()}-{self._count}.log"
        token = secrets.token_hex(12)
        environ = {**procfs.clean_environ(), **env, procfs.TOKEN_VAR: token,
                   procfs.STATE_VAR: str(self.log_dir)}
        cgroup = self._make_cgroup(token)
        run = ([sys.executable, "-I", str(TRAMPOLINE), str(self._exit_file(token)), *args]
               if self.wrap else args)
        try:
            _private_dir(self.log_dir)
            _private_dir(self.log_dir / "exits")
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            with os.fdopen(fd, "ab") as out:
                options: dict[str, Any] = {"stdin": subprocess.DEVNULL, "stdout": out,
                                           "stderr": subprocess.STDOUT,
                                           "start_new_session": True}
                with trampoline.blocked() if self.wrap else contextlib.nullcontext():
                    proc = (subprocess.Popen(run, env=environ, shell=False, **options)
                            if cgroup is None
                            else cgroup_start.popen(run, environ, cgroup, **options))
        except BaseException as exc:
            if cgroup is not None:
                cgroups.remove(cgroup)
            if isinstance(exc, OSError | UnicodeEncodeError):
                raise start_error(args[0], exc) from exc
            raise
        try:
            self._children[proc.pid] = _Child(proc, log, token, cgroup,
                                              launched_from(proc.pid, env))
            for book in (self._finished, self._draining, self._stopped):
                book.pop(proc.pid, None)  # whatever an earlier owner of the pid left
            self.leaders.add(proc.pid, token, cgroup, log)  # unreaped: still this process
        except BaseException:  # an interrupt: nobody would know of the workload
            self._discard(proc, token, cgroup)
            raise
        return proc.pid

    def _discard(self, proc: subprocess.Popen[bytes], token: str,
                 cgroup: Path | None) -> None:
        """Kill a leader that was started but not handed over, and all its processes."""
        self._children.pop(proc.pid, None)
        self.leaders.remove(proc.pid)
        if cgroup is not None:
            cgroup_start.discard(proc, cgroup)
            cgroups.remove(cgroup)
            return
        # its own group while the leader is unreaped, and whatever carries its token
        for pid in procfs.members(token, group=proc.pid) if self.tracked else [proc.pid]:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        proc.wait()

    def _make_cgroup(self, token: str) -> Path | None:
        """A new cgroup for the workload ``token``; None without a root, or where it cannot
        be made (the workload then runs without one, found by its token)."""
        if self.cgroup_root is None:
            return None
        cgroup = self.cgroup_root / token
        try:
            cgroup.mkdir(parents=True)
        except OSError:
            return None
        return cgroup

    def poll(self, pid: int) -> ProcessStatus:
        child = self._children.get(pid)
        if child is None:
            return self._finished.get(pid) or self._poll_other(pid)
        exited, code = _peek_exit(child.popen)
        if not exited:
            return ProcessStatus(pid, ProcState.RUNNING)
        # a leader reaped elsewhere no longer holds its pid: its group may be someone else's
        members = self._members(pid, child.token, group=code is not None, cgroup=child.cgroup)
        if not self._drained(pid, members, child.cgroup):
            return ProcessStatus(pid, ProcState.RUNNING)
        if code is not None:
            child.popen.wait()  # reap: from here on the pid is free for others
        del self._children[pid]
        if code is None and self.wrap:  # reaped elsewhere: its wrapper wrote it down
            code = _read_exit(self._exit_file(child.token), child.log)
        status = (ProcessStatus(pid, ProcState.EXITED, code, last_line(child.log))
                  if code is not None else ProcessStatus(pid, ProcState.UNKNOWN))
        return self._finish(pid, status, child.cgroup, child.token)

    def _poll_other(self, pid: int) -> ProcessStatus:
        """A pid this agent did not start: a leader of an earlier agent's (see the book), or
        any other process, running while it lives."""
        entry = self.leaders.get(pid)
        if entry is None:
            alive = procfs.alive(pid)
            return ProcessStatus(pid, ProcState.RUNNING if alive else ProcState.UNKNOWN)
        if self.leaders.is_alive(pid):
            return ProcessStatus(pid, ProcState.RUNNING)
        cgroup = self._book_cgroup(entry)
        if not self._drained(pid, self._members(pid, entry.token, group=False, cgroup=cgroup),
                             cgroup):
            return ProcessStatus(pid, ProcState.RUNNING)
        code = _read_exit(self._exit_file(entry.token),  # what its wrapper left
                          Path(entry.log) if entry.log else None)
        status = (ProcessStatus(pid, ProcState.UNKNOWN) if code is None else ProcessStatus(
            pid, ProcState.EXITED, code, last_line(Path(entry.log)) if entry.log else ""))
        return self._finish(pid, status, cgroup, entry.token)

    def _exit_file(self, token: str) -> Path:
        return self.log_dir / "exits" / token

    def _finish(self, pid: int, status: ProcessStatus, cgroup: Path | None,
                token: str = "") -> ProcessStatus:
        if token:
            with contextlib.suppress(OSError):
                self._exit_file(token).unlink()
        if cgroup is not None:
            cgroups.remove(cgroup)  # left in place while something still runs in it
        self._stopped.pop(pid, None)
        self.leaders.remove(pid)
        self._finished[pid] = status
        if len(self._finished) > 1024:  # the supervisor reads it once; keep a few
            del self._finished[next(iter(self._finished))]
        return status

    def _drained(self, pid: int, members: list[int], cgroup: Path | None) -> bool:
        """The leader ``pid`` has exited: whether its other processes are gone, once they
        have had SIGTERM and, ``drain_grace_s`` later, SIGKILL (with a cgroup: thawed, and
        killed whole)."""
        rest = [m for m in members if m != pid]
        now = self.clock()
        deadline, killed = self._draining.get(pid, (None, False))
        if not rest or (killed and deadline is not None and now >= deadline):
            self._draining.pop(pid, None)
            return True
        if deadline is None:
            self._draining[pid] = (now + self.drain_grace_s, False)
            if now - self._stopped.get(pid, -math.inf) > self.drain_grace_s:
                procfs.kill(rest, signal.SIGTERM)  # not twice: a second can cut a checkpoint
            if cgroup is not None:
                cgroups.freeze(cgroup, False)
            procfs.kill(rest, signal.SIGCONT)  # a paused one would hold the SIGTERM
        elif now >= deadline and not killed:
            if cgroup is None or not cgroups.kill(cgroup):
                procfs.kill(rest, signal.SIGKILL)  # gone once the driver lets them go
            self._draining[pid] = (now + _KILL_WAIT_S, True)
        return False

    def _members(self, pid: int, token: str, *, group: bool, cgroup: Path | None) -> list[int]:
        """The workload's live processes: its cgroup's where it has one, else by its token
        (and the leader's group where ``group``). A leader is in its cgroup from the
        start: :func:`cgroup_start.popen` returns once it has joined and exec'd."""
        found = cgroups.procs(cgroup) if cgroup is not None else None
        if found is None:
            return procfs.members(token, pid if group else None) if self.tracked else []
        return found

    def _book_cgroup(self, entry: Leader | None) -> Path | None:
        """The cgroup the book names for a leader, if it is one (the book is a file: a
        path in it that is not a workload cgroup below the mount is never written to)."""
        if entry is None or not entry.cgroup:
            return None
        path = Path(entry.cgroup)
        return path if cgroups.is_workload_cgroup(path, self._mount) else None

    def send_signal(self, pid: int, signum: int) -> None:
        """Signal every process of the workload ``pid`` leads (see the class docstring); a
        workload with none left is a no-op. A SIGSTOP looks again for processes started
        while it was being sent, a few times. A workload whose leader has exited and whose
        rest drains already has its SIGTERM: a pause, or another SIGTERM, would only cut
        its checkpoints short (a guard may yet pause it: it still counts as running)."""
        if pid in self._draining and signum in (signal.SIGSTOP, signal.SIGTERM, signal.SIGINT):
            return
        child = self._children.get(pid)
        entry = self.leaders.get(pid)
        if signum in (signal.SIGTERM, signal.SIGINT) and (child or entry):
            self._stopped[pid] = self.clock()
        cgroup = child.cgroup if child is not None else self._book_cgroup(entry)
        if cgroup is not None and _cgroup_signal(cgroup, signum):
            return
        if child is not None and cgroup is None and not self.tracked:  # the group, reserved
            with contextlib.suppress(ProcessLookupError, PermissionError):  # while unreaped
                os.killpg(pid, signum)
        elif child is not None:
            self._signal_members(
                lambda: self._members(pid, child.token, group=True, cgroup=cgroup), signum)
        elif entry is not None:  # an earlier agent's leader, or what it left behind
            group = self.leaders.is_alive(pid)  # only a live leader reserves its group id
            self._signal_members(
                lambda: self._members(pid, entry.token, group=group, cgroup=cgroup), signum)
        elif pid not in self._finished and procfs.alive(pid):
            procfs.kill([pid], signum)

    @staticmethod
    def _signal_members(find: Callable[[], list[int]], signum: int) -> None:
        done: set[int] = set()
        for _ in range(5 if signum == signal.SIGSTOP else 1):
            new = set(find()) - done
            if not new:
                break
            procfs.kill(sorted(new), signum)
            done |= new

    def pids(self) -> list[int]:
        """Every workload this backend started that has not been reported exited (one whose
        leader exited while the rest drain still runs)."""
        return list(self._children)

    def launched(self) -> list[Launched]:
        """The live leaders with a launch id: this backend's children (as they were
        started), the leaders of the book an earlier agent left (their environment read from
        ``/proc``), and, by one pass over ``/proc``, leaders started from this state that
        the book lost (each carries the state's path, :data:`procfs.STATE_VAR`); those are
        added to the book."""
        found = [c.launched for pid, c in self._children.items()
                 if c.launched is not None and c.popen.returncode is None]
        for pid in self.leaders.pids():
            if pid not in self._children and self.leaders.is_alive(pid):
                env = procfs.environ(pid)
                if env and (known := launched_from(pid, env)) is not None:
                    found.append(known)
        if self.tracked:  # a leader the book lost (a write that failed): by its environment
            seen = {f.launch for f in found}
            for launch, (pid, env) in procfs.launch_leaders(str(self.log_dir)).items():
                token = env.get(procfs.TOKEN_VAR, "")
                if launch not in seen and token and (known := launched_from(pid, env)):
                    self.leaders.add(pid, token)  # known by its identity from now on
                    found.append(known)
        return found

    def members(self, pid: int) -> list[int]:
        """The live processes of the workload ``pid`` leads, found as signals find them (its
        cgroup, else its group and token), and ``pid`` itself."""
        child = self._children.get(pid)
        entry = self.leaders.get(pid)
        if child is not None:
            found = self._members(pid, child.token, group=True, cgroup=child.cgroup)
        elif entry is not None:
            found = self._members(pid, entry.token, group=self.leaders.is_alive(pid),
                                  cgroup=self._book_cgroup(entry))
        else:
            found = []
        return sorted({pid, *found})


def _cgroup_signal(cgroup: Path, signum: int) -> bool:
    """Do what ``signum`` asks through the cgroup where it can do it whole: SIGSTOP freezes
    it, SIGKILL kills it; SIGCONT thaws it, then goes to each process as well (one may have
    been stopped by a signal). Whether that was all (False: signal each process)."""
    if signum == signal.SIGSTOP:
        return cgroups.freeze(cgroup, True)
    if signum == signal.SIGKILL:
        return cgroups.kill(cgroup)
    if signum == signal.SIGCONT:
        cgroups.freeze(cgroup, False)
    return False


def _peek_exit(popen: subprocess.Popen[bytes]) -> tuple[bool, int | None]:
    """Whether the child has exited, and its status (``subprocess`` convention; None where
    something else reaped it and the status is lost), without reaping it: its pid (and
    process group id) stays reserved until :meth:`subprocess.Popen.wait`."""
    if popen.returncode is not None:
        return True, popen.returncode
    if not hasattr(os, "waitid"):
        code = popen.poll()
        return code is not None, code
    try:
        info = os.waitid(os.P_PID, popen.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:  # reaped by someone else: gone, its status with it
        return True, None
    if info is None or info.si_pid == 0:
        return False, None
    return True, info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


def _private_dir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)


def _check_program(program: str, env: Mapping[str, str]) -> None:
    """Refuse at once a program that cannot be started (the wrapper would only report it
    by its exit): not found, or not executable."""
    path = (program if "/" in program
            else shutil.which(program, path=env.get("PATH", os.environ.get("PATH"))))
    if path is None or not os.path.exists(path):
        raise start_error(program, FileNotFoundError(2, "No such file or directory"))
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise start_error(program, PermissionError(13, "Permission denied"))


def _read_exit(path: Path, log: Path | None = None) -> int | None:
    """The status a wrapper wrote (``subprocess``'s convention): its exit file, else the
    line it put in the workload's log where that file could not be written; None where
    there is neither."""
    try:
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError):
        line = last_line(log) if log is not None else ""
        if not line.startswith(trampoline.LOST_PREFIX):
            return None
        text = line.rpartition(": ")[2]
    kind, _, value = text.strip().partition(" ")
    try:
        number = int(value)
    except ValueError:
        return None
    return -number if kind == "signal" else number if kind == "exit" else None
