"""Flex-MIG's allocation rules checked by value: one-to-many against a brute-force search over
every subset of the free instances, the boundaries of its caps, and the exact layouts of the
static mix and the drain-and-remake baseline on hand-worked cases."""

from __future__ import annotations

import itertools
import random

from cotenant.model.gpu import CATALOG
from cotenant.model.mig import MigGeometry
from cotenant.model.training import TrainingJob
from cotenant.policies.flexmig import (
    FreeInstance,
    one_to_many,
    one_to_one,
    refill_layout,
    smallest_profile,
    static_layouts,
)


def geometry(name: str = "A100-40GB") -> MigGeometry:
    found = CATALOG.get(name).mig
    assert found is not None
    return found


def free(gpu: int, layout: str) -> list[FreeInstance]:
    return [FreeInstance(gpu, p) for p in geometry().parse(layout).placements]


def _key(chosen: tuple[FreeInstance, ...], slices: int) -> tuple[int, int, int]:
    """The rule's order: fewest instances, fewest slices beyond the ask, fewest GPUs."""
    return (len(chosen), sum(f.size for f in chosen) - slices, len({f.gpu for f in chosen}))


def _brute_force(instances: list[FreeInstance], slices: int,
                 most: int) -> tuple[int, int, int] | None:
    best = None
    for n in range(1, min(most, len(instances)) + 1):
        for combo in itertools.combinations(instances, n):
            if sum(f.size for f in combo) >= slices:
                key = _key(combo, slices)
                best = key if best is None or key < best else best
    return best


def test_one_to_many_is_the_best_subset_by_brute_force() -> None:
    rng = random.Random(7)
    layouts = geometry().enumerate_maximal()
    checked = 0
    for _ in range(150):
        instances: list[FreeInstance] = []
        for gpu in range(rng.randint(1, 3)):
            layout = rng.choice(layouts)
            instances += [FreeInstance(gpu, p) for p in layout.placements
                          if rng.random() < 0.6]
        slices = rng.randint(1, 9)
        most = rng.randint(1, 7)
        chosen = one_to_many(instances, slices, max_instances=most)
        expected = _brute_force(instances, slices, most)
        if expected is None:
            assert chosen is None, (instances, slices, most)
            continue
        assert chosen is not None, (instances, slices, most)
        assert len(set(chosen)) == len(chosen)
        assert set(chosen) <= set(instances)
        assert _key(chosen, slices) == expected, (instances, slices, most, chosen)
        checked += 1
    assert checked > 80  # most draws have an answer


def test_one_to_many_at_its_caps() -> None:
    # a 1-slice job on a GPU with only a 7g free takes it: 6 slices beyond the ask (the cap)
    whole = free(0, "7g.40gb")
    assert one_to_many(whole, 1) == tuple(whole)
    # exactly max_instances instances are allowed, one more is not
    seven = free(0, "1g.5gb,1g.5gb,1g.5gb,1g.5gb,1g.5gb,1g.5gb,1g.5gb")
    assert one_to_many(seven, 7) == tuple(seven)
    assert one_to_many(seven, 7, max_instances=6) is None
    assert one_to_many(seven, 3, max_instances=3) is not None
    # a node's GPUs pool their instances: 4 + 3 across two GPUs, two instances
    two = one_to_many(free(0, "4g.20gb") + free(1, "3g.20gb"), 7, max_instances=2)
    assert two is not None
    assert sorted((f.gpu, f.size) for f in two) == [(0, 4), (1, 3)]


def test_one_to_many_uses_the_fewest_instances_on_one_gpu() -> None:
    # GPU 0 offers 2 slices as one 2g or as two 1g: the 2g, one process
    gpu0 = free(0, "2g.10gb,1g.5gb,1g.5gb")
    chosen = one_to_many(gpu0, 2)
    assert chosen is not None
    assert [str(f.placement) for f in chosen] == ["2g.10gb@0"]
    # 3 slices: the 2g and one 1g, not three 1g
    three = one_to_many(gpu0, 3)
    assert three is not None
    assert sorted(f.size for f in three) == [1, 2]


def test_one_to_many_ties_go_to_the_lowest_gpu_and_start() -> None:
    both = free(0, "2g.10gb,1g.5gb,1g.5gb,3g.20gb") + free(1, "2g.10gb,1g.5gb,1g.5gb,3g.20gb")
    chosen = one_to_many(both, 2)
    assert chosen is not None
    assert [(f.gpu, str(f.placement)) for f in chosen] == [(0, "2g.10gb@0")]
    one = one_to_many(both, 1)
    assert one is not None
    assert [(f.gpu, str(f.placement)) for f in one] == [(0, "1g.5gb@2")]


def test_one_to_one_takes_the_smallest_instance_on_any_gpu() -> None:
    instances = free(0, "4g.20gb") + free(1, "2g.10gb,2g.10gb")
    chosen = one_to_one(instances, 2)
    assert chosen is not None
    assert (chosen.gpu, str(chosen.placement)) == (1, "2g.10gb@0")


def test_the_smallest_profile_for_each_size() -> None:
    names = [smallest_profile(geometry(), k) for k in range(1, 9)]
    assert [p.name if p else None for p in names] == [
        "1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb", "7g.40gb", "7g.40gb", None]
    # the least memory among profiles of equal compute (1g.5gb, not 1g.10gb), never +me
    assert smallest_profile(geometry("A30"), 1).name == "1g.6gb"  # type: ignore[union-attr]
    assert smallest_profile(geometry("A30"), 5) is None


def test_the_static_mix_of_one_size_is_that_size_only() -> None:
    jobs = [TrainingJob(f"j{i}", 1, 100.0) for i in range(5)]
    layouts = static_layouts(jobs, 2, geometry())
    assert [dict(lay.profile_counts()) for lay in layouts] == [{"1g.5gb": 7}] * 2


def test_the_static_mix_with_no_job_one_to_one_could_run() -> None:
    # no jobs, or only jobs larger than the A30's 4 slices: nothing is asked of any size, so
    # no size is forced in; every GPU gets the first maximal layout (the whole GPU)
    whole = geometry("A30").enumerate_maximal()[0]
    assert static_layouts([], 2, geometry("A30")) == [whole, whole]
    big = [TrainingJob("big", 6, 100.0)]
    assert static_layouts(big, 2, geometry("A30")) == [whole, whole]


def test_a_rare_small_work_large_job_still_finds_its_size_on_the_last_gpu() -> None:
    jobs = [TrainingJob(f"s{i}", 1, 1000.0) for i in range(100)] + [
        TrainingJob("b", 4, 0.1)]  # 0.4 slice-seconds of 4g work
    for gpus in (1, 3):
        layouts = static_layouts(jobs, gpus, geometry())
        counts = [dict(lay.profile_counts()) for lay in layouts]
        # the greedy's first GPUs stay all 1g; the last is the 4g layout that covers most
        # of the 1g demand it gives up (4g + three 1g, not 4g + 3g)
        assert counts == [{"1g.5gb": 7}] * (gpus - 1) + [{"4g.20gb": 1, "1g.5gb": 3}]


def test_a_drained_gpu_gets_each_instance_where_it_leaves_most_room() -> None:
    # the 3g at slice 4 (at 0 it would leave room for fewer instances); the 2g then at 0
    # (at 0 or 2 it leaves the same room: the lower start), then 1g wherever they fit
    layout = refill_layout(geometry(), [3, 2])
    assert str(layout) == "2g.10gb@0,1g.5gb@2,1g.5gb@3,3g.20gb@4"
    # alone, a 2g at 4 leaves room for nine placements (1g at 0-3 and 6, 2g at 0 and 2, 3g
    # and 4g at 0), at 0 or 2 for eight
    assert str(refill_layout(geometry(), [2])) == \
        "1g.5gb@0,1g.5gb@1,1g.5gb@2,1g.5gb@3,2g.10gb@4,1g.5gb@6"


def test_one_to_many_keeps_looking_past_a_subset_with_too_many_instances() -> None:
    # with one instance allowed, GPU 0's 4g + 2g (two) is out, but its 1g alone is the answer
    chosen = one_to_many(free(0, "4g.20gb,2g.10gb,1g.5gb"), 1, max_instances=1)
    assert chosen is not None
    assert [str(f.placement) for f in chosen] == ["1g.5gb@6"]


def test_the_gpu_that_makes_room_gives_back_all_it_covered() -> None:
    # slice-seconds: 3g 300, 1g 100, 4g 0.4 (rare): one GPU, whose greedy pick is 3g + 3g;
    # it must hold the 4g, and with the 3g demand it gave up wanted again, 4g + 3g covers
    # 3 wanted slices against 4g + three 1g's 1.75
    jobs = [TrainingJob("a", 3, 100.0), TrainingJob("b", 4, 0.1), TrainingJob("c", 1, 100.0)]
    (layout,) = static_layouts(jobs, 1, geometry())
    assert dict(layout.profile_counts()) == {"4g.20gb": 1, "3g.20gb": 1}
