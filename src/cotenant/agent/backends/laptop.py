"""Laptop mode: fake GPUs with real processes, to try the agent with one's own programs.

:class:`LaptopNode` is the fake node (:mod:`.fake`: GPUs from the catalog, MIG, MPS daemons,
injected faults) whose workloads are real: a spec's argv runs as a process of this host
(:class:`~cotenant.agent.backends.local.PopenProcesses`, under the exit-status wrapper), with
the environment the agent would give it on a GPU (``CUDA_VISIBLE_DEVICES`` or the MPS
client's ``CUDA_MPS_PIPE_DIRECTORY``, ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``,
``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT``), its output in ``<state-dir>/logs``. The simulated
programs stay available by name: an argv that starts with ``fake-workload`` runs on the fake
node as before (:mod:`.programs`). A fake MPS daemon's death kills its real clients too
(SIGKILL), as a real daemon's death ends its clients; a daemon a new agent finds is taken as
still running, as a real one outlives the agent. Real processes use no GPU, so the fake
GPUs show no memory or utilisation for them.

Pids of simulated programs start at :data:`FAKE_PID_BASE`, above any Linux pid
(``pid_max`` is at most 2**22), so the two kinds never collide.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from cotenant.agent.backends import procfs
from cotenant.agent.backends.base import DaemonConfig, Launched, ProcessStatus, ProcState
from cotenant.agent.backends.fake import FakeNode, ManualClock
from cotenant.agent.backends.local import PopenProcesses
from cotenant.agent.backends.programs import PROGRAM
from cotenant.errors import InputError, TemporaryError
from cotenant.model.gpu import CATALOG, GpuModel

FAKE_PID_BASE = 5_000_000


class LaptopNode(FakeNode):
    """Fake GPUs; real processes for every argv but ``fake-workload``'s."""

    def __init__(self, models: Sequence[GpuModel], clock: Callable[[], float], state_dir: Path,
                 mig: bool = False) -> None:
        super().__init__(models, clock, mig)
        self._next_pid = FAKE_PID_BASE
        self.real = PopenProcesses(state_dir / "logs", wrap=True)
        self._clients: dict[int, int] = {}  # real MPS client pid -> its GPU
        self._unseen = set(range(len(models)))  # GPUs whose daemon this node has not seen

    @classmethod
    def on_disk(cls, model: str, count: int, state_dir: Path,
                clock: Callable[[], float] | None = None, *, mig: bool = False) -> LaptopNode:
        """``count`` fake GPUs of catalog ``model``, real processes logged below
        ``state_dir``."""
        if count < 1:
            raise InputError("fake node", f"GPU count {count} must be at least 1")
        gpu_model = CATALOG.get(model)
        if gpu_model.memory_mib is None:
            raise InputError("fake node", f"{gpu_model.name} has no known memory size")
        return cls([gpu_model] * count, clock or ManualClock(), state_dir, mig)

    def spawn(self, argv: Sequence[str], env: Mapping[str, str], gpu: int) -> int:
        if argv and argv[0] == PROGRAM:
            return super().spawn(argv, env, gpu)
        info = self.gpu(gpu)  # an unknown GPU is refused as the fake refuses it
        pipe = env.get("CUDA_MPS_PIPE_DIRECTORY")
        if pipe is not None and not self._daemon_listens(info.index, pipe):
            raise TemporaryError(f"GPU {gpu}: no MPS daemon listens on {pipe}")
        pid = self.real.spawn(argv, env, gpu)
        if pipe is not None:
            self._clients[pid] = gpu
        return pid

    def _daemon_listens(self, gpu: int, pipe: str) -> bool:
        daemon = self._gpus[gpu].daemon
        return daemon is not None and str(daemon.pipe_dir) == pipe

    def poll(self, pid: int) -> ProcessStatus:
        if pid >= FAKE_PID_BASE:
            return super().poll(pid)
        status = self.real.poll(pid)
        if status.state is not ProcState.RUNNING:
            self._clients.pop(pid, None)
        return status

    def send_signal(self, pid: int, signum: int) -> None:
        if pid >= FAKE_PID_BASE:
            super().send_signal(pid, signum)
        else:
            self.real.send_signal(pid, signum)

    def pids(self) -> list[int]:
        return [*super().pids(), *self.real.pids()]

    def members(self, pid: int) -> list[int]:
        return super().members(pid) if pid >= FAKE_PID_BASE else self.real.members(pid)

    def launched(self) -> list[Launched]:
        return [*super().launched(), *self.real.launched()]

    def daemon_healthy(self, config: DaemonConfig) -> bool:
        """A daemon this node has not seen yet is one an earlier agent started, still
        running (as a real daemon outlives the agent): its real clients keep running."""
        if config.gpu in self._unseen:
            self._unseen.discard(config.gpu)
            super().start_daemon(config)
        return super().daemon_healthy(config)

    def start_daemon(self, config: DaemonConfig) -> None:
        self._unseen.discard(config.gpu)
        super().start_daemon(config)

    def kill_daemon(self, gpu: int) -> None:
        """The fake daemon of ``gpu`` dies: its simulated clients fail, its real ones are
        killed."""
        self._unseen.discard(gpu)
        super().kill_daemon(gpu)
        for pid, on in list(self._clients.items()):
            if on == gpu:
                for member in self.real.members(pid):
                    procfs.kill([member], signal.SIGKILL)
