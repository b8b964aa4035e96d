"""The co-location policies by name (``COLOCATION``), each a composition of the core's parts.

* ``dedicated``: online GPUs run online work only (the reference);
* ``mps-fixed``: MPS with a fixed online share (default 50%), jobs in queue order;
* ``time-slicing``: the GPU's default time slicing;
* ``priority``: online kernels first, offline kernels preempted (Tally, REEF), as the
  calibration's priority stretch and cost describe it;
* ``muxflow``: maximum-weight matching on predicted speeds, :class:`DynamicShare`, a hard
  memory limit, the compute guard as MuxFlow describes it (throttle to the need, evict past
  95%; no pause), and MuxFlow's mixed error handling (graceful exit on signals, the online
  service first after an MPS failure, offline restarts with exponential backoff);
* ``cotenant-pause``: MuxFlow's parts with the guard that pauses first (a burst costs the
  co-runner ``pause_s`` and no restart) and a throttle of at least ``step_pct`` points;
* ``cotenant-priority``: priority sharing with the adaptive guard (it pauses the co-runner
  through a burst for as long as the model says the burst lasts, never evicts), its trigger
  ``threshold`` the knob for fewer misses, the maximum-weight matching (its predictor trained
  on Tally's priority pairs), the memory limit and MuxFlow's error handling.

Every baseline takes the same protections MuxFlow has, as options: ``guard`` (the same guard
settings; under time slicing its throttle is the offline job's duty cap, TGS-like rate
control, and under priority sharing only pause or evict), ``memory_limit`` and admission
(``max_load``, ``quantile``); the frontier sweeps them.
"""

from __future__ import annotations

from dataclasses import replace

from cotenant.errors import UnknownNameError
from cotenant.policies.colocation.admission import Admission
from cotenant.policies.colocation.contract import Mechanism
from cotenant.policies.colocation.guard import GuardSettings
from cotenant.policies.colocation.policy import ColocationPolicy, Matching
from cotenant.policies.colocation.recovery import Recovery
from cotenant.policies.colocation.share import DynamicShare, FixedShare
from cotenant.registry import Registry

COLOCATION: Registry[ColocationPolicy] = Registry("co-location policy")

MUXFLOW_GUARD = GuardSettings(pause_s=0.0, step_pct=0)
"""MuxFlow's guard: throttle to the need at the measured load, evict past 95%; no pause."""
PAUSE_GUARD = GuardSettings()
"""The guard that pauses first (the node agent's default)."""
ADAPTIVE_GUARD = GuardSettings(adaptive=True, hold_s=0.0, pause_s=30.0)
"""The guard that pauses through a burst, as long as the model says it lasts."""
GUARDS = {"muxflow": MUXFLOW_GUARD, "pause": PAUSE_GUARD, "adaptive": ADAPTIVE_GUARD}
"""The guards a policy's ``guard`` option names (``true`` is ``pause``)."""
MUXFLOW_RECOVERY = Recovery(backoff_base_s=60.0, online_first=True, graceful_signals=True)


def _guard(guard: bool | str | GuardSettings) -> GuardSettings | None:
    if isinstance(guard, GuardSettings):
        return guard
    if isinstance(guard, str):
        if guard not in GUARDS:
            raise UnknownNameError("guard", guard, GUARDS)
        return GUARDS[guard]
    return PAUSE_GUARD if guard else None


@COLOCATION.register("dedicated", aliases=("none", "exclusive"))
def dedicated() -> ColocationPolicy:
    return ColocationPolicy("dedicated", Mechanism.NONE, matching=Matching.NONE)


@COLOCATION.register("mps-fixed", aliases=("mps",))
def mps_fixed(share: int = 50, guard: bool | str | GuardSettings = False,
              memory_limit: bool = False, max_load: float = 1.0,
              quantile: float = 1.0) -> ColocationPolicy:
    return ColocationPolicy("mps-fixed", Mechanism.MPS, FixedShare(share), _guard(guard),
                            Admission(max_load, quantile), memory_limit=memory_limit)


@COLOCATION.register("time-slicing", aliases=("ts", "timeslicing"))
def time_slicing(guard: bool | str | GuardSettings = False, memory_limit: bool = False,
                 max_load: float = 1.0, quantile: float = 1.0) -> ColocationPolicy:
    return ColocationPolicy("time-slicing", Mechanism.TIME_SLICING, FixedShare(0),
                            _guard(guard), Admission(max_load, quantile),
                            memory_limit=memory_limit)


@COLOCATION.register("priority", aliases=("tally",))
def priority(guard: bool | str | GuardSettings = False, memory_limit: bool = False,
             max_load: float = 1.0, quantile: float = 1.0) -> ColocationPolicy:
    return ColocationPolicy("priority", Mechanism.PRIORITY, FixedShare(0), _guard(guard),
                            Admission(max_load, quantile), memory_limit=memory_limit)


@COLOCATION.register("muxflow")
def muxflow(share: DynamicShare | None = None, guard: GuardSettings = MUXFLOW_GUARD,
            load_window_s: float = 60.0, matching: Matching = Matching.MAX_WEIGHT,
            max_load: float = 1.0, quantile: float = 1.0) -> ColocationPolicy:
    return ColocationPolicy(
        "muxflow", Mechanism.MPS, share or DynamicShare(), guard,
        Admission(max_load, quantile), MUXFLOW_RECOVERY, matching, memory_limit=True,
        load_window_s=load_window_s,
    )


@COLOCATION.register("cotenant-pause")
def cotenant_pause(share: DynamicShare | None = None, guard: GuardSettings = PAUSE_GUARD,
                   load_window_s: float = 60.0, matching: Matching = Matching.MAX_WEIGHT,
                   max_load: float = 1.0, quantile: float = 1.0) -> ColocationPolicy:
    return ColocationPolicy(
        "cotenant-pause", Mechanism.MPS, share or DynamicShare(), guard,
        Admission(max_load, quantile), MUXFLOW_RECOVERY, matching, memory_limit=True,
        load_window_s=load_window_s,
    )


@COLOCATION.register("cotenant-priority")
def cotenant_priority(guard: GuardSettings = ADAPTIVE_GUARD, threshold: float | None = None,
                      matching: Matching = Matching.MAX_WEIGHT, max_load: float = 1.0,
                      quantile: float = 1.0) -> ColocationPolicy:
    """``threshold``: the guard's trigger as a fraction of the SLO (its knob for fewer misses)."""
    if threshold is not None:
        guard = replace(guard, threshold=threshold)
    return ColocationPolicy(
        "cotenant-priority", Mechanism.PRIORITY, FixedShare(0), guard,
        Admission(max_load, quantile), MUXFLOW_RECOVERY, matching, memory_limit=True,
    )
