"""``cotenant policies``: the registered placement policies."""

from __future__ import annotations

import typer

from cotenant.policies.placement import PLACEMENT

app = typer.Typer(help="List the registered placement policies.")


@app.command()
def policies() -> None:
    """List the registered placement policies."""
    for name in PLACEMENT.names():
        typer.echo(name)
