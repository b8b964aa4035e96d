"""The simulator's reading of a load from requests against the node agent's own code on the
same kind of request stream: a Poisson stream read by the agent's window rule (a window
closes at the first scrape with ``min_requests`` requests, or at ``max_window_s``) and its
:class:`~cotenant.agent.colocation.rates.RequestRates`, against
:func:`~cotenant.sim.colocation.load_signal.counted_load` at the same flat load. They agree
in the mean to a few per cent (the agent's windows close on a count, which makes its newest
window's rate a little higher) and in the spread to 15%."""

from __future__ import annotations

import numpy as np
import pytest

from cotenant.agent.colocation.rates import RequestRates
from cotenant.agent.latency import RequestWindow
from cotenant.perf import mps
from cotenant.policies.colocation import GuardSettings
from cotenant.sim.colocation.load_signal import counted_load


def _agent_readings(load: float, model: int, guard: GuardSettings, seconds: float,
                    rng: np.random.Generator) -> np.ndarray:
    """The agent's reading (load, a fraction) at each window it closes."""
    l100 = float(mps.ONLINE_L100[model])
    per_s = load * 1000.0 / l100
    arrivals = np.cumsum(rng.exponential(1.0 / per_s, int(per_s * seconds * 1.2)))
    rates = RequestRates(fresh_s=guard.max_window_s + guard.scrape_s + 3.0)
    out, since, read = [], 0.0, 0.0
    while read < seconds:
        read += guard.scrape_s
        count = np.searchsorted(arrivals, read) - np.searchsorted(arrivals, since)
        if count < guard.min_requests and read - since < guard.max_window_s:
            continue  # the window grows
        rates.add(RequestWindow("web", float(count), since, read))
        since = read
        rate = rates.rate("web", read)
        assert rate is not None
        if read > 10.0:  # past the first windows
            out.append(min(rate.per_s * l100 / 1000.0, 1.0))
    return np.array(out)


@pytest.mark.parametrize(("model", "load"), [("resnet50", 0.3), ("vgg16", 0.3),
                                             ("bert", 0.6), ("resnet50", 0.05)])
def test_the_simulated_reading_matches_the_agents_in_mean_and_spread(model: str,
                                                                    load: float) -> None:
    guard = GuardSettings()
    index = mps.model_index(model)
    rng = np.random.default_rng(11)
    agent = _agent_readings(load, index, guard, 4000.0, rng)
    n = 20_000
    sim = counted_load(guard, np.full(n, index), np.full((n, 1), load), np.full(n, 5.0), 10.0,
                       rng)
    assert len(agent) > 500
    assert agent.mean() == pytest.approx(sim.mean(), rel=0.06)
    assert agent.mean() >= sim.mean() * 0.99  # the agent's errs higher, if anything
    assert agent.std() == pytest.approx(sim.std(), rel=0.15)
