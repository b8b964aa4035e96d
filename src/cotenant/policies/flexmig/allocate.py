"""Allocating MIG instances to a training job: one-to-one, and Flex-MIG's one-to-many.

**One-to-one** (how MIG is used today): a job asking for k compute slices takes one free
instance of at least k slices, the smallest such (best fit). A 6-slice job takes a 7g
instance and leaves a slice idle; a 4-slice job waits while a 3g and a 1g are free.

**One-to-many** (Flex-MIG, Kim, Yeom and Kim, arXiv 2511.09143): the job takes any free
instances on one node whose sizes add up to k, and runs as one process per instance joined
by a collective backend over host shared memory (MIG instances have no peer-to-peer path).
The paper's placement is "size- and topology-aware"; its exact rule is not public, so this
rule is ours: the fewest instances (one where one is large enough: each more is one more
process in the collective), then the fewest slices beyond k, then the fewest GPUs. (Fewest
idle slices first was tried too: on openb's BE jobs it made the same backlog makespan and a
mean JCT 94% higher at a 0.9 load, since it splits jobs that a free instance would hold.)

A job on more than one instance runs slower by the collective's cost, which the paper calls
a "modest increase in per-job overhead" without a figure: :func:`speed` takes it as a
parameter, ``overhead`` per instance beyond the first, and the simulator's documentation
reports results over a range of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cotenant.model.mig import MigGeometry, MigPlacement, MigProfile

MAX_INSTANCES = 7
"""The most instances (processes) one job spans."""


@dataclass(frozen=True, order=True)
class FreeInstance:
    """A free MIG instance: GPU index and placement."""

    gpu: int
    placement: MigPlacement

    @property
    def size(self) -> int:
        return self.placement.profile.compute_slices


def smallest_profile(geometry: MigGeometry, slices: int) -> MigProfile | None:
    """The compute profile one-to-one allocation gives a job of ``slices``: the smallest
    of at least that many compute slices (the smallest memory among equals, no ``+me``)."""
    fitting = [p for p in geometry.profiles
               if p.compute_slices >= slices and not p.media_extensions]
    return min(fitting, key=lambda p: (p.compute_slices, p.memory_slices), default=None)


def one_to_one(free: Sequence[FreeInstance], slices: int) -> FreeInstance | None:
    """The smallest free instance of at least ``slices`` (ties: lowest GPU, start)."""
    fits = [f for f in free if f.size >= slices]
    return min(fits, key=lambda f: (f.size, f.gpu, f.placement.start), default=None)


def _subsets(instances: list[FreeInstance], cap: int) -> dict[int, tuple[FreeInstance, ...]]:
    """Per total size up to ``cap``, the subset of ``instances`` with that total and the
    fewest instances (ties: the first found, larger instances first)."""
    best: dict[int, tuple[FreeInstance, ...]] = {0: ()}
    for inst in sorted(instances, key=lambda f: (-f.size, f.placement.start)):
        for total, chosen in list(best.items()):
            new = total + inst.size
            if new <= cap and (new not in best or len(best[new]) > len(chosen) + 1):
                best[new] = (*chosen, inst)
    return best


def one_to_many(free: Sequence[FreeInstance], slices: int,
                max_instances: int = MAX_INSTANCES) -> tuple[FreeInstance, ...] | None:
    """Free instances of one node for a job of ``slices`` (module docstring), or None where
    their sizes cannot reach it."""
    cap = slices + 6  # beyond it a single larger instance always wastes less
    by_gpu: dict[int, list[FreeInstance]] = {}
    for f in free:
        by_gpu.setdefault(f.gpu, []).append(f)
    # (total size) -> (instances, GPUs, chosen), combining GPU by GPU
    reach: dict[int, tuple[int, int, tuple[FreeInstance, ...]]] = {0: (0, 0, ())}
    for gpu in sorted(by_gpu):
        options = _subsets(by_gpu[gpu], cap)
        for total, (count, gpus, chosen) in list(reach.items()):
            for size, picked in options.items():
                if not picked or total + size > cap:
                    continue
                key = (count + len(picked), gpus + 1)
                if key[0] > max_instances:
                    continue
                old = reach.get(total + size)
                if old is None or key < old[:2]:
                    reach[total + size] = (*key, (*chosen, *picked))
    done = [(count, total - slices, gpus, chosen)
            for total, (count, gpus, chosen) in reach.items() if total >= slices]
    if not done:
        return None
    return min(done, key=lambda d: d[:3])[3]


def speed(allocated: int, asked: int, instances: int, overhead: float) -> float:
    """A job's speed relative to running on exactly the slices it asked for: slices beyond
    them do not speed it up (its work was measured at its size), and each instance beyond
    the first adds ``overhead`` to every step (the collective over host memory)."""
    return min(allocated, asked) / asked / (1.0 + overhead * (instances - 1))
