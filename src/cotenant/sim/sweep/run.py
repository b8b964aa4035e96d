"""Runs a planned sweep and hands each result on as it finishes.

:func:`plan` makes a :class:`~.spec.Sweep` concrete (the simulator's checks, the inputs
built once); :func:`run_sweep` runs it on an executor and calls ``on_result`` with each
:class:`SweepResult` the moment its run finishes, so a caller can write it out at once (a
long sweep that is stopped keeps what it finished) and show progress. A run that fails is a
result with its ``error``; the others go on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cotenant.sim.sweep.executor import Executor, RunFailure
from cotenant.sim.sweep.simulators import SIMULATORS, Plan, run_point
from cotenant.sim.sweep.spec import Sweep


@dataclass(frozen=True)
class SweepResult:
    """One run: its place in the sweep, its settings, its summary or its error."""

    index: int
    settings: dict[str, Any]
    summary: dict[str, object] | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"index": self.index, "settings": self.settings}
        if self.error is None:
            out["summary"] = self.summary
        else:
            out["error"] = self.error
        return out


def plan(sweep: Sweep) -> Plan:
    """The sweep's runs, by its simulator (an unknown name lists the known ones)."""
    return SIMULATORS.create(sweep.simulator).plan(sweep)


def run_sweep(planned: Plan, executor: Executor,
              on_result: Callable[[SweepResult], None] | None = None) -> list[SweepResult]:
    """Every run of ``planned`` on ``executor``, in sweep order (``on_result`` sees them in
    the order they finish)."""

    def result(i: int, outcome: object) -> SweepResult:
        settings = planned.points[i]
        if isinstance(outcome, RunFailure):
            return SweepResult(i, settings, None, outcome.error)
        return SweepResult(i, settings, outcome)  # type: ignore[arg-type]

    def done(i: int, outcome: object) -> None:
        if on_result is not None:
            on_result(result(i, outcome))

    outcomes = executor.map(run_point, planned.inputs, planned.tasks, on_done=done)
    return [result(i, o) for i, o in enumerate(outcomes)]
