"""Safe reconfiguration: from the deployment running today to a new plan, step by step.

A step is one of: create a GPU instance, start a replica on it, move traffic off a replica,
stop a replica, destroy an instance, or repartition a drained GPU (destroy all its instances
and create the new layout in one go). The invariant, proved by :func:`check_steps` replaying
the steps: after every step, each service of the spec keeps at least
``floor = min(demand, capacity today)`` req/s in rotation (a service that is short today is
never made shorter; one that meets its demand keeps meeting it).

The ordering rule (:func:`plan_steps`):

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
4. Repeat until done; if no step is safe, raise :class:`InfeasibleError` naming the services
   that have no slack (the fix is a spare GPU, or a plan closer to today's).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from scipy.optimize import linear_sum_assignment

from cotenant.errors import InfeasibleError, InvalidLayoutError
from cotenant.model.deployment import GpuPlan
from cotenant.model.mig import MigLayout, MigPlacement
from cotenant.policies.partition.problem import FloatArray, PartitionProblem, unmet


class StepKind(StrEnum):
    CREATE = "create-instance"
    START = "start-replica"
    MOVE_TRAFFIC = "move-traffic"
    STOP = "stop-replica"
    DESTROY = "destroy-instance"
    REPARTITION = "repartition"


@dataclass(frozen=True)
class Step:
    kind: StepKind
    gpu: int
    placement: MigPlacement | None = None
    service: str | None = None
    layout: MigLayout | None = None

    def __str__(self) -> str:
        what = f"{self.layout}" if self.kind is StepKind.REPARTITION else f"{self.placement}"
        svc = f" {self.service}" if self.service else ""
        return f"{self.kind.value} gpu{self.gpu} {what}{svc}"


@dataclass(frozen=True)
class Reconfiguration:
    steps: tuple[Step, ...]
    placement: tuple[int, ...]  # plan GPU i runs on physical GPU placement[i]
    target: tuple[GpuPlan, ...]  # per physical GPU, the plan's layout (empty when released)
    floor: FloatArray  # per service, req/s kept in rotation throughout
    drained: int  # GPUs repartitioned after all their replicas were stopped


class _State:
    """Per physical GPU: instance -> service (None: idle) and whether its replica serves."""

    def __init__(self, problem: PartitionProblem, gpus: tuple[GpuPlan, ...]) -> None:
        self.problem = problem
        self.instances = [dict(g.assignment) for g in gpus]
        self.serving = [{p: s is not None for p, s in g.assignment} for g in gpus]
        self._svc = {s: i for i, s in enumerate(problem.services)}
        self.cap = np.zeros(len(problem.services))
        for inst in self.instances:
            for p, svc in inst.items():
                self._add(p, svc, 1.0)

    def _add(self, placement: MigPlacement, service: str | None, sign: float) -> None:
        if service is not None and service in self._svc:
            self.cap[self._svc[service]] += sign * self.rate(placement, service)

    def rate(self, placement: MigPlacement, service: str) -> float:
        s = self._svc.get(service)
        return 0.0 if s is None else self.problem.rate_of(s, placement.profile.name)

    def capacity(self) -> FloatArray:
        """Req/s in rotation per service."""
        return self.cap.copy()

    def fits(self, gpu: int, placement: MigPlacement) -> bool:
        try:
            self.problem.geometry.check((*self.instances[gpu], placement))
        except InvalidLayoutError:
            return False
        return True

    def apply(self, step: Step) -> None:
        """Carry out ``step``, or raise :class:`InfeasibleError` if the driver would refuse it."""
        g, p, inst = step.gpu, step.placement, self.instances[step.gpu]
        serving = self.serving[g]
        bad = None
        if step.kind is StepKind.REPARTITION:
            if any(s is not None for s in inst.values()) or step.layout is None:
                bad = "GPU still has replicas"
            else:
                self.instances[g] = dict.fromkeys(step.layout.placements)
                self.serving[g] = dict.fromkeys(step.layout.placements, False)
            if bad is None:
                return
        elif p is None:
            bad = "no instance named"
        elif step.kind is StepKind.CREATE:
            bad = "slots taken" if p in inst or not self.fits(g, p) else None
            if bad is None:
                inst[p], serving[p] = None, False
        elif p not in inst:
            bad = "no such instance"
        elif step.kind is StepKind.START:
            bad = "instance busy" if inst[p] is not None or step.service is None else None
            if bad is None:
                inst[p], serving[p] = step.service, True
                self._add(p, step.service, 1.0)
        elif step.kind is StepKind.MOVE_TRAFFIC:
            bad = "replica not in rotation" if not serving[p] else None
            if bad is None:
                serving[p] = False
                self._add(p, inst[p], -1.0)
        elif step.kind is StepKind.STOP:
            bad = "traffic not moved off first" if serving[p] or inst[p] is None else None
            if bad is None:
                inst[p] = None
        elif step.kind is StepKind.DESTROY:
            bad = "replica still running" if inst[p] is not None else None
            if bad is None:
                del inst[p], serving[p]
        if bad is not None:
            raise InfeasibleError(f"step {step} is not possible: {bad}")


def floor_of(problem: PartitionProblem, current: tuple[GpuPlan, ...]) -> FloatArray:
    """Per service, the req/s that must stay in rotation: min(demand, capacity today)."""
    return np.minimum(problem.demand, _State(problem, current).capacity())


def check_steps(
    problem: PartitionProblem,
    current: tuple[GpuPlan, ...],
    steps: tuple[Step, ...],
    target: tuple[GpuPlan, ...],
) -> None:
    """Replay ``steps`` from ``current``; raise :class:`InfeasibleError` at the first step the
    driver would refuse or that leaves a service below its floor, or if the end state is not
    ``target`` (per physical GPU)."""
    floor = floor_of(problem, current)
    pool = max(len(current), len(target))
    empty = GpuPlan(MigLayout(), ())
    state = _State(problem, current + (empty,) * (pool - len(current)))
    for n, step in enumerate(steps, 1):
        if not 0 <= step.gpu < pool:
            raise InfeasibleError(f"step {n} ({step}): no GPU {step.gpu} in the pool")
        state.apply(step)
        cap = state.capacity()
        for s, name in enumerate(problem.services):
            if unmet(float(cap[s]), float(floor[s])):
                raise InfeasibleError(
                    f"step {n} ({step}) drops {name} to {cap[s]:.1f} req/s, below "
                    f"{floor[s]:.1f} req/s"
                )
    goal = target + (empty,) * (pool - len(target))
    for g, (have, want) in enumerate(zip(state.instances, goal, strict=True)):
        if have != dict(want.assignment) or not all(
            state.serving[g][p] for p, s in want.assignment if s is not None
        ):
            raise InfeasibleError(f"after the last step GPU {g} is not as the plan says")


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


def plan_steps(
    problem: PartitionProblem, current: tuple[GpuPlan, ...], plan: tuple[GpuPlan, ...]
) -> Reconfiguration:
    """Ordered, safe steps from ``current`` to ``plan`` (see the module docstring)."""
    where = _match(current, plan)
    pool = max(len(current), len(plan))
    empty = GpuPlan(MigLayout(), ())
    target = [empty] * pool
    for t, g in enumerate(where):
        target[g] = plan[t]
    state = _State(problem, current + (empty,) * (pool - len(current)))
    floor = floor_of(problem, current)
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
            s = index.get(svc)
            if s is not None and unmet(float(state.cap[s] - state.rate(p, svc)), float(floor[s])):
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
        cap = state.capacity()
        stuck = [
            f"{name}: {cap[s]:.1f} req/s in rotation, floor {floor[s]:.1f}"
            for s, name in enumerate(problem.services)
            if cap[s] - floor[s] < problem.rate[s].max()
        ]
        raise InfeasibleError(
            "no safe step is left: stopping any remaining old replica would drop its service "
            "below its floor (add a spare GPU, or plan closer to today's layout)",
            stuck or ["(no service has slack)"],
        )
    result = Reconfiguration(tuple(steps), where, tuple(target), floor, drained)
    check_steps(problem, current, result.steps, result.target)
    return result
