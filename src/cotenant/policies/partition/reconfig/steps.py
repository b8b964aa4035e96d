"""Reconfiguration steps, the state they change, and the checker that replays them.

A step is one of: create a GPU instance, start a replica on it, move traffic off a replica,
stop a replica, destroy an instance, or repartition a drained GPU (destroy all its instances
and create the new layout in one go). The invariants, proved by :func:`check_steps`
replaying the steps, after every step:

* each service of the spec keeps at least ``floor = min(demand, capacity today)`` req/s in
  rotation (a service that is short today is never made shorter; one that meets its
  demand keeps meeting it);
* a service of the spec with a demand and a replica in rotation today keeps at least one,
  even where its replicas serve nothing within the new SLO (today's floor is then zero, and
  a service would otherwise be stopped long before its replacement serves).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from cotenant.errors import InfeasibleError, InvalidLayoutError
from cotenant.model.deployment import GpuPlan
from cotenant.model.mig import MigLayout, MigPlacement
from cotenant.policies.partition.problem import FloatArray, IntArray, PartitionProblem, unmet


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
    method: str = "rules"  # "rules" (the ordering rules) or "search" (the bounded search)


class State:
    """Per physical GPU: instance -> service (None: idle) and whether its replica serves;
    per service, the req/s and the replicas in rotation."""

    def __init__(self, problem: PartitionProblem, gpus: tuple[GpuPlan, ...]) -> None:
        self.problem = problem
        self.instances = [dict(g.assignment) for g in gpus]
        self.serving = [{p: s is not None for p, s in g.assignment} for g in gpus]
        self._svc = {s: i for i, s in enumerate(problem.services)}
        self.cap = np.zeros(len(problem.services))
        self.count = np.zeros(len(problem.services), dtype=np.int64)
        for inst in self.instances:
            for p, svc in inst.items():
                self._add(p, svc, 1)

    def _add(self, placement: MigPlacement, service: str | None, sign: int) -> None:
        if service is not None and service in self._svc:
            s = self._svc[service]
            self.cap[s] += sign * self.rate(placement, service)
            self.count[s] += sign

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
                self._add(p, step.service, 1)
        elif step.kind is StepKind.MOVE_TRAFFIC:
            bad = "replica not in rotation" if not serving[p] else None
            if bad is None:
                serving[p] = False
                self._add(p, inst[p], -1)
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
    return np.minimum(problem.demand, State(problem, current).capacity())


def replicas_today(problem: PartitionProblem, current: tuple[GpuPlan, ...]) -> IntArray:
    """Per service with a demand, its replicas in rotation today (whatever they serve within
    the SLO); 0 for a service whose demand is now 0, which may be scaled to none."""
    return np.where(problem.demand > 0, State(problem, current).count, 0)


def shortfall(services: Sequence[str], rate: Sequence[float] | FloatArray,
              count: Sequence[int] | IntArray, floor: Sequence[float] | FloatArray,
              today: Sequence[int] | IntArray) -> str | None:
    """The reconfiguration's invariants, the one rule every checker of a reconfiguration
    uses: with per service ``rate`` req/s and ``count`` replicas in rotation, each service
    keeps its ``floor`` and, if it had a replica ``today``, one. Why the first service that
    does not ("a would have 0.0 req/s in rotation, below its floor of 300.0"), or None."""
    for s, name in enumerate(services):
        if unmet(float(rate[s]), float(floor[s])):
            return (f"{name} would have {float(rate[s]):.1f} req/s in rotation, below its "
                    f"floor of {float(floor[s]):.1f}")
        if today[s] > 0 and count[s] <= 0:
            return f"{name} would have no replica in rotation"
    return None


def losing(problem: PartitionProblem, state: State, floor: FloatArray, today: IntArray,
           placement: MigPlacement, service: str) -> str | None:
    """Why taking ``service``'s replica on ``placement`` out of rotation now breaks an
    invariant (:func:`shortfall`), or None if it is safe."""
    index = {name: s for s, name in enumerate(problem.services)}
    s = index.get(service)
    if s is None:  # a service the spec no longer has: nothing to keep
        return None
    after = float(state.cap[s] - state.rate(placement, service))
    return shortfall((service,), (after,), (int(state.count[s]) - 1,), (float(floor[s]),),
                     (int(today[s]),))


def check_steps(
    problem: PartitionProblem,
    current: tuple[GpuPlan, ...],
    steps: tuple[Step, ...],
    target: tuple[GpuPlan, ...],
) -> None:
    """Replay ``steps`` from ``current``; raise :class:`InfeasibleError` at the first step the
    driver would refuse or that breaks an invariant, or if the end state is not ``target``
    (per physical GPU)."""
    floor = floor_of(problem, current)
    today = replicas_today(problem, current)
    pool = max(len(current), len(target))
    empty = GpuPlan(MigLayout(), ())
    state = State(problem, current + (empty,) * (pool - len(current)))
    for n, step in enumerate(steps, 1):
        if not 0 <= step.gpu < pool:
            raise InfeasibleError(f"step {n} ({step}): no GPU {step.gpu} in the pool")
        state.apply(step)
        why = shortfall(problem.services, state.capacity(), state.count, floor, today)
        if why is not None:
            raise InfeasibleError(f"step {n} ({step}): {why}")
    goal = target + (empty,) * (pool - len(target))
    for g, (have, want) in enumerate(zip(state.instances, goal, strict=True)):
        if have != dict(want.assignment) or not all(
            state.serving[g][p] for p, s in want.assignment if s is not None
        ):
            raise InfeasibleError(f"after the last step GPU {g} is not as the plan says")
