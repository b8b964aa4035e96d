"""The priority-sharing schedulers by name (``PRIORITY``), each parameter with its source.

* ``time-slicing``: CUDA's default; contexts alternate every ``timeslice_us`` while both have
  work. NVIDIA does not publish the default slice; 2 ms is an assumption, a parameter.
* ``mps``: concurrent kernels; freed SMs split in proportion to demand.
* ``mps-priority``: concurrent kernels, HP's pending blocks first (client priority).
* ``tgs``: time slicing plus TGS's adaptive rate control of the BE job
  (:class:`RateControl`; its window and steps are assumptions).
* ``reef``: BE only while HP has no request in flight; an arriving request resets the BE
  kernel after ``reset_us`` and its work is lost. REEF reports microsecond-scale
  preemption without a figure in our references: the default is Tally's limit, so the two
  preemptive schedulers meet HP at the same bound. (REEF's dynamic kernel padding is not
  modelled.)
* ``tally``: BE only after HP has been idle 0.1 ms (PRIORITY_MIN_WAIT_TIME_MS), one BE kernel
  in flight, BE kernels longer than the limit sliced or made preemptive so that they leave
  within ``limit_us`` (31.6 us, tally-bench's default config), at ``transform_overhead``
  (0.25: the ~25% BE slowdown a review reports), untransformed after HP has been idle
  100 ms; HP launches without waiting for BE to drain (papers.md, Tally section).
* ``orion``: HP kernels first with stream priority; during an HP request a BE kernel
  launches only if its kind differs from the running HP kernel's (eth-easl/orion
  ``scheduler_eval.cpp``; an inference HP leaves every SM to the size check).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

from cotenant.errors import InputError
from cotenant.policies.priority.scheduler import (
    Blocks,
    Preemption,
    RateControl,
    Scheduler,
    Sharing,
)
from cotenant.registry import Registry

PRIORITY: Registry[Scheduler] = Registry("priority scheduler")
_MIN_US = 1.0
"""The shortest time slice or rate-control window: below 1 us the simulator's events pile up
without end (a 0 slice never advances)."""
RANGES: dict[str, tuple[float, float, bool, str]] = {
    # parameter: (least, most, least included, the rule as stated in an error)
    "timeslice_us": (_MIN_US, math.inf, True, "a finite number of microseconds >= 1"),
    "window_us": (_MIN_US, math.inf, True, "a finite number of microseconds >= 1"),
    "increase": (0.0, 1.0, True, "a fraction in [0, 1] (added to the BE rate)"),
    "decrease": (0.0, 1.0, True, "a fraction in [0, 1] (the BE rate is multiplied by it)"),
    "tolerance": (0.0, math.inf, True, "a finite number >= 0"),
    "reset_us": (0.0, math.inf, True, "a finite number of microseconds >= 0"),
    "limit_us": (0.0, math.inf, False, "a finite number of microseconds > 0"),
    "idle_wait_us": (0.0, math.inf, True, "a finite number of microseconds >= 0"),
    "transform_overhead": (0.0, math.inf, True, "a finite number >= 0 (0.25: 25% slower)"),
    "untransformed_after_us": (0.0, math.inf, True,
                               "a number of microseconds >= 0, or .inf (never)"),
}
"""Every scheduler parameter's valid range, checked once as a scheduler is built."""


def check_parameter(name: str, value: object) -> float:
    """``value`` as a float if it lies in ``name``'s range (:data:`RANGES`); else an
    :class:`InputError` naming the parameter and the rule."""
    least, most, closed, rule = RANGES[name]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(name, f"{value!r} must be {rule}")
    x = float(value)
    finite_ok = math.isfinite(x) or (x == math.inf and name == "untransformed_after_us")
    if not finite_ok or x > most or (x < least if closed else x <= least):
        raise InputError(name, f"{x:g} must be {rule}")
    return x


def _checked(factory: Callable[..., Scheduler]) -> Callable[..., Scheduler]:
    @functools.wraps(factory)
    def build(**params: object) -> Scheduler:
        return factory(**{k: check_parameter(k, v) if k in RANGES else v
                          for k, v in params.items()})
    return build


TALLY_LIMIT_US = 31.6
"""Tally's preemption-latency limit in tally-bench's default config (0.0316 ms)."""
TALLY_IDLE_WAIT_US = 100.0
TALLY_UNTRANSFORMED_AFTER_US = 100_000.0
TALLY_TRANSFORM_OVERHEAD = 0.25
DEFAULT_TIMESLICE_US = 2000.0


def time_slicing(timeslice_us: float = DEFAULT_TIMESLICE_US) -> Scheduler:
    return Scheduler("time-slicing", Sharing.TIME_SLICED, timeslice_us=timeslice_us)


def mps() -> Scheduler:
    return Scheduler("mps", Sharing.CONCURRENT, Blocks.SHARED)


def mps_priority() -> Scheduler:
    return Scheduler("mps-priority", Sharing.CONCURRENT, Blocks.PRIORITY)


def tgs(timeslice_us: float = DEFAULT_TIMESLICE_US, window_us: float = 10_000.0,
        increase: float = 0.05, decrease: float = 0.5, tolerance: float = 1.0) -> Scheduler:
    return Scheduler("tgs", Sharing.TIME_SLICED, timeslice_us=timeslice_us,
                     rate_control=RateControl(window_us, increase, decrease, tolerance))


def reef(reset_us: float = TALLY_LIMIT_US) -> Scheduler:
    return Scheduler("reef", Sharing.CONCURRENT, Blocks.PRIORITY, Preemption.RESET,
                     preemption_us=reset_us, be_in_requests=False, gated=True)


def tally(limit_us: float = TALLY_LIMIT_US, idle_wait_us: float = TALLY_IDLE_WAIT_US,
          transform_overhead: float = TALLY_TRANSFORM_OVERHEAD,
          untransformed_after_us: float = TALLY_UNTRANSFORMED_AFTER_US) -> Scheduler:
    return Scheduler("tally", Sharing.CONCURRENT, Blocks.PRIORITY, Preemption.DRAIN,
                     preemption_us=limit_us, idle_wait_us=idle_wait_us,
                     transform_overhead=transform_overhead,
                     untransformed_after_us=untransformed_after_us, gated=True)


def orion() -> Scheduler:
    return Scheduler("orion", Sharing.CONCURRENT, Blocks.PRIORITY, kind_rule=True, gated=True)


# Registered from a table, not by decorators, so that the mutation tests reach the
# factories' bodies (mutmut leaves decorated functions alone). Those with parameters are
# built through _checked: every parameter in its RANGES before the scheduler exists.
for _name, _aliases, _factory in (
        ("time-slicing", ("ts", "timeslicing"), _checked(time_slicing)),
        ("mps", (), mps),
        ("mps-priority", ("mps-prio",), mps_priority),
        ("tgs", (), _checked(tgs)),
        ("reef", (), _checked(reef)),
        ("tally", (), _checked(tally)),
        ("orion", (), orion)):
    PRIORITY.register(_name, aliases=_aliases)(_factory)
