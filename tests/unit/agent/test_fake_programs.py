"""The fake node's programs: warm-up, and an online service slowed by MPS co-runners."""

from __future__ import annotations

from pathlib import Path

import pytest

from cotenant.agent.backends import FakeNode, ManualClock
from cotenant.agent.backends.base import DaemonConfig
from cotenant.agent.backends.programs import Program
from cotenant.errors import InputError, UnknownNameError
from cotenant.perf import mps


def test_an_online_program_is_busy_longer_on_the_sms_busy_clients_leave_it() -> None:
    clock = ManualClock(0.0)
    node = FakeNode.build("A100-40GB", 1, clock, per_client_util=True)
    web = node.spawn(["fake-workload", "--util-pct", "20", "--model", "bert"], {}, 0)
    assert node.gpu(0).processes[0].sm_util_pct == 20.0  # alone: its load
    pipe = {"CUDA_MPS_PIPE_DIRECTORY": "/tmp/p", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "60"}
    node.start_daemon(DaemonConfig(0, Path("/tmp/p"), Path("/tmp/l")))
    train = node.spawn(["fake-workload", "--util-pct", "90", "--warmup-s", "5"], pipe, 0)
    util = {p.pid: p.sm_util_pct for p in node.gpu(0).processes}
    assert util[web] == 20.0  # the co-runner warms up: no kernels yet
    clock.advance(5.0)
    util = {p.pid: p.sm_util_pct for p in node.gpu(0).processes}
    serial = mps.ONLINE_SERIAL[mps.model_index("bert")]
    # slowed the 90 % of the time train runs kernels on its 60 % of the SMs
    assert util[web] == pytest.approx(20.0 * (0.9 / float(mps.speed(0.4, serial)) + 0.1))
    assert util[train] == 90.0  # no model: as given


def test_an_unknown_model_or_flag_is_refused() -> None:
    with pytest.raises(UnknownNameError, match="online model"):
        Program.from_argv(["fake-workload", "--model", "gpt-9"])
    with pytest.raises(InputError, match="--model"):  # listed among the valid flags
        Program.from_argv(["fake-workload", "--nope", "1"])
