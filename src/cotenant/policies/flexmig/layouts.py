"""The MIG layouts training jobs run on: the static mix, the layout a drained GPU is
remade into, and which GPU to drain.

**Static mix** (:func:`static_layouts`): the operator sizes the layouts to the job mix it
has seen: each instance size gets a share of the GPUs' slices proportional to the
slice-seconds of the jobs one-to-one allocation would put on it, GPU by GPU the layout that
covers most of what is still wanted; the largest size some job needs gets at least one
instance (smaller jobs fit in larger instances).
The static one-to-one baseline, Flex-MIG and (as its starting point) the dynamic baseline
all run on the same mix.

**Drain and remake** (the dynamic one-to-one baseline): a job that finds no free instance
large enough has a GPU drained: no job starts on it until those running there end, then it
is remade (:func:`refill_layout`) into instances for the waiting jobs, in queue order, and
filled with the smallest profile. :func:`drain_choice` picks the GPU a scheduler could pick
without knowing how long jobs run: the most free slices, then the fewest running jobs.
"""

from __future__ import annotations

from collections.abc import Sequence

from cotenant.model.mig import MigGeometry, MigLayout, MigPlacement
from cotenant.model.training import TrainingJob
from cotenant.policies.flexmig.allocate import smallest_profile


def _compute_profiles(geometry: MigGeometry) -> list[str]:
    """One profile per compute size, as the partition planner's default layouts use."""
    names = {p.profile.name for lay in geometry.enumerate_maximal() for p in lay.placements}
    return sorted(names, key=lambda n: geometry.profile(n).compute_slices)


def static_layouts(jobs: Sequence[TrainingJob], gpus: int,
                   geometry: MigGeometry) -> list[MigLayout]:
    """``gpus`` layouts sized to ``jobs``' one-to-one demand (module docstring)."""
    names = _compute_profiles(geometry)
    slices = {n: geometry.profile(n).compute_slices for n in names}
    work = dict.fromkeys(names, 0.0)
    for job in jobs:
        profile = smallest_profile(geometry, job.slices)
        if profile is not None and profile.name in work:
            work[profile.name] += job.work_s * slices[profile.name]
    total = sum(work.values()) or 1.0
    want = {n: work[n] / total * geometry.compute_slices * gpus for n in names}
    candidates = geometry.enumerate_maximal()
    chosen: list[MigLayout] = []
    for _ in range(gpus):
        def cover(layout: MigLayout) -> float:
            counts = layout.profile_counts()
            return sum(min(counts[n] * slices[n], max(want[n], 0.0)) for n in names)
        best = max(candidates, key=cover)
        chosen.append(best)
        for n, count in best.profile_counts().items():
            want[n] -= count * slices[n]
    largest = max((n for n in names if work[n] > 0), key=lambda n: slices[n], default=None)
    if largest is not None and chosen and not any(
            largest in lay.profile_counts() for lay in chosen):
        # the largest size asked for must exist (smaller jobs fit in larger instances): the
        # last GPU, the greedy's least useful, makes room; what it covered is wanted again
        for n, count in chosen[-1].profile_counts().items():
            want[n] += count * slices[n]
        chosen[-1] = max((lay for lay in candidates if largest in lay.profile_counts()),
                         key=cover)
    return chosen


def refill_layout(geometry: MigGeometry, queue: Sequence[int]) -> MigLayout:
    """A layout for a drained GPU: instances for the waiting jobs' sizes (``queue``, in
    order) while they fit, each where it leaves the most room, then the smallest profile
wherever one still fits."""
    names = _compute_profiles(geometry)
    placed: list[MigPlacement] = []

    every = [MigPlacement(geometry.profile(n), s) for n in names
             for s in geometry.profile(n).starts]

    def room(layout: MigLayout) -> int:
        return sum(geometry.can_add(layout, c) for c in every)

    def add(profile_name: str) -> bool:
        """Place one instance where it leaves the most room (ties: the lowest start)."""
        profile = geometry.profile(profile_name)
        layout = MigLayout(tuple(placed))
        options = [MigPlacement(profile, s) for s in profile.starts
                   if geometry.can_add(layout, MigPlacement(profile, s))]
        if not options:
            return False
        placed.append(max(options, key=lambda c: (room(MigLayout((*placed, c))), -c.start)))
        return True

    for slices in queue:
        profile = smallest_profile(geometry, slices)
        if profile is not None:
            add(profile.name)
    while add(names[0]):
        pass
    return geometry.layout(placed)


def drain_choice(free_slices: Sequence[int], running: Sequence[int],
                 eligible: Sequence[bool]) -> int | None:
    """The GPU to drain: the most free slices, then the fewest running jobs, then the lowest
    index; None if no GPU is eligible."""
    options = [g for g, ok in enumerate(eligible) if ok]
    if not options:
        return None
    return min(options, key=lambda g: (-free_slices[g], running[g], g))
