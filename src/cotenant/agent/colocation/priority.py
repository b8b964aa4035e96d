"""Priority sharing on the node: the agent's side of the cotenant runtime (:mod:`cotenant.runtime`).

Under a policy whose mechanism is priority (``priority``, ``cotenant-priority``) the agent
starts each online service as the HP side of its GPU's board and each offline job as the BE
side (:meth:`PriorityRuntime.env_for`, the supervisor's start environment): the runtime then
holds BE's operators while HP works, within its bound and rate floor, with no change to either
application. A workload on a MIG instance gets nothing (the hardware isolates it).

The core's actions map onto the runtime where it is there to take them:

* **pause**: the board's hold - BE stops at its next operator boundary and goes on when the
  hold ends, no signal sent (a SIGSTOP can stop a process inside a collective or holding a
  lock its peers wait on). Where no BE process on the GPU runs the runtime (no beat on the
  board in the last ``BEAT_STALE_S``: a job that is not PyTorch, or has not imported it yet),
  the pause falls back to the supervisor's SIGSTOP;
* **throttle**: the core never throttles under priority sharing (its guard pauses or evicts);
  the rate floor is the runtime's own, a setting, not an action;
* **evict**: as under MPS, the supervisor stops the job and holds the GPU.

The board's times are monotonic (the runtime's clock); the core's are wall-clock seconds, so
a hold is converted as "so many seconds from now".
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from pathlib import Path

from cotenant.agent.spec import Role, WorkloadSpec
from cotenant.errors import InputError
from cotenant.policies.colocation import ColocationPolicy, Mechanism
from cotenant.runtime import Board, BoardError, GateSettings, runtime_env
from cotenant.runtime.gate import MAX_LEASE_S

BEAT_STALE_S = 2.0
"""A board whose BE side has not beaten for this long has no live gate (its beat is 0.5 s)."""
_NS = 1_000_000_000


class PriorityRuntime:
    """The boards of this node's GPUs (one file each in ``board_dir``) and the workloads'
    runtime environment."""

    def __init__(self, board_dir: Path, settings: GateSettings | None = None, *,
                 monotonic_ns: Callable[[], int] = time.monotonic_ns) -> None:
        self.board_dir = board_dir
        self.settings = settings or GateSettings()
        self.monotonic_ns = monotonic_ns
        self._boards: dict[int, Board] = {}

    def board(self, gpu: int) -> Board:
        """GPU ``gpu``'s board, created on first use and reset then: a hold, a beat or a
        lease left from before (an earlier agent, a reboot's other monotonic clock) goes."""
        if gpu not in self._boards:
            path = self.board_dir / f"gpu{gpu}.board"
            try:
                board = Board(path)
            except (OSError, BoardError) as exc:
                raise InputError(f"priority board {path}", str(exc),
                                 hint="remove the file; the agent makes a new one") from exc
            board.reset(self.monotonic_ns(), int(MAX_LEASE_S * _NS))
            self._boards[gpu] = board
        return self._boards[gpu]

    def env_for(self, spec: WorkloadSpec) -> dict[str, str]:
        """The variables that start ``spec`` with the runtime on: HP for an online service,
        BE for an offline job; none on a MIG instance. The workload's own ``PYTHONPATH`` (its
        spec's, else the agent's) stays after the hook's directory."""
        if spec.mig_instance is not None:
            return {}
        role = "hp" if spec.role is Role.ONLINE else "be"
        own = dict(spec.env).get("PYTHONPATH", os.environ.get("PYTHONPATH"))
        return runtime_env(role, self.board(spec.gpu).path, self.settings, own)

    def gated(self, gpu: int) -> bool:
        """Whether a BE process on ``gpu`` runs the runtime (it beat on the board lately)."""
        beat = self.board(gpu).last_beat_ns()
        return beat > 0 and self.monotonic_ns() - beat <= BEAT_STALE_S * _NS

    def hold(self, gpu: int, until: float, now: float) -> None:
        """No BE operator on ``gpu`` starts before wall time ``until`` (``now`` is the wall
        time; a finite hold, so a crashed agent leaves none for long)."""
        seconds = max(0.0, until - now) if math.isfinite(until) else 0.0
        self.board(gpu).set_hold(self.monotonic_ns() + int(seconds * _NS))

    def held(self, gpu: int) -> float:
        """Seconds the board's hold on ``gpu`` has left (0: none)."""
        return max(0, self.board(gpu).hold_until_ns() - self.monotonic_ns()) / _NS

    def close(self) -> None:
        """Lift every hold (no one would end it early otherwise) and unmap the boards."""
        for board in self._boards.values():
            board.set_hold(0)
            board.close()
        self._boards.clear()


def priority_runtime(policy: ColocationPolicy, state_dir: Path,
                     settings: GateSettings | None = None) -> PriorityRuntime | None:
    """The runtime the agent runs for ``policy``: one for priority sharing, else none."""
    if policy.mechanism is not Mechanism.PRIORITY:
        return None
    return PriorityRuntime(state_dir / "priority", settings)
