"""The core's small parts: recovery, admission, the guard's report window, the registry."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cotenant.errors import InputError, UnknownNameError
from cotenant.policies.colocation import (
    COLOCATION,
    RATE_SPAN_S,
    Actions,
    Admission,
    Fault,
    GuardSettings,
    Mechanism,
    Next,
    Recovery,
    rate_span_s,
    report_window_s,
)


def test_backoff_grows_exponentially_and_is_capped() -> None:
    rec = Recovery(backoff_base_s=10.0, backoff_factor=2.0, backoff_cap_s=60.0)
    assert list(rec.delay_s(np.array([1, 2, 3, 4, 50]))) == [10.0, 20.0, 40.0, 60.0, 60.0]
    assert list(Recovery().delay_s(np.array([1, 5]))) == [0.0, 0.0]


def test_only_a_workloads_own_crash_counts_and_an_online_service_is_never_given_up() -> None:
    rec = Recovery(backoff_base_s=1.0, max_restarts=2)
    assert rec.respond(Fault.NOT_ITS_OWN, online=True, failures=99) == rec.respond(
        Fault.NOT_ITS_OWN, online=False, failures=0)
    assert rec.respond(Fault.NOT_ITS_OWN, online=True, failures=99).counts is False
    first = rec.respond(Fault.CRASH, online=True, failures=0)
    assert first.next is Next.RESTART
    assert first.delay_s == 0.0
    assert first.counts
    late = rec.respond(Fault.CRASH, online=True, failures=40)
    assert late.next is Next.RESTART
    assert late.delay_s == rec.backoff_cap_s
    assert rec.respond(Fault.CRASH, online=False, failures=2).next is Next.GIVE_UP
    assert rec.respond(Fault.CRASH, online=False, failures=1).delay_s == 2.0


def test_signals_end_an_offline_job_gracefully_only_where_handled() -> None:
    assert Recovery(graceful_signals=True).respond(Fault.SIGNAL, False, 0).next is Next.STOP
    killed = Recovery().respond(Fault.SIGNAL, False, 0)
    assert killed.next is Next.RESTART
    assert killed.loses_progress
    assert Recovery().respond(Fault.NONE, False, 3).next is Next.DONE


def test_the_budget_recovers_after_a_stable_run() -> None:
    rec = Recovery(stable_s=600.0)
    assert rec.failures_after(5, 599.0) == 5
    assert rec.failures_after(5, 600.0) == 0


def test_admission_from_history() -> None:
    assert Admission().admits_all
    assert Admission().admitted(np.array([0.99]), 0.0).all()
    adm = Admission(max_load=0.5, warmup_s=3600.0)
    assert not adm.admitted(np.array([0.1]), 100.0).any()  # no history yet
    assert list(adm.admitted(np.array([0.1, 0.6]), 3600.0)) == [True, False]
    with pytest.raises(InputError):
        Admission(max_load=1.5)


def test_a_report_window_holds_enough_requests_or_none() -> None:
    g = GuardSettings(scrape_s=0.25, min_requests=20, max_window_s=5.0)
    got = report_window_s(g, np.array([1000.0, 40.0, 5.0, 3.0, 0.0]))
    assert list(got[:3]) == [0.25, 0.5, 4.0]
    assert math.isinf(got[3])
    assert math.isinf(got[4])


def test_a_load_read_from_the_request_rate_counts_whole_windows_over_a_second() -> None:
    g = GuardSettings(scrape_s=0.25, min_requests=20, max_window_s=5.0)
    # 1000 req/s: four 0.25 s windows; 40: two 0.5 s; 16: one 1.25 s window is more than
    # a second; 5: one 4 s window; 3 and 0: too few for a p99, the window closes at 5 s
    got = rate_span_s(g, np.array([1000.0, 40.0, 16.0, 5.0, 3.0, 0.0]))
    assert got.tolist() == [1.0, 1.0, 1.25, 4.0, 5.0, 5.0]
    assert rate_span_s(GuardSettings(scrape_s=0.3, min_requests=1), np.array([100.0])
                       ).tolist() == pytest.approx([1.2])  # four 0.3 s windows: 1.2 s
    assert RATE_SPAN_S == 1.0


@pytest.mark.parametrize("bad", [{"threshold": 0.0}, {"scrape_s": 0.0}, {"min_requests": 0},
                                 {"pause_s": -1.0}, {"evict_above": 0}])
def test_bad_guard_settings_are_one_line_errors(bad: dict[str, float]) -> None:
    with pytest.raises(InputError):
        GuardSettings(**bad)  # type: ignore[arg-type]


def test_every_policy_is_registered_with_its_mechanism() -> None:
    mech = {n: COLOCATION.create(n).mechanism for n in COLOCATION.names()}
    assert mech == {"dedicated": Mechanism.NONE, "mps-fixed": Mechanism.MPS,
                    "time-slicing": Mechanism.TIME_SLICING, "priority": Mechanism.PRIORITY,
                    "muxflow": Mechanism.MPS, "cotenant-pause": Mechanism.MPS,
                    "cotenant-priority": Mechanism.PRIORITY}
    assert COLOCATION.canonical("ts") == "time-slicing"
    assert COLOCATION.canonical("tally") == "priority"


def test_every_baseline_takes_the_same_protections_as_muxflow() -> None:
    mux = COLOCATION.create("muxflow")
    for name in ("mps-fixed", "time-slicing", "priority"):
        same = COLOCATION.create(name, guard=mux.guard, memory_limit=True)
        assert same.guard == mux.guard
        assert same.memory_limit
    assert COLOCATION.create("mps-fixed", guard="adaptive").guard.adaptive  # type: ignore[union-attr]
    with pytest.raises(UnknownNameError):
        COLOCATION.create("mps-fixed", guard="bogus")


def test_cotenant_priority_takes_its_guard_threshold() -> None:
    pol = COLOCATION.create("cotenant-priority", threshold=0.5)
    assert pol.guard is not None
    assert pol.guard.threshold == 0.5
    assert pol.guard.adaptive


REC = Recovery(backoff_base_s=1.0, backoff_factor=2.0, backoff_cap_s=30.0, max_restarts=3,
               quarantine_s=600.0)
R, S, D, G = Next.RESTART, Next.STOP, Next.DONE, Next.GIVE_UP


@pytest.mark.parametrize(
    ("rec", "fault", "online", "failures", "expected"),
    [
        (REC, Fault.NONE, False, 2, (D, 0.0, False, False, 0.0)),
        (REC, Fault.NOT_ITS_OWN, True, 5, (R, 0.0, False, True, 0.0)),
        (REC, Fault.NOT_ITS_OWN, False, 5, (R, 0.0, False, True, 0.0)),
        (Recovery(graceful_signals=True), Fault.SIGNAL, False, 0, (S, 0.0, False, False, 0.0)),
        (Recovery(graceful_signals=True), Fault.SIGNAL, True, 0, (R, 0.0, True, False, 0.0)),
        (REC, Fault.SIGNAL, False, 0, (R, 1.0, True, True, 0.0)),
        (REC, Fault.XID, False, 1, (R, 600.0, True, True, 600.0)),
        (REC, Fault.XID, True, 0, (R, 0.0, True, False, 0.0)),  # online: no quarantine
        (REC, Fault.CRASH, True, 0, (R, 0.0, True, False, 0.0)),  # first: at once
        (REC, Fault.CRASH, True, 1, (R, 1.0, True, False, 0.0)),
        (REC, Fault.CRASH, True, 3, (R, 4.0, True, False, 0.0)),
        (REC, Fault.CRASH, True, 100, (R, 30.0, True, False, 0.0)),  # capped, never given up
        (REC, Fault.CRASH, False, 0, (R, 1.0, True, True, 0.0)),
        (REC, Fault.CRASH, False, 2, (R, 4.0, True, True, 0.0)),  # the third: still restarted
        (REC, Fault.CRASH, False, 3, (G, 0.0, True, True, 0.0)),  # the fourth: given up
    ],
)
def test_every_response_of_the_rule_book(
    rec: Recovery, fault: Fault, online: bool, failures: int,
    expected: tuple[Next, float, bool, bool, float],
) -> None:
    got = rec.respond(fault, online, failures)
    assert (got.next, got.delay_s, got.counts, got.loses_progress, got.quarantine_s) == expected


def test_backoff_exponent_stops_at_60() -> None:
    """Past 60 doublings the exponent stops growing (no overflow), for offline and online
    restarts alike: visible only with a cap beyond 2^60 times the base."""
    rec = Recovery(backoff_base_s=1.0, backoff_cap_s=1e30)
    assert rec.delay_s(np.array([61, 62, 500])).tolist() == [2.0**60] * 3
    assert rec.delay_s(np.array([60])).tolist() == [2.0**59]
    assert rec.respond(Fault.CRASH, True, 500).delay_s == 2.0**59  # restart 501: delay_s(60)
    no_backoff = Recovery().delay_s(np.array([1, 5]))
    assert no_backoff.dtype == np.float64
    assert Recovery(backoff_base_s=2.0).delay_s(3).dtype == np.float64


def test_report_windows_at_their_bounds() -> None:
    g = GuardSettings(scrape_s=0.25, min_requests=1, max_window_s=2.0)
    # 0.5 req/s: one request takes 2 s, exactly the longest window: kept
    got = report_window_s(g, [0.5, 4, 0.4])  # a list of plain numbers is accepted
    assert got.dtype == np.float64
    assert got[:2].tolist() == [2.0, 0.25]
    assert math.isinf(got[2])  # 2.5 s: past the longest window


def test_actions_name_the_gpus_whose_share_changes() -> None:
    n = 3
    actions = Actions(np.array([30, 50, 70]), np.zeros(n, bool), np.zeros(n), np.zeros(n, bool),
                      np.zeros(n), np.zeros(n, np.int64))
    changed = actions.changed(np.array([30, 40, 70]))
    assert changed.dtype == np.bool_
    assert changed.tolist() == [False, True, False]


def test_a_policy_copy_with_changes() -> None:
    base = COLOCATION.create("mps-fixed", share=70)
    other = base.with_(gain_threshold_pct=25)
    assert other.gain_threshold_pct == 25
    assert base.gain_threshold_pct != 25
    assert other.name == base.name
    assert other.mechanism is base.mechanism
