"""A small discrete-event core: a heap of (time, priority, sequence) and handlers that return
their follow-up events.

Events at the same time run in priority order (lower first: departures before arrivals, so
capacity freed at ``t`` is usable at ``t``), then in the order they were scheduled; the sequence
counter belongs to each :class:`Engine`, so two runs with the same inputs and the same injected
RNG give the same result bit for bit. There is no wall clock anywhere in the core.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any


class Priority(IntEnum):
    """Order of events that share a time stamp."""

    DEPARTURE = 0
    ARRIVAL = 1
    SAMPLE = 2


@dataclass(frozen=True, order=True)
class Event:
    """Something that happens at ``time``; ``payload`` is the handler's business."""

    time: float
    priority: int
    seq: int
    kind: str = field(compare=False)
    payload: Any = field(compare=False, default=None)


Handler = Callable[[Event], Iterable[tuple[float, int, str, Any]] | None]


class Engine:
    """Runs events in (time, priority, sequence) order, dispatching on ``Event.kind``."""

    def __init__(self) -> None:
        self._heap: list[Event] = []
        self._seq = 0
        self._handlers: dict[str, Handler] = {}
        self.now: float = 0.0
        self.processed = 0

    def on(self, kind: str, handler: Handler) -> None:
        self._handlers[kind] = handler

    def schedule(self, time: float, priority: int, kind: str, payload: Any = None) -> Event:
        if time < self.now:
            raise ValueError(f"cannot schedule {kind} at {time}, before now ({self.now})")
        event = Event(time, priority, self._seq, kind, payload)
        self._seq += 1
        heapq.heappush(self._heap, event)
        return event

    def __len__(self) -> int:
        return len(self._heap)

    def step(self) -> Event:
        """Run the next event and schedule what its handler returns."""
        event = heapq.heappop(self._heap)
        self.now = event.time
        follow_ups = self._handlers[event.kind](event)
        self.processed += 1
        if follow_ups:
            for time, priority, kind, payload in follow_ups:
                self.schedule(time, priority, kind, payload)
        return event

    def run(self, until: float | None = None) -> None:
        """Run until the queue is empty or the next event is after ``until``."""
        while self._heap and (until is None or self._heap[0].time <= until):
            self.step()
