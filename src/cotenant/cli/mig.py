"""``cotenant mig``: MIG profiles and layouts from the GPU catalog."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from cotenant.errors import NotSupportedError
from cotenant.model.gpu import CATALOG
from cotenant.model.mig import MigGeometry

app = typer.Typer(help="MIG profiles and layouts.", no_args_is_help=True)
GpuArg = Annotated[str, typer.Argument(help="GPU model, e.g. A100-40GB, H100-80GB, A30")]


def _geometry(gpu: str) -> MigGeometry:
    model = CATALOG.get(gpu)
    if model.mig is None:
        raise NotSupportedError("MIG", model.name)
    return model.mig


@app.command()
def profiles(gpu: GpuArg) -> None:
    """List a GPU model's MIG profiles with their placement rules."""
    table = Table(title=f"MIG profiles of {CATALOG.get(gpu).name}")
    for col in ("profile", "NVML id", "compute", "memory slices", "MiB", "SMs", "starts", "max"):
        table.add_column(col)
    for p in _geometry(gpu).profiles:
        table.add_row(
            p.name, str(p.nvml_id), str(p.compute_slices), str(p.memory_slices),
            str(p.memory_mib), str(p.sms), ",".join(map(str, p.starts)), str(p.max_count),
        )
    Console().print(table)


@app.command()
def layouts(gpu: GpuArg) -> None:
    """Every maximal valid layout (one profile per compute size)."""
    found = _geometry(gpu).enumerate_maximal()
    for layout in found:
        slices = "-".join(map(str, layout.compute_slices()))
        typer.echo(f"{slices:<16} {layout}")
    typer.echo(f"{len(found)} layouts")


@app.command()
def validate(
    gpu: GpuArg,
    layout: Annotated[str, typer.Argument(help='e.g. "3g.40gb@0,2g.20gb@4,1g.10gb@6"')],
) -> None:
    """Check a layout against the model's placement rules (exit 2 with the rule if invalid)."""
    parsed = _geometry(gpu).parse(layout)
    typer.echo(f"valid: {parsed}")
