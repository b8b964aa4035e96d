"""``cotenant mig``: MIG profiles and layouts from the GPU catalog; apply and export a node's
layouts through an agent backend (``nvml`` on the host, or a fresh ``fake`` node to try it)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
import yaml
from rich.console import Console

from cotenant.agent.backends import BACKEND_NAMES, open_backend
from cotenant.agent.mig import MigManager
from cotenant.cli.checks import file_option, finite
from cotenant.errors import NotSupportedError, UnknownNameError
from cotenant.model.gpu import CATALOG
from cotenant.model.mig import MigGeometry
from cotenant.report.output import write_text_atomic
from cotenant.report.tables import fitted_tables

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
    head = ["profile", "NVML id", "compute", "memory slices", "MiB", "SMs", "starts", "max"]
    body = [
        [p.name, str(p.nvml_id), str(p.compute_slices), str(p.memory_slices), str(p.memory_mib),
         str(p.sms), ",".join(map(str, p.starts)), str(p.max_count)]
        for p in _geometry(gpu).profiles
    ]
    console = Console()
    console.print(*fitted_tables(head, body, console.width, left=("profile", "starts"),
                                 title=f"MIG profiles of {CATALOG.get(gpu).name}"))


@app.command()
def layouts(
    gpu: GpuArg,
    all_profiles: Annotated[bool, typer.Option(
        "--all", help="over every profile (1g.10gb, +me ...), not one per compute size")] = False,
) -> None:
    """Every maximal valid layout (one profile per compute size, or with --all every
    profile); a * marks a layout with a driver note (see cotenant mig validate)."""
    geometry = _geometry(gpu)
    found = (geometry.maximal_layouts(tuple(p.name for p in geometry.profiles))
             if all_profiles else tuple(geometry.enumerate_maximal()))
    for layout in found:
        slices = "-".join(map(str, layout.compute_slices()))
        mark = " *" if geometry.notes(layout) else ""
        typer.echo(f"{slices:<16} {layout}{mark}")
    typer.echo(f"{len(found)} layouts")


@app.command()
def validate(
    gpu: GpuArg,
    layout: Annotated[str, typer.Argument(help='e.g. "3g.40gb@0,2g.20gb@4,1g.10gb@6"')],
) -> None:
    """Check a layout against the model's placement rules (exit 2 with the rule if invalid)."""
    geometry = _geometry(gpu)
    parsed = geometry.parse(layout)
    typer.echo(f"valid: {parsed}")
    for note in geometry.notes(parsed):
        typer.echo(f"note: {note}")


Backend = Annotated[str, typer.Option(help=f"one of: {', '.join(BACKEND_NAMES)}")]
FakeGpus = Annotated[str, typer.Option(help="fake backend: MODEL:COUNT")]
StateDir = Annotated[Path, typer.Option(help="state directory (nvml backend logs)")]


def _manager(backend: str, gpus: str, state_dir: Path, grace_s: float = 10.0) -> MigManager:
    if backend not in BACKEND_NAMES:
        raise UnknownNameError("backend", backend, BACKEND_NAMES)
    # the fake stands for a node whose operator has switched MIG mode on
    node = open_backend(backend, gpus=gpus, state_dir=state_dir, fake_mig=True)
    return MigManager(node, grace_s=grace_s)


@app.command()
def apply(
    layout: Annotated[str, typer.Argument(help='e.g. "3g.20gb,2g.10gb,1g.5gb,1g.5gb"')],
    gpu: Annotated[int, typer.Option(help="GPU index on this node")],
    backend: Backend = "nvml",
    gpus: FakeGpus = "A100-40GB:1",
    state_dir: StateDir = Path(".cotenant"),
    drain: Annotated[bool, typer.Option(help="stop the GPU's processes first")] = False,
    grace_s: Annotated[
        float, typer.Option(min=0.0, callback=finite,
                            help="--drain: seconds from SIGTERM to SIGKILL")
    ] = 10.0,
) -> None:
    """Apply a MIG layout to one GPU (a no-op when it is already there; MIG mode must be on).

    The fake backend starts from an empty fake node each time: it shows what would be done."""
    status = _manager(backend, gpus, state_dir, grace_s).apply(gpu, layout, drain=drain)
    what = "changed" if status.changed else "already applied"
    typer.echo(f"GPU {gpu}: {status.state.value} {status.layout} ({what})")


@app.command()
def export(
    backend: Backend = "nvml",
    gpus: FakeGpus = "A100-40GB:1",
    state_dir: StateDir = Path(".cotenant"),
    out: Annotated[
        Path | None, typer.Option(callback=file_option, help="write the YAML here")
    ] = None,
) -> None:
    """Export every GPU's current layout as a mig-parted config (``cotenant-current``)."""
    text = yaml.safe_dump(_manager(backend, gpus, state_dir).export(), sort_keys=False)
    if out is None:
        typer.echo(text, nl=False)
    else:
        write_text_atomic(out, text)
        typer.echo(f"wrote {out}")
