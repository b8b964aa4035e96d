"""The load a simulated policy is shown: what the node agent could read of a service's load.

The decision core sizes shares, throttles and places on each online service's load
(:class:`~cotenant.policies.colocation.Observation`'s ``load`` and ``load_peak``). What the
node agent can read of it depends on the mechanism, so the simulator offers the policy one of
(``world.loadSignal``):

* ``service``: the service's own load in the sub-step, exactly: what NVML's per-process
  sample gives where every process is sampled (time slicing, priority sharing without MPS);
* ``requests``: the load read from the service's request rate, as the agent reads it where
  NVML samples no process of the service (under MPS it samples the clients on the MPS
  server's pid): the rate over the newest closed report windows covering ``S =
  rate_span_s(guard, rate)`` seconds (:func:`~cotenant.policies.colocation.guard.
  rate_span_s`; the guard's defaults for a policy without a guard), or the newest window's
  own rate where that is higher (a burst shows at once), times the service's solo GPU time
  per request (``perf.mps.ONLINE_L100``, calibrated perfectly: its error is not modelled),
  at most 1 (the agent caps its reading at a whole GPU).
  Requests are Poisson counts at each covered sub-step's load; the count over the span is
  unbiased with a relative spread of ``1 / sqrt(rate x S)``, and the newest window's rate,
  where it is the higher, makes the reading err high, as the agent's does. The windows'
  lengths are set by the current rate;
* ``whole-gpu``: the GPU's utilisation in the state in force (online and offline busy time,
  :meth:`~cotenant.sim.colocation.world.Physics.busy_rates`): the agent's fallback without a
  latency histogram or a time per request, uncorrected;
* ``auto`` (the default): ``requests`` for an MPS policy, ``service`` otherwise.

The peak a policy sees (``load_peak``, and the peak placement and matching read) is the peak
of what it was shown, as the agent keeps the peak of its own readings. ``requests`` draws
from its own stream, ``default_rng([seed, SIGNAL_STREAM])``, so every other draw of a run is
the same whatever the signal. Admission by a load quantile (``max_load`` < 1) still reads
each interval's own load: over a whole interval the count is within ``1 / sqrt(rate x
interval)`` of it.
"""

from __future__ import annotations

import math
from enum import StrEnum

import numpy as np
import numpy.typing as npt
from scipy.special import ndtri

from cotenant.errors import InputError
from cotenant.perf import mps
from cotenant.policies.colocation import GuardSettings, Mechanism
from cotenant.policies.colocation.guard import RATE_SPAN_S, closed_window_s, covering_span_s

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
SIGNAL_STREAM = 0x10AD
"""The second seed word of the ``requests`` signal's random stream."""


class LoadSignal(StrEnum):
    """Which load a simulated policy is shown (see the module docstring)."""

    AUTO = "auto"
    SERVICE = "service"
    REQUESTS = "requests"
    WHOLE_GPU = "whole-gpu"

    @classmethod
    def parse(cls, value: object, where: str = "world.loadSignal") -> LoadSignal:
        """``value`` as a signal, or a one-line :class:`InputError` at ``where``."""
        for signal in cls:
            if value == signal.value:
                return signal
        raise InputError(where, f"{value!r}; one of {', '.join(s.value for s in cls)}")

    def resolve(self, mechanism: Mechanism) -> LoadSignal:
        """The signal a policy of ``mechanism`` is shown (``auto``: requests under MPS)."""
        if self is not LoadSignal.AUTO:
            return self
        return LoadSignal.REQUESTS if mechanism is Mechanism.MPS else LoadSignal.SERVICE


def span_steps(guard: GuardSettings, dt: float) -> int:
    """Sub-steps of true load a count may reach over: its span is below ``RATE_SPAN_S`` plus
    one report window (at most ``max_window_s``), and it may start inside the current one."""
    return math.ceil((RATE_SPAN_S + guard.max_window_s) / dt) + 1


def counted_load(guard: GuardSettings, model: IntArray, past: FloatArray, off: FloatArray,
                 dt: float, rng: np.random.Generator) -> FloatArray:
    """The load read from the requests counted up to ``off`` seconds into the current
    sub-step: the rate over the newest closed report windows covering ``S`` seconds, or the
    newest window's own rate where that is higher (as the node agent reads it: a burst shows
    at once, a fall takes the span). ``past[:, i]`` is each GPU's load ``i`` sub-steps back
    (0: the current one, which began at 0); requests arrive as a Poisson process at ``load x
    1000 / L100`` per second, the newest window's count and the rest's drawn apart. At most
    1 (a whole GPU), as the agent caps its reading."""
    l100 = mps.ONLINE_L100[model]
    rates = past * 1000.0 / l100[:, None]
    newest = closed_window_s(guard, rates[:, 0])  # a dropped one too
    span = covering_span_s(newest)
    recent = rng.poisson(_expected(rates, off - newest, off, dt))
    older = rng.poisson(_expected(rates, off - span, off - newest, dt))
    per_s = np.maximum((recent + older) / span, recent / newest)
    # at most a whole GPU, as the agent reads it: noise over 1 says no more than 1 does
    return np.asarray(np.minimum(per_s * l100 / 1000.0, 1.0), dtype=np.float64)


def _expected(rates: FloatArray, lo: FloatArray, hi: FloatArray, dt: float) -> FloatArray:
    """Requests expected in ``[lo, hi)`` (seconds from the current sub-step's start), each
    sub-step at its own rate (``rates[:, i]``: ``i`` sub-steps back)."""
    out = np.zeros(len(lo))
    for i in range(rates.shape[1]):
        start, end = -i * dt, -(i - 1) * dt if i else math.inf
        out += rates[:, i] * np.maximum(np.minimum(hi, end) - np.maximum(lo, start), 0.0)
    return out


def peak_of_readings(guard: GuardSettings, model: IntArray, load: FloatArray, dt: float,
                     rng: np.random.Generator) -> FloatArray:
    """The highest load the agent reads over a sub-step of ``dt`` seconds at a flat ``load``:
    it reads at every window that closes (every ``W`` s), each reading the higher of the
    newest window's rate and the rate over the span ``S``, and keeps the peak of them all
    for its load window. That is the higher of the largest of ``dt / W`` newest-window
    counts and of ``dt / S`` span counts (spans apart from one another), at most 1. The
    largest of ``m`` Poisson counts is drawn in one go, by the normal approximation."""
    l100 = mps.ONLINE_L100[model]
    rate = load * 1000.0 / l100
    newest = closed_window_s(guard, rate)
    span = covering_span_s(newest)
    per_s = np.maximum(_largest_count(rate * newest, dt / newest, rng) / newest,
                       _largest_count(rate * span, dt / span, rng) / span)
    return np.asarray(np.minimum(per_s * l100 / 1000.0, 1.0), dtype=np.float64)


def _largest_count(mean: FloatArray, m: FloatArray, rng: np.random.Generator) -> FloatArray:
    """The largest of ``m`` (at least 1) independent Poisson counts of ``mean``: the
    ``u^(1/m)`` quantile of the normal with that mean and variance, a whole count >= 0."""
    q = np.clip(rng.random(len(mean)) ** (1.0 / np.maximum(m, 1.0)), 1e-12, 1.0 - 1e-12)
    return np.asarray(np.maximum(np.round(mean + np.sqrt(mean) * ndtri(q)), 0.0),
                      dtype=np.float64)
