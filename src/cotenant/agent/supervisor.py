"""The supervisor: runs workloads, observes every exit, and answers it as the co-location
policy's recovery rules say (:class:`~cotenant.policies.colocation.Recovery`, the object the
simulator's fault handling uses too).

Everything happens in :meth:`Supervisor.tick` (no threads): re-adopt what a previous agent
left running, read XID events, check each GPU's MPS daemon, reap exited processes, start what
is due. What is observation and enforcement here:

* every exit is classified (:mod:`cotenant.agent.faults`) and logged with its class; an
  exit the agent asked for (a stop, a share change, an eviction) is logged as ``requested``
  and counts as no fault when it is the SIGTERM the agent sent, the SIGKILL after the grace,
  or an exit code with no GPU error in it (exit 0, 143 or 137 even with one); any other
  exit on the way out (a SIGSEGV or a CUDA error while checkpointing, an XID, an MPS
  failure) is still a fault. The kernel's OOM killer also sends SIGKILL, so an OOM kill
  during a stop cannot be told apart;
* any other exit goes to :meth:`Recovery.respond` as a :class:`Fault`
  (:func:`~cotenant.agent.faults.recovery_fault`) with the workload's count of its own faults
  since its last stable run (a run of ``stable_s`` clears it), and the response is enforced:
  done, a graceful stop (not restarted), given up, or a restart after the response's delay
  (an XID also keeps offline work off the GPU for the quarantine). Only the faults the
  response counts go into that budget (``failures``); ``restarts`` counts every restart
  after a fault, for the operator;
* an MPS daemon that stops answering is restarted; its GPU's clients are killed and restarted
  (not their fault), online ones first, offline ones after;
* online work is never stopped or delayed for offline's sake: online workloads start first in
  every tick, and only offline clients are restarted to change their SM share;
* every change is written before it is made (write-ahead): a start records ``starting``
  with a fresh launch id, then spawns the process with that id in its environment
  (:data:`~cotenant.agent.backends.base.LAUNCH_VAR`), then records ``running``; a stop or a
  restart records ``stopping`` / ``restarting`` before its SIGTERM; an exit is recorded
  together with its outcome and its count, in one transaction. Fault points
  (:mod:`cotenant.agent.faultpoints`) sit between the steps;
* an agent restart (a new Supervisor on the same state) reconciles the database with the
  processes the backend can find (:meth:`~cotenant.agent.backends.base.ProcessBackend.launched`:
  the launch ids in live processes' environments): a ``starting`` workload whose process
  exists is adopted, else started again; every process still alive is re-adopted and the
  rest accounted for (their exit is classified from the status the process's wrapper left,
  ``lost`` where unknown); a live process the database does not know (its row lost with a
  storage fault, or the database deleted) is adopted from the spec in its environment, or
  stopped where its workload is finished or runs another process. So no sequence of
  crashes runs a workload twice or loses one;
* timeouts (the SIGKILL after a stop's grace, a backoff, a hold or quarantine, a pause, the
  stable run that restores a budget) run on a monotonic clock (:mod:`.steady`): a wall
  clock step, back or forward, changes none of them;
* an offline workload can be *paused* for the compute guard (:mod:`cotenant.agent.pauses`):
  it keeps its memory and MPS share and launches nothing until it is resumed at the time
  given, or before it is stopped or restarted; an agent that starts resumes every offline
  process it adopts.
"""

from __future__ import annotations

import json
import math
import secrets
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import replace

from cotenant.agent.backends.base import (
    LAUNCH_VAR,
    SPEC_VAR,
    WORKLOAD_VAR,
    BackendFeature,
    Launched,
    NodeBackend,
    ProcessStatus,
    ProcState,
    XidEvent,
)
from cotenant.agent.downtime import DowntimeMeter
from cotenant.agent.faults import FaultClass, asked_for, classify, recovery_fault
from cotenant.agent.mig_workloads import check_mig, mig_device, rank_specs
from cotenant.agent.mps import MpsManager
from cotenant.agent.pauses import Pauses
from cotenant.agent.spec import Role, WorkloadSpec
from cotenant.agent.state import StateStore, Status, StorageError, WorkloadRecord
from cotenant.agent.steady import Pinned
from cotenant.errors import CotenantError, InputError, PermanentError, TemporaryError
from cotenant.policies.colocation.recovery import Next, Recovery, Response

NODE = "node"  # the events table's workload name for node-level events
_Event = tuple[float, str, str, str | None, str]


MAX_ACTIVE = 256
"""Workloads an agent runs or keeps pending at once: far more than a node's GPUs can share,
and few enough that every tick (which reads them all) stays fast."""

MIG_WAIT_S = 10.0
"""Seconds before a workload whose MIG instance is missing tries to start again."""

class Supervisor:
    """Reconciles the workloads in ``store`` with the processes on ``backend``."""

    def __init__(
        self,
        backend: NodeBackend,
        store: StateStore,
        mps: MpsManager,
        *,
        recovery: Recovery | None = None,
        stop_grace_s: float = 10.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.backend = backend
        self.store = store
        self.mps = mps
        self.recovery = recovery or Recovery()
        """What follows an exit (the co-location policy's rules)."""
        self.stop_grace_s = stop_grace_s
        features = backend.features()
        self.use_mps = BackendFeature.MPS in features
        self._xid_feature = BackendFeature.XID_EVENTS in features
        self._recovered = False
        self._xids: list[XidEvent] = []
        self._xid_since = float("-inf")
        self._mps_failed: dict[int, float] = {}  # GPU -> when its MPS daemon was found dead
        self._offline_held: dict[int, float] = {}  # GPU -> no offline start before (monotonic)
        self.pauses = Pauses(backend, store, monotonic)
        self.downtime = DowntimeMeter()
        """How long offline jobs are down per start and per share change (:mod:`.downtime`)."""
        self.start_env: Callable[[WorkloadSpec], Mapping[str, str]] | None = None
        """More environment for a workload that starts (the priority runtime's)."""
        self._last_now = -math.inf
        self.monotonic = monotonic
        """The clock of every timeout (a stop's grace, a backoff, a hold, a pause, a stable
        run): never the wall clock (:mod:`.steady`)."""
        self._offset = 0.0  # wall minus monotonic at the last tick
        self._next_start = Pinned(monotonic)  # a backoff's end, per workload
        self._ran_since = Pinned(monotonic)  # a running workload's start
        self.points = store.points
        self._deadlines: dict[str, float] = {}  # workload -> SIGKILL after (monotonic)
        self._strays: dict[int, float] = {}  # a duplicate being stopped -> SIGKILL after
        self.orphans: dict[int, str] = {}
        """Live processes no workload claims that recovery could not adopt: pid -> why."""

    # --- requests ----------------------------------------------------------------------------

    def submit(self, spec: WorkloadSpec, now: float) -> WorkloadRecord:
        """Add ``spec`` (a job over several MIG instances: one workload per instance, all
        checked before any is added; the first rank's record is returned)."""
        if not spec.mig_instances:
            self._check(spec)
            return self._add(spec, now)
        ranks = rank_specs(spec)
        for rank in ranks:
            self._check(rank, len(ranks))
        records = [self._add(rank, now) for rank in ranks]
        return records[0]

    def _check(self, spec: WorkloadSpec, adding: int = 1) -> None:
        gpus = self.backend.gpus()
        if spec.gpu >= len(gpus):
            raise InputError(f"workload {spec.name!r}.gpu",
                             f"no GPU {spec.gpu}; this node has 0-{len(gpus) - 1}")
        active = self.store.count_active() + adding - 1
        existing = self.store.get(spec.name)
        if active >= MAX_ACTIVE and (existing is None or existing.status.final):
            raise InputError(f"workload {spec.name!r}", f"this agent already runs {active} "
                             f"workloads, its limit", hint="stop some first")
        check_mig(self.backend, spec, gpus[spec.gpu].mig_enabled)
        total = gpus[spec.gpu].memory_total_mib
        if spec.mem_limit_mib is not None and spec.mem_limit_mib > total:
            raise InputError(f"workload {spec.name!r}.mem_limit_mib",
                             f"{spec.mem_limit_mib} MiB is more than GPU {spec.gpu} has "
                             f"({total} MiB), so it would limit nothing",
                             hint=f"give at most {total}")

    def _add(self, spec: WorkloadSpec, now: float) -> WorkloadRecord:
        record = self.store.add(spec, now)  # on disk (with its event) before it is answered
        self.points.hit("submit.recorded")
        return record

    def stop(self, name: str, now: float) -> WorkloadRecord:
        """Stop workload ``name``, or every rank of job ``name`` (the first rank's record)."""
        record = self.store.get(name)
        if record is None:
            ranks = [r for r in self.store.all() if r.spec.job == name]
            if ranks:
                stopped = [self.stop(r.spec.name, now) for r in ranks]
                return stopped[0]
            if self.store.drop_quarantined(name):
                self.store.event(now, name, "quarantine cleared", detail="stop requested")
                raise InputError(f"workload {name!r}", "was set aside as unreadable "
                                 "(quarantined); its row is removed now")
            raise InputError(f"workload {name!r}", "does not exist")
        if record.status.final:
            return record
        running = record.status.has_process and record.pid is not None
        # the intent is on disk before the SIGTERM (else StorageError: the API's 503)
        record = self.store.commit(
            replace(record, status=Status.STOPPING if running else Status.STOPPED, since=now),
            ((now, name, "stop requested", None, ""),), durable=True)
        self.downtime.forget(name)
        self.points.hit("stop.intent")
        if running and record.pid is not None:
            self._signal_stop(name, record.pid, now)
            self.points.hit("stop.signalled")
        return record

    def restart_for_share(self, name: str, share_pct: int, now: float) -> None:
        """Give offline workload ``name`` a new SM share by restarting its client (MPS reads
        the share only when a client starts)."""
        record = self.store.get(name)
        if record is None or record.spec.role is not Role.OFFLINE:
            return
        if record.status is not Status.RUNNING or record.pid is None:
            self.store.update(record, share_pct=share_pct)
            return
        self.downtime.stopped_for_share(name, now)
        event = (now, name, "share change", None, f"{record.applied_pct}->{share_pct}")
        self._stop_to_restart(replace(record, share_pct=share_pct), record.pid, now,
                              "share", (event,))

    def hold_offline(self, gpu: int, until: float, now: float | None = None) -> None:
        """Start no offline workload on ``gpu`` before wall time ``until`` (the guard's
        eviction, an XID's quarantine), as measured from ``now`` (else the last tick) on the
        monotonic clock; the hold lives in memory, so an agent restart lifts it."""
        mono = self.monotonic()
        end = mono + until - (now if now is not None else mono + self._offset)
        self._offline_held[gpu] = max(end, self._offline_held.get(gpu, end))
        for record in self.store.all():  # a hold is no part of a restart's cost
            if record.spec.gpu == gpu and record.spec.role is Role.OFFLINE:
                self.downtime.forget(record.spec.name)

    def held_until(self, gpu: int) -> float:
        """No offline workload starts on ``gpu`` before this (an eviction's hold, an XID's
        quarantine), in wall time as of the last tick; -inf where none holds it."""
        return self._offline_held.get(gpu, -math.inf) + self._offset

    def pause(self, name: str, now: float, until: float) -> bool:
        """Pause running offline workload ``name`` until ``until`` (:mod:`.pauses`); False
        where it is not running."""
        record = self.store.get(name)
        if (record is None or record.spec.role is not Role.OFFLINE
                or record.status is not Status.RUNNING or record.pid is None):
            return False
        self.pauses.pause(name, record.pid, now, until)
        return True

    def paused(self) -> set[str]:
        """The workloads paused now."""
        return self.pauses.names()

    def evict(self, name: str, now: float) -> None:
        """Stop running offline workload ``name`` to start it again when it may (after a
        :meth:`hold_offline` on its GPU); not a fault, so no restart is counted."""
        record = self.store.get(name)
        if (record is not None and record.spec.role is Role.OFFLINE
                and record.status is Status.RUNNING and record.pid is not None):
            self._stop_to_restart(record, record.pid, now, "evict")

    def _stop_to_restart(self, record: WorkloadRecord, pid: int, now: float, why: str,
                         events: tuple[tuple[float, str, str, str | None, str], ...] = ()
                         ) -> None:
        """Record ``restarting``, then SIGTERM (SIGKILL after the stop grace); started again
        once it has exited. Where the intent cannot be written (a storage fault) nothing is
        done: after a crash the SIGTERM would read as one from outside, and the job would be
        stopped, not restarted. The caller (the co-location controller) tries again."""
        try:
            self.store.commit(replace(record, status=Status.RESTARTING, since=now), events,
                              durable=True)
        except StorageError as exc:
            self.store.event(now, record.spec.name, f"{why} deferred", detail=exc.one_line())
            return
        self.points.hit(f"{why}.intent")
        self._signal_stop(record.spec.name, pid, now)
        self.points.hit(f"{why}.signalled")

    def _signal_stop(self, name: str, pid: int, now: float) -> None:
        """SIGTERM, and SIGCONT where the process is paused, so that it can act on it; the
        SIGKILL follows ``stop_grace_s`` later on the monotonic clock."""
        self._deadlines[name] = self.monotonic() + self.stop_grace_s
        self.backend.send_signal(pid, signal.SIGTERM)
        self.pauses.release(name, now, "to stop")

    # --- reconcile ---------------------------------------------------------------------------

    def tick(self, now: float) -> None:
        """One reconcile pass."""
        if now < self._last_now:
            self._clock_stepped_back(self._last_now - now)
        self._last_now = now
        self._offset = now - self.monotonic()
        self.store.flush()  # what a storage fault kept in memory, and a deleted database
        if not self._recovered:
            self._recover(now)
        self._read_xids(now)
        self._check_mps(now)
        for record in self.store.all():
            if record.status.has_process:
                self._reap(record, now)
        self._reap_strays()
        self.pauses.resume_due(now)
        self._start_due(now)

    def _reap_strays(self) -> None:
        """Duplicates found at recovery: SIGKILL after the grace, forgotten once gone."""
        for pid, deadline in list(self._strays.items()):
            if self.backend.poll(pid).state is not ProcState.RUNNING:
                del self._strays[pid]
            elif self.monotonic() > deadline:
                self.backend.send_signal(pid, signal.SIGKILL)

    def _clock_stepped_back(self, by: float) -> None:
        """The wall clock went back ``by`` seconds: the persisted backoffs keep the wait
        they had left (for an agent that starts later); in this process every wait runs on
        the monotonic clock already."""
        for record in self.store.all():
            if record.status in (Status.PENDING, Status.BACKOFF):
                self.store.update(record, next_start=record.next_start - by)
        self._next_start.shift(by)
        self.downtime.shift(by)

    def _recover(self, now: float) -> None:
        """Reconcile the state with the processes found (see the module docstring)."""
        self._recovered = True
        found = {f.launch: f for f in self.backend.launched()}
        for record in self.store.all():
            if record.spec.role is Role.OFFLINE and (
                    record.status is Status.RESTARTING
                    or (record.status is Status.PENDING
                        and record.last_exit.startswith("requested"))):
                self.downtime.down_unseen(record.spec.name)  # a previous agent's restart
            if record.status is Status.STARTING:
                self._recover_start(record, found.pop(record.launch, None), now)
                continue
            if not record.status.has_process or record.pid is None:
                continue
            found.pop(record.launch, None)
            self._recover_process(record, now)
        for launched in found.values():  # live processes the state does not know
            self._recover_unknown(launched, now)

    def _recover_start(self, record: WorkloadRecord, launched: Launched | None,
                       now: float) -> None:
        """A start the previous agent had written and may have made."""
        name = record.spec.name
        if launched is not None:
            self.store.commit(replace(record, status=Status.RUNNING, pid=launched.pid,
                                      since=now),
                              ((now, name, "adopted", None, f"pid {launched.pid} (was starting)"),))
            return
        self.store.commit(replace(record, status=Status.PENDING, next_start=now, launch=""),
                          ((now, name, "start not made", None, "starting again"),))

    def _recover_process(self, record: WorkloadRecord, now: float) -> None:
        assert record.pid is not None
        status = self.backend.poll(record.pid)
        name = record.spec.name
        if status.state is not ProcState.RUNNING:
            known = "status unknown" if status.state is ProcState.UNKNOWN else "status known"
            self.store.event(now, name, "lost", detail=f"pid {record.pid} ({known})")
            self._exited(record, status, now)
            return
        self.store.event(now, name, "adopted", detail=f"pid {record.pid}")
        if record.status in (Status.STOPPING, Status.RESTARTING):
            # its SIGTERM may not have gone out: send it, and start the grace afresh
            self._signal_stop(name, record.pid, now)
        elif record.spec.role is Role.OFFLINE:  # a pause of the previous agent's
            self.backend.send_signal(record.pid, signal.SIGCONT)

    def _recover_unknown(self, launched: Launched, now: float) -> None:
        """A live process with a launch id no workload's record holds: adopted where its
        workload has no process (its record lost, or the database deleted), stopped where
        its workload is finished or runs another process (never two copies)."""
        record = self.store.get(launched.workload)
        pid = launched.pid
        if record is None:
            try:
                spec = WorkloadSpec.from_dict(json.loads(launched.spec))
            except (CotenantError, ValueError, TypeError):
                self.orphans[pid] = f"workload {launched.workload!r} unknown, spec unreadable"
                self.store.event(now, NODE, "orphan", detail=f"pid {pid}: {self.orphans[pid]}")
                return
            record = WorkloadRecord(spec, Status.RUNNING, pid, share_pct=spec.sm_share,
                                    since=now, launch=launched.launch)
            self.store.commit(record, ((now, spec.name, "adopted", None,
                                        f"pid {pid} (not in the state: from its environment)"),))
            return
        name = record.spec.name
        if record.status.final or record.status.has_process:
            self.store.event(now, name, "duplicate stopped",
                             detail=f"pid {pid} ({record.status.value}, pid {record.pid})")
            self._strays[pid] = self.monotonic() + self.stop_grace_s
            self.backend.send_signal(pid, signal.SIGTERM)
            self.orphans[pid] = f"copy of {name!r} stopped"
            return
        self.store.commit(replace(record, status=Status.RUNNING, pid=pid, since=now,
                                  launch=launched.launch),
                          ((now, name, "adopted", None, f"pid {pid} (its start not recorded)"),))

    def _read_xids(self, now: float) -> None:
        if not self._xid_feature:
            return
        try:
            events = self.backend.xid_events(self._xid_since)
        except PermanentError as exc:  # e.g. not supported here: stop asking
            self._xid_feature = False
            self.store.event(now, NODE, "nvml error", detail=f"XID events off: {exc.one_line()}")
            return
        except CotenantError as exc:
            self.store.event(now, NODE, "nvml error", detail=exc.one_line())
            return
        for event in events:
            self.store.event(now, NODE, "xid", FaultClass.XID.value,
                             f"XID {event.xid} on GPU {event.gpu} pid {event.pid}")
            self._xid_since = max(self._xid_since, event.time)
        self._xids = [*self._xids, *events][-100:]

    def _check_mps(self, now: float) -> None:
        if not self.use_mps:
            return
        gpus = {r.spec.gpu for r in self.store.all()  # MIG workloads run without MPS
                if r.status.has_process and r.spec.mig_instance is None}
        for gpu in sorted(gpus):
            try:
                if self.mps.healthy(gpu):
                    continue
                self.store.event(now, NODE, "mps failure", FaultClass.MPS.value, f"GPU {gpu}")
                self._mps_failed[gpu] = now
                self.mps.ensure(gpu)
                self.store.event(now, NODE, "mps restarted", detail=f"GPU {gpu}")
            except CotenantError as exc:
                self.store.event(now, NODE, "mps error", detail=exc.one_line())

    def _reap(self, record: WorkloadRecord, now: float) -> None:
        assert record.pid is not None
        status = self.backend.poll(record.pid)
        if record.status is Status.RUNNING:
            self._ran_since.pin(record.spec.name, record.since, now)
        if status.state is ProcState.RUNNING:
            outlived_daemon = record.since < self._mps_failed.get(record.spec.gpu, -1.0)
            deadline = self._deadlines.get(record.spec.name)
            overdue = (record.status in (Status.STOPPING, Status.RESTARTING)
                       and deadline is not None and self.monotonic() > deadline)
            if outlived_daemon or overdue:
                self.backend.send_signal(record.pid, signal.SIGKILL)
            return
        self._exited(record, status, now)

    def _exited(self, record: WorkloadRecord, status: ProcessStatus, now: float) -> None:
        """Record an exit together with what follows it (and its fault count), in one
        transaction: a crash before it finds the exit again, after it finds it done."""
        self.points.hit("exit.seen")
        name, spec = record.spec.name, record.spec
        mps_failed = record.since < self._mps_failed.get(spec.gpu, -1.0)
        fault, detail = classify(status, spec.gpu, now, self._xids, mps_failed)
        signum = -status.returncode if status.returncode and status.returncode < 0 else 0
        requested = (record.status in (Status.STOPPING, Status.RESTARTING)
                     and asked_for(status, fault))
        label = "requested" if requested else fault.value
        events = [(now, name, "exit", None if requested else fault.value,
                   f"{label}: {detail}" if requested else detail)]
        ran_s = self._ran_since.since(name, record.since, now)  # since its start (monotonic)
        self._deadlines.pop(name, None)
        exited = replace(record, pid=None, last_exit=f"{label}: {detail}", since=now)
        if not requested:  # a crash or fault, also while checkpointing: no restart cost
            self.downtime.forget(name)
        if record.status is Status.STOPPING:
            new = replace(exited, status=Status.STOPPED)
        elif record.status is Status.RESTARTING:
            new = self._restart(exited, now, 0.0, events, count=False)
        else:
            failures = self.recovery.failures_after(record.failures, ran_s)
            response = self.recovery.respond(recovery_fault(fault, signum),
                                             spec.role is Role.ONLINE, failures)
            new = self._respond(exited, response, failures, detail, now, events)
        self.store.commit(new, tuple(events))
        if new.status in (Status.PENDING, Status.BACKOFF):
            self._next_start.pin(name, new.next_start, now)
        self.points.hit("exit.recorded")

    def _respond(self, record: WorkloadRecord, response: Response, failures: int, detail: str,
                 now: float, events: list[_Event]) -> WorkloadRecord:
        """The record after the recovery's ``response`` to an exit (``events`` gets what to
        log with it)."""
        name = record.spec.name
        failures += int(response.counts)
        if response.next is Next.DONE:
            return replace(record, status=Status.COMPLETED, failures=failures)
        if response.next is Next.STOP:
            events.append((now, name, "graceful stop", None, detail))
            return replace(record, status=Status.STOPPED, failures=failures)
        if response.next is Next.GIVE_UP:
            events.append((now, name, "gave up", None,
                           f"{failures} faults of its own, {record.restarts} restarts"))
            return replace(record, status=Status.FAILED, failures=failures)
        if response.quarantine_s > 0.0:
            events.append((now, NODE, "gpu quarantined", None, f"GPU {record.spec.gpu}: "
                           f"no offline work for {response.quarantine_s:g} s"))
            self.hold_offline(record.spec.gpu, now + response.quarantine_s, now)
        return self._restart(record, now, response.delay_s, events, failures=failures)

    @staticmethod
    def _restart(record: WorkloadRecord, now: float, delay: float, events: list[_Event],
                 count: bool = True, failures: int | None = None) -> WorkloadRecord:
        status = Status.PENDING if delay == 0.0 else Status.BACKOFF
        events.append((now, record.spec.name, "restart", None, f"in {delay:g} s"))
        return replace(record, status=status, restarts=record.restarts + int(count),
                       next_start=now + delay, launch="",
                       failures=record.failures if failures is None else failures)

    def _start_due(self, now: float) -> None:
        waiting = [r for r in self.store.all() if r.status in (Status.PENDING, Status.BACKOFF)]
        self._next_start.keep(r.spec.name for r in waiting)
        self._ran_since.keep(r.spec.name for r in self.store.all() if r.status.has_process)
        due = [r for r in waiting if self._next_start.reached(r.spec.name, r.next_start, now)
               and not (r.spec.role is Role.OFFLINE
                        and self.monotonic() < self._offline_held.get(r.spec.gpu, -math.inf))]
        due.sort(key=lambda r: (r.spec.role is not Role.ONLINE, r.next_start, r.spec.name))
        for record in due:
            self._start(record, now)
        for gpu, failed_at in list(self._mps_failed.items()):
            if not any(r.spec.gpu == gpu and r.status.has_process and r.since < failed_at
                       for r in self.store.all()):
                del self._mps_failed[gpu]

    def _start(self, record: WorkloadRecord, now: float) -> None:
        """Write the intent (``starting``, a new launch id), spawn, record ``running``. The
        spawn goes ahead while writes fail: the launch id in the process's environment
        finds it after a crash all the same."""
        spec = record.spec
        share = record.share_pct if record.share_pct is not None else spec.sm_share
        launch = secrets.token_hex(8)
        try:
            env = self._start_env(spec, share)
            env.update({LAUNCH_VAR: launch, WORKLOAD_VAR: spec.name,
                        SPEC_VAR: json.dumps(spec.to_dict(), separators=(",", ":"))})
            # the intent holds what the process gets, for a recovery that adopts it
            self.store.commit(replace(record, status=Status.STARTING, launch=launch,
                                      applied_pct=share))
            self.points.hit("start.intent")
            pid = self.backend.spawn(list(spec.argv), env, spec.gpu)
        except TemporaryError as exc:
            self.store.commit(replace(record, next_start=now + exc.delay_s, launch=""),
                              ((now, spec.name, "start deferred", None, exc.one_line()),))
            self._next_start.pin(spec.name, now + exc.delay_s, now)
            return
        except CotenantError as exc:
            self.store.commit(replace(record, status=Status.FAILED, last_exit=exc.one_line(),
                                      since=now, launch=""),
                              ((now, spec.name, "start failed", None, exc.one_line()),))
            return
        self.points.hit("start.spawned")
        where = f"MIG {spec.mig_instance}" if spec.mig_instance else f"share {share}"
        if spec.role is Role.OFFLINE and spec.mig_instance is None:
            self.downtime.started(spec.name, pid, now)
        self.store.commit(replace(record, status=Status.RUNNING, pid=pid, applied_pct=share,
                                  since=now, launch=launch),
                          ((now, spec.name, "started", None, f"pid {pid} {where}"),))
        self._ran_since.pin(spec.name, now, now)
        self.points.hit("start.recorded")

    def _start_env(self, spec: WorkloadSpec, share: int | None) -> dict[str, str]:
        """The environment a start gives ``spec`` (its GPU, MIG instance or MPS client
        settings over its own)."""
        env = dict(spec.env)
        if self.start_env is not None:
            env.update(self.start_env(spec))
        if spec.mig_instance is not None:  # its instance alone, by UUID; no MPS there
            try:
                env["CUDA_VISIBLE_DEVICES"] = mig_device(self.backend, spec).uuid
            except InputError as exc:  # being remade (mig-parted destroys, then creates)
                raise TemporaryError(exc.one_line(), delay_s=MIG_WAIT_S) from exc
        elif self.use_mps:
            self.mps.ensure(spec.gpu)
            env.update(self.mps.client_env(spec.gpu, share, spec.mem_limit_mib))
        else:
            # NVML's index: CUDA's own default order is fastest first
            env.update(CUDA_DEVICE_ORDER="PCI_BUS_ID", CUDA_VISIBLE_DEVICES=str(spec.gpu))
        return env
