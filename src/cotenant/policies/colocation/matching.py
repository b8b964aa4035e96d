"""Which offline job joins which online GPU: greedy in queue order, or MuxFlow's matching.

MuxFlow solves a maximum-weight bipartite matching between online GPUs with room and pending
offline jobs, the weight of a pair being the predicted sum of their normalised speeds, and
only pairs whose memory fits allowed. A square matrix over 20,000 GPUs does not fit in time
or memory, so :func:`match_max_weight` decomposes it:

* only GPUs *without* an offline job take part (running pairs are kept: an offline job is not
  migrated), so after the first interval the problem is small;
* the candidate jobs are the head of the pending queue, at most ``len(gpus) + slack``;
* GPUs are sorted by the memory they can give, jobs by the memory they need, and both are cut
  into ``block`` sized groups matched block by block with
  :func:`scipy.optimize.linear_sum_assignment`; sorting by memory puts the pairs that can
  fit into the same block, which a random split would not.

Infeasible pairs get a large negative weight and are dropped from the answer.
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
INFEASIBLE = -1e9


def match_greedy(
    gpus: IntArray, room_mib: FloatArray, jobs: IntArray, need_mib: FloatArray
) -> tuple[IntArray, IntArray]:
    """Pair the k-th free GPU with the k-th pending job where its memory fits (no search)."""
    k = min(len(gpus), len(jobs))
    fits = need_mib[jobs[:k]] <= room_mib[gpus[:k]]
    return gpus[:k][fits], jobs[:k][fits]


def match_max_weight(
    gpus: IntArray,
    room_mib: FloatArray,
    jobs: IntArray,
    need_mib: FloatArray,
    weights: WeightFn,
    *,
    block: int = 256,
    slack: int = 64,
) -> tuple[IntArray, IntArray]:
    """Maximum-weight matching of ``gpus`` to ``jobs`` (queue order) by memory-sorted blocks."""
    if len(gpus) == 0 or len(jobs) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    jobs = jobs[: len(gpus) + slack]
    g_sorted = gpus[np.argsort(room_mib[gpus], kind="stable")]
    j_sorted = jobs[np.argsort(need_mib[jobs], kind="stable")]
    n_blocks = max(1, -(-len(g_sorted) // block))
    g_cuts = np.array_split(g_sorted, n_blocks)
    j_cuts = np.array_split(j_sorted, n_blocks)
    out_g: list[IntArray] = []
    out_j: list[IntArray] = []
    for g_blk, j_blk in zip(g_cuts, j_cuts, strict=True):
        if len(g_blk) == 0 or len(j_blk) == 0:
            continue
        w = np.asarray(weights(g_blk, j_blk), dtype=np.float64)
        fits = need_mib[j_blk][None, :] <= room_mib[g_blk][:, None]
        w = np.where(fits, w, INFEASIBLE)
        rows, cols = linear_sum_assignment(w, maximize=True)
        keep = w[rows, cols] > INFEASIBLE / 2
        out_g.append(g_blk[rows[keep]])
        out_j.append(j_blk[cols[keep]])
    if not out_g:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(out_g).astype(np.int64), np.concatenate(out_j).astype(np.int64)
