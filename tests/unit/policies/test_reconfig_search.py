"""The bounded search's own tables checked against the GPU model's layout rules: the
placements it may add beside a GPU's instances are exactly those the geometry accepts."""

from __future__ import annotations

from cotenant.errors import InvalidLayoutError
from cotenant.model.mig import MigPlacement
from cotenant.policies.partition.reconfig.search import _Space
from tests.unit.policies.reconfig_helpers import problem


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
