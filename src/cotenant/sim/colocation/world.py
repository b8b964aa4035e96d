"""What sharing does to both sides, per mechanism: the simulator's physics, never a decision.

For GPUs with an online service at solo duty ``load`` beside an offline job of profile
``profile`` under share ``share`` (percent the online service keeps):

* **online latency**: the queue of :mod:`cotenant.perf.mps` with the batch time stretched as the
  calibration (:mod:`cotenant.perf.interference`) says for the *true* profile of the pair:
  MPS ``l100 / speed(share) * residual``; time slicing ``l100 * (1 + (stretch - 1) * duty)``
  with the co-runner's duty cap ``duty = 1 - share / 100``; priority ``l100 * stretch``. With
  the co-runner not running (starting, paused, restarting) the service is alone on the GPU.
  A request violates when its latency passes the SLO (:func:`perf.mps.violation_share`);
* **offline speed** (whole-GPU seconds per second): MPS the job's own curve at its cap
  ``1 - share / 100`` (:mod:`cotenant.perf.jobs`); time slicing ``duty * (1 - cost * load)``;
  priority ``1 - cost * load`` (the time the service leaves, less switching);
* **busy time**: the online side ``load`` times its stretch (at most 1), the offline side its
  solo utilisation while it runs; GPU utilisation as nvidia-smi counts it is ``1 - (1 - on)
  (1 - off)``; SM activity weighs each side's busy time by the SMs its kernels occupy, at most
  its share of them under MPS (:func:`cotenant.perf.jobs.online_occupancy`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cotenant.perf import mps
from cotenant.perf.interference import Interference
from cotenant.perf.jobs import JobProfiles, online_occupancy
from cotenant.policies.colocation import Mechanism

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Physics:
    """One mechanism's effects under one calibration, for arrays of GPUs."""

    mechanism: Mechanism
    calibration: Interference
    jobs: JobProfiles

    def stretch(self, profile: IntArray) -> FloatArray:
        """The true slowdown a co-runner of ``profile`` causes under this mechanism."""
        return np.asarray(self.calibration.stretch(self.mechanism)[profile], dtype=np.float64)

    def predicted_stretch(self, n: int) -> FloatArray:
        """What a policy can know of a pair's slowdown (the calibration's mean over profiles:
        it is not told which job will interfere how), as the node agent is told it."""
        return np.full(n, self.calibration.predicted_stretch(self.mechanism))

    def batch_factor(self, model: IntArray, share: IntArray, stretch: FloatArray) -> FloatArray:
        """Online batch time over its solo batch time with the co-runner running."""
        p = share / 100.0
        if self.mechanism is Mechanism.MPS:
            return np.asarray(stretch / mps.speed(np.maximum(p, 1e-6), mps.ONLINE_SERIAL[model]),
                              dtype=np.float64)
        if self.mechanism is Mechanism.TIME_SLICING:
            return np.asarray(1.0 + (stretch - 1.0) * (1.0 - p), dtype=np.float64)
        return np.asarray(stretch, dtype=np.float64)

    def violations(self, model: IntArray, load: FloatArray, factor: FloatArray,
                   slo_ms: FloatArray) -> FloatArray:
        """Share of requests over the SLO at batch-time ``factor`` (1: alone)."""
        return mps.violation_share(load, factor, mps.ONLINE_L100[model], slo_ms)

    def p99(self, model: IntArray, load: FloatArray, factor: FloatArray) -> FloatArray:
        return mps.p99_ms(load, np.ones(len(load)), 0.0, mps.ONLINE_L100[model], factor)

    def offline_speed(self, profile: IntArray, share: IntArray, load: FloatArray) -> FloatArray:
        """Whole-GPU seconds of work per second while the co-runner runs."""
        c, p = self.calibration, share / 100.0
        if self.mechanism is Mechanism.MPS:
            return self.jobs.speed(profile, 1.0 - p)
        if self.mechanism is Mechanism.TIME_SLICING:
            return np.asarray((1.0 - p) * np.clip(1.0 - c.ts_cost[profile] * load, 0.0, 1.0),
                              dtype=np.float64)
        if self.mechanism is Mechanism.PRIORITY:
            return np.asarray(np.clip(1.0 - c.priority_cost[profile] * load, 0.0, 1.0),
                              dtype=np.float64)
        return np.zeros(len(profile))

    def busy_rates(self, model: IntArray, profile: IntArray, load: FloatArray,
                   factor: FloatArray, share: IntArray) -> tuple[FloatArray, FloatArray]:
        """Utilisation and SM activity per second with the co-runner running."""
        on = np.minimum(1.0, load * factor)
        off = self.jobs.gpu_util[profile]
        if self.mechanism is Mechanism.TIME_SLICING:
            off = off * (1.0 - share / 100.0)
        util = 1.0 - (1.0 - on) * (1.0 - off)
        occ_on, occ_off = online_occupancy(model), self.jobs.occupancy[profile]
        if self.mechanism is Mechanism.MPS:
            p = share / 100.0
            sm = on * np.minimum(occ_on, p) + off * np.minimum(occ_off, 1.0 - p)
        else:
            sm = on * occ_on + off * occ_off
        return (np.asarray(util, dtype=np.float64),
                np.asarray(np.minimum(sm, 1.0), dtype=np.float64))


    def offline_rates(self, profile: IntArray, share: IntArray) -> tuple[FloatArray, FloatArray]:
        """Utilisation and SM activity per second of a co-runner whose service is down."""
        off = np.asarray(self.jobs.gpu_util[profile], dtype=np.float64)
        occ = self.jobs.occupancy[profile]
        if self.mechanism is Mechanism.MPS:
            occ = np.minimum(occ, 1.0 - share / 100.0)
        elif self.mechanism is Mechanism.TIME_SLICING:
            off = off * (1.0 - share / 100.0)
        return off, np.asarray(off * occ, dtype=np.float64)


def alone_rates(model: IntArray, load: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Utilisation and SM activity per second of an online service alone on its GPU."""
    on = np.minimum(1.0, np.asarray(load, dtype=np.float64))
    return on, np.asarray(on * online_occupancy(model), dtype=np.float64)
