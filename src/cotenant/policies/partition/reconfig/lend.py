"""Room for temporary replicas where no node left can be drained (:mod:`.stages`, item 2):
an idle instance of a node already final, else a node already final given an intermediate
layout, its final instances plus new ones in its free slots, for the services that block.
"""

from __future__ import annotations

from cotenant.errors import InvalidLayoutError
from cotenant.model.deployment import GpuPlan
from cotenant.model.mig import MigPlacement
from cotenant.policies.partition.problem import unmet
from cotenant.policies.partition.reconfig.pool import NodeStage, Pool, Temporary, move


def _short(state: Pool, node: int) -> dict[str, tuple[float, bool]]:
    """Per service that blocks ``node``'s drain: req/s it lacks and whether it lacks a replica."""
    rate, count = state.serving(node)
    out = {}
    for s, name in enumerate(state.problem.services):
        need = float(state.floor[s] - rate[s])
        lone = bool(state.today[s] > 0 and count[s] <= 0)
        if unmet(float(rate[s]), float(state.floor[s])) or lone:
            out[name] = (max(need, 0.0), lone)
    return out


def _fits(state: Pool, placements: tuple[MigPlacement, ...]) -> bool:
    try:
        state.problem.geometry.check(placements)
    except InvalidLayoutError:
        return False
    return True


def _profiles(state: Pool, service: str, need: float) -> list[MigPlacement]:
    """Placements to try for a temporary replica of ``service``: first the profiles its
    replicas have today (the pod copied for it was sized for them; those that cover ``need``
    smallest first, then the rest largest first), then the smallest profile that covers
    ``need``, else the largest first (as the ordering rules borrow)."""
    s = state.problem.services.index(service)
    sizes = sorted(state.problem.geometry.profiles, key=lambda q: q.compute_slices)
    serving = [q for q in sizes if state.problem.rate_of(s, q.name) > 0]
    covering = [q for q in serving if state.problem.rate_of(s, q.name) >= need]
    usual = [q for q in serving if q.name in state.usual.get(service, ())]
    usual = [q for q in usual if q in covering] + [q for q in usual[::-1] if q not in covering]
    chosen = covering[:1] or serving[::-1] or sizes[:1]
    ordered = [*usual, *(q for q in chosen if q not in usual)]
    return [MigPlacement(q, start) for q in ordered for start in q.starts]


def _idle(state: Pool, node: int) -> list[tuple[int, MigPlacement]]:
    """``node``'s instances that serve nothing and lend no room yet: (GPU, placement)."""
    used = {(t.gpu, t.placement) for t in state.temps}
    out = []
    for d, gpu in enumerate(state.nodes[node]):
        g = node * state.per_node + d
        busy = {p for p, s in gpu.assignment if s is not None}
        out += [(g, p) for p in gpu.layout.placements if p not in busy and (g, p) not in used]
    return out


def borrow(state: Pool, blocked: int, final: list[tuple[GpuPlan, ...]], pending: list[int],
            lending: list[bool], stages: list[NodeStage]) -> bool:
    """Temporary replicas for what blocks ``blocked``: idle instances of final nodes first, then
    a final node given an intermediate layout; whether any was added."""
    short = _short(state, blocked)
    hosts = [n for n in range(len(state.nodes)) if n != blocked and n not in pending]
    added = False
    for service, wants in short.items():  # an idle instance: a pod, no new layout
        need, lone = wants
        for g, p in [i for n in hosts for i in _idle(state, n)]:
            rate = state.rate(service, p)
            if (need > 0 and rate > 0) or (lone and need <= 0):
                state.temps.append(Temporary(service, g, p))
                need, lone, added = need - rate, False, True
        short[service] = (need, lone)
    left = {s: v for s, v in short.items() if v[0] > 0 or v[1]}
    if not left:
        return added
    free = [n for n in hosts if not any(t.gpu // state.per_node == n for t in state.temps)]
    for n in sorted(free, key=lambda n: (any(g.assignment for g in final[n]), n)):
        if state.lacks(n) is not None:
            continue
        gpus, temps = _make_room(state, n, left)
        if temps:
            stages.append(move(state, n, gpus, False))
            state.temps += temps
            lending[n] = True
            pending.append(n)
            return True
    return added


def _make_room(state: Pool, node: int,
               short: dict[str, tuple[float, bool]]) -> tuple[tuple[GpuPlan, ...], list[Temporary]]:
    """``node``'s GPUs with new instances in their free slots for the services ``short``."""
    gpus = list(state.nodes[node])
    temps: list[Temporary] = []
    for service, wants in short.items():
        need, lone = wants
        for d, gpu in enumerate(gpus):
            placed = tuple(gpu.layout.placements)
            for p in _profiles(state, service, need):
                if need <= 0 and not lone:
                    break
                if _fits(state, (*placed, p)):
                    placed = (*placed, p)
                    temps.append(Temporary(service, node * state.per_node + d, p))
                    need, lone = need - state.rate(service, p), False
            gpus[d] = GpuPlan(state.problem.geometry.layout(placed), gpu.assignment)
    return tuple(gpus), temps
