"""A sweep executor over a Ray cluster: the same runs as the local pool, on more machines.

``RayExecutor("auto")`` joins the cluster this machine knows of (``RAY_ADDRESS``, or the one
``ray start`` left here) and starts a local one where there is none; ``"local"`` always
starts a new local one; anything else is a cluster's address (``ray://head:10001``,
``head:6379``). The shared inputs go into Ray's object store once (:func:`ray.put`), each run
is a task of one CPU, and results come back as tasks finish, in whatever order; a task that
raises, or whose worker dies, comes back as a
:class:`~cotenant.sim.sweep.executor.RunFailure` and the others go on. The nodes need
cotenant installed (the same version as here): the tasks are cotenant's own functions.

Ray is imported when an executor is made, never at import time, so cotenant works without
the ``ray`` extra.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Sequence
from types import ModuleType, TracebackType
from typing import Any, TypeVar

from cotenant.errors import CotenantError, InputError
from cotenant.sim.sweep.executor import Done, RunFailure, guarded, one_line, start_order

T = TypeVar("T")
R = TypeVar("R")


def import_ray() -> ModuleType:
    """The ``ray`` module, or a :class:`CotenantError` saying how to install it."""
    try:
        import ray  # noqa: PLC0415 - optional and heavy: only when a Ray executor is made
    except ImportError as exc:
        raise CotenantError("Ray is not installed", hint="pip install 'cotenant[ray]'") from exc
    module: ModuleType = ray  # typed the same whether or not Ray (and its stubs) is installed
    return module


REACH_TIMEOUT_S = 3.0
"""How long a cluster's address has to answer before ``--ray`` gives up on it."""


def cluster_address(address: str) -> str | None:
    """The ``host:port`` a Ray address points at (``auto`` follows ``RAY_ADDRESS``), or None
    where it starts a new local cluster (``local``, or ``auto`` without ``RAY_ADDRESS``)."""
    if address == "local":
        return None
    if address == "auto":
        address = os.environ.get("RAY_ADDRESS", "").strip()
        if not address or address in ("auto", "local"):
            return None
    return address


def check_reachable(address: str, timeout_s: float = REACH_TIMEOUT_S) -> None:
    """An :class:`InputError` naming ``address`` where nothing answers there within
    ``timeout_s`` (Ray itself retries an unreachable cluster for minutes)."""
    target = cluster_address(address)
    if target is None:
        return
    client = target.startswith("ray://")
    rest = target.removeprefix("ray://").split("/", 1)[0]
    host, colon, port_text = rest.rpartition(":")
    if not colon:
        host, port_text = rest, "10001" if client else "6379"
    host = host.strip("[]")
    if not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise InputError("--ray", f"{address!r} is not a cluster's address (host:port or "
                         "ray://host:port)", hint="auto, local, or e.g. ray://head:10001")
    try:
        with socket.create_connection((host, int(port_text)), timeout=timeout_s):
            pass
    except OSError as exc:
        reason = (f"no answer within {timeout_s:g} s" if isinstance(exc, TimeoutError)
                  else (exc.strerror or str(exc)).lower())
        via = f" (from RAY_ADDRESS for {address!r})" if target != address else ""
        raise InputError("--ray", f"no Ray cluster answers at {target}{via}: {reason}",
                         hint="start one (ray start --head) or name another address") from exc


class RayExecutor:
    """Runs a sweep's runs as Ray tasks (see the module docstring); a context manager that
    shuts down the Ray instance it started (one it joined is left running)."""

    def __init__(self, address: str = "auto", *, num_cpus: int | None = None) -> None:
        ray = import_ray()
        self._ray = ray
        self._owns = not ray.is_initialized()
        if self._owns:
            check_reachable(address)
            target = None if address == "auto" else address
            extra = {"num_cpus": num_cpus} if num_cpus is not None else {}  # a new local one
            try:
                ray.init(address=target, include_dashboard=False, log_to_driver=False,
                         logging_level=logging.WARNING, **extra)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise InputError("--ray", f"cannot start or reach a Ray cluster at "
                                 f"{address!r}: {one_line(exc)}",
                                 hint="auto, local, or a cluster's address such as "
                                 "ray://head:10001") from exc
        self.address = address

    @property
    def workers(self) -> int:
        return max(1, int(self._ray.cluster_resources().get("CPU", 1)))

    def map(self, fn: Callable[[Any, T], R], shared: object, items: Sequence[T], *,
            order: Sequence[int] | None = None,
            on_done: Done | None = None) -> list[R | RunFailure]:
        ray = self._ray
        sequence = start_order(len(items), order)
        if not sequence:
            return []
        shared_ref = ray.put(shared)
        task = ray.remote(num_cpus=1, max_retries=0)(guarded)
        pending = {task.remote(fn, shared_ref, items[i], i): i for i in sequence}
        out: dict[int, R | RunFailure] = {}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                i = pending.pop(ref)
                try:
                    out[i] = ray.get(ref)
                except ray.exceptions.RayError as exc:  # the worker died, or the task was lost
                    out[i] = RunFailure(i, f"Ray task lost: {one_line(exc)}")
                if on_done is not None:
                    on_done(i, out[i])
        return [out[i] for i in range(len(items))]

    def close(self) -> None:
        """Shut down the Ray instance this executor started (not one it joined)."""
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()
        self._owns = False

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
