"""Checks on command-line values that typer's types do not make, done before any work starts.

typer parses ``inf`` and ``nan`` as floats, and a report path is only tried once a run that may
take minutes has finished; both used to end in a traceback. Each check here fails with an
:class:`InputError` naming the option and the rule, which ``cotenant`` prints as one line.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TypeVar

import typer

from cotenant.errors import InputError
from cotenant.report.output import probe_directory

T = TypeVar("T")


def finite(param: typer.CallbackParam, value: T) -> T:
    """typer callback: every float in ``value`` (a float, a list of floats, or None) is finite."""
    for item in value if isinstance(value, list | tuple) else (value,):
        if isinstance(item, float) and not math.isfinite(item):
            raise InputError(option_name(param), f"{item} must be a finite number")
    return value


def once_each(names: list[str], option: str) -> list[str]:
    """``names`` (canonical policy names) when none repeats: a policy given twice would run
    twice and be reported as one policy of two runs."""
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InputError(option, f"{', '.join(twice)} given twice", hint="give each once")
    return names


def option_name(param: typer.CallbackParam) -> str:
    """The option as the user typed it: its longest flag, or its name."""
    return max(param.opts, key=len) if param.opts else str(param.name)


def out_dir(path: Path | None, option: str = "--out") -> Path | None:
    """``path`` when a report directory can be made there: an existing directory, or a path
    below a directory this process may write in."""
    if path is None:
        return None
    dangling(path, option)
    if path.exists():
        if not path.is_dir():
            raise InputError(option, f"{path} exists and is not a directory",
                             hint="name a directory; a missing one is created")
        writable(path, option)
        return path
    writable(existing_ancestor(path, option), option)
    return path


def out_file(path: Path | None, option: str) -> Path | None:
    """``path`` when a file can be written there: not a directory, in an existing directory
    this process may write in."""
    if path is None:
        return None
    dangling(path, option)
    if path.is_dir():
        raise InputError(option, f"{path} is a directory", hint="name a file")
    if path.exists():  # written in place: the directory it is in need not be writable
        if not os.access(path, os.W_OK):
            raise InputError(option, f"{path} is not writable")
        return path
    parent = path.parent
    if not parent.is_dir():
        state = "is not a directory" if parent.exists() else "does not exist"
        raise InputError(option, f"{parent} {state}",
                         hint="name a file in an existing directory")
    writable(parent, option)
    return path


def dangling(path: Path, option: str) -> None:
    """An error when ``path`` is a symbolic link to nothing (it cannot be made or written)."""
    if path.is_symlink() and not path.exists():
        raise InputError(option, f"{path} is a symbolic link to {os.readlink(path)}, which "
                         "does not exist")


def existing_ancestor(path: Path, option: str) -> Path:
    """The nearest ancestor of ``path`` that exists; an error when it is not a directory."""
    for ancestor in path.absolute().parents:
        if ancestor.exists():
            if not ancestor.is_dir():
                raise InputError(option, f"{ancestor} is not a directory, so {path} cannot be "
                                 "made")
            return ancestor
    return Path(path.absolute().anchor)


def writable(directory: Path, option: str) -> None:
    """An error unless a file can be made in ``directory``: tried, not guessed from its mode
    (root may write anywhere by the mode bits, yet not in /proc or on a read-only mount)."""
    try:
        probe_directory(directory)
    except OSError as exc:
        raise InputError(option, f"cannot write in {directory}: {exc.strerror or exc}",
                         hint="choose another place") from None


def dir_option(param: typer.CallbackParam, value: Path | None) -> Path | None:
    """typer callback: :func:`out_dir` on the option's value."""
    return out_dir(value, option_name(param))


def file_option(param: typer.CallbackParam, value: Path | None) -> Path | None:
    """typer callback: :func:`out_file` on the option's value."""
    return out_file(value, option_name(param))
