"""Which offline job joins which online GPU: MuxFlow's maximum-weight matching, decomposed.

The baselines call it with equal weights (any memory-feasible pairing of most pairs).

MuxFlow solves a maximum-weight bipartite matching between online GPUs with room and pending
offline jobs, the weight of a pair being the predicted sum of their normalised speeds, and
only pairs whose memory fits allowed. A square matrix over 20,000 GPUs does not fit in time
or memory, so :func:`match_max_weight` decomposes it:

* only GPUs *without* an offline job take part (running pairs are kept: an offline job is not
  migrated), so after the first interval the problem is small;
* GPUs are sorted by the memory they can give, largest first, and cut into ``block`` sized
  groups; each group is matched with :func:`scipy.optimize.linear_sum_assignment` against
  ``block + slack`` pending jobs the queue offers that fit *every* GPU of the group, so large
  jobs meet large rooms first. When those are too few (a group whose smallest room fits
  almost nothing, or a small cluster in one group), the queue is asked again with the
  group's largest room; a pair that does not fit gets a prohibitive weight and is dropped
  if chosen, so every pair made fits (the hard memory limit). Jobs a group was offered but
  did not take are offered to the next group first (while they fit its largest room)
  instead of waiting for the next interval. The queue offers the largest jobs first, so a
  GPU whose room only small jobs fit can still stay free for an interval while a small job
  waits behind larger ones (the matching is a heuristic). A group costs O(block^2 (block +
  slack)), so an interval is linear in free GPUs.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from scipy.optimize import linear_sum_assignment

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
WeightFn = Callable[[IntArray, IntArray], FloatArray]
"""``weights(gpus, jobs)`` -> matrix (len(gpus), len(jobs)) of predicted speed sums."""
_NO_FIT = -1e9
"""Weight of a pair whose job does not fit the GPU (never kept)."""
TakeFn = Callable[[float, int], IntArray]
"""``take(room, k)`` -> up to ``k`` pending jobs whose memory fits ``room`` (queue order)."""


def match_max_weight(
    gpus: IntArray,
    room_mib: FloatArray,
    need_mib: FloatArray,
    take: TakeFn,
    weights: WeightFn,
    *,
    block: int = 64,
    slack: int = 16,
) -> tuple[IntArray, IntArray, IntArray]:
    """Match ``gpus`` block by block with jobs offered by ``take(room, k)``; ``need_mib`` is
    every job's memory. Returns the matched GPUs, their jobs, and the offered jobs left
    unmatched (to give back)."""
    none = np.empty(0, np.int64)
    g_sorted = gpus[np.argsort(-room_mib[gpus], kind="stable")]
    out_g: list[IntArray] = []
    out_j: list[IntArray] = []
    unused: list[IntArray] = []
    carry = none  # offered to the group before and not taken
    for start in range(0, len(g_sorted), block):
        g_blk = g_sorted[start:start + block]
        fit_top = need_mib[carry] <= room_mib[g_blk[0]]
        unused.append(carry[~fit_top])  # rooms only shrink from here: these fit no later GPU
        carry = carry[fit_top]
        want = max(0, len(g_blk) + slack - int((need_mib[carry] <= room_mib[g_blk[-1]]).sum()))
        offered = np.concatenate([carry, take(float(room_mib[g_blk[-1]]), want)])
        offered = offered.astype(np.int64)
        if len(offered) < len(g_blk) and room_mib[g_blk[0]] > room_mib[g_blk[-1]]:
            more = take(float(room_mib[g_blk[0]]), len(g_blk) - len(offered) + slack)
            offered = np.concatenate([offered, more]).astype(np.int64)
        carry = none
        if len(offered) == 0:
            continue
        fits = need_mib[offered][None, :] <= room_mib[g_blk][:, None]
        w = np.where(fits, np.asarray(weights(g_blk, offered), dtype=np.float64), _NO_FIT)
        rows, cols = linear_sum_assignment(w, maximize=True)
        ok = fits[rows, cols]
        rows, cols = rows[ok], cols[ok]
        out_g.append(g_blk[rows])
        out_j.append(offered[cols])
        left = np.ones(len(offered), dtype=bool)
        left[cols] = False
        carry = offered[left]
    unused.append(carry)
    if not out_g:
        return none, none, np.concatenate(unused) if unused else none
    return (
        np.concatenate(out_g).astype(np.int64),
        np.concatenate(out_j).astype(np.int64),
        np.concatenate(unused).astype(np.int64),
    )
