"""Co-location on the node: the agent observes and enforces, the core decides.

The agent builds the co-location core's :class:`~cotenant.policies.colocation.Observation`
for its GPUs (:mod:`.observe`), calls the policy's
:meth:`~cotenant.policies.colocation.ColocationPolicy.decide` - the object the simulator
drives - holding its state between calls (:mod:`.controller`), and enforces the actions
through the supervisor (:mod:`.enforce`), under priority sharing through the cotenant
runtime's boards (:mod:`.priority`).
"""

from cotenant.agent.colocation.controller import ColocationController, Observer
from cotenant.agent.colocation.enforce import Enforcer, GpuAction, check_enforceable, per_gpu
from cotenant.agent.colocation.load import LoadWindows, solo_load_pct
from cotenant.agent.colocation.observe import (
    NodeObserver,
    RowKey,
    Rows,
    check_online,
    guard_settings,
    reads_models,
)
from cotenant.agent.colocation.priority import PriorityRuntime, priority_runtime
from cotenant.agent.colocation.reports import P99Reports, Report

__all__ = [
    "ColocationController",
    "Enforcer",
    "GpuAction",
    "LoadWindows",
    "NodeObserver",
    "Observer",
    "P99Reports",
    "PriorityRuntime",
    "Report",
    "RowKey",
    "Rows",
    "check_enforceable",
    "check_online",
    "guard_settings",
    "per_gpu",
    "priority_runtime",
    "reads_models",
    "solo_load_pct",
]
