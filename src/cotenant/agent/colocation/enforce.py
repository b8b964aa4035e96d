"""The core's :class:`Actions`, enforced on the node through the supervisor.

The core decides per row (GPU, online service); a GPU with several online services takes the
most protective of its rows (:func:`per_gpu`): the largest share, a pause or an eviction if
any row asks for one (an eviction over everything else). Per GPU, :class:`Enforcer`:

* **share**: every offline client of the GPU is given the thread cap ``100 - share`` (at
  least 1, MPS's minimum). MPS reads a cap only when a client creates its context, so a
  running client is restarted for it (``Supervisor.restart_for_share``: SIGTERM, it
  checkpoints, it starts again with the new cap) where the core asks for a restart, or where
  its cap is above the new one; one that waits to start just starts with it (which costs
  nothing). Online clients are never restarted for a share;
* **pause**: the GPU's running offline clients are stopped (SIGSTOP, or their cgroup frozen)
  until ``pause_until`` (``Supervisor.pause``); a pause the core extends (the adaptive guard)
  moves the resume time. Under priority sharing, where the GPU's offline job runs the cotenant
  runtime, the pause is the runtime's hold instead (:mod:`.priority`): it stops at its next
  operator, no signal sent;
* **evict**: no offline work starts on the GPU before ``hold_until``
  (``Supervisor.hold_offline``), and its running offline clients are stopped, to start again
  after the hold (not a fault).

Each guard action is logged (``guard pause``, ``guard throttle``, ``guard evict``) and
counted once per GPU and decision, for the metrics.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cotenant.agent.colocation.observe import Rows
from cotenant.agent.colocation.priority import PriorityRuntime
from cotenant.agent.records import Status, WorkloadRecord
from cotenant.agent.spec import Role
from cotenant.agent.supervisor import NODE, Supervisor
from cotenant.errors import InputError
from cotenant.policies.colocation import (
    COLOCATION,
    MAX_SHARE_PCT,
    Actions,
    ColocationPolicy,
    Mechanism,
    Why,
    offline_thread_pct,
)

ENFORCEABLE = (Mechanism.MPS, Mechanism.PRIORITY)
"""MPS shares are thread caps; priority is the cotenant runtime (:mod:`.priority`)."""


def check_enforceable(policy: ColocationPolicy) -> ColocationPolicy:
    """``policy`` if the agent can enforce it: its shares are MPS thread caps, or it shares
    by priority (the cotenant runtime). Time slicing's duty caps need a scheduler the agent
    does not run, and a policy that shares nothing has nothing for it to do."""
    if policy.mechanism not in ENFORCEABLE:
        usable = [n for n in COLOCATION if COLOCATION.create(n).mechanism in ENFORCEABLE]
        raise InputError(f"co-location policy {policy.name!r}", f"shares GPUs by "
                         f"{policy.mechanism.value}; the node agent enforces MPS shares and "
                         "priority sharing only", hint=f"use one of: {', '.join(usable)}")
    return policy


@dataclass(frozen=True)
class GpuAction:
    """What one decision does on one GPU."""

    gpu: int
    placed: bool
    """Offline work is placed on the GPU (else there is no share to enforce)."""
    share: int
    before: int
    """The share in force when the core decided."""
    restart: bool
    pause_until: float
    """NaN: no pause."""
    evict: bool
    hold_until: float
    why: frozenset[Why]
    detail: str
    """The report behind a guard action, for the log (``GPU 0: p99 49 ms, SLO 50 ms``)."""

    @property
    def offline_pct(self) -> int:
        """The offline clients' MPS thread cap at this share."""
        return offline_thread_pct(self.share)


def per_gpu(rows: Rows, actions: Actions) -> list[GpuAction]:
    """The core's per-row ``actions`` as one action per GPU: the most protective of its rows."""
    out = []
    gpus = np.asarray([gpu for gpu, _ in rows.keys], dtype=np.int64)
    obs = rows.obs
    for gpu in sorted(set(gpus.tolist())):
        i = np.flatnonzero(gpus == gpu)
        pauses = actions.pause_until[i]
        pauses = pauses[np.isfinite(pauses)]
        worst = i[np.argmax(np.nan_to_num(obs.p99_ms[i], nan=-1.0) / obs.slo_ms[i])]
        detail = (f"GPU {gpu}: p99 {obs.p99_ms[worst]:g} ms, SLO {obs.slo_ms[worst]:g} ms"
                  if math.isfinite(obs.p99_ms[worst]) else f"GPU {gpu}")
        out.append(GpuAction(
            gpu=gpu, placed=bool(obs.placed[i].any()), share=int(actions.share[i].max()),
            before=int(obs.share[i].max()),
            restart=bool(actions.restart[i].any()),
            pause_until=float(pauses.max()) if len(pauses) else math.nan,
            evict=bool(actions.evict[i].any()), hold_until=float(actions.hold_until[i].max()),
            why=frozenset(Why(int(w)) for w in actions.why[i]) - {Why.NONE}, detail=detail))
    return out


class Enforcer:
    """Applies :class:`GpuAction` s through the supervisor and counts the guard's actions."""

    def __init__(self, supervisor: Supervisor, runtime: PriorityRuntime | None = None) -> None:
        self.supervisor = supervisor
        self.runtime = runtime
        """The priority runtime's boards, where the policy shares by priority."""
        self.counts = {"pause": 0, "throttle": 0, "evict": 0}

    def apply(self, actions: list[GpuAction], now: float) -> None:
        if not actions:
            return
        records = self.supervisor.store.all()
        for action in actions:
            offline = [r for r in records if r.spec.gpu == action.gpu
                       and r.spec.role is Role.OFFLINE and r.spec.mig_instance is None
                       and not r.status.final]
            if action.evict:
                self._evict(action, offline, now)
                continue
            if math.isfinite(action.pause_until):
                self._pause(action, offline, now)
            if Why.THROTTLE in action.why:
                self.counts["throttle"] += 1
                self.supervisor.store.event(now, NODE, "guard throttle", detail=(
                    f"{action.detail}: online share >= {action.share}"))
            self._share(action, offline, now)

    def _pause(self, action: GpuAction, offline: list[WorkloadRecord], now: float) -> None:
        """Through the runtime's hold where the GPU's offline job runs it, else SIGSTOP."""
        gated = self.runtime is not None and self.runtime.gated(action.gpu)
        if Why.PAUSE in action.why:  # a new pause, not an extension
            self.counts["pause"] += 1
            how = " (the runtime's hold: at its next operator)" if gated else ""
            self.supervisor.store.event(now, NODE, "guard pause", detail=(
                f"{action.detail}: offline paused {action.pause_until - now:g} s{how}"))
        if gated:
            assert self.runtime is not None
            self.runtime.hold(action.gpu, action.pause_until, now)
            return
        for record in offline:
            self.supervisor.pause(record.spec.name, now, action.pause_until)

    def _share(self, action: GpuAction, offline: list[WorkloadRecord], now: float) -> None:
        if not action.placed:  # held: its offline work waits off the GPU
            return
        target = action.offline_pct
        for record in offline:
            if record.status is Status.RUNNING:
                applied = MAX_SHARE_PCT if record.applied_pct is None else record.applied_pct
                change = applied > target or (action.restart and applied != target)
            else:  # not running: the new cap applies when it starts
                change = record.share_pct != target
            if change:
                self.supervisor.restart_for_share(record.spec.name, target, now)

    def _evict(self, action: GpuAction, offline: list[WorkloadRecord], now: float) -> None:
        """Stop the GPU's offline clients; no offline work starts there before the hold ends
        (those evicted, those waiting, those submitted meanwhile)."""
        self.counts["evict"] += 1
        self.supervisor.hold_offline(action.gpu, action.hold_until, now)
        for record in offline:
            if record.status is Status.RUNNING:
                self.supervisor.store.event(now, record.spec.name, "guard evict",
                                            detail=action.detail)
                self.supervisor.evict(record.spec.name, now)
