"""The agent-twin benchmark's harness runs, and agrees with the simulator where it must."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from cotenant.sim.colocation_workload import synthetic_workload

BENCH = Path(__file__).resolve().parents[3] / "benchmarks"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("agent_twin", BENCH / "agent_twin.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


def test_an_idle_fleet_changes_no_share_in_either(bench: ModuleType) -> None:
    base = synthetic_workload(np.random.default_rng(3), gpus=2, intervals=6)
    work = dataclasses.replace(
        base, load=np.zeros_like(base.load), job_memory_mib=np.full(2, 1000.0),
        job_work_s=np.full(2, 1e12), job_profile=np.full(2, 0, np.int64),
        job_arrival=np.zeros(2, np.int64))
    sim, agent = bench.simulate(work, 3), bench.twin(work)
    for side in (sim, agent):
        assert side["share_changes_per_gpu_hour"] == 0.0
        assert side["colocated_gpu_hours"] == pytest.approx(0.2, abs=0.01)
    # both lose the first 30 s to the start, then run at the policy's share for an idle
    # service, sized with the same interference
    assert agent["offline_tput"] == pytest.approx(sim["offline_tput"], rel=1e-3)
    assert agent["online_seconds_over_slo_pct"] == 0.0
