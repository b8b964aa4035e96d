"""The event core: ordering by (time, priority, sequence) and follow-up events."""

from __future__ import annotations

from typing import Any

import pytest

from cotenant.sim.engine import Engine, Event, Priority


def test_events_run_in_time_priority_sequence_order() -> None:
    engine = Engine()
    seen: list[str] = []
    engine.on("x", lambda e: seen.append(e.payload))
    engine.schedule(5.0, Priority.ARRIVAL, "x", "arrive@5")
    engine.schedule(5.0, Priority.DEPARTURE, "x", "depart@5")
    engine.schedule(1.0, Priority.ARRIVAL, "x", "first")
    engine.schedule(5.0, Priority.ARRIVAL, "x", "arrive@5-second")
    engine.run()
    assert seen == ["first", "depart@5", "arrive@5", "arrive@5-second"]
    assert engine.now == 5.0


def test_handlers_return_follow_ups_and_run_until() -> None:
    engine = Engine()
    times: list[float] = []

    def tick(event: Event) -> list[tuple[float, int, str, Any]]:
        times.append(event.time)
        return [(event.time + 10.0, Priority.SAMPLE, "tick", None)]

    engine.on("tick", tick)
    engine.schedule(0.0, Priority.SAMPLE, "tick")
    engine.run(until=35.0)
    assert times == [0.0, 10.0, 20.0, 30.0]
    assert len(engine) == 1


def test_cannot_schedule_in_the_past() -> None:
    engine = Engine()
    engine.on("x", lambda e: None)
    engine.schedule(3.0, 0, "x")
    engine.run()
    with pytest.raises(ValueError, match="before now"):
        engine.schedule(1.0, 0, "x")
