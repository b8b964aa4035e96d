"""Allocating instances to training jobs: one-to-one best fit, Flex-MIG's one-to-many rule,
the speed model, the static mix and the layout a drained GPU is remade into."""

from __future__ import annotations

import pytest

from cotenant.model.gpu import CATALOG
from cotenant.model.mig import MigGeometry
from cotenant.model.training import TrainingJob
from cotenant.policies.flexmig import (
    FreeInstance,
    drain_choice,
    one_to_many,
    one_to_one,
    refill_layout,
    smallest_profile,
    speed,
    static_layouts,
)


def geometry() -> MigGeometry:
    found = CATALOG.get("A100-40GB").mig
    assert found is not None
    return found


def free(gpu: int, layout: str) -> list[FreeInstance]:
    return [FreeInstance(gpu, p) for p in geometry().parse(layout).placements]


def test_one_to_one_takes_the_smallest_instance_large_enough() -> None:
    instances = free(0, "4g.20gb,2g.10gb,1g.5gb") + free(1, "7g.40gb")
    chosen = one_to_one(instances, 2)
    assert chosen is not None
    assert str(chosen.placement) == "2g.10gb@4"
    six = one_to_one(instances, 6)
    assert six is not None
    assert (six.gpu, six.size) == (1, 7)  # a slice idle
    assert one_to_one(free(0, "3g.20gb,3g.20gb"), 4) is None
    assert smallest_profile(geometry(), 5) == geometry().profile("7g.40gb")


def test_one_to_many_prefers_one_instance_then_no_idle_slices_then_one_gpu() -> None:
    both = free(0, "4g.20gb,2g.10gb,1g.5gb") + free(1, "4g.20gb,3g.20gb")
    one = one_to_many(both, 4)
    assert one is not None
    assert [f.size for f in one] == [4]
    six = one_to_many(both, 6)  # 4g + 2g on GPU 0, no idle slice (7g: none free)
    assert six is not None
    assert sorted(f.size for f in six) == [2, 4]
    assert {f.gpu for f in six} == {0}
    seven = one_to_many(free(0, "4g.20gb,2g.10gb") + free(1, "1g.5gb"), 7)
    assert seven is not None
    assert sorted(f.size for f in seven) == [1, 2, 4]
    assert {f.gpu for f in seven} == {0, 1}
    assert one_to_many(free(0, "3g.20gb,2g.10gb"), 6) is None
    assert one_to_many(free(0, "1g.5gb,1g.5gb,1g.5gb"), 3, max_instances=2) is None


def test_speed_counts_what_was_asked_for_and_each_extra_process() -> None:
    assert speed(7, 6, 1, 0.05) == 1.0  # a larger instance does not speed the job up
    assert speed(6, 6, 2, 0.05) == pytest.approx(1 / 1.05)
    assert speed(6, 6, 3, 0.0) == 1.0


def test_the_static_mix_follows_the_jobs_and_holds_the_largest_size() -> None:
    jobs = [TrainingJob(f"j{i}", 2, 1000.0) for i in range(30)] + [
        TrainingJob(f"k{i}", 6, 1000.0) for i in range(10)]
    layouts = static_layouts(jobs, 4, geometry())
    assert len(layouts) == 4
    counts = [lay.profile_counts() for lay in layouts]
    # 2-slice jobs ask for 60,000 of the 2g's slice-seconds, 6-slice ones 70,000 of the 7g's
    assert sum(c["7g.40gb"] for c in counts) == 2
    assert sum(c["2g.10gb"] for c in counts) == 6
    for lay in layouts:
        geometry().check(lay.placements)
    # a rare large job still finds its size
    rare = [TrainingJob(f"s{i}", 1, 1000.0) for i in range(100)] + [TrainingJob("b", 7, 1.0)]
    assert any("7g.40gb" in lay.profile_counts() for lay in static_layouts(rare, 3, geometry()))


def test_a_drained_gpu_is_remade_for_the_waiting_jobs() -> None:
    layout = refill_layout(geometry(), [3, 2])
    # the 3g at slice 4 leaves room for the 2g and two 1g (at slice 0 it would leave one)
    assert layout.profile_counts() == {"3g.20gb": 1, "2g.10gb": 1, "1g.5gb": 2}
    assert drain_choice([3, 5, 5], [1, 2, 1], [True, True, True]) == 2
    assert drain_choice([3], [0], [False]) is None
