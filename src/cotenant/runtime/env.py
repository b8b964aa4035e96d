"""The runtime's environment: how the agent turns it on in a workload, and how it reads it.

The agent starts a workload with ``COTENANT_PRIORITY_ROLE`` (``hp`` or ``be``), the board of
its GPU (``COTENANT_PRIORITY_BOARD``), the settings, and the startup hook's directory first on
``PYTHONPATH``: every Python process of the workload - a launcher's workers too, which inherit
the environment - runs the hook at startup (:mod:`._hook.sitecustomize`) and the application
is not changed. Without ``COTENANT_PRIORITY_ROLE`` the hook does nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from .gate import GateSettings

ROLE = "COTENANT_PRIORITY_ROLE"
BOARD = "COTENANT_PRIORITY_BOARD"
SETTINGS = {"lease_s": "COTENANT_PRIORITY_LEASE_S", "max_hold_s": "COTENANT_PRIORITY_MAX_HOLD_S",
            "floor": "COTENANT_PRIORITY_FLOOR", "poll_s": "COTENANT_PRIORITY_POLL_S"}
ROLES = ("hp", "be")
HOOK_DIR = Path(__file__).resolve().parent / "_hook"
"""The directory of the startup hook (``sitecustomize.py``), put first on ``PYTHONPATH``."""


def runtime_env(role: str, board: Path, settings: GateSettings,
                pythonpath: str | None = None) -> dict[str, str]:
    """The variables that turn the runtime on in a workload as ``role`` on ``board``;
    ``pythonpath``: the workload's own ``PYTHONPATH``, kept after the hook's directory."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")
    path = str(HOOK_DIR) if not pythonpath else f"{HOOK_DIR}{os.pathsep}{pythonpath}"
    env = {ROLE: role, BOARD: str(board), "PYTHONPATH": path}
    env.update({var: repr(float(getattr(settings, name))) for name, var in SETTINGS.items()})
    return env


def settings_from_env(environ: Mapping[str, str]) -> GateSettings:
    """The settings in ``environ`` (the defaults where a variable is absent); a ValueError
    naming the variable where one is not a valid number."""
    values: dict[str, float] = {}
    for name, var in SETTINGS.items():
        text = environ.get(var)
        if text is None:
            continue
        try:
            values[name] = float(text)
        except ValueError:
            raise ValueError(f"{var}={text!r:.40} is not a number") from None
    try:
        return GateSettings(**values)
    except ValueError as exc:
        raise ValueError(f"COTENANT_PRIORITY_*: {exc}") from None
