"""The BE gate's rules on a manual clock: it holds while HP's lease is live, lets go when the
lease ends or at the bound, keeps the rate floor, and honours the agent's hold."""

from __future__ import annotations

import itertools

import pytest

from cotenant.runtime import Gate, GateSettings

NS = 1_000_000_000
MS = 1_000_000


class Board:
    """A board in memory: HP's latest lease expiry and the agent's hold, in ns."""

    def __init__(self) -> None:
        self.hp = 0
        self.hold = 0
        self.beats: list[tuple[int, int]] = []

    def hp_until_ns(self, before_ns: int | None = None) -> int:
        return self.hp if before_ns is None or self.hp <= before_ns else 0

    def hold_until_ns(self) -> int:
        return self.hold

    def beat(self, pid: int, now_ns: int) -> None:
        self.beats.append((pid, now_ns))


class Clock:
    """Monotonic ns that only ``sleep`` moves (and a hook run at each sleep)."""

    def __init__(self) -> None:
        self.now = 10 * NS
        self.on_sleep = lambda now: None

    def __call__(self) -> int:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.now += round(seconds * NS)
        self.on_sleep(self.now)


def gate(settings: GateSettings | None = None) -> tuple[Gate, Board, Clock]:
    board, clock = Board(), Clock()
    return Gate(board, settings or GateSettings(), clock_ns=clock, sleep=clock.sleep,
                pid=7), board, clock


def test_an_idle_hp_costs_be_nothing() -> None:
    g, board, clock = gate()
    board.hp = clock.now - 1  # a lease that has run out
    assert g.check() == 0.0
    assert clock.now == 10 * NS
    assert (g.stats.waits, g.stats.checks) == (0, 1)
    assert board.beats == [(7, 10 * NS)]


def test_be_waits_while_hp_works_and_goes_on_within_a_poll_of_the_lease_end() -> None:
    g, board, clock = gate(GateSettings(poll_s=0.001, max_hold_s=1.0))
    board.hp = clock.now + 30 * MS + 200_000  # HP's lease runs 30.2 ms more
    waited = g.check()
    assert 0.0302 <= waited <= 0.0302 + 0.001
    assert clock.now >= board.hp
    assert (g.stats.waits, g.stats.bounded) == (1, 0)


def test_hp_that_keeps_renewing_holds_be_for_at_most_the_bound() -> None:
    g, board, clock = gate(GateSettings(max_hold_s=0.1, lease_s=0.02, poll_s=0.0005))
    clock.on_sleep = lambda now: setattr(board, "hp", now + 20 * MS)  # HP never idles
    board.hp = clock.now + 20 * MS
    waited = g.check()
    assert waited == pytest.approx(0.1, abs=1e-9)
    assert (g.stats.waits, g.stats.bounded) == (1, 1)


def test_a_released_lease_lets_be_go_at_the_next_poll() -> None:
    g, board, clock = gate(GateSettings(poll_s=0.0005, max_hold_s=1.0))
    board.hp = clock.now + 5 * NS  # a long lease ...
    start = clock.now

    def release(now: int) -> None:
        if now - start >= 3 * MS:
            board.hp = 0  # ... that HP released after 3 ms

    clock.on_sleep = release
    assert g.check() == pytest.approx(0.003, abs=0.0005)


@pytest.mark.parametrize("floor", [0.05, 0.1, 0.5])
def test_the_rate_floor_holds_however_busy_hp_is(floor: float) -> None:
    """HP never idles; BE runs 1 ms operators. Over a second BE runs at least ``floor`` of
    the time (and close to it: HP gets the rest)."""
    g, board, clock = gate(GateSettings(max_hold_s=0.05, floor=floor))
    clock.on_sleep = lambda now: setattr(board, "hp", now + 20 * MS)
    board.hp = clock.now + 20 * MS
    start, ran = clock.now, 0
    while clock.now - start < 2 * NS:
        g.check()
        clock.now += MS  # one BE operator runs
        board.hp = clock.now + 20 * MS
        ran += MS
    share = ran / (clock.now - start)
    assert floor <= share <= floor + 0.03
    assert g.stats.bounded == g.stats.waits > 0


def test_no_floor_still_moves_one_operator_per_bound() -> None:
    g, board, clock = gate(GateSettings(max_hold_s=0.05, floor=0.0))
    clock.on_sleep = lambda now: setattr(board, "hp", now + 20 * MS)
    board.hp = clock.now + 20 * MS
    for _ in range(10):
        assert g.check() == pytest.approx(0.05)
    assert g.stats.waits == 10


def test_the_agents_hold_is_honoured_to_its_end_and_earns_no_floor_credit() -> None:
    g, board, clock = gate(GateSettings(max_hold_s=0.05, floor=0.5))
    board.hold = clock.now + 2 * NS  # the guard's pause: 2 s, longer than the bound
    assert g.check() == pytest.approx(2.0, abs=0.011)
    assert g.stats.held_s == pytest.approx(2.0, abs=0.011)
    assert g.stats.waits == 0
    board.hp = clock.now + 5 * NS  # HP busy now: no credit from the hold, so BE waits
    assert g.check() == pytest.approx(0.05)


def test_a_hold_during_an_hp_wait_does_not_count_against_the_bound() -> None:
    g, board, clock = gate(GateSettings(max_hold_s=0.05, floor=0.5, poll_s=0.001))
    start = clock.now
    board.hp = start + 10 * NS

    def hold_once(now: int) -> None:
        if now - start >= 10 * MS and board.hold == 0:
            board.hold = now + NS

    clock.on_sleep = hold_once
    waited = g.check()
    assert waited == pytest.approx(1.05, abs=0.003)  # 50 ms for HP + the 1 s hold
    assert g.stats.waited_s == pytest.approx(0.05, abs=0.002)


def test_the_beat_comes_every_half_second_at_most() -> None:
    g, board, clock = gate()
    for _ in range(100):
        g.check()
        clock.now += 10 * MS
    assert len(board.beats) == 2


@pytest.mark.parametrize(("field", "value"), [
    ("lease_s", 0.0), ("max_hold_s", -1.0), ("poll_s", 61.0), ("floor", 1.0), ("floor", -0.1),
    ("lease_s", float("nan")),
])
def test_bad_settings_are_refused_naming_the_field(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        GateSettings(**{field: value})


def test_an_expiry_beyond_any_lease_holds_nothing() -> None:
    """A lease expiry from before the monotonic clock restarted (a reboot) lies further ahead
    than any lease can: it is not a lease."""
    g, board, clock = gate()
    board.hp = clock.now + 10 * 86400 * NS
    assert g.check() == 0.0
    board.hp = clock.now + 59 * NS  # within the longest lease: HP is busy
    assert g.check() == pytest.approx(0.1)


def test_a_waiting_gate_keeps_beating_through_a_long_hold() -> None:
    g, board, clock = gate()
    board.hold = clock.now + 5 * NS
    g.check()
    times = [t for _, t in board.beats]
    assert times[0] == 10 * NS
    assert times[-1] >= 14 * NS
    assert max(b - a for a, b in itertools.pairwise(times)) <= NS  # far from 2 s staleness
