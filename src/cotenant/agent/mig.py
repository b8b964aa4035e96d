"""The MIG manager: reconcile a GPU's instances to a desired layout, and export what is there.

``apply`` follows mig-parted's reconfigure loop: read the current layout and return at once when
it already equals the desired one (idempotent); refuse while processes run on the GPU unless
``drain=True`` (then stop them: SIGTERM, and SIGKILL for those still running after
``grace_s``, so a training job has time to checkpoint); destroy the instances that are not
wanted, create the missing ones larger first and at their exact starts (explicit starts make
creation order irrelevant; the driver's own choice would not); read back and verify. Each GPU's
state (pending, applied, failed) is kept with the step that failed, as mig-manager publishes
``nvidia.com/mig.config.state``. Validity comes from the catalog's
:class:`~cotenant.model.mig.MigGeometry`, never from rules of our own.

``export`` writes the current layouts as one mig-parted config (``cotenant-current``), reusing
:func:`cotenant.policies.partition.export.to_mig_parted` for the per-layout selections.
"""

from __future__ import annotations

import enum
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cotenant.agent.backends.base import NodeBackend, ProcState
from cotenant.errors import (
    CotenantError,
    NotSupportedError,
    PermanentError,
    check_seconds,
)
from cotenant.model.deployment import GpuPlan
from cotenant.model.gpu import CATALOG
from cotenant.model.mig import MigGeometry, MigLayout, MigPlacement
from cotenant.policies.partition.export import layout_key, to_mig_parted
from cotenant.policies.partition.problem import Plan

_DRAIN_POLL_S = 0.1
_KILL_WAIT_S = 5.0


class MigState(enum.Enum):
    PENDING = "pending"
    APPLIED = "applied"
    FAILED = "failed"


@dataclass(frozen=True)
class MigStatus:
    """The reconcile state of one GPU; ``step`` names the step that failed (or ran last)."""

    gpu: int
    state: MigState
    layout: str
    step: str = ""
    error: str = ""
    changed: bool = False


class MigApplyError(CotenantError):
    """A MIG apply that failed; ``status`` names the failing step."""

    def __init__(self, status: MigStatus, *, hint: str | None = None) -> None:
        super().__init__(
            f"GPU {status.gpu}: MIG apply failed at step {status.step!r}: {status.error}",
            hint=hint,
        )
        self.status = status


class MigManager:
    """Applies and exports MIG layouts through a backend."""

    def __init__(
        self,
        backend: NodeBackend,
        *,
        grace_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        check_seconds(grace_s, "drain grace")
        self.backend = backend
        self.grace_s = grace_s
        """Seconds a drained process gets between SIGTERM and SIGKILL."""
        self.clock = clock
        self.sleep = sleep
        self._status: dict[int, MigStatus] = {}

    def geometry(self, gpu: int) -> MigGeometry:
        model = CATALOG.get(self.backend.gpu(gpu).model)
        if model.mig is None:
            raise NotSupportedError("MIG", f"GPU {gpu} ({model.name})")
        return model.mig

    def status(self, gpu: int) -> MigStatus | None:
        return self._status.get(gpu)

    def apply(self, gpu: int, layout: MigLayout | str, *, drain: bool = False) -> MigStatus:
        """Reconcile ``gpu`` to ``layout`` (a layout or text such as ``"3g.20gb,2g.10gb"``)."""
        geometry = self.geometry(gpu)
        desired = geometry.parse(layout) if isinstance(layout, str) else geometry.layout(
            layout.placements)
        current = self.backend.mig_layout(gpu)
        if set(current.placements) == set(desired.placements):
            return self._set(MigStatus(gpu, MigState.APPLIED, str(desired), "no-op"))
        busy = self.backend.gpu(gpu).processes
        if busy and not drain:
            status = self._set(MigStatus(
                gpu, MigState.FAILED, str(desired), "check processes",
                f"{len(busy)} processes run on GPU {gpu}"))
            raise MigApplyError(status, hint="stop them, or pass --drain to stop them first")
        self._set(MigStatus(gpu, MigState.PENDING, str(desired)))
        if busy:
            self._step(gpu, desired, "drain", lambda: self._drain([p.pid for p in busy]))
        for placement in sorted(set(current.placements) - set(desired.placements)):
            self._step(gpu, desired, f"destroy {placement}",
                       lambda p=placement: self.backend.destroy_instance(gpu, p))
        todo = sorted(set(desired.placements) - set(current.placements),
                      key=lambda p: (-p.profile.memory_slices, -p.profile.compute_slices, p.start))
        for placement in todo:
            self._step(gpu, desired, f"create {placement}",
                       lambda p=placement: self._create(gpu, p))
        read_back = self.backend.mig_layout(gpu)
        if set(read_back.placements) != set(desired.placements):
            self._fail(gpu, desired, "verify", f"read back {read_back}, wanted {desired}")
        return self._set(MigStatus(gpu, MigState.APPLIED, str(desired), "verify", changed=True))

    def _create(self, gpu: int, placement: MigPlacement) -> None:
        made = self.backend.create_instance(gpu, placement.profile.name, placement.start)
        if made != placement:
            raise PermanentError(f"driver created {made} instead of {placement}")

    def _drain(self, pids: list[int]) -> None:
        """SIGTERM, ``grace_s`` to exit, then SIGKILL and a few seconds for the driver to
        release the GPU; a process still there fails the destroy step that follows."""
        for pid in pids:
            self.backend.send_signal(pid, signal.SIGTERM)
        running = self._wait_exit(pids, self.grace_s)
        for pid in running:
            self.backend.send_signal(pid, signal.SIGKILL)
        self._wait_exit(running, _KILL_WAIT_S)

    def _wait_exit(self, pids: list[int], seconds: float) -> list[int]:
        """Poll until every one of ``pids`` has exited or ``seconds`` pass; those running."""
        deadline = self.clock() + seconds
        while True:
            pids = [p for p in pids if self.backend.poll(p).state is ProcState.RUNNING]
            if not pids or self.clock() >= deadline:
                return pids
            self.sleep(_DRAIN_POLL_S)

    def _step(self, gpu: int, desired: MigLayout, step: str, action: Any) -> None:
        try:
            action()
        except CotenantError as exc:
            self._fail(gpu, desired, step, exc.one_line(), exc)

    def _fail(self, gpu: int, desired: MigLayout, step: str, error: str,
              cause: Exception | None = None) -> None:
        status = self._set(MigStatus(gpu, MigState.FAILED, str(desired), step, error))
        raise MigApplyError(status) from cause

    def _set(self, status: MigStatus) -> MigStatus:
        self._status[status.gpu] = status
        return status

    def export(self) -> dict[str, Any]:
        """The current layout of every GPU as one mig-parted config, ``cotenant-current``."""
        selections: list[dict[str, Any]] = []
        plain: list[int] = []
        by_model: dict[str, list[tuple[int, MigLayout]]] = {}
        for info in self.backend.gpus():
            if not info.mig_enabled or CATALOG.get(info.model).mig is None:
                plain.append(info.index)
                continue
            by_model.setdefault(info.model, []).append((info.index, self.backend.mig_layout(
                info.index)))
        for model, gpus in by_model.items():
            plan = Plan("observed", tuple(GpuPlan(lay, ()) for _, lay in gpus), 0, False)
            doc = to_mig_parted(plan, model)
            for (selection,) in doc["mig-configs"].values():
                key = tuple(sorted(selection["mig-devices"].items()))
                selection["devices"] = [i for i, lay in gpus if layout_key(lay) == key]
                selections.append(selection)
        if plain:
            selections.append({"devices": plain, "mig-enabled": False})
        return {"version": "v1", "mig-configs": {"cotenant-current": selections}}
