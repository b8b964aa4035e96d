"""The generated CLI reference: every command of the app, with its help and its options."""

from __future__ import annotations

import re

import typer.main

from cotenant.cli.main import app
from cotenant.cli.reference import cli_reference


def commands(command: object, path: tuple[str, ...] = ("cotenant",)) -> list[tuple[str, ...]]:
    """Every command path of the app, walked through its own groups."""
    found = [path]
    listing = getattr(command, "list_commands", None)
    if listing is None:
        return found
    ctx = command.context_class(command, info_name=path[-1])  # type: ignore[attr-defined]
    for name in listing(ctx):
        found += commands(command.get_command(ctx, name), (*path, name))  # type: ignore[attr-defined]
    return found


def test_every_command_has_a_section_with_its_usage() -> None:
    page = cli_reference(app)
    paths = commands(typer.main.get_command(app))
    assert ("cotenant", "simulate", "colocation") in paths
    assert ("cotenant", "agent", "run") in paths
    for path in paths:
        name = " ".join(path)
        assert re.search(rf"^#+ {re.escape(name)}$", page, re.M), name
        assert f"\n{name} [OPTIONS]" in page, name


def test_options_carry_their_help_and_default() -> None:
    page = cli_reference(app)
    seeds = next(line for line in page.splitlines() if line.startswith("| `--seeds"))
    assert "number of seeds" in seeds
    assert "default: 10" in seeds
    assert "| `--frontier` |" in page


def test_angle_brackets_outside_code_are_escaped() -> None:
    """A table cell's `<state-dir>` would otherwise be read as an HTML tag and vanish."""
    page = cli_reference(app)
    cells = [line for line in page.splitlines() if line.startswith("| ")]
    for line in cells:
        outside = "".join(line.split("`")[0::2])
        assert "<" not in outside, line
        assert ">" not in outside, line
