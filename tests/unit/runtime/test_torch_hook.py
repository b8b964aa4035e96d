"""The torch side, in real interpreters started with the agent's environment: BE's operators
(the backward pass's too) wait while an HP lease is live; HP's module calls, in any thread,
renew its lease. Skipped where torch is not importable (CI); run on CPU torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cotenant.runtime import Board, GateSettings, HpLease, runtime_env

pytest.importorskip("torch")
pytestmark = pytest.mark.torch

BE = """
import json, time, torch
import _cotenant_runtime.hook as hook
net = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
x = torch.randn(8, 16)
loss = net(x).sum()
before = hook.ACTIVE.gate.stats.checks
loss.backward()
stats = hook.ACTIVE.gate.stats
print(json.dumps({"checks": stats.checks, "backward_checks": stats.checks - before,
                  "waits": stats.waits, "waited_s": stats.waited_s, "bounded": stats.bounded}))
"""
HP = """
import json, threading, time, torch
from _cotenant_runtime.lease import Board
import _cotenant_runtime.hook as hook
net = torch.nn.Linear(4, 4)
board = hook.ACTIVE.board
out = {}
def serve():
    net(torch.randn(1, 4))
    out["left_ns"] = board.hp_until_ns() - time.monotonic_ns()
t = threading.Thread(target=serve)
t.start(); t.join()
print(json.dumps(out))
"""


def run(code: str, role: str, board: Path, settings: GateSettings) -> dict[str, float]:
    env = {**os.environ, **runtime_env(role, board, settings, os.environ.get("PYTHONPATH"))}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert "cotenant runtime" not in out.stderr
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_be_operators_wait_while_an_hp_lease_is_live_backward_too(tmp_path: Path) -> None:
    path = tmp_path / "gpu0.board"
    board = Board(path)
    lease = HpLease(board, 60.0)
    lease.touch()  # HP busy for the whole run
    settings = GateSettings(max_hold_s=0.05, floor=0.0)
    try:
        stats = run(BE, "be", path, settings)
    finally:
        lease.release()
    assert stats["backward_checks"] > 0  # the dispatch mode sees the backward's operators
    assert stats["waits"] == stats["checks"] == stats["bounded"]  # each held to the bound
    assert stats["waited_s"] >= 0.05 * stats["waits"]
    idle = run(BE, "be", path, settings)  # HP released: nothing waits
    assert idle["waits"] == 0
    assert idle["checks"] == stats["checks"]


def test_hp_module_calls_renew_the_lease_from_any_thread(tmp_path: Path) -> None:
    path = tmp_path / "gpu0.board"
    settings = GateSettings(lease_s=30.0)
    out = run(HP, "hp", path, settings)
    assert 0 < out["left_ns"] <= 30e9
    board = Board(path)
    assert board.hp_until_ns() <= time.monotonic_ns()  # released when the process exited


HP_LOOP = """
import sys, time, torch
from pathlib import Path
net = torch.nn.Linear(4, 4)
net(torch.randn(1, 4))
print("ready", flush=True)
stop = Path(sys.argv[1])
while not stop.exists():
    net(torch.randn(1, 4))  # a busy server: a module call every millisecond
    time.sleep(0.001)
"""
BE_FORK = """
import json, os, torch
import _cotenant_runtime.hook as hook
x = torch.randn(4, 4)
r, w = os.pipe()
pid = os.fork()
if pid == 0:  # a DataLoader-like worker: its operators are never gated
    before = hook.ACTIVE.gate.stats.checks
    for _ in range(50):
        x = x + 1
    os.write(w, str(hook.ACTIVE.gate.stats.checks - before).encode())
    os._exit(0)
os.waitpid(pid, 0)
child_checks = int(os.read(r, 100))
print(json.dumps({"child_checks": child_checks}))
"""


def test_both_hooks_together_an_hp_server_holds_a_be_trainer(tmp_path: Path) -> None:
    """HP and BE both started with the agent's environment, nothing else: the HP process's
    module calls hold BE's operators (each wait to the bound, BE moving at its floor)."""
    path = tmp_path / "gpu0.board"
    settings = GateSettings(lease_s=0.05, max_hold_s=0.05, floor=0.2)
    env = {**os.environ, **runtime_env("hp", path, settings, os.environ.get("PYTHONPATH"))}
    stop = tmp_path / "stop"
    hp = subprocess.Popen([sys.executable, "-c", HP_LOOP, str(stop)], env=env,
                          stdout=subprocess.PIPE, text=True)
    try:
        assert hp.stdout is not None
        assert hp.stdout.readline().strip() == "ready"
        stats = run(BE, "be", path, settings)
    finally:
        stop.touch()
        hp.wait(timeout=60)
        if hp.stdout is not None:
            hp.stdout.close()
    assert hp.returncode == 0
    assert stats["waits"] > 0
    assert stats["waited_s"] >= 0.05 * stats["bounded"]


def test_a_forked_child_of_be_is_not_gated(tmp_path: Path) -> None:
    path = tmp_path / "gpu0.board"
    board = Board(path)
    lease = HpLease(board, 60.0)
    lease.touch()
    try:
        out = run(BE_FORK, "be", path, GateSettings())
    finally:
        lease.release()
    assert out["child_checks"] == 0
