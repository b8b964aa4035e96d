"""The load a simulated policy is shown (``world.loadSignal``): the service's own as before,
counted from its requests (unbiased, with the Poisson spread, its own random stream), the
whole GPU's utilisation, and ``auto`` by mechanism."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from cotenant.errors import InputError
from cotenant.perf import mps
from cotenant.policies.colocation import COLOCATION, Actions, GpuState, Mechanism, Observation
from cotenant.policies.colocation.guard import GuardSettings, rate_span_s
from cotenant.policies.colocation.policy import ColocationPolicy
from cotenant.sim.colocation.load_signal import LoadSignal, counted_load
from cotenant.sim.colocation.records import ColocationConfig, ColocationRun
from cotenant.sim.colocation.run import run_colocation
from cotenant.sim.colocation.workload import ColocationWorkload, synthetic_workload

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


def test_counted_loads_are_unbiased_with_the_poisson_spread(work: ColocationWorkload) -> None:
    """A flat load of 0.3 everywhere: each reading over its span ``S`` is ``count / S`` of a
    Poisson count with mean ``rate x S``, so ``(shown / true - 1) x sqrt(rate S)`` has mean 0
    and variance 1 over the run's 7,200 readings (flat minutes: one sub-step each)."""
    flat = replace(work, load=np.full_like(work.load, 0.3), fine=None)
    seen = _shown(flat, "muxflow", "requests")
    guard = COLOCATION.create("muxflow").guard
    assert guard is not None
    rate = 0.3 * 1000.0 / mps.ONLINE_L100[flat.model]
    span = rate_span_s(guard, rate)
    z = np.concatenate([(o.load / 0.3 - 1.0) * np.sqrt(rate * span) for o in seen])
    assert len(z) == 80 * 90
    assert abs(z.mean()) < 0.05
    assert z.var() == pytest.approx(1.0, abs=0.06)
    ratio = np.concatenate([o.load / 0.3 for o in seen])
    assert ratio.mean() == pytest.approx(1.0, abs=0.005)
    assert len(np.unique(ratio)) > 100  # a count, not the exact load


def test_a_count_reaches_back_over_the_sub_steps_its_span_covers() -> None:
    """0.25 s into a sub-step at load 0.6 after one at 0.2: a one-second span counts 0.25 s
    of the new load and 0.75 s of the old, so it reads 0.3 on average."""
    n = 40_000
    model = np.zeros(n, dtype=np.int64)
    past = np.tile([0.6, 0.2, 0.9], (n, 1))  # now, one sub-step back, two back
    guard = GuardSettings()
    rate = 0.6 * 1000.0 / float(mps.ONLINE_L100[0])
    span = float(rate_span_s(guard, np.array([rate]))[0])
    assert span == pytest.approx(1.0)  # the default guard's windows fill fast at this rate
    got = counted_load(guard, model, past, np.full(n, 0.25), 10.0, np.random.default_rng(0))
    assert got.mean() == pytest.approx(0.25 * 0.6 + 0.75 * 0.2, rel=0.01)
    later = counted_load(guard, model, past, np.full(n, 2.0), 10.0, np.random.default_rng(0))
    assert later.mean() == pytest.approx(0.6, rel=0.01)  # the span inside the sub-step


def test_the_peak_is_of_the_counted_loads(work: ColocationWorkload) -> None:
    seen = _shown(work, "muxflow", "requests")
    window = 6  # muxflow's 60 s load window in 10 s sub-steps
    loads = np.array([o.load for o in seen])
    truth = np.array([work.load_at(*divmod(s, work.substeps)) for s in range(len(seen))])
    for step, obs in enumerate(seen):
        assert np.array_equal(obs.load_peak, loads[max(0, step - window):step + 1].max(axis=0))
    true_peak = np.array([truth[max(0, s - window):s + 1].max(axis=0) for s in range(len(seen))])
    assert not np.allclose(np.array([o.load_peak for o in seen]), true_peak)


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
