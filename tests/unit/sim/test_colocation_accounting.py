"""What the co-location simulator credits, interval by interval, on one GPU at a time.

Each test pins one rule of ``sim.colocation``'s accounting that a review found broken: a job
is credited only the work it has, a late guard keeps the p99 it found, a crash without backoff
restarts in the next interval, a service that serves nothing runs no kernel, and a job one
group of GPUs did not take is offered to the next.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import numpy as np
import numpy.typing as npt
import pytest

from cotenant.perf import mps
from cotenant.policies.colocation import COLOCATION
from cotenant.policies.colocation.matching import match_max_weight
from cotenant.sim.colocation import run_colocation
from cotenant.sim.colocation_faults import FaultRates
from cotenant.sim.colocation_queue import JobQueue
from cotenant.sim.colocation_records import ColocationConfig, ColocationRun, common_jct
from cotenant.sim.colocation_workload import ColocationWorkload, synthetic_workload

FloatArray = npt.NDArray[np.float64]
QUIET = ColocationConfig(faults=FaultRates(0, 0, 0, 0), offline_start_s=0.0, share_change_s=0.0)
SHARING = ("mps-fixed", "time-slicing", "muxflow")


@pytest.fixture(scope="module")
def base() -> ColocationWorkload:
    return synthetic_workload(np.random.default_rng(3), gpus=20, intervals=30)


def one_gpu(base: ColocationWorkload, load: FloatArray, work_s: float = 1e7,
            gpu_mib: float = 81920.0, job_mib: float = 4096.0) -> ColocationWorkload:
    """One online GPU (8 GiB service) at ``load`` and one offline job arriving at once."""
    return replace(
        base, gpu_memory_mib=np.array([gpu_mib]), model=base.model[:1],
        online_memory_mib=np.array([8192.0]), slo_ms=base.slo_ms[:1],
        series=np.zeros(1, dtype=np.int64), load=np.asarray(load, float)[None, :],
        memory_profile=None, job_memory_mib=np.array([job_mib]),
        job_work_s=np.array([work_s]), job_profile=np.zeros(1, dtype=np.int64),
        job_arrival=np.array([0]),
    )


@pytest.mark.parametrize("policy", SHARING)
def test_a_job_is_credited_its_work_and_no_more(base: ColocationWorkload, policy: str) -> None:
    # 90 s of whole-GPU work on an idle GPU: it ends within the second or third minute
    one = one_gpu(base, np.zeros(5), work_s=90.0)
    run = run_colocation(one, policy, 0, QUIET)
    assert run.jobs_completed == 1
    assert run.offline_throughput.sum() * one.interval_s == pytest.approx(90.0)
    last = int(np.flatnonzero(run.offline_throughput)[-1])
    # the interval it ends in is busy only until it ends, and after it the GPU is idle
    assert 0.0 < run.utilisation[last] < run.utilisation[0]
    assert np.all(run.utilisation[last + 1:] == 0.0)
    assert np.all(run.running[last + 1:] == 0)


def test_a_late_guard_leaves_the_p99_it_found(base: ColocationWorkload) -> None:
    # quiet, then a load the offline co-runner's share cannot keep within the SLO
    one = one_gpu(base, np.where(np.arange(10) < 6, 0.01, 0.5))
    fast = run_colocation(one, COLOCATION.create("muxflow", guard_reaction_s=0.5), 0, QUIET)
    slow = run_colocation(one, COLOCATION.create("muxflow", guard_reaction_s=5.0), 0, QUIET)
    acted = int(np.flatnonzero(slow.violation_rate)[0])
    assert fast.violation_rate[acted] == 0.0
    assert fast.p99_over_slo[acted] <= 1.0
    # the interval the slow guard loses reports a p99 over its SLO, not the one after the act
    assert slow.p99_over_slo[acted] > 1.0


@pytest.mark.parametrize("policy", ["mps-fixed", "time-slicing"])
def test_without_backoff_a_crashed_job_runs_again_in_the_next_interval(
    base: ColocationWorkload, policy: str
) -> None:
    one = one_gpu(base, np.zeros(40))
    crashes = replace(QUIET, faults=FaultRates(0.3, 0, 0, 0))
    run = run_colocation(one, policy, 3, crashes)
    assert run.faults["offline-crash:injected"] > 3
    assert np.all(run.running == 1)  # requeued and matched again at once, every time
    assert list(COLOCATION.create(policy).restart_delay(np.array([1, 5]))) == [0, 0]
    # MuxFlow's backoff keeps the job off for 1, 2, 4 ... intervals
    mux = run_colocation(one, "muxflow", 3, crashes)
    assert (mux.running == 0).any()


@pytest.mark.parametrize("policy", ["mps-fixed", "time-slicing"])
def test_a_service_out_of_memory_runs_no_kernel(base: ColocationWorkload, policy: str) -> None:
    # the online service grows from 4 to 8 GiB after two minutes into the job's memory
    one = replace(one_gpu(base, np.full(6, 0.3), gpu_mib=16384.0, job_mib=10240.0),
                  memory_profile=np.where(np.arange(6) < 2, 0.5, 1.0)[None, :])
    run = run_colocation(one, policy, 0, QUIET)
    assert list(run.online_served) == [1, 1, 0, 0, 0, 0]
    alone = run_colocation(replace(one, job_work_s=np.array([0.0])), policy, 0, QUIET)
    # while out of memory the GPU is busy with the offline job only
    assert np.all(run.utilisation[2:] < run.utilisation[:2].min())
    assert np.all(run.utilisation[2:] > alone.utilisation[2:])


def test_jobs_one_group_did_not_take_go_to_the_next() -> None:
    # 128 free GPUs in two groups of 64 and 100 jobs that fit every one of them
    need = np.full(100, 4096.0)
    queue = JobQueue(need, np.zeros(100, dtype=np.int64))
    gpus, jobs, unused = match_max_weight(
        np.arange(128), np.full(128, 20000.0), need, partial(queue.take, t=0),
        lambda g, j: np.ones((len(g), len(j))), block=64, slack=16,
    )
    assert len(jobs) == 100
    assert len(set(jobs.tolist())) == 100
    assert len(unused) == 0
    assert len(set(gpus.tolist())) == 100


def test_work_of_whole_intervals_ends_in_its_last_one(base: ColocationWorkload) -> None:
    # work that is an exact multiple of a minute's progress, summed in floating point
    speed = float(mps.offline_speed(np.array([0.5]))[0])
    for k in (3, 6, 9, 12, 13, 14):
        run = run_colocation(one_gpu(base, np.zeros(40), work_s=k * speed * 60.0),
                             "mps-fixed", 0, QUIET)
        assert int((run.running > 0).sum()) == k
        assert run.jobs_completed == 1


def test_common_jct_compares_policies_on_the_jobs_all_of_them_finished() -> None:
    def run(policy: str, waits: list[float]) -> ColocationRun:
        wait = np.array(waits)
        done = int((~np.isnan(wait)).sum())
        return ColocationRun(policy, 0, 60, *([np.zeros(1)] * 7), np.zeros(1, np.int64),
                             np.zeros(1, np.int64), 1, done,
                             float(np.nanmean(wait)) if done else float("nan"), 0, 0, {},
                             job_wait_min=wait)
    nan = float("nan")
    runs = [run("dedicated", [nan, nan, nan]),  # finishes nothing: not in the set
            run("a", [10.0, 20.0, nan]),  # a big job it started is unfinished
            run("b", [30.0, 40.0, 50.0])]
    assert common_jct(runs) == {"dedicated": None, "a": 15.0, "b": 35.0}
    assert runs[2].jct_mean_min == 40.0  # its own mean counts the job a never finished
    assert common_jct([run("a", [10.0, nan]), run("b", [nan, 5.0])]) == {"a": None, "b": None}
