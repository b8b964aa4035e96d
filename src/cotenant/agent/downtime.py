"""How long an offline job is down when the agent starts it or restarts it for a new SM share.

The simulator charges every offline placement ``offline_start_s`` and every MPS share change
of a running job ``share_change_s`` (``sim.colocation``; 30 s each by default). Both are
assumptions, and the comparison between MuxFlow and the static baselines turns on the second
(``docs/results/colocation.md``, "Restart cost"). This meter measures them on the node, for the jobs
that actually run there, without any help from the job:

* ``start``: from the spawn of an offline client (its first start, a start after an eviction
  or a crash) until the GPU shows it busy;
* ``share change``: from the SIGTERM the agent sends to give a running client a new share
  (MPS reads the share only when a client starts) until its successor is busy: the
  checkpoint on SIGTERM, the exit, the new process, its CUDA context and its warm-up.

A start is timed from the spawn, so a start the agent had to defer (an MPS daemon not up
yet) is not charged for the wait; a share change includes its own spawn.

"Busy" is the SM utilisation of the job's own processes (NVML's per-process samples of the
leader, else of all its cgroup's or group's processes together: torchrun's workers run apart) at
or above ``busy_pct`` (10% by default: a training step, not a context or a data loader).
NVML samples an MPS client's SM use on the MPS server's pid, not on the client's (seen on an
H200, driver 580), so a job without a sample of its own is read as busy as its daemon
(:func:`~cotenant.agent.backends.base.daemon_samples`: all its clients on the GPU together,
counted once for the job) once NVML lists it, that is once its CUDA context is up. That is a
lower bound (:attr:`Downtime.lower_bound`), kept apart: beside other clients (the online
service) the daemon is busy before the job has run a step, and the server's newest sample
can predate the job (NVML keeps the server's samples across its clients).

Each sample is the cost of one change, as the simulator charges it: a second share change
before the job is busy again starts the measurement afresh from its own SIGTERM (the first
was cut short), and a share change while a start is still warming up leaves that start
unmeasured. A measurement is dropped, unrecorded, when its job crashes or faults (during the
checkpoint too), is paused or evicted by the guard, stops for good, or shows no utilisation
for ``timeout_s`` (a backend without per-process samples: logged each time). An agent
restart loses the open ones, and the next start of a job that was down then is not measured
(its cause is unknown); a wall clock stepping back shifts them with it.

The medians of the exact measurements are what a co-location scenario's
``world.offlineStartS`` / ``shareChangeS`` should be given; ``cotenant agent status`` prints
them (the lower bounds apart) and Prometheus gets ``cotenant_offline_downtime_seconds``.
Measurements live in memory (and as ``up again`` events in the state file); precision is the
agent's tick (1 s by default).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

from cotenant.agent.backends.base import GpuInfo, daemon_samples, workload_sm_util
from cotenant.errors import InputError, check_seconds

START = "start"
SHARE_CHANGE = "share change"
KINDS = (START, SHARE_CHANGE)
SIM_OPTION = {START: "world.offlineStartS", SHARE_CHANGE: "world.shareChangeS"}
"""The ``cotenant simulate colocation`` option each kind of downtime stands for."""
KEEP = 1000
"""Measurements kept per kind (the newest) for the summary."""


@dataclass
class _Open:
    kind: str
    begin: float
    pid: int | None = None
    """The process whose busy time ends the downtime; None until it is spawned."""


@dataclass(frozen=True)
class Downtime:
    """One measured downtime of offline workload ``workload``."""

    workload: str
    kind: str
    seconds: float
    at: float
    lower_bound: bool = False
    """Read on the job's MPS daemon: the job may not have run a step yet."""

    def describe(self) -> str:
        """The ``up again`` event's detail."""
        bound = " (a lower bound: read on its MPS daemon)"
        return f"{self.kind}: {self.seconds:.1f} s{bound if self.lower_bound else ''}"


class DowntimeMeter:
    """Open downtimes per offline workload, closed when the GPU shows the job busy."""

    def __init__(self, busy_pct: float = 10.0, timeout_s: float = 900.0) -> None:
        if not 0.0 < busy_pct <= 100.0:
            raise InputError("downtime busy_pct", f"{busy_pct} must be in (0, 100]")
        check_seconds(timeout_s, "downtime timeout_s", positive=True)
        self.busy_pct = busy_pct
        self.timeout_s = timeout_s
        self._open: dict[str, _Open] = {}
        self._unknown: set[str] = set()
        """Workloads down for a reason this meter did not see (before an agent restart)."""
        self._done: dict[str, deque[float]] = {kind: deque(maxlen=KEEP) for kind in KINDS}
        self._bounds: dict[str, deque[float]] = {kind: deque(maxlen=KEEP) for kind in KINDS}
        """The lower bounds (:attr:`Downtime.lower_bound`), apart from the measurements."""

    def stopped_for_share(self, name: str, now: float) -> None:
        """The agent sent ``name`` SIGTERM to restart it with a new share."""
        self._unknown.discard(name)
        self._open[name] = _Open(SHARE_CHANGE, now)  # a change while down starts afresh

    def started(self, name: str, pid: int, now: float) -> None:
        """Offline workload ``name`` was spawned as ``pid``."""
        if name in self._unknown:  # down since before this agent: no telling for what
            self._unknown.discard(name)
            self._open.pop(name, None)
            return
        current = self._open.get(name)
        if current is not None and current.kind == SHARE_CHANGE and current.pid is None:
            current.pid = pid  # the successor whose busy time ends the share change
        else:  # a first start, or a restart after a crash or an eviction
            self._open[name] = _Open(START, now, pid)

    def forget(self, name: str) -> None:
        """Drop ``name``'s open downtime (it stops for good, faults, or is paused)."""
        self._open.pop(name, None)

    def down_unseen(self, name: str) -> None:
        """``name`` is down for a reason not seen (an agent restart): do not measure its next
        start."""
        self._open.pop(name, None)
        self._unknown.add(name)

    def shift(self, by: float) -> None:
        """The wall clock stepped back ``by`` seconds: keep each open downtime as long."""
        for state in self._open.values():
            state.begin -= by

    def observe(self, gpus: Sequence[GpuInfo], live: Collection[str], paused: Iterable[str],
                now: float, members: Callable[[int], list[int]] | None = None,
                ) -> tuple[list[Downtime], list[str]]:
        """Close the downtimes whose job the GPUs show busy. ``live``: the offline workloads
        not stopped for good; ``paused``: those the guard pauses now; ``members``: a leader's
        processes (``ProcessBackend.members``), asked only while the leader is not busy
        itself. Returns the measurements made, and the workloads given up for want of
        utilisation samples."""
        for name in set(paused) | (set(self._open) - set(live)):
            self.forget(name)
        self._unknown &= set(live)
        util = {p.pid: p.sm_util_pct for g in gpus for p in g.processes}
        daemons = daemon_samples(gpus)
        done: list[Downtime] = []
        gave_up: list[str] = []
        for name, state in list(self._open.items()):
            busy, bound = self._busy(state.pid, util, daemons, members)
            if busy is not None and busy >= self.busy_pct:
                seconds = max(0.0, now - state.begin)
                done.append(Downtime(name, state.kind, seconds, now, lower_bound=bound))
                (self._bounds if bound else self._done)[state.kind].append(seconds)
                del self._open[name]
            elif now - state.begin > self.timeout_s:
                gave_up.append(name)
                del self._open[name]
        return done, gave_up

    def _busy(self, pid: int | None, util: dict[int, float | None],
              daemons: dict[int, float],
              members: Callable[[int], list[int]] | None) -> tuple[float | None, bool]:
        """The SM utilisation of the job's processes (the leader's alone while it is busy
        itself, or where no ``members`` is given, so its workers are looked for only then);
        else, for MPS clients NVML samples on their server, the daemon's, once for the job
        (the busiest GPU's): a lower bound."""
        if pid is None:
            return None, False
        own = util.get(pid)
        if own is not None and (members is None or own >= self.busy_pct):
            return own, False
        group = [pid] if members is None else members(pid)
        sampled = workload_sm_util(pid, util, lambda _: group)
        if sampled is not None:
            return sampled, False
        found = [daemons[m] for m in group if m in daemons]
        return (max(found), True) if found else (None, False)

    def summary(self, lower_bounds: bool = False) -> dict[str, dict[str, float | int | str]]:
        """Per kind with measurements: count, median, 90th percentile and max (seconds), and
        the simulator option the median is for; of the lower bounds where ``lower_bounds``."""
        out: dict[str, dict[str, float | int | str]] = {}
        for kind, values in (self._bounds if lower_bounds else self._done).items():
            if not values:
                continue
            ordered = sorted(values)
            out[kind] = {
                "count": len(ordered),
                "median_s": round(_quantile(ordered, 0.5), 2),
                "p90_s": round(_quantile(ordered, 0.9), 2),
                "max_s": round(ordered[-1], 2),
                "simulator_option": SIM_OPTION[kind],
            }
        return out


def _quantile(ordered: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile of sorted ``ordered`` (numpy's default method)."""
    pos = q * (len(ordered) - 1)
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)
