"""The predicted stretch a policy sees is one perf function, for the simulator and the agent."""

from __future__ import annotations

import numpy as np
import pytest

from cotenant.perf.interference import SOURCES, STATISTICS, interference
from cotenant.perf.jobs import job_profiles
from cotenant.policies.colocation import Mechanism
from cotenant.sim.colocation.world import Physics


@pytest.mark.parametrize("mechanism", list(Mechanism))
@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("statistic", STATISTICS)
def test_the_simulators_physics_predicts_what_the_calibration_says(
    mechanism: Mechanism, source: str, statistic: str,
) -> None:
    calibration = interference(source, statistic)
    physics = Physics(mechanism, calibration, job_profiles())
    profiles = np.arange(len(job_profiles().names))
    assert np.array_equal(physics.stretch(profiles), calibration.stretch(mechanism))
    assert np.all(physics.predicted_stretch(3) == calibration.predicted_stretch(mechanism))


def test_nothing_shared_is_no_stretch() -> None:
    assert interference().predicted_stretch(Mechanism.NONE) == 1.0
    assert interference().predicted_stretch(Mechanism.MPS) > 1.0
