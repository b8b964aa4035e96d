"""The co-location simulation: reproducible, causal, smooth in the guard's reaction time, and
every policy judged against the dedicated floor on the same bursts and faults."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

from cotenant.policies.colocation import (
    COLOCATION,
    Actions,
    GpuState,
    Matching,
    Observation,
)
from cotenant.policies.colocation.policy import ColocationPolicy
from cotenant.sim.colocation.faults import FaultRates
from cotenant.sim.colocation.records import ColocationConfig, IntervalState
from cotenant.sim.colocation.run import run_colocation
from cotenant.sim.colocation.workload import ColocationWorkload, synthetic_workload
from cotenant.traces.genai import load_duty_cycles

SHARING = ("mps-fixed", "time-slicing", "priority", "muxflow", "cotenant-pause",
           "cotenant-priority")
GENAI = (Path(__file__).resolve().parents[3].parent / "shared" / "data" / "alibaba-genai-v2026"
         / "pod_gpu_duty_cycle_anon.tar.gz")


@pytest.fixture(scope="module")
def work() -> ColocationWorkload:
    return synthetic_workload(np.random.default_rng(3), gpus=80, intervals=90)


@pytest.mark.parametrize("policy", ["dedicated", *SHARING])
def test_a_seeded_run_is_reproducible_bit_for_bit(work: ColocationWorkload, policy: str) -> None:
    a, b = run_colocation(work, policy, 5), run_colocation(work, policy, 5)
    assert a.summary() == b.summary()
    assert np.array_equal(a.late_requests, b.late_requests)
    assert np.array_equal(a.offline_throughput, b.offline_throughput)


def test_dedicated_does_no_offline_work_and_its_misses_are_every_policys_floor(
        work: ColocationWorkload) -> None:
    floor = run_colocation(work, "dedicated", 5)
    assert floor.offline_throughput.sum() == 0.0
    assert floor.summary()["offline_starts"] == 0
    assert floor.violation_pct > 0.0  # the load's own bursts: an SLO nobody tuned to it
    for name in SHARING:
        run = run_colocation(work, name, 5)
        assert np.all(run.late_requests >= floor.late_requests - 1e-9), name
        assert np.allclose(run.requests, floor.requests)  # the same requests for everyone


@pytest.mark.parametrize("policy", SHARING)
def test_shares_stay_within_the_gpu_and_the_memory_limit_holds(work: ColocationWorkload,
                                                               policy: str) -> None:
    seen: list[IntervalState] = []
    pol = COLOCATION.create(policy)
    run = run_colocation(work, pol, 5, on_interval=seen.append)
    assert len(seen) == work.intervals
    for state in seen:
        assert np.all((state.online_share >= 0) & (state.online_share <= 100))
        assert np.all(state.memory_used_mib <= work.gpu_memory_mib + 1e-6)
    if pol.memory_limit:
        assert run.summary()["online_oom_intervals"] == 0
    assert run.utilisation.min() >= 0.0
    assert run.utilisation.max() <= 1.0
    assert np.all(run.sm_activity <= run.utilisation + 1e-9)  # a kernel does not fill the GPU


class _Recorder:
    """Wraps a policy and records what each decision was shown."""

    def __init__(self, policy: ColocationPolicy) -> None:
        self.policy, self.seen = policy, []  # type: ignore[var-annotated]
        self.log: list[tuple[Observation, Actions]] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.policy, name)

    def decide(self, obs: Observation, state: GpuState) -> tuple[Actions, GpuState]:
        self.seen.append(obs)
        actions, nxt = self.policy.decide(obs, state)
        self.log.append((obs, actions))
        return actions, nxt


@pytest.mark.parametrize("policy", ["muxflow", "cotenant-priority", "cotenant-pause"])
def test_no_decision_sees_a_load_that_has_not_happened(work: ColocationWorkload,
                                                       policy: str) -> None:
    """Change the load from sub-step 3 of minute 45 on: every observation and every action
    before that sub-step is the same, field by field."""
    cut, k = 45, 3
    fine = work.fine.copy() if work.fine is not None else None
    assert fine is not None
    fine[:, cut, k:] = np.minimum(1.0, fine[:, cut, k:] * 3.0 + 0.2)
    fine[:, cut + 1:, :] = np.minimum(1.0, fine[:, cut + 1:, :] * 3.0 + 0.2)
    later = replace(work, fine=fine)
    seen = []
    for w in (work, later):
        rec = _Recorder(COLOCATION.create(policy))
        run_colocation(w, rec, 5)  # type: ignore[arg-type]
        seen.append(rec)
    before = cut * work.substeps + k
    for (x, ax), (y, ay) in zip(seen[0].log[:before], seen[1].log[:before], strict=True):
        for name in ("load", "load_peak", "p99_ms", "placed", "running", "share", "stretch"):
            assert np.array_equal(np.nan_to_num(getattr(x, name)),
                                  np.nan_to_num(getattr(y, name))), name
        for name in ("share", "restart", "evict", "why"):
            assert np.array_equal(getattr(ax, name), getattr(ay, name)), name
    assert any(not np.array_equal(x.load, y.load)
               for (x, _), (y, _) in zip(seen[0].log[before:], seen[1].log[before:],
                                         strict=False))


def test_the_policy_is_told_a_predicted_stretch_not_the_pairs_true_one(
        work: ColocationWorkload) -> None:
    rec = _Recorder(COLOCATION.create("muxflow"))
    run_colocation(work, rec, 5)  # type: ignore[arg-type]
    assert len({float(s) for o in rec.seen for s in np.unique(o.stretch)}) == 1


@pytest.mark.shared_data
def test_late_requests_grow_smoothly_with_the_guards_reaction_time() -> None:
    """No cliff: between 0.3 and 0.9 s, no step of 0.1 s adds a percentage point (real
    GenAI duty cycles, 300 GPUs, 6 hours, seed 7)."""
    if not GENAI.exists():
        pytest.skip("../shared/data/alibaba-genai-v2026 is absent")
    series, _ = load_duty_cycles(GENAI)
    w = synthetic_workload(np.random.default_rng(7), gpus=300, intervals=360, load=series)
    got = [run_colocation(w, "muxflow", 7, ColocationConfig(reaction_s=r)).violation_pct
           for r in np.arange(0.3, 0.95, 0.1)]
    steps = [b - a for a, b in pairwise(got)]
    assert all(-0.05 <= s <= 1.0 for s in steps), got
    assert got[-1] > got[0]  # slower is worse, and by less than a cliff


def test_late_requests_grow_with_the_reaction_time_on_the_synthetic_load(
        work: ColocationWorkload) -> None:
    got = [run_colocation(work, "muxflow", 5, ColocationConfig(reaction_s=r)).violation_pct
           for r in (0.0, 1.0, 3.0)]
    assert got[0] < got[1] < got[2]


def test_a_share_change_restarts_the_co_runner(work: ColocationWorkload) -> None:
    free = run_colocation(work, "muxflow", 5, ColocationConfig(share_change_s=0.0))
    costly = run_colocation(work, "muxflow", 5, ColocationConfig(share_change_s=55.0))
    assert costly.summary()["share_changes"] > 0
    assert costly.offline_throughput.sum() < free.offline_throughput.sum()
    # time slicing and priority change nothing by restarting
    ts = run_colocation(work, COLOCATION.create("time-slicing", guard="muxflow"), 5)
    assert ts.summary()["share_changes"] == 0
    assert ts.summary()["throttles"] > 0


def test_the_guard_trades_offline_work_for_fewer_late_requests(work: ColocationWorkload) -> None:
    for name in ("mps-fixed", "time-slicing", "priority"):
        bare = run_colocation(work, COLOCATION.create(name, memory_limit=True), 5)
        guarded = run_colocation(work, COLOCATION.create(name, memory_limit=True,
                                                         guard="muxflow"), 5)
        assert guarded.violation_pct < bare.violation_pct, name
        assert guarded.offline_throughput.sum() <= bare.offline_throughput.sum() + 1e-9, name


def test_a_pause_costs_the_co_runner_its_length_and_no_restart(work: ColocationWorkload) -> None:
    run = run_colocation(work, "cotenant-priority", 5)
    s = run.summary()
    assert s["pauses"] > 0
    assert s["share_changes"] == 0
    assert s["evictions"] == 0


@pytest.mark.parametrize("policy", ["muxflow", "cotenant-pause", "cotenant-priority"])
def test_every_fault_class_is_handled_and_online_keeps_serving(work: ColocationWorkload,
                                                                policy: str) -> None:
    config = ColocationConfig(faults=FaultRates(0.02, 0.02, 0.02, 0.01))
    run = run_colocation(work, policy, 5, config)
    f = run.faults
    for name in ("offline-crash", "signal", "gpu-xid"):
        assert f[f"{name}:injected"] > 0
    assert f.get("signal:graceful-exit-requeued", 0) == f["signal:injected"]
    assert np.all(run.online_served == work.gpus)  # online first: served through it all


def test_without_online_first_an_mps_failure_takes_the_service_down(
        work: ColocationWorkload) -> None:
    config = ColocationConfig(faults=FaultRates(0.0, 0.0, 0.05, 0.0))
    run = run_colocation(work, COLOCATION.create("mps-fixed", memory_limit=True), 5, config)
    down = run.faults["mps-failure:online-down-one-interval"]
    assert down > 0
    assert int((work.gpus - run.online_served).sum()) == down


def test_without_a_memory_limit_online_growth_runs_out_of_memory(
        work: ColocationWorkload) -> None:
    bare = run_colocation(work, "mps-fixed", 5)
    limited = run_colocation(work, COLOCATION.create("mps-fixed", memory_limit=True), 5)
    assert bare.summary()["online_oom_intervals"] > 0
    assert limited.summary()["online_oom_intervals"] == 0


def test_a_job_is_credited_its_work_and_no_more() -> None:
    w = synthetic_workload(np.random.default_rng(4), gpus=40, intervals=120)
    for name in ("time-slicing", "priority", "muxflow"):
        run = run_colocation(w, name, 5, ColocationConfig(faults=FaultRates(0, 0, 0, 0)))
        done = float(run.offline_throughput.sum() * w.interval_s * w.gpus)
        assert done <= w.job_work_s.sum() + 1e-6
        finished = ~np.isnan(run.job_wait_min) if run.job_wait_min is not None else None
        assert finished is not None
        assert int(finished.sum()) == run.jobs_completed
        assert np.all(run.job_wait_min[finished] >= 0.0)  # type: ignore[index]


def test_admission_from_history_keeps_offline_work_off_busy_gpus(
        work: ColocationWorkload) -> None:
    everything = run_colocation(work, "priority", 5)
    admitted = run_colocation(work, COLOCATION.create("priority", max_load=0.3,
                                                      quantile=0.99), 5)
    assert admitted.running.sum() < everything.running.sum()
    assert admitted.running[:60].sum() == 0  # the first hour: no history yet


@pytest.mark.parametrize("matching", ["max-weight", "greedy", "random"])
def test_each_matching_pairs_jobs_that_fit(work: ColocationWorkload, matching: str) -> None:
    seen: list[IntervalState] = []
    pol = COLOCATION.create("muxflow", matching=Matching(matching))
    run_colocation(work, pol, 5, on_interval=seen.append)
    for state in seen:
        on = state.offline_job >= 0
        room = work.gpu_memory_mib - work.online_memory_mib
        assert np.all(work.job_memory_mib[state.offline_job[on]] <= room[on] + 1e-9)


def test_a_pause_ends_when_the_core_says_and_the_co_runner_idles_through_it(
        work: ColocationWorkload) -> None:
    """The simulator resumes a paused co-runner at the core's pause_until, as the agent does:
    a longer reaction delays the pause's start, not its end."""
    rec = _Recorder(COLOCATION.create("cotenant-priority"))
    run_colocation(work, rec, 5)  # type: ignore[arg-type]
    ends = [a.pause_until[np.isfinite(a.pause_until)] for _, a in rec.log]
    assert any(len(e) for e in ends)
    for (obs, act) in rec.log:
        i = np.isfinite(act.pause_until)
        now = np.broadcast_to(np.asarray(obs.now_s), i.shape)
        assert np.allclose(act.pause_until[i] - now[i], 30.0)


def test_work_done_before_an_eviction_is_credited_to_the_evicted_job(
        work: ColocationWorkload) -> None:
    run = run_colocation(work, COLOCATION.create("mps-fixed", guard="muxflow",
                                                 memory_limit=True), 5)
    assert run.summary()["evictions"] > 0
    assert run.job_wait_min is not None
    done = ~np.isnan(run.job_wait_min)
    assert np.all(run.job_wait_min[done] >= 0.0)  # no job finishes before it arrives
