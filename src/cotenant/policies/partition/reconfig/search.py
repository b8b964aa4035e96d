"""Safe reconfiguration by a bounded best-first search over the steps.

Where the ordering rules (:mod:`.rules`) find no safe step, this search looks for an order
among all of them, in the spirit of MIG-serving's exchange-and-compact (replacement replicas
first, wherever there is room, then compaction into the planned layouts), but exhaustively:

* a **state** is, per GPU, the set of replicas in rotation (instance placement, service);
  idle instances are destroyed first and the plan's idle ones created last;
* a **move** starts a replica on a new instance where it fits (one the plan has, on any
  GPU, or a *temporary* one for a service which has a replica it cannot yet retire: any
  profile that serves it, or any profile at all where it lacks only a replica, not req/s),
  or retires one (move traffic, stop, destroy) where :func:`.losing`
  allows it: the service keeps its floor and, if it had a replica today, one replica;
* the **goal** is any state whose GPUs hold the plan's GPUs, in any order (the plan says
  what each GPU runs, not which physical GPU runs it): states that differ only in GPU order
  are one state;
* states are expanded best first by ``steps + 2 x distance`` (distance: replicas to add or
  retire, and GPUs unlike any plan GPU); a state's temporary replicas are tried only after
  its other moves.

The **search bound** is :class:`SearchBound`: at most ``states`` states (20,000 by default)
and ``seconds`` of wall time. When the search runs out of states without reaching the
bound, no safe order of such moves exists; either way the refusal names, for the state
closest to the plan, each service that blocks it and how many req/s it lacks.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections import Counter
from dataclasses import dataclass

import numpy as np

from cotenant.errors import InfeasibleError
from cotenant.model.deployment import GpuPlan
from cotenant.model.mig import MigLayout, MigPlacement
from cotenant.policies.partition.problem import TOLERANCE, FloatArray, IntArray, PartitionProblem
from cotenant.policies.partition.reconfig.steps import (
    Reconfiguration,
    Step,
    StepKind,
    check_steps,
    floor_of,
    replicas_today,
)

Config = frozenset[int]  # item codes: placement index * services + service index
WEIGHT = 2.0
"""Weight of the distance in the priority: above 1 the search goes deep first (an order, not
the shortest one)."""


@dataclass(frozen=True)
class SearchBound:
    """How far the search looks: states expanded and wall-clock seconds."""

    states: int = 20_000
    seconds: float = 30.0


class _Space:
    """The problem's placements, services and rates as integer tables."""

    def __init__(self, problem: PartitionProblem, gpus: tuple[GpuPlan, ...]) -> None:
        geometry = problem.geometry
        self.problem = problem
        self.places = [MigPlacement(p, s) for p in geometry.profiles for s in p.starts]
        self.place_index = {p: i for i, p in enumerate(self.places)}
        extra = sorted({s for g in gpus for _, s in g.assignment
                        if s is not None and s not in problem.services})
        self.names = list(problem.services) + extra  # services the spec dropped come last
        self.n = len(self.names)
        self.mask = [sum(1 << k for k in range(p.start, p.end)) for p in self.places]
        self.kslices = [p.profile.compute_slices for p in self.places]
        self.profile = [geometry.profiles.index(p.profile) for p in self.places]
        self.me = [p.profile.media_extensions for p in self.places]
        self.max_count = [p.max_count for p in geometry.profiles]
        self.compute = geometry.compute_slices
        self._fitting: dict[Config, list[int]] = {}
        self.rate = np.zeros((len(self.places), self.n))
        for i, p in enumerate(self.places):
            for s in range(len(problem.services)):
                self.rate[i, s] = problem.rate_of(s, p.profile.name)

    def code(self, placement: MigPlacement, service: str) -> int:
        return self.place_index[placement] * self.n + self.names.index(service)

    def config(self, gpu: GpuPlan) -> Config:
        return frozenset(self.code(p, s) for p, s in gpu.assignment if s is not None)

    def fitting(self, config: Config) -> list[int]:
        """The placements a new instance could take beside ``config`` (cached: a search
        meets the same GPU configurations again and again)."""
        found = self._fitting.get(config)
        if found is not None:
            return found
        used = k = me = 0
        counts = Counter[int]()
        for item in config:
            i = item // self.n
            used |= self.mask[i]
            k += self.kslices[i]
            me += self.me[i]
            counts[self.profile[i]] += 1
        found = [i for i in range(len(self.places))
                 if used & self.mask[i] == 0 and k + self.kslices[i] <= self.compute
                 and me + self.me[i] <= 1 and counts[self.profile[i]] < self.max_count[
                     self.profile[i]]]
        self._fitting[config] = found
        return found


@dataclass
class _Node:
    state: tuple[Config, ...]
    parent: int
    move: tuple[str, int, int] | None  # ("add"/"retire", gpu, item)
    depth: int
    distance: int
    cap: FloatArray  # req/s in rotation per service
    count: IntArray  # replicas in rotation per service
    key: tuple[int, int]  # the multiset of configs, hashed (see _key)


class _Search:
    def __init__(self, problem: PartitionProblem, current: tuple[GpuPlan, ...],
                 plan: tuple[GpuPlan, ...], bound: SearchBound) -> None:
        self.pool = max(len(current), len(plan))
        empty = GpuPlan(MigLayout(), ())
        self.current = current + (empty,) * (self.pool - len(current))
        self.plan = plan
        self.space = _Space(problem, self.current + plan)
        self.bound = bound
        space = self.space
        self.targets = Counter(space.config(g) for g in plan)
        self.targets[frozenset()] += self.pool - len(plan)
        self.target_items = Counter(i for g in plan for i in space.config(g))
        self.wanted: dict[int, list[int]] = {}  # placement -> services the plan puts there
        for item in self.target_items:
            self.wanted.setdefault(item // space.n, []).append(item % space.n)
        served = floor_of(problem, self.current)
        self.floor = np.concatenate([served, np.zeros(space.n - len(served))])
        today = replicas_today(problem, self.current)
        self.today = np.concatenate([today, np.zeros(space.n - len(today), dtype=np.int64)])
        self.spec = len(problem.services)

    # --- one state -----------------------------------------------------------------------

    def load(self, state: tuple[Config, ...]) -> tuple[FloatArray, IntArray]:
        space = self.space
        cap = np.zeros(space.n)
        count = np.zeros(space.n, dtype=np.int64)
        for config in state:
            for item in config:
                cap[item % space.n] += space.rate[item // space.n, item % space.n]
                count[item % space.n] += 1
        return cap, count

    def blocker(self, item: int, cap: FloatArray, count: IntArray) -> float | None:
        """None if ``item`` may retire now, else the req/s its service lacks (0: its last
        replica)."""
        space = self.space
        s = item % space.n
        if s >= self.spec:
            return None
        after = cap[s] - space.rate[item // space.n, s]
        short = self.floor[s] - after
        if short > TOLERANCE * max(1.0, float(self.floor[s])):
            return float(short)
        if self.today[s] > 0 and count[s] <= 1:
            return 0.0
        return None

    def distance(self, state: tuple[Config, ...]) -> int:
        """Replicas to add or retire (over all GPUs) plus GPUs unlike any plan GPU."""
        pooled = Counter(i for c in state for i in c)
        extra = pooled - self.target_items
        missing = self.target_items - pooled
        unlike = Counter(state) - self.targets
        return extra.total() + missing.total() + unlike.total()

    def child(self, node: _Node, n: int, move: tuple[str, int, int]) -> _Node:
        """``node`` after ``move``, its distance updated in O(GPUs), not recomputed."""
        kind, g, item = move
        old = node.state[g]
        new = old | {item} if kind == "add" else old - {item}
        state = (*node.state[:g], new, *node.state[g + 1:])
        sign = 1 if kind == "add" else -1
        have = sum(item in c for c in node.state)
        want = self.target_items[item]
        delta = abs(have + sign - want) - abs(have - want)
        before = Counter(node.state)  # configs alike: GPUs beyond the plan's count of them
        for config, step in ((old, -1), (new, 1)):
            now = before[config]
            delta += (max(now + step - self.targets[config], 0)
                      - max(now - self.targets[config], 0))
            before[config] = now + step
        s = item % self.space.n
        cap, count = node.cap.copy(), node.count.copy()
        cap[s] += sign * self.space.rate[item // self.space.n, s]
        count[s] += sign
        (a, b), (a_old, b_old), (a_new, b_new) = node.key, _hashes(old), _hashes(new)
        key = ((a - a_old + a_new) % _PRIME, (b - b_old + b_new) % _PRIME)
        return _Node(state, n, move, node.depth + 1, node.distance + delta, cap, count, key)

    def moves(self, node: _Node, temporary: bool) -> list[tuple[str, int, int]]:
        space = self.space
        state, cap, count = node.state, node.cap, node.count
        out: list[tuple[str, int, int]] = []
        blocked: dict[int, float] = {}  # service -> the least it lacks (0: its last replica)
        for g, config in enumerate(state):
            for item in sorted(config):
                short = self.blocker(item, cap, count)
                if short is not None:
                    s = item % space.n
                    blocked[s] = min(short, blocked.get(s, short))
                elif not temporary:  # retirements were tried with the state's first moves
                    out.append(("retire", g, item))
        if not temporary:
            for g, config in enumerate(state):
                for place in space.fitting(config):
                    out += [("add", g, place * space.n + s) for s in self.wanted.get(place, ())]
            return out
        for s, short in sorted(blocked.items()):  # a replica that serves, or any one where
            for g, config in enumerate(state):  # only a replica is missing
                out += [("add", g, i * space.n + s) for i in space.fitting(config)
                        if space.rate[i, s] > 0 or short == 0.0]
        return out

    # --- the search ----------------------------------------------------------------------

    def run(self) -> tuple[list[_Node], int | None, int, bool]:
        """Nodes, the goal node (None if not reached), states expanded, and whether the
        bound stopped the search."""
        space = self.space
        start_state = tuple(space.config(g) for g in self.current)
        cap, count = self.load(start_state)
        nodes = [_Node(start_state, -1, None, 0, self.distance(start_state), cap, count,
                       _key(start_state))]
        tick = itertools.count()
        heap = [(WEIGHT * nodes[0].distance, next(tick), 0, False)]
        seen = {nodes[0].key}
        began = time.perf_counter()
        expanded = 0
        while heap:
            if expanded >= self.bound.states or time.perf_counter() - began > self.bound.seconds:
                return nodes, None, expanded, True
            _, _, n, temporary = heapq.heappop(heap)
            node = nodes[n]
            if node.distance == 0:  # the plan's GPUs, in some order
                return nodes, n, expanded, False
            if not temporary:  # temporary replicas later, after this state's other moves
                expanded += 1
                priority = node.depth + 1 + WEIGHT * node.distance
                heapq.heappush(heap, (priority, next(tick), n, True))
            for move in self.moves(node, temporary):
                child = self.child(node, n, move)
                if child.key in seen:
                    continue
                seen.add(child.key)
                nodes.append(child)
                priority = child.depth + WEIGHT * child.distance
                heapq.heappush(heap, (priority, next(tick), len(nodes) - 1, False))
        return nodes, None, expanded, False

    def steps(self, nodes: list[_Node], goal: int) -> Reconfiguration:
        space = self.space
        path: list[tuple[str, int, int]] = []
        n = goal
        while nodes[n].move is not None:
            move = nodes[n].move
            assert move is not None
            path.append(move)
            n = nodes[n].parent
        steps: list[Step] = [Step(StepKind.DESTROY, g, p)  # idle instances first
                             for g, gpu in enumerate(self.current)
                             for p, s in gpu.assignment if s is None]
        for kind, g, item in reversed(path):
            p, svc = space.places[item // space.n], space.names[item % space.n]
            if kind == "add":
                steps += [Step(StepKind.CREATE, g, p), Step(StepKind.START, g, p, svc)]
            else:
                steps += [Step(StepKind.MOVE_TRAFFIC, g, p, svc), Step(StepKind.STOP, g, p, svc),
                          Step(StepKind.DESTROY, g, p)]
        final = nodes[goal].state
        free = dict(enumerate(self.plan))
        where = [0] * len(self.plan)
        target: list[GpuPlan] = []
        for g, config in enumerate(final):
            match = next((i for i, gpu in free.items() if space.config(gpu) == config), None)
            if match is None:  # a GPU the plan does not need
                target.append(GpuPlan(MigLayout(), ()))
                continue
            gpu = free.pop(match)
            where[match] = g
            target.append(gpu)
            steps += [Step(StepKind.CREATE, g, p) for p, s in gpu.assignment if s is None]
        floor = self.floor[: self.spec]
        drained = sum(1 for g in range(len(self.current))
                      if self.current[g].services() and not final[g] & space.config(
                          self.current[g]))
        return Reconfiguration(tuple(steps), tuple(where), tuple(target), floor, drained,
                               "search")

    def refusal(self, nodes: list[_Node], expanded: int, bounded: bool) -> InfeasibleError:
        space = self.space
        closest = min(nodes, key=lambda node: node.distance)
        cap, count = closest.cap, closest.count
        lacks: dict[int, tuple[float, str]] = {}
        for g, config in enumerate(closest.state):
            for item in config:
                short = self.blocker(item, cap, count)
                s = item % space.n
                if short is None or (s in lacks and lacks[s][0] <= short):
                    continue
                lacks[s] = (short, f"gpu{g} {space.places[item // space.n]}")
        reasons = [
            (f"{space.names[s]} lacks {short:.1f} req/s to retire {where} (floor "
             f"{self.floor[s]:.1f})" if short > 0 else
             f"{space.names[s]} would lose its last replica on {where}")
            for s, (short, where) in sorted(lacks.items())
        ] or ["every old replica can retire, but no free slots fit the planned instances"]
        if bounded:
            head = (f"no safe order found within the search bound ({expanded:,} states, "
                    f"{self.bound.seconds:g} s)")
        else:
            head = f"no safe order exists (every reachable state searched: {expanded:,})"
        return InfeasibleError(f"{head}; add a spare GPU, or plan closer to today's layout",
                               reasons[:8])


_PRIME = (1 << 61) - 1


def _hashes(config: Config) -> tuple[int, int]:
    h = hash(config) % _PRIME  # frozensets cache their hash
    return h, h * h % _PRIME


def _key(state: tuple[Config, ...]) -> tuple[int, int]:
    """The multiset of a state's configs as two power sums of their hashes modulo a 61-bit
    prime: the same for states that differ only in GPU order, updated in O(1) per move; two
    different states collide (and would be merged) with negligible chance."""
    pairs = [_hashes(c) for c in state]
    return sum(a for a, _ in pairs) % _PRIME, sum(b for _, b in pairs) % _PRIME


def search_steps(
    problem: PartitionProblem, current: tuple[GpuPlan, ...], plan: tuple[GpuPlan, ...],
    bound: SearchBound | None = None,
) -> Reconfiguration:
    """A safe order from ``current`` to ``plan`` found by the bounded search (module
    docstring), checked by replaying it; :class:`InfeasibleError` naming what blocks it."""
    search = _Search(problem, current, plan, bound or SearchBound())
    nodes, goal, expanded, bounded = search.run()
    if goal is None:
        raise search.refusal(nodes, expanded, bounded)
    result = search.steps(nodes, goal)
    check_steps(problem, current, result.steps, result.target)
    return result
