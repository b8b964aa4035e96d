"""Hypothesis strategies for the domain: pod shapes, nodes, clusters, MIG placements, demands."""

from __future__ import annotations

from hypothesis import strategies as st

from cotenant.model.cluster import Cluster
from cotenant.model.gpu import CATALOG
from cotenant.model.mig import MigGeometry, MigLayout, MigPlacement
from cotenant.model.workload import Node, PodShape

GPU_MODELS = ["G2", "T4", "P100", "V100-16GB", "V100-32GB", "A10"]


@st.composite
def pod_shapes(draw: st.DrawFn, specs: bool = True) -> PodShape:
    kind = draw(st.sampled_from(["cpu", "fractional", "whole"]))
    cpu = draw(st.integers(0, 64_000))
    mem = draw(st.integers(0, 256_000))
    spec: tuple[str, ...] = ()
    if specs and draw(st.booleans()):
        spec = tuple(sorted(draw(st.sets(st.sampled_from(GPU_MODELS), min_size=1, max_size=3))))
    if kind == "cpu":
        return PodShape(cpu, mem, 0, 0, spec)
    if kind == "fractional":
        return PodShape(cpu, mem, 1, draw(st.integers(1, 999)), spec)
    return PodShape(cpu, mem, draw(st.sampled_from([1, 2, 4, 8])), 1000, spec)


@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    count = draw(st.integers(1, 8))
    nodes = [
        Node(
            f"n{i}",
            draw(st.integers(8_000, 128_000)),
            draw(st.integers(32_000, 786_432)),
            draw(st.sampled_from([1, 2, 4, 8])),
            CATALOG.get(draw(st.sampled_from(GPU_MODELS))),
        )
        for i in range(count)
    ]
    return Cluster(nodes)


def placements(geometry: MigGeometry) -> st.SearchStrategy[list[MigPlacement]]:
    """Placements of any profile at any memory slice, the starts the profile does not allow
    (and those running past the last slice) included."""
    every = [MigPlacement(p, s) for p in geometry.profiles for s in range(geometry.memory_slices)]
    return st.lists(st.sampled_from(every), max_size=8)


@st.composite
def valid_layouts(draw: st.DrawFn, geometry: MigGeometry) -> MigLayout:
    """A valid layout: any subset of one of the geometry's maximal layouts (with +me and the
    double-memory 1g profiles reachable through ``placements`` filtered by validity too)."""
    if draw(st.booleans()):
        maximal = draw(st.sampled_from(geometry.enumerate_maximal()))
        kept = draw(st.lists(st.sampled_from(maximal.placements), unique=True)) if (
            maximal.placements) else []
        return geometry.layout(kept)
    chosen: list[MigPlacement] = []
    for placement in draw(placements(geometry)):
        if geometry.can_add(MigLayout(tuple(chosen)), placement):
            chosen.append(placement)
    return geometry.layout(chosen)


def demands(rates: list[float]) -> st.SearchStrategy[float]:
    """Any demand, or exactly k instances' worth of one profile's rate (a boundary: k of
    that profile serve it with nothing to spare)."""
    usable = [r for r in rates if r > 0]
    exact = st.builds(lambda r, k: r * k, st.sampled_from(usable), st.integers(1, 6))
    return st.one_of(st.floats(0, 3000), exact)
