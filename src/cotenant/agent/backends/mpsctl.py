"""The MPS control daemons of a Linux host, one per GPU (used by the nvml backend).

:class:`MpsControl` drives ``nvidia-cuda-mps-control``: the daemon is started with
``CUDA_VISIBLE_DEVICES=<gpu>`` and its own ``CUDA_MPS_PIPE_DIRECTORY`` and
``CUDA_MPS_LOG_DIRECTORY``; defaults are set through the control interface
(``set_default_active_thread_percentage``, ``set_default_device_pinned_mem_limit``); health is
``get_server_list`` answering; stop is ``quit``. ``-d`` returns before the daemon listens, so
a start waits (up to ``timeout_s``) for ``get_server_list`` to answer before it sets the
defaults; the defaults are set again the first time this agent process finds a daemon
already running (one left by an agent that may have had other defaults); they apply to MPS
servers started afterwards. The control pipe is a Unix socket, so a pipe directory whose
path is too long for one is refused with that reason instead of the daemon's "cannot find".
The daemon runs with ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` so that its ``CUDA_VISIBLE_DEVICES``
index is NVML's (CUDA's default order is fastest first). Real MPS also has
``set_active_thread_percentage <server PID> <pct>``, which changes the share of an MPS *server*
for clients that connect afterwards; running clients keep theirs, which is why the share
controller restarts an offline client to change its share.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from cotenant.agent.backends import procfs
from cotenant.agent.backends.base import DaemonConfig
from cotenant.errors import InputError, PermanentError, TemporaryError

MPS_CONTROL = "nvidia-cuda-mps-control"
SOCKET_PATH_MAX = 107
"""Bytes of a Unix socket path (``sun_path`` is 108 with the terminating NUL)."""
_SOCKET = "control"  # the daemon's socket in the pipe directory


class MpsControl:
    """``nvidia-cuda-mps-control`` daemons, one per GPU."""

    def __init__(self, executable: str = MPS_CONTROL, timeout_s: float = 10.0) -> None:
        self.executable = executable
        self.timeout_s = timeout_s
        self._defaults: dict[Path, tuple[int, int | None]] = {}  # pipe dir -> defaults set

    @staticmethod
    def env(config: DaemonConfig) -> dict[str, str]:
        return {
            **procfs.clean_environ(),
            **config.extra_env,
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
            "CUDA_VISIBLE_DEVICES": str(config.gpu),
            "CUDA_MPS_PIPE_DIRECTORY": str(config.pipe_dir),
            "CUDA_MPS_LOG_DIRECTORY": str(config.log_dir),
        }

    def _run(self, config: DaemonConfig, args: list[str], stdin: str | None,
             timeout_s: float | None = None) -> str:
        try:
            done = subprocess.run(
                [self.executable, *args], input=stdin, env=self.env(config), text=True,
                capture_output=True, timeout=timeout_s or self.timeout_s, check=False,
            )
        except FileNotFoundError as exc:
            raise PermanentError(f"{self.executable} not found",
                                 hint="install the CUDA toolkit's MPS binaries") from exc
        except subprocess.TimeoutExpired as exc:
            raise TemporaryError(f"{self.executable} {args} timed out", delay_s=5.0) from exc
        if done.returncode != 0:
            raise TemporaryError(
                f"GPU {config.gpu}: {self.executable} {' '.join(args) or stdin!r} failed: "
                f"{(done.stderr or done.stdout).strip()[:200]}", delay_s=2.0,
            )
        return done.stdout

    def start_daemon(self, config: DaemonConfig) -> None:
        if not self.daemon_healthy(config):
            socket = os.fsencode(config.pipe_dir.absolute() / _SOCKET)
            if len(socket) > SOCKET_PATH_MAX:
                raise InputError(f"GPU {config.gpu}: MPS pipe directory {config.pipe_dir}",
                                 f"its socket path is {len(socket)} bytes; a Unix socket path "
                                 f"holds at most {SOCKET_PATH_MAX}",
                                 hint="give the agent a shorter --state-dir")
            config.pipe_dir.mkdir(parents=True, exist_ok=True)
            config.log_dir.mkdir(parents=True, exist_ok=True)
            self._run(config, ["-d"], None)
            self._defaults.pop(config.pipe_dir, None)
            self._wait_ready(config)
        wanted = (config.default_thread_pct, config.default_mem_limit_mib)
        if self._defaults.get(config.pipe_dir) != wanted:
            self._run(config, [],
                      f"set_default_active_thread_percentage {config.default_thread_pct}\n")
            if config.default_mem_limit_mib is not None:
                cmd = f"set_default_device_pinned_mem_limit 0 {config.default_mem_limit_mib}M\n"
                self._run(config, [], cmd)
            self._defaults[config.pipe_dir] = wanted

    def _wait_ready(self, config: DaemonConfig) -> None:
        """Until the daemon ``-d`` just started answers, at most ``timeout_s``."""
        deadline = time.monotonic() + self.timeout_s
        while not self.daemon_healthy(config, probe_s=min(1.0, self.timeout_s)):
            if time.monotonic() > deadline:
                raise TemporaryError(f"GPU {config.gpu}: the MPS control daemon started but "
                                     f"did not answer within {self.timeout_s:g} s", delay_s=5.0)
            time.sleep(0.05)

    def stop_daemon(self, config: DaemonConfig) -> None:
        if self.daemon_healthy(config):
            self._run(config, [], "quit\n")
        self._defaults.pop(config.pipe_dir, None)

    def daemon_healthy(self, config: DaemonConfig, probe_s: float | None = None) -> bool:
        if not config.pipe_dir.exists():
            return False
        try:
            self._run(config, [], "get_server_list\n", probe_s)
        except TemporaryError:
            return False
        return True
