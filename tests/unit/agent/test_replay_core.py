"""The agent and the simulator decide alike: one observation stream, two callers of one core.

A short simulator run (``run_colocation`` on a small synthetic workload, a burst-heavy load)
is recorded by wrapping the policy: every :class:`Observation` it passes to ``decide``, the
:class:`GpuState` it passes and the :class:`Actions` it gets. The stream is replayed

(a) through ``decide`` as the simulator calls it, the state carried from call to call with the
    simulator's pair resets (a job placed or gone) in between: the same actions, which also
    shows the recording is the whole input;
(b) through the node agent's :class:`ColocationController` on the fake backend, a fake observe
    step handing it the same observations (each GPU one online service, the pair resets as
    new pair numbers) and its enforcement acting on fake workloads: the same actions GPU by
    GPU, and the guard's pauses, throttles and evictions counted as the simulator counts them.

Neither side has decision logic of its own to disagree with: both import the same objects.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field, fields
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

from cotenant.agent.backends import ManualClock
from cotenant.agent.colocation import ColocationController, Enforcer, GpuAction, Rows
from cotenant.policies.colocation import (
    COLOCATION,
    Actions,
    ColocationPolicy,
    GpuState,
    Observation,
    Why,
)
from cotenant.sim.colocation.run import run_colocation
from cotenant.sim.colocation.workload import synthetic_workload

from .harness import make_agent

GPUS = 16


@dataclass(frozen=True)
class Recording(ColocationPolicy):
    """``policy`` with every call of ``decide`` kept: (observation, state in, actions, state
    out)."""

    calls: list[tuple[Observation, GpuState, Actions, GpuState]] = field(
        default_factory=list, compare=False)

    @classmethod
    def of(cls, policy: ColocationPolicy) -> Recording:
        return cls(**{f.name: getattr(policy, f.name) for f in fields(policy)})

    def decide(self, obs: Observation, state: GpuState) -> tuple[Actions, GpuState]:
        actions, nxt = super().decide(obs, state)
        self.calls.append((obs, state, actions, nxt))
        return actions, nxt


def reset_between(before: GpuState, after: GpuState) -> np.ndarray:
    """The GPUs whose state the simulator reset between two calls (a pair placed or gone):
    ``after`` must be ``before`` with exactly those reset."""
    changed = np.zeros(len(before.decided), dtype=np.bool_)
    for name in ("decided", "floor", "floor_until", "acted_at", "paused_at", "paused_until",
                 "gained_at"):
        changed |= getattr(before, name) != getattr(after, name)
    gpus = np.flatnonzero(changed)
    again = before.reset(gpus, 0.0)
    for f in fields(GpuState):
        assert np.array_equal(getattr(again, f.name), getattr(after, f.name)), f.name
    return gpus


@dataclass
class Stream:
    """The recorded observations, the resets before each, and the simulator's actions."""

    policy: ColocationPolicy
    observations: list[Observation]
    resets: list[np.ndarray]
    actions: list[Actions]


def record(name: str, **kwargs: object) -> Stream:
    work = synthetic_workload(np.random.default_rng(3), gpus=GPUS, intervals=40, load_scale=2.0)
    policy = Recording.of(COLOCATION.create(name, **kwargs))
    run_colocation(work, policy, 5)
    calls = policy.calls
    first = calls[0][1]
    start = GpuState.new(GPUS, 0.0)
    for f in fields(GpuState):
        assert np.array_equal(getattr(first, f.name), getattr(start, f.name))
    resets = [np.zeros(0, dtype=np.int64)]
    resets += [reset_between(prev[3], cur[1]) for prev, cur in pairwise(calls)]
    base = COLOCATION.create(name, **kwargs)
    return Stream(base, [c[0] for c in calls], resets, [c[2] for c in calls])


POLICIES = [("cotenant-pause", {}), ("muxflow", {}), ("mps-fixed", {"guard": True})]


@pytest.fixture(scope="module", params=POLICIES, ids=[p[0] for p in POLICIES])
def stream(request: pytest.FixtureRequest) -> Stream:
    name, kwargs = request.param
    return record(name, **kwargs)


def test_the_stream_has_every_kind_of_decision(stream: Stream) -> None:
    """A replay that agrees only on "nothing to do" would prove little."""
    whys = Counter(int(w) for a, o in zip(stream.actions, stream.observations, strict=True)
                   for w in a.why[o.placed])
    assert whys[Why.SHARE_UP] or whys[Why.SHARE_DOWN]
    assert whys[Why.EVICT]
    assert whys[Why.PAUSE] or whys[Why.THROTTLE]
    assert sum(len(r) for r in stream.resets) > GPUS


def same(a: Actions, b: Actions) -> None:
    assert np.array_equal(a.share, b.share)
    assert np.array_equal(a.restart, b.restart)
    assert np.array_equal(a.pause_until, b.pause_until, equal_nan=True)
    assert np.array_equal(a.evict, b.evict)
    assert np.array_equal(a.hold_until, b.hold_until)
    assert np.array_equal(a.why, b.why)


def test_a_the_simulators_call_of_decide_gives_the_recorded_actions(stream: Stream) -> None:
    state = GpuState.new(GPUS, 0.0)
    for obs, gpus, recorded in zip(stream.observations, stream.resets, stream.actions,
                                   strict=True):
        state = state.reset(gpus, 0.0)
        actions, state = stream.policy.decide(obs, state)
        same(actions, recorded)


class ReplayObserver:
    """The fake observe step: the recorded observations, one online service a GPU, a pair
    number that moves where the simulator reset a GPU's pair."""

    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        self.keys = tuple((g, f"web-{g}") for g in range(GPUS))
        self.pairs = np.zeros(GPUS, dtype=np.int64)
        self.step = -1

    def observe(self, now: float) -> Rows:
        self.step += 1
        self.pairs[self.stream.resets[self.step]] += 1
        return Rows(self.keys, tuple(int(p) for p in self.pairs),
                    self.stream.observations[self.step])

    def forget(self) -> None:
        raise AssertionError("the replay's clock never steps back")


def agrees(mine: GpuAction, theirs: Actions, g: int) -> None:
    assert mine.gpu == g
    assert mine.share == theirs.share[g]
    assert mine.restart == theirs.restart[g]
    assert mine.evict == theirs.evict[g]
    assert mine.hold_until == theirs.hold_until[g]
    assert ((math.isnan(mine.pause_until) and math.isnan(theirs.pause_until[g]))
            or mine.pause_until == theirs.pause_until[g])
    assert mine.why == frozenset({Why(int(theirs.why[g]))}) - {Why.NONE}


def test_b_the_agents_controller_gives_the_same_actions_gpu_by_gpu(
    stream: Stream, tmp_path: Path,
) -> None:
    agent = make_agent(tmp_path, gpus=GPUS)
    clock: ManualClock = agent.clock
    clock.now = 0.0
    for g in range(GPUS):  # something for the enforcement to act on
        agent.submit({"name": f"web-{g}", "argv": ["fake-workload", "--util-pct", "20"],
                      "role": "online", "gpu": g, "model": "resnet50"})
        agent.submit({"name": f"train-{g}", "argv": ["fake-workload", "--util-pct", "60"],
                      "role": "offline", "gpu": g, "sm_share": 50})
    agent.sup.tick(0.0)
    observer = ReplayObserver(stream)
    controller = ColocationController(stream.policy, observer, Enforcer(agent.sup), start_s=0.0)
    counts: Counter[str] = Counter()
    for obs, recorded in zip(stream.observations, stream.actions, strict=True):
        now = float(np.max(obs.now_s))
        clock.now = now
        mine = controller.decide(now)
        assert len(mine) == GPUS
        for g, action in enumerate(mine):
            agrees(action, recorded, g)
        why = np.where(obs.placed, recorded.why, Why.NONE)
        counts.update({"pause": int((why == Why.PAUSE).sum()),
                       "throttle": int((why == Why.THROTTLE).sum()),
                       "evict": int((why == Why.EVICT).sum())})
        agent.sup.tick(now)
    assert controller.counts == dict(counts)
    assert sum(counts.values()) > 0
