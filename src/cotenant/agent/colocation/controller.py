"""The node agent's co-location loop: observe, let the core decide, enforce.

:class:`ColocationController` holds the core's :class:`GpuState` between calls, one entry per
(GPU, online service) row, and calls :meth:`ColocationPolicy.decide`, the very method the
simulator calls for its GPUs: share sizing, its hysteresis and gain rules, and the compute
guard are decided there and nowhere in the agent. The agent's part is what it observes
(:mod:`.observe`) and how it enforces (:mod:`.enforce`).

:meth:`~ColocationController.decide` runs at each reconcile tick and, the guard's fast path,
as soon as a p99 report arrives (pushed, or read by the latency scraper); each call reads the
loads from NVML afresh. A row that appears starts with a fresh state
(watched from then on); a row whose offline work changes starts its pair state afresh
(:meth:`GpuState.reset`), as does every row of a GPU the guard evicted. A wall clock that
steps back starts everything afresh: the windows and the guard's memory; the supervisor
keeps what its pauses and holds had left.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Protocol

import numpy as np

from cotenant.agent.colocation.enforce import Enforcer, GpuAction, per_gpu
from cotenant.agent.colocation.observe import RowKey, Rows
from cotenant.policies.colocation import ColocationPolicy, GpuState

_FIELDS = ("decided", "floor", "floor_until", "acted_at", "paused_at", "paused_until",
           "held_until", "watched_since", "gained_at")


class Observer(Protocol):
    """Where a decision's rows come from (:class:`~.observe.NodeObserver` on a node)."""

    def observe(self, now: float) -> Rows: ...

    def forget(self) -> None: ...


class ColocationController:
    """Drives ``policy`` for this node's GPUs, holding its state between calls."""

    def __init__(self, policy: ColocationPolicy, observer: Observer, enforcer: Enforcer, *,
                 start_s: float | None = None) -> None:
        self.policy = policy
        self.observer = observer
        self.enforcer = enforcer
        self._origin = start_s
        """When the agent began watching: the rows of its first decision are watched since
        then (None: since that decision); later rows since they appear."""
        self.shares: dict[int, int] = {}
        """The online share per GPU after the last decision (for status and metrics)."""
        self._keys: tuple[RowKey, ...] = ()
        self._pairs: tuple[int, ...] = ()
        self._state = GpuState.new(0, 0.0)
        self._last_now = -math.inf

    @property
    def counts(self) -> dict[str, int]:
        """The guard's actions since the agent started: pause, throttle, evict."""
        return dict(self.enforcer.counts)

    def decide(self, now: float) -> list[GpuAction]:
        """Decide for every row the observer sees now and enforce it; the actions per GPU."""
        self._check_clock(now)
        rows = self.observer.observe(now)
        state = self._aligned(rows, now)
        actions, state = self.policy.decide(rows.obs, state)
        todo = per_gpu(rows, actions)
        self.enforcer.apply(todo, now)
        evicted = {a.gpu for a in todo if a.evict}
        if evicted:  # their offline work left: a new pair starts afresh
            gone = np.asarray([i for i, (gpu, _) in enumerate(rows.keys) if gpu in evicted],
                              dtype=np.int64)
            state = state.reset(gone, now)
        self._keys, self._pairs, self._state = rows.keys, rows.pairs, state
        self._origin = None
        self.shares = {a.gpu: a.share for a in todo}
        return todo

    def _check_clock(self, now: float) -> None:
        if now < self._last_now:  # the wall clock stepped back: the memory means nothing
            self.observer.forget()
            self._keys, self._pairs, self._state = (), (), GpuState.new(0, now)
        self._last_now = now

    def _aligned(self, rows: Rows, now: float) -> GpuState:
        """The state for ``rows``: each row's own from the last call, fresh for a new row,
        its pair state reset where its offline work changed."""
        old = {key: i for i, key in enumerate(self._keys)}
        n = len(rows.keys)
        idx = np.asarray([old.get(key, -1) for key in rows.keys], dtype=np.int64)
        known = idx >= 0
        fresh = GpuState.new(n, now if self._origin is None else self._origin)
        values = {}
        for name in _FIELDS:
            mine, new = getattr(self._state, name), getattr(fresh, name)
            values[name] = np.where(known, mine[np.maximum(idx, 0)] if len(mine) else new, new)
        state = replace(fresh, **values)
        changed = np.asarray([i for i in range(n) if known[i]
                              and self._pairs[idx[i]] != rows.pairs[i]], dtype=np.int64)
        return state.reset(changed, now) if len(changed) else state
