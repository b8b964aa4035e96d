"""Real processes in a cgroup v2 per workload (no GPU needed, but a cgroup v2 the test may
write: skipped elsewhere). The cgroup finds what the token and the process group cannot (a
worker in a session of its own that also dropped its environment), freezes a workload whole,
new forks included, and kills it whole; an agent restart keeps using the recorded cgroup."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cotenant.agent.backends import cgroup_start, cgroups, procfs
from cotenant.agent.backends.base import ProcState
from cotenant.agent.backends.local import PopenProcesses
from cotenant.errors import InputError, PermanentError, TemporaryError

from .test_local_processes import (
    check_drain_keeps_its_checkpoint,
    check_interrupted_start,
    check_start_failures,
    wait_for,
)


def _test_root() -> Path | None:
    own = cgroups.own_dir()
    if own is None or not procfs.available():
        return None
    root = own / f"cotenant-test-{secrets.token_hex(4)}"
    if not cgroup_start.usable(root):
        return None
    root.rmdir()  # made by the fixture, for the tests that run
    return root


ROOT = _test_root()
needs_cgroups = pytest.mark.skipif(ROOT is None, reason="needs a writable cgroup v2")

SLEEPER = "import time; time.sleep(60)"
# a worker in a session of its own, with an empty environment: no group, no token
HIDDEN = ("import subprocess, sys, time; "
          "subprocess.Popen(['env', '-i', sys.executable, '-c', {worker!r}], "
          "start_new_session=True); {then}")
COUNTER = ("import sys, time\n"
           "n = 0\n"
           "while True:\n"
           "    n += 1\n"
           "    open(sys.argv[1], 'w').write(str(n))\n"
           "    time.sleep(0.02)")
FORKER = ("import subprocess, time\n"
          "while True:\n"
          "    subprocess.Popen(['sleep', '30'])\n"
          "    time.sleep(0.01)")


def hidden(worker: str, then: str = "time.sleep(60)") -> list[str]:
    return [sys.executable, "-c", HIDDEN.format(worker=worker, then=then)]


def checkpointer(ckpt: Path) -> str:
    """A worker that, on SIGTERM, writes ``done`` to ``ckpt`` and exits 0."""
    return ("import signal, sys, time\n"
            "def stop(*a):\n"
            f"    open({str(ckpt)!r}, 'w').write('done')\n"
            "    sys.exit(0)\n"
            "signal.signal(signal.SIGTERM, stop)\n"
            "time.sleep(60)")


def events(cgroup: Path) -> dict[str, str]:
    return dict(line.split() for line in (cgroup / "cgroup.events").read_text().splitlines())


def frozen(cgroup: Path) -> bool:
    return events(cgroup).get("frozen") == "1"


@pytest.fixture
def root() -> Iterator[Path]:
    assert ROOT is not None
    ROOT.mkdir(parents=True, exist_ok=True)
    yield ROOT
    for child in ROOT.iterdir():  # whatever a failing test left behind
        if child.is_dir():
            cgroups.kill(child)
    wait_for(lambda: not any(cgroups.procs(c) for c in ROOT.iterdir() if c.is_dir()))
    cgroups.remove(ROOT)


@pytest.fixture
def procs(tmp_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[PopenProcesses]:
    monkeypatch.delenv(procfs.TOKEN_VAR, raising=False)
    backend = PopenProcesses(tmp_path, drain_grace_s=1.0, cgroup_root=root)
    yield backend
    for pid, child in list(backend._children.items()):
        backend.send_signal(pid, signal.SIGKILL)
        child.popen.wait(10)


def cgroup_of(procs: PopenProcesses, pid: int) -> Path:
    cgroup = procs._children[pid].cgroup
    assert cgroup is not None
    return cgroup


def members(procs: PopenProcesses, pid: int) -> list[int]:
    return cgroups.procs(cgroup_of(procs, pid)) or []


def exited(procs: PopenProcesses, pid: int) -> bool:
    return procs.poll(pid).state is not ProcState.RUNNING


@needs_cgroups
def test_a_worker_with_no_group_and_no_token_is_frozen_and_killed(
        procs: PopenProcesses, tmp_path: Path) -> None:
    count = tmp_path / "count"
    pid = procs.spawn(hidden(COUNTER.replace("sys.argv[1]", repr(str(count)))), {}, gpu=0)
    cgroup = cgroup_of(procs, pid)
    assert wait_for(lambda: len(members(procs, pid)) == 2 and count.exists())
    worker = next(p for p in members(procs, pid) if p != pid)
    assert procfs.token_of(worker) is None  # the token alone would not find it
    assert worker not in procfs.members(procs._children[pid].token, pid)
    assert procs.members(pid) == sorted([pid, worker])  # its cgroup finds it
    procs.send_signal(pid, signal.SIGSTOP)
    assert wait_for(lambda: frozen(cgroup))
    before = count.read_text()
    time.sleep(0.3)
    assert count.read_text() == before  # it does not run while frozen
    procs.send_signal(pid, signal.SIGCONT)
    assert wait_for(lambda: not frozen(cgroup) and count.read_text() != before)
    procs.send_signal(pid, signal.SIGKILL)
    assert wait_for(lambda: exited(procs, pid))
    assert procs.poll(pid).returncode == -signal.SIGKILL
    assert not procfs.alive(worker)
    assert not cgroup.exists()  # removed once empty


@needs_cgroups
def test_a_freeze_holds_processes_forked_while_it_is_applied(procs: PopenProcesses) -> None:
    """A process that forks every 10 ms: a SIGSTOP to each member can miss the newest, the
    freezer cannot."""
    pid = procs.spawn([sys.executable, "-c", FORKER], {}, gpu=0)
    cgroup = cgroup_of(procs, pid)
    assert wait_for(lambda: len(members(procs, pid)) > 5)
    procs.send_signal(pid, signal.SIGSTOP)
    assert wait_for(lambda: frozen(cgroup))
    held = sorted(members(procs, pid))
    time.sleep(0.3)
    assert sorted(members(procs, pid)) == held  # no new process while frozen
    procs.send_signal(pid, signal.SIGKILL)
    assert wait_for(lambda: exited(procs, pid))
    assert all(not procfs.alive(p) for p in held)


@needs_cgroups
def test_a_stop_of_a_frozen_workload_lets_it_checkpoint(
        procs: PopenProcesses, tmp_path: Path) -> None:
    """The supervisor's stop of a paused client: SIGTERM, then SIGCONT (which thaws)."""
    ckpt = tmp_path / "ckpt"
    worker = checkpointer(ckpt)
    pid = procs.spawn([sys.executable, "-c", worker], {}, gpu=0)
    cgroup = cgroup_of(procs, pid)
    time.sleep(0.5)  # its handler installed
    procs.send_signal(pid, signal.SIGSTOP)
    assert wait_for(lambda: frozen(cgroup))
    procs.send_signal(pid, signal.SIGTERM)
    time.sleep(0.2)
    assert not ckpt.exists()  # held while frozen
    procs.send_signal(pid, signal.SIGCONT)
    assert wait_for(lambda: exited(procs, pid))
    assert procs.poll(pid).returncode == 0
    assert ckpt.read_text() == "done"


@needs_cgroups
def test_a_drain_thaws_a_frozen_workload_so_that_it_checkpoints(
        procs: PopenProcesses, tmp_path: Path) -> None:
    """Frozen, then the launcher alone is killed (the OOM killer): the drain's SIGTERM
    comes with a thaw, so the worker checkpoints instead of waiting for the SIGKILL."""
    ckpt = tmp_path / "ckpt"
    worker = checkpointer(ckpt)
    pid = procs.spawn(hidden(worker), {}, gpu=0)
    cgroup = cgroup_of(procs, pid)
    assert wait_for(lambda: len(members(procs, pid)) == 2)
    time.sleep(0.5)  # its handler installed
    procs.send_signal(pid, signal.SIGSTOP)
    assert wait_for(lambda: frozen(cgroup))
    os.kill(pid, signal.SIGKILL)
    assert wait_for(lambda: exited(procs, pid))
    assert ckpt.read_text() == "done"


@needs_cgroups
def test_a_resume_also_reaches_a_process_stopped_by_a_signal(procs: PopenProcesses) -> None:
    pid = procs.spawn(hidden(SLEEPER), {}, gpu=0)
    assert wait_for(lambda: len(members(procs, pid)) == 2)
    worker = next(p for p in members(procs, pid) if p != pid)
    os.kill(worker, signal.SIGSTOP)
    assert wait_for(lambda: procfs.state(worker) == "T")
    procs.send_signal(pid, signal.SIGCONT)
    assert wait_for(lambda: procfs.state(worker) not in ("T", None))


@needs_cgroups
def test_what_a_finished_leader_leaves_in_its_cgroup_is_killed(procs: PopenProcesses) -> None:
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    pid = procs.spawn(hidden(stubborn, then="time.sleep(0.5)"), {}, gpu=0)
    assert wait_for(lambda: len(members(procs, pid)) == 2)
    helper = next(p for p in members(procs, pid) if p != pid)
    assert wait_for(lambda: exited(procs, pid), timeout_s=5.0)
    assert procs.poll(pid).returncode == 0
    assert not procfs.alive(helper)


@needs_cgroups
def test_a_restarted_agent_keeps_to_the_recorded_cgroup(
        procs: PopenProcesses, tmp_path: Path, root: Path) -> None:
    """Even one run with --cgroups off: the book names the cgroup, and only it finds the
    hidden worker."""
    pid = procs.spawn(hidden(SLEEPER), {}, gpu=0)
    cgroup = cgroup_of(procs, pid)
    assert wait_for(lambda: len(members(procs, pid)) == 2)
    worker = next(p for p in members(procs, pid) if p != pid)
    book = json.loads((tmp_path / "leaders.json").read_text())
    assert book[str(pid)]["cgroup"] == str(cgroup)
    again = PopenProcesses(tmp_path)
    assert again.poll(pid).state is ProcState.RUNNING
    again.send_signal(pid, signal.SIGSTOP)
    assert wait_for(lambda: frozen(cgroup))
    again.send_signal(pid, signal.SIGKILL)
    assert wait_for(lambda: not procfs.alive(worker))
    assert wait_for(lambda: again.poll(pid).state is ProcState.UNKNOWN)  # the old agent's child
    procs._children[pid].popen.wait(10)


@needs_cgroups
def test_a_new_agent_thaws_and_tidies_only_its_own_cgroups(
        tmp_path: Path, root: Path) -> None:
    """An agent that died may have left a workload frozen, and empty cgroups: the next one
    thaws every workload cgroup, removes the empty ones it does not know and the probes,
    and touches nothing else below the root."""
    left, kept, busy = "a" * 24, "b" * 24, "c" * 24
    for name in (left, kept, busy, "reserved", "probe-1234"):
        (root / name).mkdir()
    (tmp_path / "leaders.json").write_text(json.dumps(
        {"1": {"token": kept, "start": 1, "boot": "b", "cgroup": str(root / kept)}}))
    sleeper = cgroup_start.popen([sys.executable, "-c", SLEEPER], dict(os.environ), root / busy)
    try:
        assert cgroups.freeze(root / busy, True)
        assert wait_for(lambda: frozen(root / busy))
        PopenProcesses(tmp_path, cgroup_root=root)
        assert sorted(c.name for c in root.iterdir() if c.is_dir()) == sorted(
            [kept, busy, "reserved"])
        assert wait_for(lambda: not frozen(root / busy))
    finally:
        sleeper.kill()
        sleeper.wait()


@needs_cgroups
def test_a_cgroup_from_the_book_must_be_a_workload_cgroup(
        procs: PopenProcesses, tmp_path: Path) -> None:
    """The book is a file: a path in it that is not a workload cgroup below the mount is
    never written to (nor walked, nor removed)."""
    plain = tmp_path / ("d" * 24)
    (plain / "inner").mkdir(parents=True)
    pid = procs.spawn([sys.executable, "-c", SLEEPER], {}, gpu=0)
    book = json.loads((tmp_path / "leaders.json").read_text())
    book[str(pid)]["cgroup"] = str(plain)
    (tmp_path / "leaders.json").write_text(json.dumps(book))
    again = PopenProcesses(tmp_path)
    again.send_signal(pid, signal.SIGSTOP)  # by its group and token instead
    assert wait_for(lambda: procfs.state(pid) == "T")
    again.send_signal(pid, signal.SIGKILL)
    assert wait_for(lambda: procfs.state(pid) in (None, "Z"))
    assert sorted(p.name for p in plain.iterdir()) == ["inner"]  # no cgroup.* files made


@needs_cgroups
def test_a_start_that_fails_says_why_and_leaves_no_cgroup(
        procs: PopenProcesses, root: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """As Popen would say it: the exec's error comes back from the trampoline. Its cgroup
    goes, though the trampoline just reaped can keep it busy for a moment."""
    for _ in range(10):
        with pytest.raises(PermanentError, match="not found"):
            procs.spawn(["no-such-command-cotenant"], {}, gpu=0)
    script = tmp_path / "script"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(PermanentError, match="permission denied"):
        procs.spawn([str(script)], {}, gpu=0)
    script.write_text("echo no shebang\n")
    script.chmod(0o755)
    with pytest.raises(PermanentError, match="not a program"):
        procs.spawn([str(script)], {}, gpu=0)
    check_start_failures(procs, tmp_path)
    monkeypatch.setattr(cgroup_start.subprocess, "Popen", _refuse)
    with pytest.raises(ValueError, match="refused"):
        procs.spawn([sys.executable, "-c", SLEEPER], {}, gpu=0)
    assert [c for c in root.iterdir() if c.is_dir()] == []


@needs_cgroups
def test_an_exec_error_of_any_kind_comes_back(root: Path) -> None:
    """Not only an OSError: an empty program name (the spec refuses it) is a ValueError in
    the trampoline, which must say so rather than seem to start and exit 1."""
    (root / ("a" * 24)).mkdir()
    with pytest.raises(OSError, match="empty"):
        cgroup_start.popen([""], {}, root / ("a" * 24))


@needs_cgroups
def test_an_interrupted_start_leaves_nothing_running(
        procs: PopenProcesses, root: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An interrupt while the trampoline reads its environment or execs (a review's SIGTERMs
    to the agent landed there 34 times in 140, before the agent stopped between ticks), or
    after, before the leader's record: the workload and its cgroup go, no pipe stays open."""
    check_interrupted_start(procs, tmp_path, monkeypatch)
    fd_count = len(os.listdir("/proc/self/fd"))
    receive = cgroup_start._receive

    def interrupted(fd: int) -> bytes:
        receive(fd)  # the workload runs now
        raise KeyboardInterrupt

    monkeypatch.setattr(cgroup_start, "_receive", interrupted)
    with pytest.raises(KeyboardInterrupt):
        procs.spawn([sys.executable, "-c", SLEEPER], {}, gpu=0)
    assert [c for c in root.iterdir() if c.is_dir()] == []
    assert len(os.listdir("/proc/self/fd")) == fd_count


@needs_cgroups
def test_an_agent_started_without_stdio_still_passes_the_environment(
        root: Path, tmp_path: Path) -> None:
    """With fds 0-2 closed, os.pipe hands those out; the child's own 0-2 must not replace
    the trampoline's pipes."""
    out = tmp_path / "out"
    cgroup = root / ("e" * 24)
    cgroup.mkdir()
    script = ("import pathlib, subprocess\n"
              "from cotenant.agent.backends import cgroup_start\n"
              f"proc = cgroup_start.popen(['sh', '-c', 'echo $X > {out}'], {{'X': 'ok'}}, "
              f"pathlib.Path({str(cgroup)!r}), stdin=subprocess.DEVNULL)\n"
              f"pathlib.Path({str(out)!r} + '.rc').write_text(str(proc.wait()))\n")
    done = subprocess.run(["sh", "-c", 'exec "$0" -c "$1" 0<&- 1>&- 2>&-', sys.executable,
                           script], timeout=60, check=False)
    assert done.returncode == 0
    assert (tmp_path / "out.rc").read_text() == "0"
    assert out.read_text() == "ok\n"


def _refuse(*args: object, **kwargs: object) -> None:
    raise ValueError("refused")


@needs_cgroups
def test_a_cgroup_that_cannot_be_joined_defers_the_start(tmp_path: Path) -> None:
    with pytest.raises(TemporaryError, match="cannot join cgroup"):
        cgroup_start.popen([sys.executable, "-c", ""], {}, tmp_path / "gone")


@needs_cgroups
def test_a_signal_right_after_the_start_is_not_lost(procs: PopenProcesses) -> None:
    """In its first milliseconds the leader has not joined its cgroup yet (an empty one)."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        for _ in range(5):
            pid = procs.spawn([sys.executable, "-c", SLEEPER], {}, gpu=0)
            procs.send_signal(pid, signum)
            assert wait_for(lambda: exited(procs, pid), timeout_s=5.0)  # noqa: B023


@needs_cgroups
def test_the_environment_reaches_the_workload_byte_for_byte(procs: PopenProcesses) -> None:
    """Names a shell would drop or reset, and a PYTHONHOME that would break a Python
    trampoline run in it."""
    env = {"spring.profiles.active": "x=1", "HYDRA-X": "y", "IFS": ":", "PWD": "/nowhere",
           "PYTHONHOME": "/nonexistent", "UNICODE": "\u00e9\u4e2d"}
    pid = procs.spawn(["env"], env, gpu=0)
    log = procs._children[pid].log
    assert wait_for(lambda: exited(procs, pid))
    assert procs.poll(pid).returncode == 0
    seen = dict(line.split("=", 1) for line in log.read_text().splitlines())
    assert {k: seen.get(k) for k in env} == env


@needs_cgroups
def test_the_argv_is_never_read_by_the_shell(procs: PopenProcesses, tmp_path: Path) -> None:
    out = tmp_path / "out"
    pid = procs.spawn([sys.executable, "-c", "import sys; open(sys.argv[1], 'w').write("
                       "repr(sys.argv[2:]) + open('/proc/self/cgroup').read())", str(out),
                       "$HOME", "a b", "; rm -rf x", "`id`", "-c"], {}, gpu=0)
    cgroup = cgroup_of(procs, pid)
    assert wait_for(lambda: exited(procs, pid))
    text = out.read_text()
    assert text.startswith(repr(["$HOME", "a b", "; rm -rf x", "`id`", "-c"]))
    assert f"/{cgroup.parent.name}/{cgroup.name}\n" in text  # it ran inside its cgroup


@needs_cgroups
def test_open_root_takes_auto_off_or_a_usable_path(tmp_path: Path) -> None:
    assert cgroup_start.open_root("off", tmp_path) is None
    assert ROOT is not None
    name = cgroup_start.default_name(tmp_path)
    assert name.startswith(cgroups.DEFAULT_NAME + "-")
    assert cgroup_start.default_name(tmp_path / "other") != name  # two agents, two roots
    default = ROOT.parent / name
    try:
        assert cgroup_start.open_root("auto", tmp_path) == default
    finally:
        cgroups.remove(default)
    with pytest.raises(InputError, match="--cgroups"):
        cgroup_start.open_root(str(tmp_path / "not-a-cgroup"), tmp_path)


def test_the_mount_and_own_cgroup_are_read_from_proc(tmp_path: Path) -> None:
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(
        "25 1 0:23 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
        "36 25 0:31 / /sys/fs/cgroup/my\\040unified rw,relatime shared:10 - cgroup2 cgroup2 rw\n")
    assert cgroups.mountpoint(mountinfo) == Path("/sys/fs/cgroup/my unified")
    mountinfo.write_text("25 1 0:23 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n")
    assert cgroups.mountpoint(mountinfo) is None
    own = tmp_path / "cgroup"
    own.write_text("4:memory:/x\n0::/system.slice/cotenant-agent.service\n")
    assert cgroups.own_path(own) == "/system.slice/cotenant-agent.service"
    assert cgroups.own_path(tmp_path / "missing") is None
    mountinfo.write_text("36 25 0:31 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")
    assert cgroups.own_dir(mountinfo, own) == Path(
        "/sys/fs/cgroup/system.slice/cotenant-agent.service")
    # a container that sees only its own subtree mounted, while /proc names the host's path
    mountinfo.write_text("36 25 0:31 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")
    own.write_text("0::/kubepods/pod1/agent\n")
    assert cgroups.own_dir(mountinfo, own) == Path("/sys/fs/cgroup/agent")
    own.write_text("0::/../../elsewhere\n")  # outside its cgroup namespace
    assert cgroups.own_dir(mountinfo, own) is None
    own.write_text("0::/kubepods/pod2\n")  # not below what is mounted
    assert cgroups.own_dir(mountinfo, own) is None
    assert cgroup_start.open_root("off", tmp_path) is None
    assert not cgroup_start.usable(tmp_path / "plain")  # not inside a cgroup: not even made
    assert not os.path.exists(tmp_path / "plain")
    (tmp_path / "dir").mkdir()
    assert not cgroup_start.usable(tmp_path / "dir")  # a plain directory has no cgroup files
    assert list((tmp_path / "dir").iterdir()) == []  # the probe removed


@needs_cgroups
def test_a_drain_is_not_frozen_or_signalled_twice(
        procs: PopenProcesses, tmp_path: Path) -> None:
    check_drain_keeps_its_checkpoint(procs, tmp_path)
