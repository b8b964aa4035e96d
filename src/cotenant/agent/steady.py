"""Wall times the state persists, measured in-process on the monotonic clock.

A restart's backoff (``next_start``) and a run's start (``since``, whose length decides
whether a restart budget recovers) are wall times in the state database: they must mean
something to the next agent process. Within one process they are checked on the monotonic
clock instead: the first time a value is seen it is pinned to the monotonic clock (the
wall time left, or gone by, at that moment), and from then on only the monotonic clock
moves it. A wall clock step forward (NTP) neither ends a backoff early nor makes a short
run look stable; one back delays nothing. Across an agent restart the persisted wall time
is read against the wall clock once, when the new process first sees it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable


class Pinned:
    """Wall times per key (a workload), each pinned to the monotonic clock when first seen."""

    def __init__(self, monotonic: Callable[[], float]) -> None:
        self.monotonic = monotonic
        self._at: dict[str, tuple[float, float]] = {}  # key -> (wall value, monotonic)

    def pin(self, key: str, wall: float, now: float) -> float:
        """The monotonic time of ``wall`` (pinned now, where ``key`` held another value)."""
        entry = self._at.get(key)
        if entry is None or entry[0] != wall:
            entry = (wall, self.monotonic() + (wall - now))
            self._at[key] = entry
        return entry[1]

    def reached(self, key: str, wall: float, now: float) -> bool:
        """Whether the time ``wall`` has come, on the monotonic clock."""
        return self.monotonic() >= self.pin(key, wall, now)

    def since(self, key: str, wall: float, now: float) -> float:
        """Seconds gone since the time ``wall``, on the monotonic clock."""
        return self.monotonic() - self.pin(key, wall, now)

    def shift(self, by: float) -> None:
        """The wall values moved back ``by`` seconds (a backward step corrected in the state):
        keep their monotonic times."""
        self._at = {k: (wall - by, mono) for k, (wall, mono) in self._at.items()}

    def keep(self, keys: Iterable[str]) -> None:
        """Forget every key but ``keys``."""
        wanted = set(keys)
        self._at = {k: v for k, v in self._at.items() if k in wanted}
