"""Supervisor basics, workload specs, the SQLite state and the MPS manager on the fake node."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from cotenant.agent import state
from cotenant.agent.backends import FakeNode, ManualClock
from cotenant.agent.backends.base import ProcessStatus, ProcState, XidEvent
from cotenant.agent.faults import FaultClass, classify
from cotenant.agent.mps import MpsManager, pinned_mem_limit
from cotenant.agent.spec import Role, WorkloadSpec
from cotenant.agent.state import StateStore, Status
from cotenant.errors import InputError

from .harness import OFFLINE, ONLINE, make_agent


def test_spec_parses_and_round_trips() -> None:
    spec = WorkloadSpec.from_dict(OFFLINE)
    assert spec.role is Role.OFFLINE
    assert spec.argv == ("fake-workload", "--mem-mib", "8000", "--util-pct", "60")
    assert WorkloadSpec.from_dict(spec.to_dict()) == spec


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"argv": "sh -c 'rm -rf /'"}, "argv"),
        ({"argv": []}, "argv"),
        ({"argv": ["ok", 3]}, "argv"),
        ({"role": "batch"}, "role"),
        ({"gpu": -1}, "gpu"),
        ({"gpu": "0"}, "gpu"),
        ({"sm_share": 0}, "sm_share"),
        ({"sm_share": 101}, "sm_share"),
        ({"mem_limit_mib": 0}, "mem_limit_mib"),
        ({"env": {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "100"}}, "env"),
        ({"env": {"A=B": "1"}}, "env"),
        ({"env": {"A": "x\0y"}}, "env"),
        ({"argv": ["python", "a\0b"]}, "argv"),
        ({"argv": ["", "serve.py"]}, "argv"),
        ({"argv": ["python", "\ud800"]}, "argv"),  # JSON spells a lone surrogate: no bytes
        ({"env": {"A": "\udfff"}}, "env"),
        ({"env": {"\ud800": "1"}}, "env"),
        ({"name": "Bad Name"}, "name"),
        ({"name": "web\n"}, "name"),
        ({"env": {"A\nB": "1"}}, "env"),
        ({"slo_ms": 5e-324}, "slo_ms"),
        ({"slo_ms": 1e308}, "slo_ms"),
        ({"role": "online", "latency_metric": {"url": "http://u:p@host/metrics",
                                               "histogram": "lat"}}, "latency_metric.url"),
        ({"shell": True}, "shell"),
    ],
)
def test_bad_specs_name_the_field(change: dict[str, object], where: str) -> None:
    with pytest.raises(InputError, match=f"workload.{where}"):
        WorkloadSpec.from_dict({**OFFLINE, **change})


def test_state_is_sqlite_wal_and_keeps_everything(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.db")
    assert store.journal_mode() == "wal"
    store.add(WorkloadSpec.from_dict(ONLINE), 1.0)
    with pytest.raises(InputError, match="already exists"):
        store.add(WorkloadSpec.from_dict(ONLINE), 2.0)
    store.event(1.0, "web", "exit", "oom", "x")
    assert store.fault_counts() == {("web", "oom"): 1}


def test_run_stop_and_complete(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit(ONLINE)
    agent.submit({**OFFLINE, "name": "short", "argv": ["fake-workload", "--duration-s", "2"]})
    agent.run(1.0)
    web = agent.record("web")
    assert web.status is Status.RUNNING
    assert web.pid is not None
    env = agent.node.env_of(web.pid)
    assert env["CUDA_MPS_PIPE_DIRECTORY"].endswith("mps/gpu0/pipe")
    short = agent.record("short")
    assert short.pid is not None
    short_env = agent.node.env_of(short.pid)
    assert short_env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
    assert short_env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=10000M"
    agent.run(2.0)
    assert agent.status("short") is Status.COMPLETED
    agent.sup.stop("web", agent.clock())
    assert agent.status("web") is Status.STOPPING
    agent.run(0.5)
    assert agent.status("web") is Status.STOPPED
    assert agent.record("web").restarts == 0


def test_stop_waits_for_a_checkpoint_and_kills_after_the_grace(tmp_path: Path) -> None:
    """A job that checkpoints for 4 s on SIGTERM stops by itself; one that ignores SIGTERM is
    killed once the supervisor's 10 s grace has passed. A share change waits the same way."""
    agent = make_agent(tmp_path)
    argv = {"ckpt": ["fake-workload", "--term-delay-s", "4"],
            "deaf": ["fake-workload", "--term-delay-s", "inf"]}
    for name, cmd in argv.items():
        agent.submit({**OFFLINE, "name": name, "argv": cmd, "mem_limit_mib": 1000})
    agent.run(1.0)
    agent.sup.stop("ckpt", agent.clock())
    agent.sup.stop("deaf", agent.clock())
    agent.run(3.5)
    assert agent.status("ckpt") is Status.STOPPING  # still checkpointing
    agent.run(1.0)
    assert agent.status("ckpt") is Status.STOPPED
    assert agent.status("deaf") is Status.STOPPING
    agent.run(5.0)
    assert agent.status("deaf") is Status.STOPPING  # 9.5 s: still within the grace
    agent.run(1.5)
    assert agent.status("deaf") is Status.STOPPED
    assert "SIGKILL" in agent.record("deaf").last_exit
    assert "SIGTERM" in agent.record("ckpt").last_exit
    agent.submit({**OFFLINE, "name": "moved", "argv": argv["ckpt"], "mem_limit_mib": 1000})
    agent.run(1.0)
    old = agent.record("moved").pid
    agent.sup.restart_for_share("moved", 30, agent.clock())
    agent.run(3.5)
    assert agent.status("moved") is Status.RESTARTING
    assert agent.node.poll(old or 0).state is ProcState.RUNNING
    agent.run(1.0)
    moved = agent.record("moved")
    assert moved.status is Status.RUNNING
    assert moved.pid != old
    assert moved.applied_pct == 30
    # exits the agent asked for are logged, not counted as faults (metrics, restarts)
    assert agent.store.fault_counts() == {}
    assert agent.record("deaf").last_exit == "requested: killed by SIGKILL"
    assert moved.restarts == 0


def test_a_crash_while_stopping_is_still_a_fault(tmp_path: Path) -> None:
    """The signals the agent sends, exit 0 or a shell's 143 answer a stop; an XID or a CUDA
    error on the way out (while checkpointing) is counted."""
    agent = make_agent(tmp_path)
    ckpt = ["fake-workload", "--term-delay-s", "4"]
    agent.submit({**OFFLINE, "argv": ckpt, "mem_limit_mib": 1000})
    agent.submit({**OFFLINE, "name": "cuda", "argv": [*ckpt, "--crash-at-s", "3"],
                  "mem_limit_mib": 1000})
    for name, code in (("sh", "143"), ("torchrun", "1")):  # their exits on SIGTERM
        agent.submit({**OFFLINE, "name": name, "mem_limit_mib": 1000,
                      "argv": [*ckpt, "--duration-s", "2", "--exit-code", code]})
    agent.run(1.0)
    pid = agent.record("train").pid
    assert pid is not None
    names = ("train", "cuda", "sh", "torchrun")
    for name in names:
        agent.sup.stop(name, agent.clock())
    agent.node.inject_xid(0, 43, pid=pid)
    agent.run(3.0)
    assert {n: agent.status(n) for n in names} == dict.fromkeys(names, Status.STOPPED)
    assert agent.store.fault_counts() == {("train", "xid"): 1, ("cuda", "cuda"): 1}
    assert agent.record("sh").last_exit.startswith("requested: exit 143")
    assert agent.record("torchrun").last_exit.startswith("requested: exit 1")


def test_submit_unknown_gpu_and_unknown_stop(tmp_path: Path) -> None:
    agent = make_agent(tmp_path, gpus=2)
    with pytest.raises(InputError, match="no GPU 7"):
        agent.submit({**ONLINE, "gpu": 7})
    with pytest.raises(InputError, match="does not exist"):
        agent.sup.stop("nope", 0.0)


def test_gives_up_after_max_restarts(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.sup.recovery = replace(agent.sup.recovery, max_restarts=2)
    agent.submit({**OFFLINE, "argv": ["fake-workload", "--exit-code", "3", "--duration-s", "1"]})
    agent.run(20.0)
    assert agent.status("train") is Status.FAILED
    assert agent.record("train").restarts == 2


def test_classify_exits() -> None:
    def st(code: int, msg: str = "") -> ProcessStatus:
        return ProcessStatus(7, ProcState.EXITED, code, msg)

    assert classify(st(0), 0, 5.0)[0] is FaultClass.NONE
    assert classify(st(-15), 0, 5.0) == (FaultClass.SIGNAL, "killed by SIGTERM")
    assert classify(st(1, "CUDA out of memory"), 0, 5.0)[0] is FaultClass.OOM
    assert classify(st(1, "CUDA error: illegal address"), 0, 5.0)[0] is FaultClass.CUDA
    assert classify(st(1, "MPS client terminated"), 0, 5.0)[0] is FaultClass.MPS
    assert classify(st(1, "boom"), 0, 5.0)[0] is FaultClass.CRASH
    assert classify(st(1), 0, 5.0, [XidEvent(0, 43, 4.0, 7)])[0] is FaultClass.XID
    assert classify(st(1), 0, 5.0, [XidEvent(1, 43, 4.0, 7)])[0] is FaultClass.CRASH
    assert classify(st(-9), 0, 5.0, mps_failed=True)[0] is FaultClass.MPS
    assert classify(ProcessStatus(7, ProcState.UNKNOWN), 0, 5.0)[0] is FaultClass.LOST


def test_mps_manager_per_gpu_dirs_defaults_and_restart(tmp_path: Path) -> None:
    node = FakeNode.build("H100-80GB", 2, ManualClock())
    mps = MpsManager(node, tmp_path, default_thread_pct=80, default_mem_limit_mib=5000)
    assert mps.config(1).pipe_dir == tmp_path / "mps" / "gpu1" / "pipe"
    assert mps.config(1).log_dir == tmp_path / "mps" / "gpu1" / "log"
    assert mps.ensure(0)
    assert not mps.ensure(0)
    assert mps.healthy(0)
    assert not mps.healthy(1)
    pid = node.spawn(["fake-workload", "--mem-mib", "6000"], mps.client_env(0), 0)
    assert node.poll(pid).state is ProcState.EXITED  # past the daemon's default limit
    node.kill_daemon(0)
    assert mps.ensure(0)
    assert mps.restarts == {0: 1}
    mps.stop(0)
    assert not mps.healthy(0)
    env = mps.client_env(0, 30, 2048)
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "30"
    assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == pinned_mem_limit(2048) == "0=2048M"
    with pytest.raises(InputError, match="outside 1-100"):
        mps.client_env(0, 0)


def test_only_the_newest_finished_workloads_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(state, "KEEP_FINISHED", 2)
    store = StateStore(tmp_path / "s.db")
    try:
        for i in range(4):
            record = store.add(WorkloadSpec.from_dict({**OFFLINE, "name": f"j{i}"}), float(i))
            store.update(record, status=Status.COMPLETED, since=float(i))
        running = store.add(WorkloadSpec.from_dict({**OFFLINE, "name": "live"}), 10.0)
        names = {r.spec.name for r in store.all()}
        assert names == {"j2", "j3", "live"}  # j0, j1: the oldest finished, gone
        assert running.status is Status.PENDING
    finally:
        store.close()


def test_the_event_log_is_pruned_but_fault_counts_never_fall(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(state, "KEEP_EVENTS", 5)
    monkeypatch.setattr(state, "PRUNE_EVERY", 4)
    store = StateStore(tmp_path / "s.db")
    try:
        for i in range(12):
            store.event(float(i), "train", "exit", fault="offline-crash", detail=str(i))
        kept = [int(e.detail) for e in store.events("train")]
        assert kept[0] > 0  # the oldest went
        assert kept[-1] == 11
        assert len(kept) <= 5 + 4
        assert store.fault_counts() == {("train", "offline-crash"): 12}
    finally:
        store.close()


def test_a_state_from_before_the_count_table_is_counted_once(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store = StateStore(db)
    for i in range(3):
        store.event(float(i), "train", "exit", fault="signal")
    store.close()
    with sqlite3.connect(db) as conn:  # as an older agent left it
        conn.execute("DROP TABLE fault_counts")
    for _ in range(2):  # reopened twice: counted from the log once, then kept
        store = StateStore(db)
        assert store.fault_counts() == {("train", "signal"): 3}
        store.close()
