"""The pending offline jobs, bucketed by memory so a GPU is offered jobs that fit it.

A plain FIFO lets jobs that fit only the few roomy GPUs pile up at its head and starve the
small ones. Jobs are bucketed by their memory need rounded up to ``GRAIN_MIB`` (the rounded
value is what must fit: conservative); each bucket keeps queue order, with jobs that come back
(evicted, failed, put back unmatched) in a small side list ahead of the never-started ones.
A job is offered only once it is ready (``ready[job] <= t``: arrived, and past any restart
delay); never-started jobs are kept in arrival order (``ready`` at construction), so the
ones not yet arrived are always at the tail of their bucket.
:meth:`JobQueue.take` offers the largest jobs that fit a given room first (best fit), so the
cost of an offer is O(buckets + offered), not O(pending).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
GRAIN_MIB = 256.0


class JobQueue:
    """Stateful pending-job queue of one simulation run (not shared)."""

    def __init__(self, need_mib: FloatArray, ready: IntArray) -> None:
        bound = np.ceil(need_mib / GRAIN_MIB) * GRAIN_MIB
        self.bounds, cls = np.unique(bound, return_inverse=True)
        # each bucket in arrival order (then index), so the not-yet-arrived are at its tail
        order = np.lexsort((np.arange(len(need_mib)), ready, cls))
        cuts = np.searchsorted(cls[order], np.arange(len(self.bounds) + 1))
        self._fresh = [order[cuts[c]:cuts[c + 1]].astype(np.int64)
                       for c in range(len(self.bounds))]
        self._ptr = [0] * len(self.bounds)
        self._back: list[IntArray] = [np.empty(0, np.int64) for _ in self.bounds]
        self._cls = cls.astype(np.int64)
        self._ready = ready

    def pending(self) -> int:
        return sum(len(f) - p for f, p in zip(self._fresh, self._ptr, strict=True)) + sum(
            len(b) for b in self._back
        )

    def take(self, room_mib: float, k: int, t: int) -> IntArray:
        """Up to ``k`` jobs ready at ``t`` whose need fits ``room_mib``, largest first."""
        out: list[IntArray] = []
        left = k
        top = int(np.searchsorted(self.bounds, room_mib, side="right"))
        for c in range(top - 1, -1, -1):
            if left <= 0:
                break
            back = self._back[c]
            if len(back):
                ok = self._ready[back] <= t
                got = back[ok][:left]
                if len(got):
                    self._back[c] = np.sort(np.concatenate([back[~ok], back[ok][left:]]))
                    out.append(got)
                    left -= len(got)
            if left > 0 and self._ptr[c] < len(self._fresh[c]):
                nxt = self._fresh[c][self._ptr[c]:self._ptr[c] + left]
                got = nxt[: int(np.searchsorted(self._ready[nxt], t, side="right"))]
                self._ptr[c] += len(got)
                out.append(got)
                left -= len(got)
        return np.concatenate(out) if out else np.empty(0, np.int64)

    def put_back(self, jobs: IntArray) -> None:
        """Return jobs (offered but unmatched, evicted, failed) to their buckets."""
        if len(jobs) == 0:
            return
        cls = self._cls[jobs]
        for c in np.unique(cls):
            merged = np.concatenate([self._back[c], jobs[cls == c]])
            self._back[c] = np.sort(merged, kind="stable")
