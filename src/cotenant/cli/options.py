"""Typer option types shared by the ``simulate`` commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cotenant.cli.checks import dir_option

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
