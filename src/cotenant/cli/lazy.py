"""Command groups whose commands are imported when they run, not when ``cotenant`` starts.

Each command lives in a module of its own (``cotenant.cli.simulate``, ``cotenant.cli.replay``)
that imports what it needs (numpy, pandas, matplotlib, a simulator) and exposes a typer app
``app``. A lazy group knows its commands by module and one line of help, so ``--help`` lists
them without importing any, and running one imports that module alone.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import typer
import typer.core
import typer.main


def load(name: str, module: str) -> Any:
    """The click command of ``module``'s typer app, named ``name``: the app's own command
    where its only command bears that name, else the app as a group (even of one command:
    ``cotenant plan mig``)."""
    sub: typer.Typer = importlib.import_module(module).app
    names = [c.name or (c.callback.__name__ if c.callback else "")
             for c in sub.registered_commands]
    if names == [name] and not sub.registered_groups and sub.registered_callback is None:
        return typer.main.get_command(sub)
    group = typer.main.get_group(sub)
    group.name = name
    return group


def lazy_group(commands: Mapping[str, tuple[str, str]]) -> type[typer.core.TyperGroup]:
    """A typer group class whose ``commands`` (name: (module, help line)) load when they run;
    ``--help`` lists them, in the order given, before the group's own commands."""

    class LazyGroup(typer.core.TyperGroup):
        listing = False

        def list_commands(self, ctx: Any) -> list[str]:
            return [*commands, *super().list_commands(ctx)]

        def get_command(self, ctx: Any, cmd_name: str) -> Any:
            if cmd_name not in commands:
                return super().get_command(ctx, cmd_name)
            module, line = commands[cmd_name]
            if self.listing:  # formatting --help: the line is all it shows
                return typer.core.TyperCommand(cmd_name, help=line)
            return load(cmd_name, module)

        def format_help(self, ctx: Any, formatter: Any) -> None:
            self.listing = True
            try:
                super().format_help(ctx, formatter)
            finally:
                self.listing = False

    return LazyGroup
