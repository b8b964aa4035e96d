"""Entry point: ``cotenant``. Every :class:`CotenantError` becomes one line on stderr and exit
code 2, and typer reports usage errors with exit code 2; no traceback reaches the user for bad
input."""

from __future__ import annotations

import sys

import typer

from cotenant import __version__
from cotenant.cli import agent, mig, perf, plan, simulate, trace
from cotenant.errors import CotenantError
from cotenant.policies.placement import PLACEMENT

app = typer.Typer(
    name="cotenant",
    help="GPU sharing for deep-learning clusters: placement, co-location, MIG, simulation.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(simulate.app, name="simulate")
app.add_typer(trace.app, name="trace")
app.add_typer(mig.app, name="mig")
app.add_typer(plan.app, name="plan")
app.add_typer(agent.app, name="agent")
app.add_typer(perf.app, name="perf")


@app.command()
def policies() -> None:
    """List the registered placement policies."""
    for name in PLACEMENT.names():
        typer.echo(name)


@app.command()
def version() -> None:
    """Print cotenant's version."""
    typer.echo(__version__)


def main(argv: list[str] | None = None) -> None:
    """Run the CLI. Usage errors are typer's (exit 2); bad input exits 2 with one line."""
    try:
        app(args=argv)
    except CotenantError as exc:
        typer.echo(f"cotenant: error: {exc.one_line()}", err=True)
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
