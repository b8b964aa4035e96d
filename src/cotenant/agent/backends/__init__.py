"""Backends of the node agent: the Protocols, the fake node, and the NVML implementation.

``open_backend("fake", gpus="A100-40GB:4")`` or ``open_backend("nvml", state_dir=...)``. The
nvml module is imported only when chosen (it loads ``pynvml`` lazily in turn).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

from cotenant.agent.backends.base import (
    BackendFeature,
    DaemonConfig,
    DeviceInventory,
    GpuInfo,
    GpuProcess,
    MigBackend,
    MigDevice,
    MpsBackend,
    NodeBackend,
    ProcessBackend,
    ProcessStatus,
    ProcState,
    XidEvent,
    require,
)
from cotenant.agent.backends.fake import FakeNode, ManualClock
from cotenant.errors import InputError, UnknownNameError

BACKEND_NAMES = ("fake", "nvml")
MAX_GPUS = 64  # GPUs on one fake node: more than any server holds


def parse_gpus(spec: str) -> tuple[str, int]:
    """``"A100-40GB:4"`` -> ("A100-40GB", 4); a bare model means one GPU."""
    model, _, count = spec.partition(":")
    count = count.strip()
    if count and (not (count.isascii() and count.isdigit()) or not 1 <= int(count) <= MAX_GPUS):
        raise InputError("--gpus", f"{spec!r}: count must be an integer 1..{MAX_GPUS}",
                         hint="e.g. A100-40GB:4")
    return model.strip(), int(count) if count else 1


def open_backend(
    name: str,
    *,
    gpus: str = "A100-40GB:4",
    state_dir: Path = Path(".cotenant"),
    clock: Callable[[], float] | None = None,
    cgroup_root: Path | None = None,
    fake_mig: bool = False,
    real_processes: bool = False,
) -> NodeBackend:
    """The backend called ``name``: ``fake`` (a node of ``gpus``, in MIG mode if ``fake_mig``;
    with ``real_processes`` every argv but a simulated program's runs on this host:
    :mod:`.laptop`)
    or ``nvml`` (this host, its workloads in cgroups below ``cgroup_root`` where given: see
    :mod:`.cgroups`)."""
    if name == "fake":
        model, count = parse_gpus(gpus)
        if real_processes:  # laptop mode: fake GPUs, the argv run for real
            laptop = importlib.import_module("cotenant.agent.backends.laptop")
            node: NodeBackend = laptop.LaptopNode.on_disk(model, count, state_dir, clock,
                                                          mig=fake_mig)
            return node
        return FakeNode.build(model, count, clock, mig=fake_mig)
    if name == "nvml":
        module = importlib.import_module("cotenant.agent.backends.nvml")
        nvml: NodeBackend = module.NvmlNode(state_dir, cgroup_root)
        return nvml
    raise UnknownNameError("backend", name, BACKEND_NAMES)


__all__ = [
    "BACKEND_NAMES",
    "BackendFeature",
    "DaemonConfig",
    "DeviceInventory",
    "FakeNode",
    "GpuInfo",
    "GpuProcess",
    "ManualClock",
    "MigBackend",
    "MigDevice",
    "MpsBackend",
    "NodeBackend",
    "ProcState",
    "ProcessBackend",
    "ProcessStatus",
    "XidEvent",
    "open_backend",
    "parse_gpus",
    "require",
]
