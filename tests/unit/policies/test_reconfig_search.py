"""The bounded search's own tables checked against the GPU model's layout rules (the
placements it may add beside a GPU's instances are exactly those the geometry accepts), and
its refusal's reasons worked out by hand."""

from __future__ import annotations

import pytest

from cotenant.errors import InfeasibleError, InvalidLayoutError
from cotenant.model.mig import MigPlacement
from cotenant.policies.partition.reconfig import plan_steps
from cotenant.policies.partition.reconfig.search import _Space
from tests.unit.policies.reconfig_helpers import gpu, problem


def test_the_placements_that_fit_beside_every_valid_layout_are_the_geometrys() -> None:
    # every set of instances the A100-40GB accepts (its +me and 1g.10gb profiles included),
    # each instance serving a or b: the search's bitmask, slice, media-extension and count
    # rules give the placements that the geometry's own check accepts beside it
    pb = problem([1, 1])
    space = _Space(pb, ())
    places = space.places

    def valid(placements: list[MigPlacement]) -> bool:
        try:
            pb.geometry.check(tuple(placements))
        except InvalidLayoutError:
            return False
        return True

    layouts: list[list[MigPlacement]] = []

    def extend(first: int, chosen: list[MigPlacement]) -> None:
        layouts.append(chosen)
        for i in range(first, len(places)):
            if valid([*chosen, places[i]]):
                extend(i + 1, [*chosen, places[i]])

    extend(0, [])
    assert (len(places), len(layouts)) == (25, 2319)
    for layout in layouts:
        config = frozenset(space.code(p, "ab"[k % 2]) for k, p in enumerate(layout))
        expected = [i for i, p in enumerate(places) if valid([*layout, p])]
        assert space.fitting(config) == expected, layout
        assert space.fitting(config) == expected  # from its cache


@pytest.mark.parametrize(("demand", "services", "reasons"), [
    # a's floor is 590, on its 4g (330) and 3g (260): retiring either leaves it short, the
    # 3g by less (260 against 330), and that is the one named
    ([590, 0], ["a", "a"], ["a lacks 260.0 req/s to retire gpu0 3g.20gb@4 (floor 590.0)"]),
    # a and b each have one replica at their floor: both are named, in the spec's order
    ([330, 150], ["a", "b"], ["a lacks 330.0 req/s to retire gpu0 4g.20gb@0 (floor 330.0)",
                              "b lacks 150.0 req/s to retire gpu0 3g.20gb@4 (floor 150.0)"]),
])
def test_the_search_refusal_names_each_services_smallest_shortfall(
        demand: list[float], services: list[str | None], reasons: list[str]) -> None:
    # one GPU, planned as one 7g for a: no slot is free for it until both old replicas go,
    # and neither can go first; the start is the only state
    with pytest.raises(InfeasibleError) as refused:
        plan_steps(problem(demand), (gpu("4g.20gb@0,3g.20gb@4", services),),
                   (gpu("7g.40gb@0", ["a"]),))
    assert refused.value.reasons == tuple(reasons)
    assert str(refused.value).startswith(
        "no safe order exists (every reachable state searched: 1); add a spare GPU, or plan "
        "closer to today's layout: ")
