"""The runtime in a workload process: read the environment, map the board, wait for torch.

:func:`activate` runs at startup (the ``sitecustomize`` hook). For ``hp`` it takes a lease on
the GPU's board and renews it whenever a module runs; for ``be`` it gates every operator
(:class:`~.gate.Gate`). torch is not imported here: importing it costs a second or more, and
most Python processes under a workload (a launcher, pip, a shell helper) never use it. The
hook goes in when the process imports torch (an import watcher on ``sys.meta_path``), or at
once if torch is already in.

A hook must never break the application: a bad setting or a board it cannot map is one line
on stderr (``cotenant runtime: ...``) and the process runs ungated.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

from . import torch_hook
from .env import BOARD, ROLE, ROLES, settings_from_env
from .gate import Gate, GateSettings
from .lease import Board, BoardError, HpLease

ACTIVE: Runtime | None = None
"""This process's runtime once :func:`activate` has made one (its gate's stats, for a report)."""


class Runtime:
    """One process's side of its GPU's board."""

    def __init__(self, role: str, board: Board, settings: GateSettings) -> None:
        self.role = role
        self.board = board
        self.settings = settings
        self.gate = Gate(board, settings) if role == "be" else None
        self._lease: HpLease | None = None
        self._no_slot = 0
        self.installed: Any = None

    def touch(self) -> None:
        """HP works now (the lease is this process's own: a forked child takes its own). It
        runs inside the application's forward, so it never raises: a board with no free
        slot, or one that was removed, replaced or cannot be opened when this process first
        claims a slot, is said once on stderr, and this process then holds no BE."""
        lease = self._lease
        if lease is None or lease.pid != os.getpid():
            if self._no_slot == os.getpid():
                return
            try:
                lease = self._lease = HpLease(self.board, self.settings.lease_s)
            except (BoardError, OSError) as exc:
                self._no_slot = os.getpid()
                _warn(f"{exc}; this process holds no best-effort work (it runs ungated)")
                return
        lease.touch()

    def release(self) -> None:
        if self._lease is not None and self._lease.pid == os.getpid():
            self._lease.release()

    def install_torch(self) -> None:
        """Put the hook into torch (on the main thread: a BE mode is thread-local)."""
        if self.gate is not None:
            if threading.current_thread() is not threading.main_thread():
                _warn("torch was imported off the main thread; this process runs ungated")
                return
            self.installed = torch_hook.install_be(self.gate.check)
        else:
            self.installed = torch_hook.install_hp(self.touch)
            atexit.register(self.release)


def activate(environ: Mapping[str, str] = os.environ) -> Runtime | None:
    """The runtime that ``environ`` asks for, its torch hook in or waiting for torch; None
    where it asks for none or cannot have one (said on stderr)."""
    role = environ.get(ROLE)
    if not role:
        return None
    try:
        if role not in ROLES:
            raise ValueError(f"{ROLE}={role!r:.20} is not one of {', '.join(ROLES)}")
        if not environ.get(BOARD):
            raise ValueError(f"{BOARD} is not set")
        runtime = Runtime(role, Board(environ[BOARD]), settings_from_env(environ))
    except (ValueError, OSError, BoardError) as exc:
        _warn(f"{exc}; this process runs ungated")
        return None
    if "torch" in sys.modules:
        runtime.install_torch()
    else:
        sys.meta_path.insert(0, _TorchWatcher(runtime))
    global ACTIVE  # noqa: PLW0603 - one runtime per process, by design
    ACTIVE = runtime
    return runtime


def _warn(text: str) -> None:
    sys.stderr.write(f"cotenant runtime: {text}\n")


class _TorchWatcher(MetaPathFinder):
    """Finds nothing itself; when ``torch`` is imported it wraps torch's loader so the hook
    goes in once torch has loaded, and steps out of ``sys.meta_path``."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname != "torch":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec: ModuleSpec | None = (find(fullname, path, target) if find is not None
                                       else None)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _Then(spec.loader, self.runtime.install_torch)
                return spec
        return None


class _Then(Loader):
    """``loader``, then ``after()`` once the module has run."""

    def __init__(self, loader: Loader, after: Any) -> None:
        self.loader = loader
        self.after = after

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        try:
            self.after()
        except Exception as exc:  # the hook must never break the application
            _warn(f"could not hook torch ({type(exc).__name__}: {exc}); this process runs "
                  "ungated")
