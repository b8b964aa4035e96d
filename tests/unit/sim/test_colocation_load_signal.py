"""The load a simulated policy is shown (``world.loadSignal``): the service's own as before,
counted from its requests (a Poisson count, the newest window's rate where higher, its own
random stream), the whole GPU's utilisation, and ``auto`` by mechanism."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import numpy.typing as npt
import pytest

from cotenant.errors import InputError
from cotenant.perf import mps
from cotenant.policies.colocation import COLOCATION, Actions, GpuState, Mechanism, Observation
from cotenant.policies.colocation.guard import GuardSettings, rate_span_s, report_window_s
from cotenant.policies.colocation.policy import ColocationPolicy
from cotenant.sim.colocation.load_signal import LoadSignal, counted_load, peak_of_readings
from cotenant.sim.colocation.records import ColocationConfig, ColocationRun
from cotenant.sim.colocation.run import run_colocation
from cotenant.sim.colocation.workload import ColocationWorkload, synthetic_workload

FloatArray = npt.NDArray[np.float64]

BEFORE = {
    "muxflow": (197662.57438140342, 32.405951125463965, 45.42547639199615,
                29.168620794162372, 1692, 279, 0, 386),
    "cotenant-pause": (197836.24007946855, 34.72970821783464, 51.2360603073252,
                       31.108105766720882, 2139, 172, 622, 37),
    "mps-fixed": (519560.39898234536, 56.43503855870261, 76.81951181326875,
                  42.18673103254143, 0, 0, 0, 0),
    "cotenant-priority": (194075.216976692, 64.99633458785229, 65.59647601142348,
                          59.7373844670842, 0, 0, 689, 0),
    "time-slicing": (468522.4108965752, 74.93862311250537, 75.68424538843617,
                     70.51538946819974, 0, 0, 0, 0),
}
"""Late requests, offline work, utilisation and SM activity summed over the intervals, share
changes, evictions, pauses and throttles of each policy on :func:`work` with seed 5, from the
simulator before the load signal existed (commit 3d536a7), where every policy saw its
service's own load."""


@pytest.fixture(scope="module")
def work() -> ColocationWorkload:
    return synthetic_workload(np.random.default_rng(3), gpus=80, intervals=90)


def _config(signal: str) -> ColocationConfig:
    return ColocationConfig(load_signal=signal)


def _figures(run: ColocationRun) -> tuple[float | int, ...]:
    c = run.counts
    return (float(run.late_requests.sum()), float(run.offline_throughput.sum()),
            float(run.utilisation.sum()), float(run.sm_activity.sum()),
            c["share_changes"], c["evictions"], c["pauses"], c["throttles"])


class _Recorder:
    """Wraps a policy and keeps every observation it is shown."""

    def __init__(self, policy: ColocationPolicy) -> None:
        self.policy = policy
        self.seen: list[Observation] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.policy, name)

    def decide(self, obs: Observation, state: GpuState) -> tuple[Actions, GpuState]:
        self.seen.append(obs)
        return self.policy.decide(obs, state)


def _shown(work: ColocationWorkload, policy: str, signal: str,
           seed: int = 5) -> list[Observation]:
    rec = _Recorder(COLOCATION.create(policy))
    run_colocation(work, rec, seed, _config(signal))  # type: ignore[arg-type]
    assert len(rec.seen) == work.intervals * work.substeps  # one decision per sub-step
    return rec.seen


@pytest.mark.parametrize("policy", sorted(BEFORE))
def test_service_gives_every_figure_of_the_simulator_before_the_signal(
        work: ColocationWorkload, policy: str) -> None:
    assert _figures(run_colocation(work, policy, 5, _config("service"))) == BEFORE[policy]
    if COLOCATION.create(policy).mechanism is not Mechanism.MPS:  # auto: service there
        assert _figures(run_colocation(work, policy, 5)) == BEFORE[policy]


def test_service_shows_each_services_own_load(work: ColocationWorkload) -> None:
    seen = _shown(work, "muxflow", "service")
    for step, obs in enumerate(seen):
        t, k = divmod(step, work.substeps)
        assert np.array_equal(obs.load, work.load_at(t, k))


def test_auto_counts_requests_under_mps_only(work: ColocationWorkload) -> None:
    assert LoadSignal.AUTO.resolve(Mechanism.MPS) is LoadSignal.REQUESTS
    for mech in (Mechanism.NONE, Mechanism.TIME_SLICING, Mechanism.PRIORITY):
        assert LoadSignal.AUTO.resolve(mech) is LoadSignal.SERVICE
    for signal in (LoadSignal.SERVICE, LoadSignal.REQUESTS, LoadSignal.WHOLE_GPU):
        assert signal.resolve(Mechanism.MPS) is signal
    muxflow = run_colocation(work, "muxflow", 5)
    assert muxflow.summary() == run_colocation(work, "muxflow", 5, _config("requests")).summary()
    assert muxflow.summary() != run_colocation(work, "muxflow", 5, _config("service")).summary()
    prio = run_colocation(work, "cotenant-priority", 5)
    assert prio.summary() == run_colocation(work, "cotenant-priority", 5,
                                            _config("service")).summary()


def _flat(work: ColocationWorkload, load: float) -> tuple[ColocationWorkload, FloatArray,
                                                            FloatArray, FloatArray]:
    """``work`` at one flat load, muxflow's guard: the rate, the newest report window and the
    span each GPU's requests are counted over."""
    flat = replace(work, load=np.full_like(work.load, load), fine=None)
    guard = COLOCATION.create("muxflow").guard
    assert guard is not None
    rate = load * 1000.0 / mps.ONLINE_L100[flat.model]
    window = report_window_s(guard, rate)
    newest = np.where(np.isfinite(window), window, guard.max_window_s)
    return flat, rate, newest, rate_span_s(guard, rate)


def test_a_reading_over_one_window_is_a_poisson_count(work: ColocationWorkload) -> None:
    """A flat load of 0.02: every service's newest window covers the whole span ``S`` (fewer
    than 20 requests a second), so a reading is ``count / S`` of a Poisson count with mean
    ``rate x S``: ``(shown / true - 1) x sqrt(rate S)`` has mean 0 and variance 1 over the
    run's 7,200 readings (flat minutes: one sub-step each)."""
    flat, rate, newest, span = _flat(work, 0.02)
    assert np.array_equal(newest, span)
    seen = _shown(flat, "muxflow", "requests")
    z = np.concatenate([(o.load / 0.02 - 1.0) * np.sqrt(rate * span) for o in seen])
    assert len(z) == 80 * 90
    assert abs(z.mean()) < 0.05
    assert z.var() == pytest.approx(1.0, abs=0.06)
    assert len(np.unique(z)) > 100  # a count, not the exact load


def test_the_newest_windows_rate_makes_a_reading_err_high_and_no_more(
        work: ColocationWorkload) -> None:
    """A flat load of 0.6: where the newest window is shorter than the span, the reading is
    the higher of the span's rate and the window's own, so it errs high: by the mean of the
    positive part of their difference, whose spread is ``sqrt((S - W) / (rate S W))`` of the
    load, so about that over ``sqrt(2 pi)`` for counts near normal. (Near a whole GPU the
    reading is capped at 1, as the agent caps it.)"""
    flat, rate, newest, span = _flat(work, 0.6)
    short = newest < span
    assert short.sum() > 25
    seen = _shown(flat, "muxflow", "requests")
    ratio = np.array([o.load / 0.6 for o in seen])
    high = ratio[:, short].mean() - 1.0
    bound = np.sqrt((span - newest) / (rate * span * newest))[short].mean()
    assert high == pytest.approx(bound / np.sqrt(2.0 * np.pi), rel=0.25)
    z = ((ratio[:, ~short] - 1.0) * np.sqrt(rate * span)[~short]).ravel()
    assert abs(z.mean()) < 0.1  # one window over the span: unbiased
    near, *_ = _flat(work, 0.97)
    shown = np.array([o.load for o in _shown(near, "muxflow", "requests")])
    assert shown.max() == 1.0  # noise over a whole GPU reads as a whole GPU
    assert (shown > 0.97).mean() > 0.2


class _Expected:
    """A Poisson "draw" that is its mean: a reading without the counts' noise."""

    @staticmethod
    def poisson(lam: FloatArray) -> FloatArray:
        return lam


def test_a_burst_shows_at_once_and_a_fall_takes_the_span() -> None:
    """At the first report after a change (its window just closed), a rise to 0.6 from 0.2
    reads 0.6 at once (the newest window's rate); a fall to 0.2 from 0.6 reads the span's
    mean, mostly the second before it."""
    guard = GuardSettings()
    model = np.zeros(1, dtype=np.int64)
    rate = 0.6 * 1000.0 / float(mps.ONLINE_L100[0])
    w = float(report_window_s(guard, np.array([rate]))[0])
    low = 0.2 * 1000.0 / float(mps.ONLINE_L100[0])
    w_low = float(report_window_s(guard, np.array([low]))[0])
    s_low = float(rate_span_s(guard, np.array([low]))[0])
    assert (w, w_low, s_low) == (0.5, 1.5, 1.5)  # at 41 and 14 requests a second
    rise = counted_load(guard, model, np.array([[0.6, 0.2, 0.9]]), np.array([w]), 10.0,
                        _Expected())  # type: ignore[arg-type]
    assert rise[0] == pytest.approx(0.6)
    fall = counted_load(guard, model, np.array([[0.2, 0.6, 0.9]]), np.array([w_low]), 10.0,
                        _Expected())  # type: ignore[arg-type]
    assert fall[0] == pytest.approx(0.2)  # the window and the span are the same second
    late = counted_load(guard, model, np.array([[0.2, 0.6, 0.9]]), np.array([0.5]), 10.0,
                        _Expected())  # type: ignore[arg-type]
    assert late[0] == pytest.approx((0.5 * 0.2 + 1.0 * 0.6) / 1.5)  # mostly from before


def test_the_peak_is_of_every_reading_the_agent_makes(work: ColocationWorkload) -> None:
    """The load window's peak holds, for each past sub-step, the highest of the readings the
    agent makes through it (one per report window), not only the decision's reading: at
    least every reading shown, and more than them where the counts are noisy."""
    seen = _shown(work, "muxflow", "requests")
    window = 6  # muxflow's 60 s load window in 10 s sub-steps
    loads = np.array([o.load for o in seen])
    truth = np.array([work.load_at(*divmod(s, work.substeps)) for s in range(len(seen))])
    above = []
    for step, obs in enumerate(seen):
        shown = loads[max(0, step - window):step + 1].max(axis=0)
        assert np.all(obs.load_peak >= shown)
        above.append(np.mean(obs.load_peak > shown))
    assert np.mean(above[window:]) > 0.25  # not where a burst is shown now, or idle, or 1
    true_peak = np.array([truth[max(0, s - window):s + 1].max(axis=0) for s in range(len(seen))])
    assert not np.allclose(np.array([o.load_peak for o in seen]), true_peak)


def test_the_peak_of_a_sub_steps_readings_is_the_largest_of_its_counts() -> None:
    """Against brute force: the largest of 40 Poisson counts over 0.25 s windows and of ten
    over 1 s spans, at 80 requests a second (resnet50 at a load of 1.184: capped) and at 40."""
    guard = GuardSettings()
    model = np.zeros(20_000, dtype=np.int64)
    l100 = float(mps.ONLINE_L100[0])
    rng = np.random.default_rng(7)
    for load in (0.3, 0.5):
        rate = load * 1000.0 / l100
        w = float(report_window_s(guard, np.array([rate]))[0])
        got = peak_of_readings(guard, model, np.full(20_000, load), 10.0, rng)
        newest = rng.poisson(rate * w, (20_000, round(10.0 / w))).max(axis=1) / w
        spans = rng.poisson(rate, (20_000, 10)).max(axis=1) / 1.0
        brute = np.minimum(np.maximum(newest, spans) * l100 / 1000.0, 1.0)
        assert got.mean() == pytest.approx(brute.mean(), rel=0.03)
        assert got.std() == pytest.approx(brute.std(), rel=0.25)
        assert got.mean() > 1.2 * load  # the peak of many noisy readings, well above the load
        assert got.max() <= 1.0


def test_the_whole_gpu_counts_the_co_runners_busy_time(work: ColocationWorkload) -> None:
    seen = _shown(work, "muxflow", "whole-gpu")
    above = []
    for step, obs in enumerate(seen):
        own = np.minimum(1.0, work.load_at(*divmod(step, work.substeps)))
        assert np.all(obs.load >= own - 1e-12)
        alone = ~obs.placed
        assert np.array_equal(obs.load[alone], own[alone])
        above.append(obs.load[obs.running] - own[obs.running])
    extra = np.concatenate(above)
    assert len(extra) > 1000
    assert np.mean(extra > 0.05) > 0.9  # training keeps the GPU busy beside the service
    assert all(np.all(obs.load <= 1.0) for obs in seen)


def test_counting_is_reproducible_and_leaves_the_runs_other_draws_alone(
        work: ColocationWorkload) -> None:
    a, b = _shown(work, "muxflow", "requests"), _shown(work, "muxflow", "requests")
    assert all(np.array_equal(x.load, y.load) for x, y in zip(a, b, strict=True))
    other = _shown(work, "muxflow", "requests", seed=6)
    assert not all(np.array_equal(x.load, y.load) for x, y in zip(a, other, strict=True))
    # a fixed split without a guard reads no load: the counts change none of its figures
    assert _figures(run_colocation(work, "mps-fixed", 5, _config("requests"))) == \
        BEFORE["mps-fixed"]


@pytest.mark.parametrize("bad", ["exact", "", "Requests"])
def test_an_unknown_signal_is_one_line_naming_the_key(bad: str) -> None:
    with pytest.raises(InputError) as err:
        ColocationConfig(load_signal=bad)
    assert "world.loadSignal" in str(err.value)
    assert "\n" not in str(err.value)
    assert "whole-gpu" in str(err.value)
