"""The kernel-level priority-sharing simulator: properties every scheduler must keep."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cotenant.perf.kernels import UNKNOWN, Units, kernel_profile
from cotenant.policies.priority import PRIORITY
from cotenant.sim.priority.compare import colocation_check, compare, summary
from cotenant.sim.priority.engine import Engine
from cotenant.sim.priority.run import Pair, alone_latency_us, arrivals, run_pair
from cotenant.sim.priority.stream import BeStream

SCHEDULERS = PRIORITY.names()
BE = "pytorch_resnet50"


def _engine(name: str, seed: int = 1, load: float = 0.5, n: int = 40, be: str | None = BE,
            **params: float) -> tuple[Engine, np.ndarray, float]:
    rng = np.random.default_rng(seed)
    hp_prof = kernel_profile("bert")
    hp = hp_prof.sample(rng)
    arr = arrivals(n, hp.length_us / load, "periodic", rng)
    stream = None
    if be is not None:
        prof = kernel_profile(be)
        stream = BeStream(prof.sample(rng, 10**9), prof.sms, prof.orion.waves)
    return Engine(PRIORITY.create(name, **params), hp, hp_prof.sms, stream, arr, rng), arr, \
        hp.length_us


@pytest.mark.parametrize("name", SCHEDULERS)
def test_hp_alone_has_no_overhead_under_any_scheduler(name: str) -> None:
    for kind in ("periodic", "poisson"):
        r = run_pair(PRIORITY.create(name), Pair("bert", None, requests=30, arrivals=kind), 3)
        assert r.p99_ratio == pytest.approx(1.0, abs=1e-9)
        assert r.mean_ratio == pytest.approx(1.0, abs=1e-9)
        assert r.be_norm_tput == 0.0


def test_the_engine_without_be_is_the_fcfs_queue() -> None:
    engine, arr, length = _engine("mps", be=None, load=0.9, n=80)
    got = engine.run().latency_us
    assert np.allclose(got, alone_latency_us(arr, length))


@pytest.mark.parametrize(("name", "bound"), [("tally", "limit_us"), ("reef", "reset_us")])
@pytest.mark.parametrize("limit", [5.0, 31.6, 100.0])
def test_preemptive_schedulers_bound_hp_waiting_by_the_preemption_latency(
        name: str, bound: str, limit: float) -> None:
    params = {bound: limit}
    if name == "tally":
        params["untransformed_after_us"] = math.inf
    engine, _, length = _engine(name, n=60, **params)
    lat = engine.run().latency_us
    # periodic arrivals at half load never queue: each request waits for BE once, at most
    # the preemption latency (Tally's first HP kernel runs beside the draining kernel)
    assert lat.max() - length <= limit + 1e-6
    assert lat.min() >= length - 1e-6


@pytest.mark.parametrize("name", SCHEDULERS)
@pytest.mark.parametrize("be", ["pytorch_whisper", "pytorch_bert"])
def test_be_throughput_never_exceeds_be_alone(name: str, be: str) -> None:
    r = run_pair(PRIORITY.create(name), Pair("bert", be, requests=20), 2)
    assert 0.0 < r.be_norm_tput <= 1.0 + 1e-9
    assert r.p99_ratio >= 1.0 - 1e-9


@pytest.mark.parametrize("name", ["mps", "mps-priority", "time-slicing", "reef", "orion"])
def test_work_conserving_be_takes_an_idle_gpu(name: str) -> None:
    # HP at 2% load: BE runs nearly all the time, at full speed
    r = run_pair(PRIORITY.create(name), Pair("bert", BE, load=0.02, requests=20), 0)
    assert r.be_norm_tput > 0.95


def test_tally_pays_its_transformation_only_while_hp_is_recent() -> None:
    busy = run_pair(PRIORITY.create("tally"), Pair("bert", BE, load=0.02, requests=20), 0)
    never = run_pair(PRIORITY.create("tally", untransformed_after_us=0.0),
                     Pair("bert", BE, load=0.02, requests=20), 0)
    assert busy.be_norm_tput < never.be_norm_tput
    assert never.be_norm_tput > 0.95


def test_reef_loses_the_work_it_resets_and_tally_keeps_it() -> None:
    reef = run_pair(PRIORITY.create("reef"), Pair("bert", BE, requests=60), 0)
    tally = run_pair(PRIORITY.create("tally"), Pair("bert", BE, requests=60), 0)
    assert reef.be_lost_share > 0.0
    assert tally.be_lost_share == 0.0


def test_the_priority_family_protects_hp_better_than_sharing() -> None:
    res = {n: run_pair(PRIORITY.create(n), Pair("bert", BE, requests=50), 0)
           for n in SCHEDULERS}
    for preemptive in ("tally", "reef"):
        for other in ("time-slicing", "mps", "mps-priority"):
            assert res[preemptive].p99_ratio < res[other].p99_ratio
    assert res["mps"].be_norm_tput > res["tally"].be_norm_tput


def test_a_run_is_the_same_bit_for_bit_under_one_seed() -> None:
    a = run_pair(PRIORITY.create("tgs"), Pair("bert", BE, requests=30), 5)
    b = run_pair(PRIORITY.create("tgs"), Pair("bert", BE, requests=30), 5)
    assert a == b


def test_a_kernel_end_below_the_clock_resolution_does_not_stop_time() -> None:
    # 35 s into a run a float's spacing (7e-9 us) exceeds the completion tolerance: a BE
    # kernel with 1e-9 of its 2.3 us left would end at t itself, for ever (a Llama-2 run did)
    t0 = 34725109.01160847
    hp = Units(np.array([5.0]), np.array([0.0]), np.array([UNKNOWN]))
    be = BeStream(Units(np.array([2.2788790115912816, 3.0]), np.zeros(2),
                        np.array([UNKNOWN, UNKNOWN])), 50.0, 1.0)
    engine = Engine(PRIORITY.create("tally"), hp, 50.0, be, np.array([t0 - 10.0]),
                    np.random.default_rng(0))
    engine.t, engine.cur, engine.next_req = t0, t0 - 10.0, 1
    engine.hp_ready_at, engine.hp_idle_since = t0 + 30.0, t0 - 5.0
    engine.be_on, engine.a_b, be.frac = True, 50.0, 1.0549310314189597e-09
    result = engine.run()
    assert len(result.latency_us) == 1
    assert result.end_us >= t0 + 35.0
    assert be.kernels >= 1


def test_llama_requests_are_coarsened_but_keep_their_length() -> None:
    prof = kernel_profile("llama")
    units = prof.sample(np.random.default_rng(0), 500)
    assert len(units.duration_us) <= 500
    assert units.busy_us == pytest.approx(prof.busy_us)
    assert units.length_us == pytest.approx(prof.busy_us + prof.idle_us)
    r = run_pair(PRIORITY.create("tally"), Pair("llama", "pytorch_gpt2", requests=4), 0)
    assert r.p99_alone_ms == pytest.approx(1963.886, rel=1e-6)


def test_the_comparison_sets_ours_beside_tallys_published_figures() -> None:
    rows = compare(("tally", "tgs"), requests=8, llama_requests=2)
    assert len(rows) == 24
    table = {s["scheduler"]: s for s in summary(rows)}
    # the 12 published pairs at their two decimals: Tally +5.0% (calibration.md's 4.8%
    # is from the unrounded source), TGS +177%; BE 0.44 and 0.79
    assert table["tally"]["paper_p99_overhead_pct"] == pytest.approx(5.0, abs=0.05)
    assert table["tgs"]["paper_p99_overhead_pct"] == pytest.approx(177.2, abs=0.5)
    assert table["tally"]["paper_be_norm_tput"] == pytest.approx(0.44, abs=0.005)
    assert table["tgs"]["paper_be_norm_tput"] == pytest.approx(0.79, abs=0.005)
    assert table["tgs"]["be_vs_tgs"] == 1.0
    check = colocation_check(rows)
    assert len(check) == 6
    assert all(c["tally_stretch_ours"] >= 1.0 for c in check)
