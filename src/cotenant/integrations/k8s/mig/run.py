"""``cotenant k8s mig`` as one library call: plan, write the mig-parted configs, roll out
(against the cluster, or against the fake on a manual clock for a dry run)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from cotenant.agent.backends import ManualClock
from cotenant.errors import CotenantError, InputError
from cotenant.integrations.k8s.mig.controller import (
    MigApi,
    RolloutReport,
    run_rollout,
)
from cotenant.integrations.k8s.mig.fake import FakeMigNodes
from cotenant.integrations.k8s.mig.rollout import Rollout, describe, plan_rollout
from cotenant.integrations.k8s.mig.steps import Action, Settings
from cotenant.model.deployment import parse_deployment
from cotenant.model.documents import loads_yaml
from cotenant.model.serving import parse_spec
from cotenant.perf.mig_profiles import ProfileTable, default_table, load_csv
from cotenant.report.output import write_text_atomic


@dataclass(frozen=True)
class MigJob:
    spec: Path
    nodes: tuple[str, ...]
    gpus_per_node: int
    current: Path | None = None
    mig_parted: Path | None = None
    profiles: Path | None = None
    kubeconfig: Path | None = None
    dry_run: bool = False
    settings: Settings = field(default_factory=Settings)
    solver: str = "auto"
    time_limit: float = 10.0


def _document(path: Path) -> object:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(str(path), f"cannot read: {exc.strerror}") from None
    return loads_yaml(text, str(path))


def prepare(job: MigJob) -> Rollout:
    """The rollout of ``job``'s spec over its nodes; writes the mig-parted configs if asked."""
    spec = parse_spec(_document(job.spec), str(job.spec))
    current = spec.current
    if job.current is not None:
        if current is not None:
            raise InputError("--current", f"{job.spec} has its own current: block",
                             hint="give the deployment running today once")
        current = parse_deployment(_document(job.current), str(job.current))
    table: ProfileTable = load_csv(job.profiles) if job.profiles else default_table()
    rollout, _ = plan_rollout(spec, table, list(job.nodes), job.gpus_per_node,
                              current=current, solver=job.solver, time_limit=job.time_limit)
    if job.mig_parted is not None:
        write_text_atomic(job.mig_parted, yaml.safe_dump(rollout.configs, sort_keys=False))
    return rollout


def _quiet(_: str) -> None:
    pass


def run_mig(job: MigJob, on_action: Callable[[float, Action], None],
            on_plan: Callable[[str], None] | None = None) -> RolloutReport:
    """Plan and roll out ``job`` (``on_plan`` gets the changes in order first); the cluster's
    configuration is loaded before planning, so a bad kubeconfig fails at once."""
    if job.dry_run:
        rollout = prepare(job)
        for line in describe(rollout):
            (on_plan or _quiet)(line)
        fake_clock = ManualClock()  # moves only by the controller's sleeps: no time taken
        fake = FakeMigNodes.for_rollout(rollout, fake_clock)
        return run_rollout(rollout, fake, fake_clock, fake_clock.advance, job.settings,
                           on_action)
    try:
        from cotenant.integrations.k8s.mig.client import ClientMigApi  # noqa: PLC0415
    except ImportError as exc:
        raise CotenantError(f"the Kubernetes integration needs {exc.name}",
                            hint="pip install 'cotenant[k8s]'") from None
    api: MigApi = ClientMigApi(job.kubeconfig)
    rollout = prepare(job)
    for line in describe(rollout):
        (on_plan or _quiet)(line)
    return run_rollout(rollout, api, time.monotonic, time.sleep, job.settings, on_action)
