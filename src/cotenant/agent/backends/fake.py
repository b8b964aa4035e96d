"""A stateful in-memory GPU node that enforces the driver's rules, for tests and laptops.

``FakeNode.build("A100-40GB", count=4)`` gives a node whose GPUs come from the catalog, MIG
mode off as GPUs ship (``mig=True``: on, where the model supports it). It implements all four
backend Protocols and enforces what NVML, MIG and MPS would:

* MIG: placements valid per the model's :class:`~cotenant.model.mig.MigGeometry` (allowed starts,
  no overlap, per-profile counts); when the caller lets the driver choose the start, the driver
  prefers the *highest* free start for 1g/3g profiles and the lowest otherwise, which reproduces
  the MIG guide's creation-order caveat (``-cgi 19,19,14,9`` fails, ``-cgi 9,19,14,19`` works);
  a GPU instance cannot be destroyed while processes run on the GPU.
* Memory: a process allocating past its ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`` (or past the GPU's
  free memory) exits with a CUDA out-of-memory error.
* MPS: a process whose env names a GPU's pipe directory is a client of that GPU's daemon. A fatal
  CUDA error in one client reaches every client on that GPU (they exit ``FAULT_EXIT_DELAY_S``
  later), and the server refuses new clients until all of them have exited. Killing the daemon
  ends all its clients. An online program (``--model``) is busy longer while other clients
  with a thread percentage run kernels: for their busy share of the time, its load over its
  speed on the SMs the largest of them leaves it (``perf.mps.busy_beside``). As NVML does
  (seen on an H200, driver 580), the clients' SM use is sampled on the MPS server's pid (a
  process listed once the daemon has a client, with all its clients' utilisation), not on
  theirs; ``per_client_util=True`` samples each client on its own pid instead, a signal NVML
  does not give, for tests of logic that would read one.
* Faults can be injected: XID events, NVML query errors, daemon deaths.
* Signals act as on Linux: SIGSTOP pauses a process (it keeps its memory, causes no
  utilisation, and its program's clock stands still), SIGCONT resumes it; a SIGTERM or
  SIGINT sent to a paused process waits until it is resumed, a SIGKILL does not; a fault
  of another MPS client reaches a paused one once it is resumed. (An XID or a daemon death
  ends a paused process at once, sooner than Linux would let it see the error.)

Processes are :class:`~cotenant.agent.backends.programs.Program` descriptions whose events
happen on the injected clock; every call first settles the events due by ``clock()``.
"""

from __future__ import annotations

import math
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from cotenant.agent.backends.base import (
    BackendFeature,
    DaemonConfig,
    GpuInfo,
    GpuProcess,
    Launched,
    MigDevice,
    ProcessStatus,
    ProcState,
    XidEvent,
    launched_from,
    require,
)
from cotenant.agent.backends.programs import Program, parse_mem_limit
from cotenant.errors import InputError, PermanentError, TemporaryError
from cotenant.model.gpu import CATALOG, GpuModel
from cotenant.model.mig import MigGeometry, MigLayout, MigPlacement
from cotenant.perf import mps

FAULT_EXIT_DELAY_S = 1.0
THREAD_PCT = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
MSG_OOM = "torch.OutOfMemoryError: CUDA out of memory (fake node)"
MSG_CUDA = "RuntimeError: CUDA error: an illegal memory access was encountered"
MSG_MPS_FAULT = "RuntimeError: CUDA error: MPS client terminated by a fatal fault of another client"
MSG_MPS_DOWN = "RuntimeError: CUDA error: MPS server is not ready (server terminated)"
MSG_XID = "RuntimeError: CUDA error: unspecified launch failure"
MPS_SERVER_MIB = 66
"""The MPS server's own memory on a GPU with clients (an H200, driver 580, measured)."""
MSG_NO_DEVICE = "RuntimeError: CUDA error: no CUDA-capable device is detected"
_STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGKILL, signal.SIGQUIT, signal.SIGHUP}


class ManualClock:
    """A clock that moves only when told: ``clock()`` reads it, ``advance(s)`` moves it."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


@dataclass
class _Proc:
    pid: int
    argv: tuple[str, ...]
    env: dict[str, str]
    gpu: int
    program: Program
    started: float
    limit_mib: int | None
    mps_client: bool
    instance: MigPlacement | None = None
    """The MIG instance it runs on (``CUDA_VISIBLE_DEVICES=MIG-...``); None: the whole GPU."""
    alloc_mib: int = 0
    grown: bool = False
    util_pct: float = 0.0
    returncode: int | None = None
    message: str = ""
    ended: float | None = None
    fault_exit_at: float = math.inf
    term_at: float = math.inf
    """When a caught SIGTERM/SIGINT ends it (after its checkpoint delay)."""
    term_signal: int = 0
    paused_at: float | None = None
    """When SIGSTOP paused it (None: running); its program's events wait meanwhile."""
    pending: int = 0
    """A SIGTERM/SIGINT sent while paused, delivered when it is resumed."""

    @property
    def alive(self) -> bool:
        return self.returncode is None


@dataclass
class _Gpu:
    index: int
    model: GpuModel
    mig_enabled: bool
    placements: list[MigPlacement] = field(default_factory=list)
    uuids: dict[MigPlacement, str] = field(default_factory=dict)  # a new one per creation
    daemon: DaemonConfig | None = None
    mps_faulted: bool = False
    server_pid: int | None = None
    """The MPS server's pid, once a client has connected (NVML lists it with the GPU's
    compute processes and samples the clients' SM use on it)."""


class FakeNode:
    """One simulated node with GPUs from the catalog; see the module docstring for its rules."""

    def __init__(
        self, models: Sequence[GpuModel], clock: Callable[[], float], mig: bool = False,
        *, per_client_util: bool = False,
    ) -> None:
        self.clock = clock
        self.per_client_util = per_client_util
        """Sample each MPS client's SM use on its own pid, a signal NVML does not give (it
        samples them on the MPS server's pid): for tests of logic that would use one."""
        self._gpus = [_Gpu(i, m, mig and m.supports_mig) for i, m in enumerate(models)]
        self._procs: dict[int, _Proc] = {}
        self._next_pid = 1000
        self._xids: list[XidEvent] = []
        self._nvml_errors: dict[str, list[bool]] = {}
        self.spawned: list[tuple[str, ...]] = []
        """Every argv exactly as handed to :meth:`spawn`, in order."""

    @classmethod
    def build(
        cls, model: str = "A100-40GB", count: int = 1, clock: Callable[[], float] | None = None,
        *, mig: bool = False, per_client_util: bool = False,
    ) -> FakeNode:
        """``count`` GPUs of catalog ``model``; ``mig``: MIG mode on where the model has it;
        ``per_client_util``: see the attribute."""
        if count < 1:
            raise InputError("fake node", f"GPU count {count} must be at least 1")
        gpu_model = CATALOG.get(model)
        if gpu_model.memory_mib is None:
            raise InputError("fake node", f"{gpu_model.name} has no known memory size")
        return cls([gpu_model] * count, clock or ManualClock(), mig,
                   per_client_util=per_client_util)

    # --- fault injection ---------------------------------------------------------------------

    def inject_nvml_error(self, call: str, *, times: int = 1, permanent: bool = False) -> None:
        """Make the next ``times`` calls of inventory/MIG method ``call`` fail."""
        self._nvml_errors.setdefault(call, []).extend([permanent] * times)

    def inject_xid(self, gpu: int, xid: int, pid: int | None = None) -> None:
        """Report XID ``xid``; the process ``pid`` (if given) dies of it, and XID 79 (fallen
        off the bus) ends every process on the GPU."""
        now = self._settle()
        self._gpu(gpu)
        self._xids.append(XidEvent(gpu, xid, now, pid))
        for proc in self._alive(gpu):
            if proc.pid == pid or xid == 79:
                self._exit(proc, now, 1, MSG_XID)

    def kill_daemon(self, gpu: int) -> None:
        """The MPS control daemon of ``gpu`` dies; its clients fail with an MPS error."""
        now = self._settle()
        state = self._gpu(gpu)
        state.daemon = None
        state.mps_faulted = False
        state.server_pid = None
        for proc in self._alive(gpu):
            if proc.mps_client:
                self._exit(proc, now, 1, MSG_MPS_DOWN)

    def set_util(self, pid: int, pct: float) -> None:
        """Change the SM utilisation a running process causes (its offered load)."""
        self._procs[pid].util_pct = pct

    def argv_of(self, pid: int) -> tuple[str, ...]:
        return self._procs[pid].argv

    def env_of(self, pid: int) -> dict[str, str]:
        return dict(self._procs[pid].env)

    # --- DeviceInventory ---------------------------------------------------------------------

    def features(self) -> frozenset[BackendFeature]:
        found = {
            BackendFeature.MPS,
            BackendFeature.MPS_MEM_LIMIT,
            BackendFeature.SM_ACTIVITY,
            BackendFeature.XID_EVENTS,
            BackendFeature.PROCESS_CONTROL,
        }
        if all(g.mig_enabled for g in self._gpus):  # as NVML: MIG mode on, not just capable
            found.add(BackendFeature.MIG)
        return frozenset(found)

    def gpus(self) -> list[GpuInfo]:
        self._nvml_call("gpus")
        return [self._info(g) for g in self._gpus]

    def gpu(self, index: int) -> GpuInfo:
        self._nvml_call("gpu")
        return self._info(self._gpu(index))

    def xid_events(self, since: float) -> list[XidEvent]:
        self._nvml_call("xid_events")
        return [e for e in self._xids if e.time > since]

    # --- MigBackend --------------------------------------------------------------------------

    def mig_layout(self, gpu: int) -> MigLayout:
        self._nvml_call("mig_layout")
        return MigLayout(tuple(self._mig_gpu(gpu).placements))

    def mig_devices(self, gpu: int) -> list[MigDevice]:
        self._nvml_call("mig_devices")
        state = self._mig_gpu(gpu)
        return [MigDevice(gpu, p, state.uuids[p]) for p in state.placements]

    def possible_starts(self, gpu: int, profile: str) -> tuple[int, ...]:
        state = self._mig_gpu(gpu)
        geometry = self._geometry(state)
        prof = geometry.profile(profile)
        layout = MigLayout(tuple(state.placements))
        return tuple(s for s in prof.starts if geometry.can_add(layout, MigPlacement(prof, s)))

    def create_instance(self, gpu: int, profile: str, start: int | None = None) -> MigPlacement:
        self._nvml_call("create_instance")
        state = self._mig_gpu(gpu)
        prof = self._geometry(state).profile(profile)
        free = self.possible_starts(gpu, profile)
        if start is None and free:
            start = max(free) if prof.compute_slices in (1, 3) else min(free)
        if start is None or start not in free:
            where = "any start" if start is None else f"start {start}"
            raise PermanentError(
                f"GPU {gpu}: Insufficient Resources creating {prof.name} at {where}; "
                f"free starts now: {list(free)}",
                hint="destroy overlapping instances first, or create larger instances first",
            )
        placement = MigPlacement(prof, start)
        state.placements.append(placement)
        self._next_pid += 1  # one counter for pids and UUIDs: a remade instance gets a new one
        state.uuids[placement] = f"MIG-fake-{gpu:04d}-{placement}-{self._next_pid}"
        return placement

    def destroy_instance(self, gpu: int, placement: MigPlacement) -> None:
        self._nvml_call("destroy_instance")
        state = self._mig_gpu(gpu)
        if placement not in state.placements:
            raise PermanentError(f"GPU {gpu}: no GPU instance {placement}")
        if self._alive(gpu):
            raise TemporaryError(
                f"GPU {gpu}: In use by another client: {len(self._alive(gpu))} processes run",
                hint="stop the GPU's processes (drain) before destroying instances",
            )
        state.placements.remove(placement)

    # --- MpsBackend --------------------------------------------------------------------------

    def start_daemon(self, config: DaemonConfig) -> None:
        self._settle()
        state = self._gpu(config.gpu)
        if state.daemon is None:
            state.daemon = config
            state.mps_faulted = False
        elif state.daemon.pipe_dir == config.pipe_dir:  # running: its defaults are set anew
            state.daemon = config

    def stop_daemon(self, config: DaemonConfig) -> None:
        self.kill_daemon(config.gpu)

    def daemon_healthy(self, config: DaemonConfig) -> bool:
        self._settle()
        daemon = self._gpu(config.gpu).daemon
        return daemon is not None and daemon.pipe_dir == config.pipe_dir

    # --- ProcessBackend ----------------------------------------------------------------------

    def spawn(self, argv: Sequence[str], env: Mapping[str, str], gpu: int) -> int:
        now = self._settle()
        state = self._gpu(gpu)
        self.spawned.append(tuple(argv))
        program = Program.from_argv(argv)
        pipe = env.get("CUDA_MPS_PIPE_DIRECTORY")
        client = pipe is not None
        limit: int | None = None
        if client:
            if state.daemon is None or str(state.daemon.pipe_dir) != pipe:
                raise TemporaryError(f"GPU {gpu}: no MPS daemon listens on {pipe}")
            if state.mps_faulted:
                raise TemporaryError(
                    f"GPU {gpu}: MPS server refuses new clients until its faulted clients exit"
                )
            limit = state.daemon.default_mem_limit_mib
            if state.server_pid is None:  # the control daemon starts a server for the first
                self._next_pid += 1
                state.server_pid = self._next_pid
            if "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT" in env:
                limit = parse_mem_limit(env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"])
        self._next_pid += 1
        proc = _Proc(self._next_pid, tuple(argv), dict(env), gpu, program, now, limit, client)
        proc.util_pct = program.util_pct
        self._procs[proc.pid] = proc
        visible = env.get("CUDA_VISIBLE_DEVICES", "")
        if visible.startswith("MIG-"):  # CUDA sees that instance only, or no device at all
            found = [p for p in state.placements if state.uuids.get(p) == visible]
            if not found or not state.mig_enabled:
                self._exit(proc, now, 1, MSG_NO_DEVICE)
                return proc.pid
            proc.instance = found[0]
        self._allocate(proc, program.mem_mib, now)
        return proc.pid

    def poll(self, pid: int) -> ProcessStatus:
        self._settle()
        proc = self._procs.get(pid)
        if proc is None:
            return ProcessStatus(pid, ProcState.UNKNOWN)
        if proc.alive:
            return ProcessStatus(pid, ProcState.RUNNING, gpu=proc.gpu)
        return ProcessStatus(pid, ProcState.EXITED, proc.returncode, proc.message, proc.gpu)

    def send_signal(self, pid: int, signum: int) -> None:
        now = self._settle()
        proc = self._procs.get(pid)
        if proc is None or not proc.alive:
            return
        if signum == signal.SIGSTOP and proc.paused_at is None:
            proc.paused_at = now
        elif signum == signal.SIGCONT and proc.paused_at is not None:
            self._resume(proc, now)
        elif signum in _STOP_SIGNALS:
            if proc.paused_at is not None and signum != signal.SIGKILL:
                proc.pending = proc.pending or signum  # delivered on SIGCONT
            else:
                self._stop(proc, signum, now)

    def paused(self, pid: int) -> bool:
        """Whether ``pid`` is alive and paused by SIGSTOP."""
        self._settle()
        proc = self._procs.get(pid)
        return proc is not None and proc.alive and proc.paused_at is not None

    def _resume(self, proc: _Proc, now: float) -> None:
        """SIGCONT: the program's clock moves on from where it stood; a signal that
        waited is delivered now."""
        assert proc.paused_at is not None
        stood = now - proc.paused_at
        proc.paused_at = None
        proc.started += stood
        proc.fault_exit_at += stood
        proc.term_at += stood
        if proc.pending:
            signum, proc.pending = proc.pending, 0
            self._stop(proc, signum, now)

    def _stop(self, proc: _Proc, signum: int, now: float) -> None:
        delay = proc.program.term_delay_s
        if signum == signal.SIGKILL or delay <= 0.0:
            self._exit(proc, now, -signum, "")
        elif now + delay < proc.term_at:  # caught: it checkpoints, then exits by the signal
            proc.term_at, proc.term_signal = now + delay, signum

    def pids(self) -> list[int]:
        self._settle()
        return [p.pid for p in self._procs.values() if p.alive]

    def members(self, pid: int) -> list[int]:
        """A fake program is one process."""
        return [pid]

    def launched(self) -> list[Launched]:
        """The live processes with a launch id in their environment (a test's agent that
        "crashes" leaves them on the node for the next one to find)."""
        self._settle()
        found = (launched_from(p.pid, p.env) for p in self._procs.values() if p.alive)
        return [f for f in found if f is not None]

    # --- internals ---------------------------------------------------------------------------

    def _gpu(self, index: int) -> _Gpu:
        if isinstance(index, bool) or not 0 <= index < len(self._gpus):
            raise InputError(f"GPU {index}", f"no such GPU; this node has 0-{len(self._gpus) - 1}")
        return self._gpus[index]

    def _mig_gpu(self, index: int) -> _Gpu:
        state = self._gpu(index)
        require(
            frozenset({BackendFeature.MIG}) if state.model.supports_mig else frozenset(),
            BackendFeature.MIG,
            f"GPU {index} ({state.model.name})",
        )
        if not state.mig_enabled:
            raise PermanentError(f"GPU {index}: MIG mode is disabled")
        return state

    @staticmethod
    def _geometry(state: _Gpu) -> MigGeometry:
        assert state.model.mig is not None
        return state.model.mig

    def _nvml_call(self, call: str) -> None:
        self._settle()
        pending = self._nvml_errors.get(call)
        if pending:
            if pending.pop(0):
                raise PermanentError(f"NVML {call}: NVML_ERROR_NOT_SUPPORTED (injected)")
            raise TemporaryError(f"NVML {call}: NVML_ERROR_TIMEOUT (injected)", delay_s=1.0)

    def _alive(self, gpu: int) -> list[_Proc]:
        return [p for p in self._procs.values() if p.alive and p.gpu == gpu]

    def _info(self, state: _Gpu) -> GpuInfo:
        procs = self._alive(state.index)
        now = self.clock()
        busy = {p.pid: self._util(p, now) for p in procs}
        for p in procs:  # an online service runs slower on the SMs busy clients leave it
            others = [q for q in procs if q is not p and busy[q.pid] > 0.0 and _thread_pct(q)]
            if p.program.model and busy[p.pid] > 0.0 and others:
                held = max(_thread_pct(q) for q in others)  # caps, as the controller reads
                overlap = min(1.0, max(busy[q.pid] for q in others) / 100.0)
                share = max(1, min(_thread_pct(p) or 100, 100 - held)) / 100.0
                serial = float(mps.ONLINE_SERIAL[mps.model_index(p.program.model)])
                busy[p.pid] = 100.0 * mps.busy_beside(busy[p.pid] / 100.0, share, serial,
                                                      overlap)
        util = min(100.0, sum(busy.values()))
        assert state.model.memory_mib is not None
        on_server = not self.per_client_util
        listed = [GpuProcess(p.pid, p.alloc_mib,
                             None if p.mps_client and on_server else busy[p.pid],
                             mps_client=p.mps_client) for p in procs]
        if on_server and state.server_pid is not None and any(p.mps_client for p in procs):
            served = min(100.0, sum(busy[p.pid] for p in procs if p.mps_client))
            listed.insert(0, GpuProcess(state.server_pid, MPS_SERVER_MIB, served,
                                        mps_server=True))
        return GpuInfo(
            index=state.index,
            uuid=f"GPU-fake-{state.index:04d}",
            model=state.model.name,
            memory_total_mib=state.model.memory_mib,
            memory_used_mib=sum(p.used_memory_mib for p in listed),
            utilisation_pct=None if state.mig_enabled else util,  # as NVML in MIG mode
            sm_activity_pct=util,
            mig_enabled=state.mig_enabled,
            processes=tuple(listed),
        )

    @staticmethod
    def _util(proc: _Proc, now: float) -> float:
        """The SM utilisation ``proc`` causes now: none while paused or warming up."""
        if proc.paused_at is not None or now < proc.started + proc.program.warmup_s:
            return 0.0
        return proc.util_pct

    def _allocate(self, proc: _Proc, mib: int, now: float) -> None:
        model_mib = self._gpus[proc.gpu].model.memory_mib or 0
        peers = [p for p in self._alive(proc.gpu) if p is not proc]
        if proc.instance is not None:  # a MIG instance has its own memory
            model_mib = proc.instance.profile.memory_mib
            peers = [p for p in peers if p.instance == proc.instance]
        others = sum(p.alloc_mib for p in peers)
        wanted = proc.alloc_mib + mib
        if (proc.limit_mib is not None and wanted > proc.limit_mib) or others + wanted > model_mib:
            self._exit(proc, now, 1, MSG_OOM)
        else:
            proc.alloc_mib = wanted

    def _exit(self, proc: _Proc, now: float, returncode: int, message: str) -> None:
        proc.returncode, proc.message, proc.ended, proc.alloc_mib = returncode, message, now, 0
        state = self._gpus[proc.gpu]
        if state.mps_faulted and not any(p.mps_client for p in self._alive(proc.gpu)):
            state.mps_faulted = False

    def _next_event(self, proc: _Proc) -> tuple[float, str]:
        if proc.paused_at is not None:  # its clock stands still until SIGCONT
            return (math.inf, "paused")
        p = proc.program
        events = [
            (proc.fault_exit_at, "fault"),
            (proc.started + p.crash_at_s, "crash"),
            (proc.started + p.duration_s, "end"),
            (proc.term_at, "term"),
        ]
        if not proc.grown:
            events.append((proc.started + p.grow_at_s, "grow"))
        return min(events)

    def _settle(self) -> float:
        """Apply every process event due by now, in time order; return now."""
        now = self.clock()
        while True:
            due = [(self._next_event(p), p.pid) for p in self._procs.values() if p.alive]
            due = [d for d in due if d[0][0] <= now]
            if not due:
                return now
            (when, kind), pid = min(due)
            proc = self._procs[pid]
            if kind == "grow":
                proc.grown = True
                self._allocate(proc, proc.program.grow_mib, when)
            elif kind == "end":
                self._exit(proc, when, proc.program.exit_code, "")
            elif kind == "fault":
                self._exit(proc, when, 1, MSG_MPS_FAULT)
            elif kind == "term":
                self._exit(proc, when, -proc.term_signal, "")
            else:
                self._crash(proc, when)

    def _crash(self, proc: _Proc, when: float) -> None:
        self._exit(proc, when, 1, MSG_CUDA)
        if not proc.mps_client:
            return
        others = [p for p in self._alive(proc.gpu) if p.mps_client]
        for other in others:  # a paused one meets the error once resumed (its clock shifts)
            start = when if other.paused_at is None else other.paused_at
            other.fault_exit_at = min(other.fault_exit_at, start + FAULT_EXIT_DELAY_S)
        self._gpus[proc.gpu].mps_faulted = bool(others)


def _thread_pct(proc: _Proc) -> int:
    """The SM share an MPS client was started with; 0 for none (it holds no set share)."""
    if not proc.mps_client:
        return 0
    try:
        return int(proc.env.get(THREAD_PCT, "0"))
    except ValueError:
        return 0
