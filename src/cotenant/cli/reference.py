"""The CLI reference as Markdown, generated from the typer app itself.

The documentation site builds ``reference/cli.md`` from this at build time (a MkDocs hook,
``scripts/mkdocs_hooks.py``), so the page can never disagree with the commands: every
command, its help text, its arguments and options with their defaults, in the order
``cotenant --help`` lists them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import typer
import typer.main

HEADER = """# CLI reference

Generated from the command-line app when the site is built; `cotenant COMMAND --help` prints
the same. Every command exits 0 on success, 2 with one line on bad input or usage, and 1 with
one line when the system refuses a file (see [Errors and input checks](../concepts/errors.md)).
"""


def cli_reference(app: typer.Typer, name: str = "cotenant") -> str:
    """The Markdown page for ``app``: one section per command, groups before their commands."""
    root = typer.main.get_command(app)
    parts = [HEADER]
    for path, command, ctx in _walk(root, _context(root, name, None), [name]):
        parts.append(_section(path, command, ctx))
    return "\n".join(parts)


# typer's command objects are click's (older typer) or its own copy of click (newer): they are
# used here only through the methods both share.
def _context(command: Any, name: str, parent: Any) -> Any:
    return command.context_class(command, info_name=name, parent=parent)


def _subcommands(command: Any, ctx: Any) -> list[tuple[str, Any]]:
    if not hasattr(command, "list_commands"):
        return []
    found = ((n, command.get_command(ctx, n)) for n in command.list_commands(ctx))
    return [(n, c) for n, c in found if c is not None and not c.hidden]


def _walk(command: Any, ctx: Any, path: list[str]) -> Iterator[tuple[list[str], Any, Any]]:
    yield path, command, ctx
    for sub, child in _subcommands(command, ctx):
        yield from _walk(child, _context(child, sub, ctx), [*path, sub])


def _section(path: list[str], command: Any, ctx: Any) -> str:
    level = "#" * min(len(path) + 1, 4)
    lines = [f"{level} {' '.join(path)}", ""]
    help_text = _markdown(command.help or command.short_help or "")
    if help_text:
        lines += [help_text, ""]
    usage = " ".join(command.collect_usage_pieces(ctx))
    lines += ["```", f"{' '.join(path)} {usage}".rstrip(), "```", ""]
    subs = _subcommands(command, ctx)
    if subs:
        lines += ["| command | what it does |", "|---|---|"]
        lines += [f"| `{n}` | {_cell(c.get_short_help_str(limit=300))} |" for n, c in subs]
        lines.append("")
    records = [_record(p, ctx) for p in command.get_params(ctx)
               if not getattr(p, "hidden", False) and p.name != "help"]
    if records:
        lines += ["| argument or option | what it sets |", "|---|---|"]
        lines += [f"| `{flags}` | {_cell(_markdown(text))} |" for flags, text in records]
        lines.append("")
    return "\n".join(lines)


def _record(param: Any, ctx: Any) -> tuple[str, str]:
    """A parameter's flags (with its metavar) and help (with its default and range)."""
    record = param.get_help_record(ctx)
    if record is None:  # click's arguments have none
        return param.human_readable_name, getattr(param, "help", None) or ""
    flags, text = record
    return flags, text


def _markdown(text: str) -> str:
    """Docstring text as Markdown: reST ``literals`` become `code`, paragraphs kept."""
    text = re.sub(r"``([^`]+)``", r"`\1`", text)
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text.strip())]
    return "\n\n".join(p for p in paragraphs if p)


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell (outside code spans, <> would read as HTML)."""
    out = []
    for i, piece in enumerate(text.split("`")):
        out.append(piece.replace("<", "&lt;").replace(">", "&gt;") if i % 2 == 0 else piece)
    return "`".join(out).replace("|", "\\|").replace("\n", " ")
