"""The co-location simulation: determinism, invariants, fault handling, policy contrasts."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from cotenant.errors import InputError
from cotenant.policies.colocation import COLOCATION
from cotenant.sim.colocation import guard_in_time, run_colocation
from cotenant.sim.colocation_faults import FAULTS, FaultRates
from cotenant.sim.colocation_records import ColocationConfig, IntervalState
from cotenant.sim.colocation_workload import (
    ColocationWorkload,
    build_workload,
    synthetic_workload,
)
from cotenant.traces.genai import load_duty_cycles
from cotenant.traces.source import load_workload

POLICIES = ("dedicated", "mps-fixed", "time-slicing", "muxflow")
FloatArray = npt.NDArray[np.float64]


@pytest.fixture(scope="module")
def work() -> ColocationWorkload:
    return synthetic_workload(np.random.default_rng(3), gpus=120, intervals=240)


def test_registry_names_and_aliases() -> None:
    assert COLOCATION.names() == list(POLICIES)
    assert COLOCATION.canonical("TS") == "time-slicing"


@pytest.mark.parametrize("policy", POLICIES)
def test_seeded_runs_are_bit_for_bit_reproducible(work: ColocationWorkload, policy: str) -> None:
    a = run_colocation(work, policy, 7)
    b = run_colocation(work, policy, 7)
    for field in ("utilisation", "violation_rate", "offline_throughput", "running"):
        assert np.array_equal(getattr(a, field), getattr(b, field))
    assert a.faults == b.faults


def test_dedicated_has_no_offline_work_and_no_interference(work: ColocationWorkload) -> None:
    run = run_colocation(work, "dedicated", 1)
    assert run.offline_throughput.sum() == 0.0
    assert run.running.sum() == 0
    assert run.throttles == run.evictions == 0
    assert all(v == 0 for k, v in run.faults.items())
    # with no co-runner, violations are only the load's own (p99 alone over the SLO)
    muxflow = run_colocation(work, "muxflow", 1)
    assert muxflow.violation_rate.mean() <= run.violation_rate.mean() + 0.01


@pytest.mark.parametrize("policy", POLICIES)
def test_shares_and_memory_stay_within_the_gpu(work: ColocationWorkload, policy: str) -> None:
    seen: list[IntervalState] = []
    run_colocation(work, policy, 2, on_interval=seen.append)
    assert len(seen) == work.intervals
    for state in seen:
        assert np.all((state.online_share >= 1) & (state.online_share <= 100))
        assert np.all(state.memory_used_mib <= work.gpu_memory_mib + 1e-6)
        jobs = state.offline_job[state.offline_job >= 0]
        assert len(np.unique(jobs)) == len(jobs)  # a job runs on one GPU at a time


@pytest.mark.parametrize("fault", FAULTS)
def test_every_fault_class_leaves_online_services_running(
    work: ColocationWorkload, fault: str
) -> None:
    rates = dict.fromkeys(("offline_crash", "signal", "mps_failure", "gpu_xid"), 0.0)
    rates[fault.replace("-", "_")] = 0.05
    config = ColocationConfig(faults=FaultRates(**rates))
    served: list[int] = []
    run = run_colocation(
        work, "muxflow", 4, config, on_interval=lambda s: served.append(s.online_served)
    )
    assert run.faults[f"{fault}:injected"] > 0
    assert served == [work.gpus] * work.intervals
    assert np.all(run.online_served == work.gpus)
    outcomes = sum(v for k, v in run.faults.items() if k.startswith(fault) and "injected" not in k)
    assert outcomes >= run.faults[f"{fault}:injected"]
    assert run.offline_throughput.sum() > 0  # offline work resumes after faults


def test_graceful_signals_lose_no_progress_but_kills_do(work: ColocationWorkload) -> None:
    config = ColocationConfig(faults=FaultRates(0.0, 0.05, 0.0, 0.0))
    mux = run_colocation(work, "muxflow", 5, config)
    fixed = run_colocation(work, "mps-fixed", 5, config)
    assert mux.faults.get("signal:graceful-exit-requeued", 0) == mux.faults["signal:injected"]
    assert fixed.faults.get("signal:killed-requeued", 0) == fixed.faults["signal:injected"]


def test_backoff_grows_exponentially_and_is_capped() -> None:
    mux = COLOCATION.create("muxflow")
    delays = mux.restart_delay(np.array([1, 2, 3, 4, 10, 50]))
    assert list(delays) == [1, 2, 4, 8, 32, 32]
    assert list(COLOCATION.create("mps-fixed").restart_delay(np.array([1, 5]))) == [0, 0]


def test_muxflow_harvests_idle_gpus_within_the_slo(work: ColocationWorkload) -> None:
    dedicated = run_colocation(work, "dedicated", 1).summary()
    muxflow = run_colocation(work, "muxflow", 1).summary()
    fixed = run_colocation(work, "mps-fixed", 1).summary()
    assert muxflow["utilisation_pct"] > 2 * dedicated["utilisation_pct"]  # type: ignore[operator]
    assert muxflow["slo_violation_pct"] <= fixed["slo_violation_pct"]  # type: ignore[operator]
    assert muxflow["offline_throughput"] > 0  # type: ignore[operator]


@pytest.mark.shared_data
def test_real_openb_and_genai_inputs_run_an_hour(openb_dir: Path) -> None:
    duty = openb_dir.parent / "alibaba-genai-v2026" / "pod_gpu_duty_cycle_anon.tar.gz"
    if not duty.exists():
        pytest.skip("../shared/data/alibaba-genai-v2026 is absent")
    source = load_workload(openb_dir / "openb_pod_list_default.csv")
    series, _ = load_duty_cycles(duty)
    work = build_workload(
        source.cluster, source.pods, series, np.random.default_rng(0), intervals=60
    )
    assert work.gpus == 4229  # one online GPU per GPU of each LS pod
    # every GPU pod is online (LS), offline (BE) or counted: 105 Burstable/Guaranteed pods
    assert work.rejected == {"offline pod without a lifetime": 1,
                             "GPU pod neither LS nor BE (Burstable, Guaranteed)": 105}
    run = run_colocation(work, "muxflow", 0)
    dedicated = run_colocation(work, "dedicated", 0)
    assert run.utilisation.mean() > 3 * dedicated.utilisation.mean()
    assert np.all(run.online_served == work.gpus)


def test_without_online_first_an_mps_failure_takes_the_online_service_down(
    work: ColocationWorkload,
) -> None:
    config = ColocationConfig(faults=FaultRates(0.0, 0.0, 0.05, 0.0))
    # a memory limit keeps out-of-memory out of the count
    fixed = run_colocation(work, COLOCATION.create("mps-fixed", memory_limit=True), 6, config)
    assert fixed.online_ooms == 0
    down = fixed.faults["mps-failure:online-down-one-interval"]
    assert down == fixed.faults["mps-failure:injected"] > 0
    assert int((work.gpus - fixed.online_served).sum()) == down
    mux = run_colocation(work, "muxflow", 6, config)
    assert mux.faults["mps-failure:online-restarted-first"] == mux.faults["mps-failure:injected"]
    assert np.all(mux.online_served == work.gpus)


def test_static_admission_shares_only_gpus_whose_peak_is_low_enough(
    work: ColocationWorkload,
) -> None:
    cut = float(np.median(work.peak_load))
    admitted = work.peak_load <= cut
    for name in ("time-slicing", "mps-fixed"):
        seen: list[IntervalState] = []
        policy = COLOCATION.create(name, max_peak_load=cut)
        run_colocation(work, policy, 5, on_interval=seen.append)
        used = np.any([s.offline_job >= 0 for s in seen], axis=0)
        assert used.any()
        assert not np.any(used & ~admitted), name
    below = float(work.peak_load.min()) / 2.0
    assert below > 0.0
    none = run_colocation(work, COLOCATION.create("time-slicing", max_peak_load=below), 5)
    assert none.running.sum() == 0


def test_admission_by_a_quantile_of_the_load(work: ColocationWorkload) -> None:
    """Below 1 the admission compares the load a service stays at or below for that share of
    the run: never above its peak, so at one threshold it admits at least as many GPUs."""
    p90 = work.load_quantile(0.9)
    assert np.array_equal(work.load_quantile(1.0), work.peak_load)
    assert np.all(p90 <= work.peak_load)
    series = work.load[work.series]
    assert np.all(np.mean(series <= p90[:, None], axis=1) >= 0.9)  # at or below, 90% of it
    assert np.all(np.mean(series < p90[:, None], axis=1) < 0.9)  # and the least such load
    cut = float(np.median(p90))
    admitted = p90 <= cut
    assert admitted.sum() > (work.peak_load <= cut).sum()
    seen: list[IntervalState] = []
    policy = COLOCATION.create("time-slicing", max_peak_load=cut, admit_quantile=0.9)
    run_colocation(work, policy, 5, on_interval=seen.append)
    used = np.any([s.offline_job >= 0 for s in seen], axis=0)
    assert used.any()
    assert not np.any(used & ~admitted)
    with pytest.raises(InputError, match="admit_quantile"):
        COLOCATION.create("mps-fixed", admit_quantile=0.0)


def test_completion_time_counts_from_each_jobs_arrival(work: ColocationWorkload) -> None:
    # one job of one interval's work arriving at interval 7 on an idle online GPU
    k = 7
    one = replace(
        work, gpu_memory_mib=work.gpu_memory_mib[:1], model=work.model[:1],
        online_memory_mib=work.online_memory_mib[:1], slo_ms=work.slo_ms[:1],
        series=np.zeros(1, dtype=np.int64), load=np.zeros((1, 30)),
        job_memory_mib=np.array([1024.0]), job_work_s=np.array([float(work.interval_s)]),
        job_profile=np.zeros(1, dtype=np.int64), job_arrival=np.array([k], dtype=np.int64),
    )
    instant = ColocationConfig(faults=FaultRates(0, 0, 0, 0), offline_start_s=0.0)
    run = run_colocation(one, "time-slicing", 0, instant)
    assert run.jobs_completed == 1
    assert run.running[:k].sum() == 0  # not offered before it arrives
    assert run.jct_mean_min == pytest.approx(work.interval_s / 60.0)
    # a process start of half an interval: half the work in the first interval, done in two
    slow = run_colocation(one, "time-slicing", 0, replace(instant, offline_start_s=30.0))
    assert slow.offline_throughput[k] == pytest.approx(0.5)
    assert slow.offline_starts == 1
    assert slow.jct_mean_min == pytest.approx(2 * work.interval_s / 60.0)


def _one_gpu(work: ColocationWorkload, load: FloatArray) -> ColocationWorkload:
    """One online GPU at ``load`` over time and one long offline job arriving at once."""
    return replace(
        work, gpu_memory_mib=np.array([81920.0]), model=work.model[:1],
        online_memory_mib=np.array([8192.0]), slo_ms=work.slo_ms[:1],
        series=np.zeros(1, dtype=np.int64), load=load[None, :], memory_profile=None,
        job_memory_mib=np.array([4096.0]), job_work_s=np.array([1e7]),
        job_profile=np.zeros(1, dtype=np.int64), job_arrival=np.array([0]),
    )


def test_an_mps_share_change_restarts_the_offline_client(work: ColocationWorkload) -> None:
    # quiet, then busy from interval 6 on: MuxFlow must give the online service more SMs
    load = np.where(np.arange(12) < 6, 0.01, 0.3)
    one = _one_gpu(work, load)
    quiet = ColocationConfig(faults=FaultRates(0, 0, 0, 0))
    seen: list[IntervalState] = []
    run = run_colocation(one, "muxflow", 0, quiet, on_interval=seen.append)
    shares = [int(s.online_share[0]) for s in seen]
    assert shares[5] < shares[6]  # raised as the load rose
    # the guard and the share policy size a pair's share alike: at a steady load the share
    # the guard set stays, no second restart
    assert len(set(shares[6:])) == 1
    assert run.share_changes == sum(a != b for a, b in pairwise(shares))
    assert run.share_changes >= 1
    assert run.offline_starts == 1
    free = run_colocation(one, "muxflow", 0,
                          replace(quiet, offline_start_s=0.0, share_change_s=0.0))
    lost = free.offline_throughput - run.offline_throughput
    # each (re)start costs half an interval of the speed the job would have had
    starts = [0] + [i for i in range(1, 12) if shares[i] != shares[i - 1]]
    assert np.allclose(lost[starts], free.offline_throughput[starts] / 2)
    assert np.allclose(np.delete(lost, starts), 0.0)
    # shares changed in place: only the placement costs
    in_place = run_colocation(one, "muxflow", 0, replace(quiet, share_change_s=0.0))
    assert np.allclose((free.offline_throughput - in_place.offline_throughput)[1:], 0.0)
    assert in_place.offline_throughput[0] == pytest.approx(free.offline_throughput[0] / 2)
    # the static baselines never change a running client's share
    for name in ("mps-fixed", "time-slicing"):
        assert run_colocation(one, name, 0, quiet).share_changes == 0


def test_a_lowered_share_the_guard_puts_back_is_two_restarts(work: ColocationWorkload) -> None:
    # busy, one quiet interval, busy again: the share policy, which sees the last interval's
    # load, lowers the online share at interval 7, and the guard raises it back within it
    load = np.where(np.arange(10) == 6, 0.0, 0.5)
    one = _one_gpu(work, load)
    quiet = ColocationConfig(faults=FaultRates(0, 0, 0, 0), offline_start_s=0.0)
    seen: list[IntervalState] = []
    run = run_colocation(one, "muxflow", 0, quiet, on_interval=seen.append)
    shares = [int(s.online_share[0]) for s in seen]
    assert shares[6] == shares[7]  # the interval ends where it began ...
    assert run.throttles == 1  # ... after a lowering and a throttle: two restarts
    assert run.share_changes == 2
    free = run_colocation(one, "muxflow", 0, replace(quiet, share_change_s=0.0))
    assert run.offline_throughput[7] == pytest.approx(0.0)  # 2 x 30 s: the whole minute
    assert free.offline_throughput[7] > 0.0
    assert np.allclose(np.delete(run.offline_throughput, 7), np.delete(free.offline_throughput, 7))


def test_a_start_longer_than_an_interval_carries_over(work: ColocationWorkload) -> None:
    one = _one_gpu(work, np.full(6, 0.01))
    config = ColocationConfig(faults=FaultRates(0, 0, 0, 0), offline_start_s=90.0)
    run = run_colocation(one, "mps-fixed", 0, config)
    assert run.offline_throughput[0] == 0.0
    full = run.offline_throughput[2]
    assert full > 0.0
    assert run.offline_throughput[1] == pytest.approx(full / 2)
    # the offline side's busy time shrinks with the downtime too
    assert run.sm_activity[0] < run.sm_activity[1] < run.sm_activity[2]
    assert run.utilisation[0] < run.utilisation[1] < run.utilisation[2]
    with pytest.raises(InputError):
        ColocationConfig(offline_start_s=-1.0)
    for bad in (float("nan"), float("inf")):
        with pytest.raises(InputError):
            ColocationConfig(share_change_s=bad)


def _growing(work: ColocationWorkload, steps: int, arrival: int) -> ColocationWorkload:
    """One 16 GiB GPU whose online service peaks at 8 GiB, at 4 GiB for 5 intervals, then at
    its peak; one 10 GiB job arriving at ``arrival``: it fits the memory free at 4 GiB, not
    the room below the peak."""
    return replace(
        work, gpu_memory_mib=np.array([16384.0]), model=work.model[:1],
        online_memory_mib=np.array([8192.0]), slo_ms=work.slo_ms[:1],
        series=np.zeros(1, dtype=np.int64), load=np.full((1, steps), 0.05),
        memory_profile=np.where(np.arange(steps) < 5, 0.5, 1.0)[None, :],
        job_memory_mib=np.array([10240.0]), job_work_s=np.array([1e6]),
        job_profile=np.zeros(1, dtype=np.int64), job_arrival=np.array([arrival]),
    )


def test_without_a_memory_limit_online_growth_runs_out_of_memory(
    work: ColocationWorkload,
) -> None:
    steps = 20
    one = _growing(work, steps, 0)
    quiet = ColocationConfig(faults=FaultRates(0, 0, 0, 0))
    for name in ("time-slicing", "mps-fixed"):
        seen: list[IntervalState] = []
        run = run_colocation(one, name, 0, quiet, on_interval=seen.append)
        assert run.running.sum() == steps  # placed at once, never evicted
        assert run.online_ooms == steps - 5  # out of memory from the growth on
        assert np.array_equal(run.oom_rate, (np.arange(steps) >= 5).astype(np.float64))
        assert np.array_equal(run.online_served, (np.arange(steps) < 5).astype(np.int64))
        assert run.violation_rate[5:].min() == 1.0
        assert run.p99_over_slo[5:].min() == 10.0  # a service out of memory counts at the cap
        used = [s.memory_used_mib[0] for s in seen]
        assert used[:5] == [4096.0 + 10240.0] * 5
        assert used[5:] == [16384.0] * (steps - 5)  # the GPU is full
        limited = run_colocation(one, COLOCATION.create(name, memory_limit=True), 0, quiet)
        assert limited.running.sum() == 0
        assert limited.online_ooms == 0
    mux = run_colocation(one, "muxflow", 0, quiet)
    assert mux.running.sum() == 0
    assert mux.summary()["online_oom_intervals"] == 0


def test_a_baseline_places_by_the_memory_free_in_the_previous_interval(
    work: ColocationWorkload,
) -> None:
    # the job arrives at 5, as the online service grows: placed on the 4 GiB seen at 4,
    # out of memory at once
    run = run_colocation(_growing(work, 12, 5), "time-slicing", 0,
                         ColocationConfig(faults=FaultRates(0, 0, 0, 0)))
    assert run.running[:5].sum() == 0
    assert run.running[5] == 1
    assert run.oom_rate[5] == 1.0
    assert run.online_ooms == 12 - 5


def test_only_the_memory_limit_keeps_online_memory_growth_safe(work: ColocationWorkload) -> None:
    assert work.memory_profile is not None  # the synthetic load carries one
    assert run_colocation(work, "time-slicing", 4).online_ooms > 0
    # out-of-memory is measured the same way under every policy: the limit must keep it at 0
    limited = COLOCATION.create("time-slicing", memory_limit=True)
    assert run_colocation(work, limited, 4).online_ooms == 0
    mux = run_colocation(work, "muxflow", 4)
    assert mux.running.sum() > 0
    assert mux.online_ooms == 0


def test_a_guard_slower_than_the_p99_tail_leaves_the_violation(work: ColocationWorkload) -> None:
    """The guard acts on the same intervals at any speed, so offline figures do not move; only
    when it acts within 1% of the interval (0.6 s of a minute) does the interval keep its p99.
    """
    assert guard_in_time(0.59, 60.0)
    assert not guard_in_time(0.6, 60.0)
    runs = {
        s: run_colocation(work, COLOCATION.create("muxflow", guard_reaction_s=s), 1).summary()
        for s in (0.0, 0.59, 0.6, 5.0)
    }
    dedicated = run_colocation(work, "dedicated", 1).summary()
    fast, slow = runs[0.59], runs[0.6]
    assert runs[0.0] == fast
    assert runs[5.0] == slow
    assert fast["slo_violation_pct"] == dedicated["slo_violation_pct"]
    assert slow["slo_violation_pct"] > fast["slo_violation_pct"]  # type: ignore[operator]
    assert slow["throttles"] == fast["throttles"] > 0  # type: ignore[operator]
    for key in ("offline_throughput", "utilisation_pct", "share_changes", "evictions"):
        assert slow[key] == fast[key]


def test_muxflow_takes_its_guard_reaction_and_load_window() -> None:
    mux = COLOCATION.create("muxflow", guard_reaction_s=2.0, load_window=15)
    assert (mux.guard_reaction_s, mux.load_window) == (2.0, 15)
    for bad in (-0.1, float("inf"), float("nan")):
        with pytest.raises(InputError, match=r"guard_reaction_s .* finite number of seconds"):
            COLOCATION.create("muxflow", guard_reaction_s=bad)
    with pytest.raises(InputError, match="load_window"):
        COLOCATION.create("muxflow", load_window=0)


def test_admission_from_history_sees_only_the_past(work: ColocationWorkload) -> None:
    """Loads from the past only: an hour with no sharing, then the running peak; a service
    that bursts past the threshold keeps its co-runner for the burst's interval (nobody
    knew), loses it at the next, and is never shared again."""
    load = np.full_like(work.load, 0.1)
    bursty = np.arange(work.load.shape[0]) % 2 == 0
    load[bursty, 100:] = 0.9
    calm = replace(work, load=load)
    matrix = calm.admitted_from_history(1.0, 0.5)
    assert not matrix[:, :60].any()
    assert matrix[~bursty, 60:].all()
    assert matrix[bursty, 60:101].all()  # t = 100 is judged on the load before it
    assert not matrix[bursty, 101:].any()
    ts = COLOCATION.create("time-slicing", max_peak_load=0.5, admit_history=True)
    run = run_colocation(calm, ts, 1, ColocationConfig(faults=FaultRates().scaled(0.0)))
    assert run.running[:60].sum() == 0
    on_bursty = int(bursty[calm.series].sum())
    assert run.running[100] > calm.gpus - on_bursty  # jobs still on the bursting GPUs
    assert (run.running[101:] <= calm.gpus - on_bursty).all()
    assert run.evictions > 0
    foresight = run_colocation(calm, replace(ts, admit_history=False), 1,
                               ColocationConfig(faults=FaultRates().scaled(0.0)))
    assert foresight.evictions == 0
    assert (foresight.running <= calm.gpus - on_bursty).all()


def test_a_quantile_from_history_is_recomputed_every_hour(work: ColocationWorkload) -> None:
    load = np.zeros_like(work.load)
    load[:, 60:90] = 0.8  # half of the second hour is busy
    matrix = replace(work, load=load).admitted_from_history(0.9, 0.5)
    assert matrix[:, 60:120].all()  # the first hour's p90 is 0
    assert not matrix[:, 120:180].any()  # over two hours, 30 of 120 minutes at 0.8: p90 0.8
    assert not matrix[:, 180:240].any()  # 30 of 180 minutes: the p90 is still 0.8
    assert matrix[:, :60].sum() == 0
