"""``cotenant trace``: check an openb trace, and fit synthetic parameters to one."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cotenant.errors import InputError
from cotenant.traces.openb import load_nodes, load_pods
from cotenant.traces.synthetic import fit_openb

app = typer.Typer(help="Inspect and fit cluster traces.", no_args_is_help=True)


@app.command()
def check(
    pods: Annotated[Path, typer.Argument(help="openb pod list CSV")],
    nodes: Annotated[Path | None, typer.Option(help="openb node list CSV")] = None,
) -> None:
    """Validate a trace strictly and print what it holds."""
    pod_list = load_pods(pods)
    gpu_milli = sum(p.shape.gpu_milli_total for p in pod_list)
    typer.echo(f"{pods.name}: {len(pod_list)} pods, GPU demand {gpu_milli / 1000:.1f} GPUs")
    if nodes is not None:
        every_node = load_nodes(nodes, gpu_only=False)
        gpus = sum(n.gpu_count for n in every_node)
        gpu_nodes = sum(1 for n in every_node if n.gpu_count)
        typer.echo(
            f"{nodes.name}: {gpu_nodes} GPU nodes, {gpus} GPUs, "
            f"{len(every_node) - gpu_nodes} CPU-only nodes (left out of simulations)"
        )
        typer.echo(f"demand / capacity: {gpu_milli / (1000 * gpus):.1%}")


@app.command()
def fit(
    pods: Annotated[Path, typer.Argument(help="openb pod list CSV")],
    nodes: Annotated[Path, typer.Argument(help="openb node list CSV")],
    out: Annotated[Path, typer.Option(help="where to write the parameters (JSON)")],
) -> None:
    """Fit synthetic-workload parameters to a trace (what the embedded default was made by)."""
    params = fit_openb(load_pods(pods), load_nodes(nodes), f"{pods.name} + {nodes.name}")
    try:
        out.write_text(params.to_json(), encoding="utf-8")
    except OSError as exc:
        raise InputError(str(out), f"cannot write parameters: {exc.strerror}") from exc
    typer.echo(f"wrote {out}: {len(params.shapes)} pod shapes, {len(params.node_types)} node types")
