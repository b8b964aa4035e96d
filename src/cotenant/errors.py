"""One exception hierarchy for cotenant, each error carrying a hint on how to fix it.

The CLI turns every :class:`CotenantError` into a single line on stderr and exit code 2, so a
user never sees a traceback for bad input. Messages name the place (file, line, column, field)
and the rule that was broken.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any


class CotenantError(Exception):
    """Root of every error cotenant raises on purpose."""

    exit_code: int = 2

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        """The message and its fix hint, on one line."""
        text = self.message.replace("\n", " ")
        return f"{text} (hint: {self.hint})" if self.hint else text

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its arguments and attributes, not rebuilt through ``__init__`` (whose
        parameters differ by class): an error raised in a solver's child process comes back
        to the parent as itself."""
        return _restore, (type(self), self.args, dict(self.__dict__))


def _restore(cls: type[CotenantError], args: tuple[Any, ...],
             state: dict[str, Any]) -> CotenantError:
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class InputError(CotenantError):
    """Bad input data: a malformed trace row, an invalid spec, a wrong type.

    ``where`` names the place, e.g. ``pods.csv:17:gpu_milli``.
    """

    def __init__(self, where: str, rule: str, *, hint: str | None = None) -> None:
        super().__init__(f"{where}: {rule}", hint=hint)
        self.where = where
        self.rule = rule


def check_seconds(value: float, where: str, *, positive: bool = False) -> float:
    """``value`` if it is a finite number of seconds, >= 0 (> 0 when ``positive``); else an
    :class:`InputError` at ``where``."""
    if not (math.isfinite(value) and (value > 0.0 if positive else value >= 0.0)):
        bound = "> 0" if positive else ">= 0"
        raise InputError(where, f"{value:g} s must be a finite number {bound}")
    return value


class UnknownNameError(CotenantError):
    """A name looked up in a registry or catalog that does not exist."""

    def __init__(self, kind: str, name: str, valid: Iterable[str], where: str = "") -> None:
        choices = sorted(valid)
        place = f" in {where}" if where else ""
        super().__init__(
            f"unknown {kind} {name!r}{place}; valid: {', '.join(choices) or 'none'}",
        )
        self.kind = kind
        self.name = name
        self.valid = tuple(choices)


class InvalidLayoutError(CotenantError):
    """A MIG layout that breaks the GPU model's placement rules."""


class InfeasibleError(CotenantError):
    """A demand that no plan can meet; ``reasons`` says why, one per item."""

    def __init__(self, message: str, reasons: Sequence[str] = ()) -> None:
        detail = f": {'; '.join(reasons)}" if reasons else ""
        super().__init__(f"{message}{detail}")
        self.reasons = tuple(reasons)


class NotSupportedError(CotenantError):
    """A backend or GPU model lacks a feature that was asked for."""

    def __init__(self, feature: str, subject: str) -> None:
        super().__init__(f"{subject} does not support {feature}")
        self.feature = feature
        self.subject = subject


class TemporaryError(CotenantError):
    """A side effect failed in a way that may pass: retry after ``delay_s`` seconds.

    NVML's ``NVML_ERROR_TIMEOUT``/``GPU_IS_LOST`` while resetting, an MPS server that refuses
    clients until its faulted ones exit, a busy device. The agent retries on a later tick.
    """

    def __init__(self, message: str, *, delay_s: float = 1.0, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.delay_s = delay_s


class PermanentError(CotenantError):
    """A side effect that will fail the same way again until someone changes something:
    no permission, no driver, an invalid argument. The agent reports it and does not retry."""
