"""Block matching: every pair fits, the weight is maximised within a block, leftovers back."""

from __future__ import annotations

import itertools

import numpy as np

from cotenant.policies.colocation.matching import match_max_weight


def _taker(need: np.ndarray) -> tuple[list[int], object]:
    pending = list(range(len(need)))

    def take(room: float, k: int) -> np.ndarray:
        got = [j for j in pending if need[j] <= room][:k]
        for j in got:
            pending.remove(j)
        return np.array(got, dtype=np.int64)

    return pending, take


def test_pairs_fit_and_unmatched_offers_come_back() -> None:
    room = np.array([1000.0, 5000.0, 200.0, 8000.0])
    need = np.array([4000.0, 100.0, 7000.0, 900.0, 150.0, 9000.0])
    pending, take = _taker(need)
    g, j, unused = match_max_weight(
        np.arange(4), room, need, take, lambda a, b: np.ones((len(a), len(b))), block=2,
        slack=1,
    )
    assert np.all(need[j] <= room[g])
    assert len(set(g)) == len(g)
    assert len(set(j)) == len(j)
    offered = set(j) | set(unused)
    assert offered.isdisjoint(pending)
    assert 5 in pending  # fits no GPU, never offered


def test_a_single_block_is_the_exact_maximum_weight_matching() -> None:
    rng = np.random.default_rng(0)
    w = rng.random((4, 5))
    room = np.full(4, 1e9)
    need = np.zeros(5)
    _, take = _taker(need)
    g, j, _ = match_max_weight(
        np.arange(4), room, need, take, lambda a, b: w[np.ix_(a, b)], block=8, slack=4
    )
    best = max(
        sum(w[r, c] for r, c in enumerate(perm)) for perm in itertools.permutations(range(5), 4)
    )
    assert np.isclose(w[g, j].sum(), best)


def test_a_tiny_room_does_not_starve_the_rest_of_its_block() -> None:
    # one GPU can take almost nothing; the others must still get jobs in the same block
    room = np.array([9000.0, 9000.0, 9000.0, 50.0])
    need = np.array([4000.0, 3000.0, 5000.0, 2000.0])
    pending, take = _taker(need)
    g, j, unused = match_max_weight(
        np.arange(4), room, need, take, lambda a, b: np.ones((len(a), len(b))), block=8,
        slack=2,
    )
    assert sorted(g) == [0, 1, 2]
    assert np.all(need[j] <= room[g])
    assert len(unused) + len(pending) == 1
