"""The MPS manager: one MPS control daemon per GPU, its defaults, and each client's limits.

Each GPU ``n`` gets ``<state>/mps/gpu<n>/pipe`` and ``.../log``; its daemon is started with
``CUDA_VISIBLE_DEVICES=n``. A client joins that daemon through ``CUDA_MPS_PIPE_DIRECTORY`` and
gets its limits through two variables read when the CUDA context is created (so a running
client's limits cannot change; the co-location enforcement restarts it instead):

* ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` - the share of SMs (threads) it may use, 1-100;
* ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`` - ``<device>=<N>M``: past it, allocations fail (CUDA OOM).
  The device is the ordinal *as the client enumerates devices*: a client of a per-GPU daemon
  sees exactly one device, ordinal 0, whatever the GPU's index on the host.

The daemon's defaults (``set_default_active_thread_percentage``,
``set_default_device_pinned_mem_limit``) apply to clients that set neither. ``ensure`` restarts
a daemon that stopped answering and counts the restarts.
"""

from __future__ import annotations

from pathlib import Path

from cotenant.agent.backends.base import DaemonConfig, MpsBackend
from cotenant.errors import InputError
from cotenant.policies.colocation.contract import check_share_pct

CLIENT_ORDINAL = 0


def pinned_mem_limit(mib: int, ordinal: int = CLIENT_ORDINAL) -> str:
    """The ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`` value for ``mib`` MiB: ``"0=2000M"``."""
    if isinstance(mib, bool) or not isinstance(mib, int) or mib <= 0:
        raise InputError("mem_limit_mib", f"memory limit must be a positive integer, got {mib!r}")
    return f"{ordinal}={mib}M"


class MpsManager:
    """Starts, checks, restarts and stops the per-GPU MPS daemons under ``state_dir``."""

    def __init__(
        self,
        backend: MpsBackend,
        state_dir: Path,
        *,
        default_thread_pct: int = 100,
        default_mem_limit_mib: int | None = None,
    ) -> None:
        self.backend = backend
        self.state_dir = state_dir
        self.default_thread_pct = check_share_pct(default_thread_pct, "default active-thread %")
        if default_mem_limit_mib is not None:
            pinned_mem_limit(default_mem_limit_mib)
        self.default_mem_limit_mib = default_mem_limit_mib
        self.restarts: dict[int, int] = {}
        """Restarts of each GPU's daemon after it had been started once."""
        self._started: set[int] = set()

    def config(self, gpu: int) -> DaemonConfig:
        base = self.state_dir / "mps" / f"gpu{gpu}"
        return DaemonConfig(gpu, base / "pipe", base / "log", self.default_thread_pct,
                            self.default_mem_limit_mib)

    def start(self, gpu: int) -> None:
        self.backend.start_daemon(self.config(gpu))

    def stop(self, gpu: int) -> None:
        self.backend.stop_daemon(self.config(gpu))

    def healthy(self, gpu: int) -> bool:
        return self.backend.daemon_healthy(self.config(gpu))

    def ensure(self, gpu: int) -> bool:
        """Start the daemon if it is not answering; True when it had to be (re)started. A daemon
        found running that this agent did not start (one an earlier agent left) is given this
        agent's defaults, for the MPS servers it starts from now on."""
        if self.healthy(gpu):
            if gpu not in self._started:
                self._started.add(gpu)
                self.start(gpu)
            return False
        if gpu in self._started:
            self.restarts[gpu] = self.restarts.get(gpu, 0) + 1
        self._started.add(gpu)
        self.start(gpu)
        return True

    def client_env(
        self, gpu: int, thread_pct: int | None = None, mem_limit_mib: int | None = None
    ) -> dict[str, str]:
        """The environment that makes a process a client of ``gpu``'s daemon with limits."""
        config = self.config(gpu)
        env = {
            "CUDA_MPS_PIPE_DIRECTORY": str(config.pipe_dir),
            "CUDA_MPS_LOG_DIRECTORY": str(config.log_dir),
        }
        if thread_pct is not None:
            pct = check_share_pct(thread_pct, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")
            env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(pct)
        if mem_limit_mib is not None:
            env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = pinned_mem_limit(mem_limit_mib)
        return env
