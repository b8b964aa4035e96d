"""Typer option types shared by the ``simulate`` commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cotenant.cli.checks import dir_option, once_each
from cotenant.policies.placement import PLACEMENT

DEFAULT_POLICIES = [
    "random", "dot-product", "gpu-clustering", "gpu-packing", "best-fit", "fgd", "cotenant-pack"
]
MAX_SYNTHETIC = 1_000_000  # pods or nodes drawn: over 100x openb's 8,152 pods and 1,213 nodes

PodsOpt = Annotated[
    Path | None, typer.Option("--pods", help="openb pod list CSV (default: embedded synthetic)")
]
NodesOpt = Annotated[
    Path | None, typer.Option("--nodes", help="openb node list CSV (default: beside --pods)")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="print a JSON summary on stdout")]
OutOpt = Annotated[
    Path | None, typer.Option("--out", callback=dir_option,
                              help="report directory (HTML + PNG); none if omitted")
]
PolicyOpt = Annotated[
    list[str] | None,
    typer.Option("--policy", "-p", help="placement policy, repeatable (default: all seven)"),
]
ParamsOpt = Annotated[
    Path | None, typer.Option("--params", help="fitted synthetic parameters (JSON)")
]


def placement_policies(names: list[str] | None) -> list[str]:
    """The placement policies asked for (their canonical names), each once."""
    return once_each([PLACEMENT.canonical(n) for n in (names or DEFAULT_POLICIES)], "--policy")
