"""A guard for the policy tests: code under test never ends the test's own process.

The partition solvers run their work in forked children, which end with ``os._exit``. Were
that ever to run in the parent (the fork's two branches swapped, say), the test process
would end on the spot with the child's exit code, 0 as often as not, and the run would stop
early and pass. Here such an exit fails the test instead; a forked child exits as usual."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


@pytest.fixture(autouse=True)
def _no_exit_in_the_test_process(monkeypatch: pytest.MonkeyPatch) -> None:
    test_pid = os.getpid()
    real_exit = os._exit

    def guarded(code: int) -> NoReturn:
        if os.getpid() == test_pid:
            raise AssertionError(f"os._exit({code}) called in the test's own process")
        real_exit(code)

    monkeypatch.setattr(os, "_exit", guarded)
