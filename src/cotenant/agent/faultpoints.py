"""Named fault-injection points at the agent's step boundaries, for the crash tests.

The supervisor and the state store call :meth:`FaultPoints.hit` between the steps of every
change they make (write the intent, act, record the outcome): ``start.intent`` after a
start's intent is written and before the spawn, ``start.spawned`` after the spawn and before
``running`` is written, and so on (:data:`POINTS`). A test arms a point with the exception
the agent should meet there: :class:`AgentCrash` (a :class:`BaseException`, so nothing in the
agent catches it) stands for the agent dying at that instant, a ``sqlite3.OperationalError``
for a full disk. Unarmed, a hit costs one dictionary lookup.
"""

from __future__ import annotations

from collections.abc import Callable

POINTS = {
    "submit": ("submit.recorded",),
    "start": ("start.intent", "start.spawned", "start.recorded"),
    "stop": ("stop.intent", "stop.signalled"),
    "restart": ("exit.seen", "exit.recorded"),
    "share change": ("share.intent", "share.signalled"),
}
"""Each operation's step boundaries, in order (a restart after a crash is the exit's steps,
then a start's)."""


class AgentCrash(BaseException):
    """The agent dies at a fault point (tests only; nothing in the agent catches it)."""


class FaultPoints:
    """Which points are armed, and every point passed (for the tests' coverage)."""

    def __init__(self) -> None:
        self._armed: dict[str, tuple[Callable[[], BaseException], int]] = {}
        self.passed: list[str] = []

    def arm(self, name: str, error: Callable[[], BaseException] = AgentCrash,
            times: int = 1) -> None:
        """Raise ``error()`` at the next ``times`` hits of ``name`` (-1: every hit)."""
        self._armed[name] = (error, times)

    def disarm(self, name: str) -> None:
        self._armed.pop(name, None)

    def hit(self, name: str) -> None:
        self.passed.append(name)
        if len(self.passed) > 10_000:
            del self.passed[:5_000]
        armed = self._armed.get(name)
        if armed is None:
            return
        error, times = armed
        if times > 0:
            if times == 1:
                del self._armed[name]
            else:
                self._armed[name] = (error, times - 1)
        raise error()
