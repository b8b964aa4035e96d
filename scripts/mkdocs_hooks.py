"""MkDocs hook: the CLI reference page (``reference/cli.md``), generated from the typer app
when the site is built, so it always matches the commands (see ``cotenant.cli.reference``)."""

from __future__ import annotations

from typing import Any

from mkdocs.structure.files import File, Files

from cotenant.cli.main import app
from cotenant.cli.reference import cli_reference

PAGE = "reference/cli.md"


def on_files(files: Files, config: Any) -> Files:
    files.append(File.generated(config, PAGE, content=cli_reference(app)))
    return files
