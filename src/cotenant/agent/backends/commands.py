"""What a workload's command line may be, and what a failure to start it means.

An argv is a list (never a string a shell would read), its program named, and every item
something ``exec`` can pass: no NUL, and text the file-system encoding can carry (JSON can
spell a lone surrogate, which has no bytes). A start that fails is the workload's problem,
reported with its reason, not the agent's crash: most errors stay until someone changes
something (:class:`PermanentError`); a host short of processes, memory or files may pass
(:class:`TemporaryError`).
"""

from __future__ import annotations

import errno
import os

from cotenant.errors import CotenantError, InputError, PermanentError, TemporaryError


def check_argv(argv: object, where: str = "argv") -> list[str]:
    """``argv`` as a non-empty list of strings, or an :class:`InputError`. A single string is
    refused: it would need a shell (or a split) to become a command line."""
    if not isinstance(argv, list | tuple) or not argv:
        raise InputError(where, "must be a non-empty list of strings, not a command string",
                         hint='e.g. ["python", "serve.py", "--port", "8000"]')
    if not all(isinstance(a, str) for a in argv):
        raise InputError(where, "every item must be a string")
    if any("\0" in a for a in argv):
        raise InputError(where, "an item holds a NUL character, which exec cannot pass")
    if not argv[0]:
        raise InputError(where, "the program (the first item) is empty")
    for arg in argv:
        check_encodable(arg, where)
    return list(argv)


def check_encodable(text: str, where: str) -> str:
    """``text``, or an :class:`InputError` where the file-system encoding cannot carry it to
    exec (a lone surrogate such as ``"\\ud800"``, which JSON can spell)."""
    try:
        os.fsencode(text)
    except UnicodeEncodeError as exc:
        raise InputError(where, f"{text!r:.40} cannot be encoded for exec ({exc.reason})",
                         hint="pass only text the host's file-system encoding holds") from None
    return text


_RETRY = {errno.EAGAIN, errno.ENOMEM, errno.EMFILE, errno.ENFILE}
"""Start failures that may pass: no process, memory or file slot free just now."""


def start_error(program: str, exc: OSError | UnicodeEncodeError) -> CotenantError:
    """What the agent reports when ``program`` cannot be started: a :class:`TemporaryError`
    for a host short of processes, memory or files, else a :class:`PermanentError` that says
    why (as the exec, or the encoding of an argument or variable, gave it)."""
    if isinstance(exc, UnicodeEncodeError):
        return PermanentError(f"cannot start {program!r}: an argument or environment string "
                              f"cannot be encoded ({exc.reason})",
                              hint="pass only text the host's file-system encoding holds")
    if exc.errno in _RETRY:
        return TemporaryError(f"cannot start {program!r}: {exc.strerror}", delay_s=5.0)
    why = {errno.ENOENT: "not found", errno.EACCES: "permission denied",
           errno.ENOEXEC: "not a program (a script needs a #! line)"}.get(
               exc.errno or 0, exc.strerror or str(exc))
    return PermanentError(f"cannot start {program!r}: {why}")
