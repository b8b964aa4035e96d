"""GPU packings as paths in a graph: the arc-flow model of bin packing.

One GPU's 1000 milli become the vertices 0..top of a grid (``quantum`` milli apart, the largest
step that divides every pod size and 1000); a fractional pod of size s is an arc from v to
v + s, and a GPU's set of pods is a path from 0 that ends where the GPU's used milli does
(Valério de Carvalho, "Exact solution of bin-packing problems using column generation and
branch-and-bound", Annals of Operations Research 86, 1999). Only paths whose sizes do not
increase are kept, so each set of pods has exactly one path. A flow on this graph describes how
many GPUs use each packing pattern; its linear relaxation is as strong as Gilmore and Gomory's
pattern formulation, with far fewer variables than there are patterns.

Both the offline optimum (:mod:`.optimum`) and the pattern prices of ``cotenant-pack``
(:mod:`.prices`) are built on it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import reduce

from cotenant.model.workload import MILLI_PER_GPU


def quantum_of(sizes: Iterable[int]) -> int:
    """The grid step: the greatest common divisor of the sizes and 1000."""
    return reduce(math.gcd, sizes, MILLI_PER_GPU)


@dataclass(frozen=True)
class ArcFlowGraph:
    """The reduced graph for a set of pod sizes: item arcs (start, size) in grid units, and
    the vertices strictly between 0 and ``top`` that some path reaches."""

    quantum: int
    top: int
    arcs: tuple[tuple[int, int], ...]
    inner: tuple[int, ...]

    @staticmethod
    def build(sizes_milli: Iterable[int], quantum: int) -> ArcFlowGraph:
        """The graph of ``sizes_milli`` (each a multiple of ``quantum``, under 1000)."""
        top = MILLI_PER_GPU // quantum
        reach = [False] * (top + 1)
        reach[0] = True
        arcs: list[tuple[int, int]] = []
        for v in sorted({s // quantum for s in sizes_milli}, reverse=True):
            for i in range(top - v + 1):  # ascending, so a size may repeat along a path
                if reach[i]:
                    arcs.append((i, v))
                    reach[i + v] = True
        inner = tuple(i for i in range(1, top) if reach[i])
        return ArcFlowGraph(quantum, top, tuple(arcs), inner)
