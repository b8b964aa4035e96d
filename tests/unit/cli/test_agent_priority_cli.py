"""``cotenant agent run`` with a priority policy: it runs with the runtime's settings, and the
``--priority-*`` options are refused with one line where out of range or where the policy
does not share by priority."""

from __future__ import annotations

from pathlib import Path

import pytest

from .test_cli import assert_one_error_line, run

Capsys = pytest.CaptureFixture[str]
AGENT = ("agent", "run", "--backend", "fake", "--listen", "127.0.0.1:0", "--interval", "0.01",
         "--ticks", "2")


def test_agent_run_with_a_priority_policy(capsys: Capsys, tmp_path: Path) -> None:
    code, out, _ = run(capsys, *AGENT, "--state-dir", str(tmp_path), "--policy",
                       "cotenant-priority", "--priority-floor", "0.25",
                       "--priority-max-hold-s", "0.05")
    assert code == 0
    assert "co-location policy cotenant-priority (priority shares)" in out
    assert ("the priority runtime holds offline work while online works (lease 0.02 s, at "
            "most 0.05 s a wait, floor 0.25)") in out


@pytest.mark.parametrize(("argv", "needle"), [
    (("--policy", "priority", "--priority-floor", "1"),
     "--priority-floor: floor must be a fraction in [0, 1), got 1.0"),
    (("--policy", "priority", "--priority-lease-s", "0"),
     "--priority-lease-s: lease_s must be seconds in (0, 60], got 0.0"),
    (("--policy", "mps-fixed", "--priority-max-hold-s", "0.1"),
     "--priority-max-hold-s: is a setting of the priority runtime, which policy 'mps-fixed' "
     "does not use (hint: use --policy priority or cotenant-priority)"),
])
def test_bad_priority_options_are_one_line(capsys: Capsys, tmp_path: Path,
                                           argv: tuple[str, ...], needle: str) -> None:
    code, _, err = run(capsys, *AGENT, "--state-dir", str(tmp_path), *argv)
    assert code == 2
    assert needle in assert_one_error_line(err)
