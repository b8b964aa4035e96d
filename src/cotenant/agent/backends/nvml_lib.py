"""NVML as the nvml backend calls it: the lazily loaded ``pynvml``, its errors as cotenant's.

``pynvml`` is imported only when the nvml backend is opened, so the rest of cotenant (and the
fake backend) runs where no NVIDIA driver is installed; tests hand :class:`NvmlLib` a stand-in
module with the same names. NVML return codes map to :class:`~cotenant.errors.TemporaryError`
(timeouts, busy, not ready: retry later) or :class:`~cotenant.errors.PermanentError` (no
permission, not supported, invalid argument, the GPU lost), each with a hint
(:func:`map_nvml_error`). Each :meth:`NvmlLib.call` names the one NVML function it wraps, so an
error names the call that failed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from cotenant.errors import CotenantError, InputError, PermanentError, TemporaryError
from cotenant.model.gpu import CATALOG

MIB = 1024 * 1024
# NVML return codes (nvml.h) that may pass on a retry. GPU_IS_LOST (15) is not among them: it
# needs a reset or a reboot, so retrying every few seconds would only hide it.
_TEMPORARY = {10: "Timeout", 11: "IRQ issue", 19: "In use", 20: "Memory", 21: "No data",
              27: "Not ready"}
_HINTS = {
    3: "this GPU or driver does not support the call",
    4: "run the agent as root or with CAP_SYS_ADMIN for MIG changes",
    9: "load the NVIDIA kernel driver",
    12: "install the NVIDIA driver (libnvidia-ml.so)",
    15: "the GPU has fallen off the bus; it needs a reset (nvidia-smi -r) or a reboot",
    16: "the GPU needs a reset (nvidia-smi -r) after a MIG mode change",
    23: "destroy overlapping instances first",
}
NOT_THERE = (2, 3, 6)
"""INVALID_ARGUMENT, NOT_SUPPORTED, NOT_FOUND: what this GPU or driver does not have."""


def map_nvml_error(code: int, call: str, text: str = "") -> CotenantError:
    """The cotenant error for NVML return ``code`` from ``call``."""
    message = f"NVML {call}: error {code}{' ' + text if text else ''}"
    if code in _TEMPORARY:
        return TemporaryError(message, delay_s=2.0, hint=f"{_TEMPORARY[code]}; retrying")
    return PermanentError(message, hint=_HINTS.get(code, "see nvidia-smi -q and dmesg"))


def load_pynvml() -> Any:
    try:
        import pynvml  # noqa: PLC0415 - optional SDK, loaded only when the nvml backend is chosen
    except ImportError as exc:
        raise PermanentError(
            "nvidia-ml-py is not installed", hint="pip install nvidia-ml-py"
        ) from exc
    return pynvml


class NvmlLib:
    """A loaded NVML: ``nv`` is the ``pynvml`` module (or a stand-in with its names)."""

    def __init__(self, nv: Any) -> None:
        self.nv = nv

    @contextmanager
    def call(self, name: str) -> Iterator[None]:
        """Turn an NVML error inside into cotenant's, naming the call ``name``."""
        try:
            yield
        except self.nv.NVMLError as exc:
            raise map_nvml_error(int(exc.value), name, str(exc)) from exc

    def code(self, exc: BaseException) -> int:
        return int(getattr(exc, "value", -1))

    def count(self) -> int:
        with self.call("nvmlDeviceGetCount"):
            return int(self.nv.nvmlDeviceGetCount())

    def handle(self, index: int) -> Any:
        count = self.count()
        if isinstance(index, bool) or not 0 <= index < count:
            raise InputError(f"GPU {index}", f"no such GPU; this node has 0-{count - 1}")
        with self.call("nvmlDeviceGetHandleByIndex"):
            return self.nv.nvmlDeviceGetHandleByIndex(index)

    def model(self, handle: Any) -> tuple[str, int]:
        """The catalog model name (or NVML's name) and the memory (MiB) of a GPU."""
        with self.call("nvmlDeviceGetName"):
            name = str(self.nv.nvmlDeviceGetName(handle))
        with self.call("nvmlDeviceGetMemoryInfo"):
            total = int(self.nv.nvmlDeviceGetMemoryInfo(handle).total) // MIB
        return catalog_name(name, total), total


def catalog_name(nvml_name: str, memory_mib: int) -> str:
    """The catalog model for an NVML name such as ``NVIDIA A100-SXM4-40GB`` (falls back to the
    NVML name itself when the catalog does not know the model)."""
    text = nvml_name.upper().replace("NVIDIA ", "").replace("TESLA ", "").strip()
    for model in CATALOG.models:
        family = model.name.split("-")[0].upper()
        if model.memory_mib is None or not text.startswith(family):
            continue
        if abs(model.memory_mib - memory_mib) <= model.memory_mib * 0.1:
            return model.name
    return nvml_name
