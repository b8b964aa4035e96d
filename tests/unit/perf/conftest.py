"""Every perf test starts with the package's caches empty.

The calibration tables are read and fitted once per process (``functools.cache``). A test that
asks for one after an earlier test built it would check the earlier result, not a fresh
computation: the tests then depend on their order, and a mutation tool that forks its workers
from a process that already ran the suite would see none of the code behind a cache run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cotenant.perf import interference, jobs, kernels, predictor, published

CACHED = (
    published.tally_jobs, published.tally_pairs, kernels.orion_stats, kernels.kernel_profile,
    jobs.occupancy_table, jobs.job_profiles, jobs._online_occupancy, interference.h200_rows,
    interference.interference, predictor.default_predictor, predictor.predictor_for,
)


@pytest.fixture(autouse=True)
def _fresh_caches() -> Iterator[None]:
    """Empty before each test, and after it: a test that replaced a table leaves nothing
    cached from it for the tests of other folders, which do not clear the caches."""
    for function in CACHED:
        function.cache_clear()
    yield
    for function in CACHED:
        function.cache_clear()
