"""A guard for the policy tests: code under test never ends the test's own process.

The partition solvers run their work in forked children, which end with ``os._exit``. Were
that ever to run in the parent (the fork's two branches swapped, say), the test process
would end on the spot with the child's exit code, 0 as often as not, and the run would stop
early and pass. Here such an exit raises in the test (and fails it at teardown even if the
code under test swallowed the error); a forked child, or another thread, exits as usual, and
a forked child that went on into the test's own code ends at teardown instead of running the
rest of the session."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import NoReturn

import pytest


@pytest.fixture(autouse=True)
def _no_exit_in_the_test_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    test_pid = os.getpid()
    real_exit = os._exit
    calls: list[int] = []

    def guarded(code: int) -> NoReturn:
        if os.getpid() != test_pid or threading.current_thread() is not threading.main_thread():
            real_exit(code)
        calls.append(code)
        raise AssertionError(f"os._exit({code}) called in the test's own process")

    monkeypatch.setattr(os, "_exit", guarded)
    yield
    if os.getpid() != test_pid:  # a forked child that returned into the test: end it here
        real_exit(1)
    if calls:
        pytest.fail(f"os._exit({calls[0]}) called in the test's own process")
