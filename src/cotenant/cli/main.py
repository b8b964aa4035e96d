"""Entry point: ``cotenant``. Every :class:`CotenantError` and every usage error (an unknown
option, a value out of range) becomes one line on stderr and exit code 2; a file the system
refuses (no space, no permission) one line and exit code 1. No traceback reaches the user for
bad input.

The command groups are loaded when they run, not when ``cotenant`` starts
(:mod:`cotenant.cli.lazy`): ``cotenant --help`` lists them from :data:`COMMANDS` without
importing any, so it and ``cotenant version`` start in a fraction of the time.
"""

from __future__ import annotations

import sys
from typing import NoReturn

import typer

from cotenant import __version__
from cotenant.cli.lazy import lazy_group
from cotenant.errors import CotenantError

COMMANDS: dict[str, tuple[str, str]] = {  # in the order --help lists them
    "policies": ("cotenant.cli.policies", "List the registered placement policies."),
    "simulate": ("cotenant.cli.simulate", "Run the trace-driven simulator."),
    "sweep": ("cotenant.cli.sweep",
              "Sweeps: many runs of a simulator, here or on a Ray cluster."),
    "trace": ("cotenant.cli.trace", "Inspect and fit cluster traces."),
    "mig": ("cotenant.cli.mig", "MIG profiles and layouts."),
    "plan": ("cotenant.cli.plan", "Plan GPU partitions."),
    "agent": ("cotenant.cli.agent", "The node agent: MPS, MIG, workloads, metrics."),
    "perf": ("cotenant.cli.perf", "Inspect the performance models."),
    "k8s": ("cotenant.cli.k8s", "Kubernetes: extender, device plugin, MIG controller."),
}
"""Each command group: its module (with a typer app ``app``) and the one line ``cotenant
--help`` shows for it; a test checks the line is the group's own."""


app = typer.Typer(
    name="cotenant",
    cls=lazy_group(COMMANDS),
    help="GPU sharing for deep-learning clusters: placement, co-location, MIG, simulation.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """GPU sharing for deep-learning clusters: placement, co-location, MIG, simulation."""


@app.command()
def version() -> None:
    """Print cotenant's version."""
    typer.echo(__version__)


def main(argv: list[str] | None = None) -> None:
    """Run the CLI and exit: 0 when it succeeds, 2 with one line for bad input or usage, 1 with
    one line when the system refuses a file."""
    try:
        result = app(args=argv, prog_name="cotenant", standalone_mode=False)
    except CotenantError as exc:
        fail(exc.one_line(), exc.exit_code)
    except USAGE_ERROR as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # a bare group: its help, as typer shows it
            help_text = str(getattr(exc, "format_message", str)())  # rich printed it already
            if help_text.strip():
                typer.echo(help_text, err=True)
            sys.exit(2)
        fail(usage_line(exc), 2)
    except typer.Abort:
        fail("aborted", 1)
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else "a file could not be written or read: "
        fail(f"{where}{exc.strerror or exc}", 1)
    sys.exit(result if isinstance(result, int) else 0)  # typer.Exit(code) returns its code


# typer ships its own click since 0.2x and re-exports only BadParameter, whose base is the
# usage error every parser failure raises.
USAGE_ERROR: type[Exception] = next(
    c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError"
)


def usage_line(exc: Exception) -> str:
    """A usage error on one line: the command, the message and where to read more."""
    ctx = getattr(exc, "ctx", None)
    path = ctx.command_path if ctx is not None else "cotenant"
    message = " ".join(str(getattr(exc, "format_message", exc.__str__)()).split())
    given = rejected_input(exc)
    param = getattr(exc, "param", None)
    if given is not None and given.strip().lower().lstrip("+-") in NOT_FINITE and param:
        # typer checks a range before our callback sees the value: "nan <= 100" fails first
        message = f"Invalid value for {max(param.opts, key=len)!r}: {given} is not a finite number"
    command = path.partition(" ")[2]  # the line already starts with "cotenant: "
    return f"{command + ': ' if command else ''}{message} (hint: see {path} --help)"


NOT_FINITE = ("nan", "inf", "infinity")


def rejected_input(exc: Exception) -> str | None:
    """The text typer refused, where its validator (pydantic) recorded it; else None."""
    errors = getattr(exc.__cause__, "errors", None)
    try:
        first = errors()[0] if callable(errors) else None
    except (TypeError, IndexError):
        return None
    value = first.get("input") if isinstance(first, dict) else None
    return value if isinstance(value, str) else None


def fail(line: str, code: int) -> NoReturn:
    typer.echo(f"cotenant: error: {line}", err=True)
    sys.exit(code)


if __name__ == "__main__":
    main()
