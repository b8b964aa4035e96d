"""Safe reconfiguration by ordering rules: fast, and enough for most changes.

The invariants are :mod:`.steps`' (floor and last replica). The ordering rule
(:func:`order_by_rules`):

1. **Match** plan GPUs to physical GPUs by a maximum-weight assignment
   (``scipy.optimize.linear_sum_assignment``) that scores instances kept as they are (same
   slot, same service) highest, then instances whose slot is kept; the pool grows by free GPUs
   when the plan needs more than exist.
2. **Grow first.** Create every new instance whose slots are free and start its replica;
   this only adds capacity, and on a free GPU it is all there is to do.
3. **Then shrink where there is slack.** Move traffic off and stop a replica only while its
   service keeps its floor; destroy an instance once it is empty, which frees slots for step 2.
   A GPU whose whole layout changes is repartitioned once drained; every other GPU changes
   instance by instance while its other instances keep serving, so only those GPUs drain.
4. Repeat until done; if no step is safe, raise :class:`InfeasibleError` (the bounded
   search of :mod:`.search` then looks for an order these rules miss).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

from cotenant.errors import InfeasibleError
from cotenant.model.deployment import GpuPlan
from cotenant.model.mig import MigLayout, MigPlacement
from cotenant.policies.partition.problem import PartitionProblem
from cotenant.policies.partition.reconfig.steps import (
    Reconfiguration,
    State,
    Step,
    StepKind,
    check_steps,
    floor_of,
    losing,
    replicas_today,
)


def _match(current: tuple[GpuPlan, ...], plan: tuple[GpuPlan, ...]) -> tuple[int, ...]:
    pool = max(len(current), len(plan))
    score = np.zeros((len(plan), pool))
    for t, want in enumerate(plan):
        for c, have in enumerate(current):
            kept = dict(have.assignment)
            for p, s in want.assignment:
                if p in kept:
                    score[t, c] += 3.0 if kept[p] == s else 1.0
            # with no instance to keep, a free GPU wins: new capacity goes there first
            score[t, c] += 0.0 if have.assignment else 0.5
    rows, cols = linear_sum_assignment(score, maximize=True)
    placement = [0] * len(plan)
    for r, c in zip(rows, cols, strict=True):
        placement[int(r)] = int(c)
    return tuple(placement)


def order_by_rules(
    problem: PartitionProblem, current: tuple[GpuPlan, ...], plan: tuple[GpuPlan, ...]
) -> Reconfiguration:
    """Ordered, safe steps from ``current`` to ``plan`` (see the module docstring)."""
    where = _match(current, plan)
    pool = max(len(current), len(plan))
    empty = GpuPlan(MigLayout(), ())
    target = [empty] * pool
    for t, g in enumerate(where):
        target[g] = plan[t]
    state = State(problem, current + (empty,) * (pool - len(current)))
    floor = floor_of(problem, current)
    today = replicas_today(problem, current)
    want = [dict(g.assignment) for g in target]
    # GPUs whose every instance changes are repartitioned whole once drained.
    # GPUs released by the plan lose their instances one by one.
    whole = [
        bool(state.instances[g]) and bool(want[g]) and not set(state.instances[g]) & set(want[g])
        for g in range(pool)
    ]
    steps: list[Step] = []
    drained = 0
    index = {name: s for s, name in enumerate(problem.services)}

    def do(step: Step) -> None:
        state.apply(step)
        steps.append(step)

    def grow() -> bool:
        progress = False
        for g in sorted(range(pool), key=lambda g: bool(state.instances[g])):  # free GPUs first
            if whole[g]:
                continue
            for p, svc in want[g].items():
                if p not in state.instances[g] and state.fits(g, p):
                    do(Step(StepKind.CREATE, g, p))
                    progress = True
                if svc is not None and p in state.instances[g] and state.instances[g][p] is None:
                    do(Step(StepKind.START, g, p, svc))
                    progress = True
        return progress

    def release(g: int, p: MigPlacement, svc: str | None) -> bool:
        """Stop ``p``'s replica if its service keeps its floor, and destroy ``p`` if the plan
        has no use for it; whether anything changed."""
        changed = (g, p) in temps
        if svc is not None:
            if losing(problem, state, floor, today, p, svc) is not None:
                return False
            do(Step(StepKind.MOVE_TRAFFIC, g, p, svc))
            do(Step(StepKind.STOP, g, p, svc))
            changed = True
        temps.discard((g, p))
        if not whole[g] and p not in want[g]:
            do(Step(StepKind.DESTROY, g, p))
            changed = True
        return changed

    def shrink() -> bool:
        nonlocal drained
        progress = False
        for g in range(pool):
            for p, svc in list(state.instances[g].items()):
                stays = p in want[g] and not whole[g] and want[g][p] == svc
                if not stays and (g, p) not in temps:
                    progress = release(g, p, svc) or progress
            if whole[g] and all(s is None for s in state.instances[g].values()):
                do(Step(StepKind.REPARTITION, g, layout=target[g].layout))
                whole[g] = False
                drained += int(bool(current[g].services()) if g < len(current) else 0)
                progress = True
        old = {svc for g in range(pool) for p, svc in state.instances[g].items()
               if (g, p) not in temps and not (p in want[g] and want[g][p] == svc)}
        for g, p in sorted(temps):  # borrowed capacity goes last, once it is not needed
            if state.instances[g][p] not in old:
                progress = release(g, p, state.instances[g][p]) or progress
        return progress

    def borrow() -> bool:
        """Start a temporary replica for a service whose old replica is stuck, in slots that
        no pending plan instance needs (free GPUs first)."""
        blocked = [
            (g, p, svc)
            for g in range(pool)
            for p, svc in state.instances[g].items()
            if svc in index and (g, p) not in temps
            and not (p in want[g] and not whole[g] and want[g][p] == svc)
        ]
        order = sorted(range(pool), key=lambda g: (bool(state.instances[g]), bool(want[g])))
        for g0, p0, svc in blocked:
            s = index[svc]
            short = float(floor[s] - (state.cap[s] - state.rate(p0, svc)))
            sizes = sorted(problem.geometry.profiles, key=lambda q: q.compute_slices)
            rate = {q: float(problem.rate[s, j]) for j, q in enumerate(problem.profiles)}
            fits = [q for q in sizes if rate.get(q.name, 0.0) > 0]
            covering = [q for q in fits if rate[q.name] >= short]
            for g in order:  # an idle instance the plan keeps idle, or will give away later
                for p, now in state.instances[g].items():
                    if now is None and want[g].get(p) is None and rate.get(p.profile.name, 0) > 0:
                        do(Step(StepKind.START, g, p, svc))
                        temps.add((g, p))
                        return True
            for g in order:
                if g == g0 and whole[g]:
                    continue
                pending = [q for q in want[g] if q not in state.instances[g]]
                for prof in (covering or fits[::-1]):
                    for start in prof.starts:
                        p = MigPlacement(prof, start)
                        if state.fits(g, p) and not any(p.overlaps(q) for q in pending):
                            do(Step(StepKind.CREATE, g, p))
                            do(Step(StepKind.START, g, p, svc))
                            temps.add((g, p))
                            return True
        return False

    temps: set[tuple[int, MigPlacement]] = set()
    seen: set[tuple[object, ...]] = set()
    for _ in range(100 * (pool + 1)):
        grew = grow()
        if not shrink() and not grew and not borrow():
            break
        # a round that ends where an earlier one did (a replica borrowed, then given back)
        # would repeat until the cap: no safe step is left
        now = (tuple(frozenset(inst.items()) for inst in state.instances), frozenset(temps),
               tuple(whole))
        if now in seen:
            break
        seen.add(now)
    if any(state.instances[g] != want[g] for g in range(pool)):
        raise InfeasibleError("the ordering rules found no safe step")
    result = Reconfiguration(tuple(steps), where, tuple(target), floor, drained)
    check_steps(problem, current, result.steps, result.target)
    return result
