"""The ordering rules' borrowing, worked out by hand: where a service's old replica is stuck
(taking it out would break the service's floor), the rules start a temporary replica in slots
no pending plan instance needs, and give it back once the planned replicas serve."""

from __future__ import annotations

from cotenant.policies.partition.reconfig.rules import order_by_rules
from tests.unit.policies.reconfig_helpers import EMPTY, gpu, problem

FREE = EMPTY


SWAP = gpu("4g.20gb@0,3g.20gb@4", ["b", "a"])
"""a and b trade places on GPU 0: a's 4g (330 req/s) becomes b's, b's 3g (150) a's."""
TAIL = [
    # a keeps 260 >= 260 on the borrowed 3g: its 4g goes, and b starts there
    "move-traffic gpu0 4g.20gb@0 a",
    "stop-replica gpu0 4g.20gb@0 a",
    "start-replica gpu0 4g.20gb@0 b",
    # b keeps 200 >= 100 on the 4g: its 3g goes, and a starts there
    "move-traffic gpu0 3g.20gb@4 b",
    "stop-replica gpu0 3g.20gb@4 b",
    "start-replica gpu0 3g.20gb@4 a",
]


def test_a_stuck_replica_borrows_the_smallest_profile_that_covers_its_floor_exactly() -> None:
    # a's floor is 260 req/s, all on its 4g, and b's 100 on its 3g: neither can go first.
    # The plan keeps both slots (2 points on GPU 0 against the free GPU's 0.5). a borrows on
    # the free GPU (it sorts first): it is short 260 - (330 - 330) = 260 req/s, and the 3g
    # serves exactly 260, the smallest profile that covers it; at 3g.20gb@0, its first start
    result = order_by_rules(problem([260, 100]), (gpu("4g.20gb@0,3g.20gb@4", ["a", "b"]), FREE),
                            (SWAP,))
    assert result.placement == (0,)
    assert result.target == (SWAP, FREE)
    assert [str(s) for s in result.steps] == [
        "create-instance gpu1 3g.20gb@0",
        "start-replica gpu1 3g.20gb@0 a",
        *TAIL,
        # a serves 260 on GPU 0 again: the borrowed replica goes, and its instance
        "move-traffic gpu1 3g.20gb@0 a",
        "stop-replica gpu1 3g.20gb@0 a",
        "destroy-instance gpu1 3g.20gb@0",
    ]
    assert (result.floor.tolist(), result.drained) == ([260.0, 100.0], 0)


def test_a_stuck_replica_borrows_an_instance_the_plan_keeps_idle() -> None:
    # as above, but GPU 1 holds an idle 3g the plan keeps idle (3 points: it stays there):
    # a starts on it rather than creating anything, and it is left idle again, not destroyed
    idle = gpu("3g.20gb@0", [None])
    result = order_by_rules(problem([260, 100]),
                            (gpu("4g.20gb@0,3g.20gb@4", ["a", "b"]), idle), (SWAP, idle))
    assert result.placement == (0, 1)
    assert [str(s) for s in result.steps] == [
        "start-replica gpu1 3g.20gb@0 a",
        *TAIL,
        "move-traffic gpu1 3g.20gb@0 a",
        "stop-replica gpu1 3g.20gb@0 a",
    ]



def test_each_serving_gpu_repartitioned_counts_as_drained() -> None:
    # two 7g serve a (floor 100): GPU 0 can go first (GPU 1's 650 keeps the floor) and is
    # repartitioned; GPU 1 waits until a serves on GPU 0's new 4g (330), then goes too
    layout = gpu("4g.20gb@0,3g.20gb@4", ["a", None])
    result = order_by_rules(problem([100, 0]),
                            (gpu("7g.40gb@0", ["a"]), gpu("7g.40gb@0", ["a"])), (layout, layout))
    assert [str(s) for s in result.steps] == [
        "move-traffic gpu0 7g.40gb@0 a",
        "stop-replica gpu0 7g.40gb@0 a",
        "repartition gpu0 4g.20gb@0,3g.20gb@4",
        "start-replica gpu0 4g.20gb@0 a",
        "move-traffic gpu1 7g.40gb@0 a",
        "stop-replica gpu1 7g.40gb@0 a",
        "repartition gpu1 4g.20gb@0,3g.20gb@4",
        "start-replica gpu1 4g.20gb@0 a",
    ]
    assert (result.placement, result.drained) == ((0, 1), 2)


def test_slots_kept_add_up_in_the_match() -> None:
    # a plan GPU of seven 1g for a: GPU 0 keeps two of them for a as they are (2 x 3 points),
    # GPU 1 all seven slots for another service (7 x 1 point): 7 > 6, so GPU 1
    sevens = "1g.5gb@0,1g.5gb@1,1g.5gb@2,1g.5gb@3,1g.5gb@4,1g.5gb@5,1g.5gb@6"
    current = (gpu("1g.5gb@0,1g.5gb@1", ["a", "a"]), gpu(sevens, ["b"] * 7))
    result = order_by_rules(problem([0, 0]), current, (gpu(sevens, ["a"] * 7),))
    assert result.placement == (1,)
