"""Plans as data for other tools: JSON, and NVIDIA mig-parted configs.

mig-parted (``NVIDIA/mig-parted``) reads ``version: v1`` with named ``mig-configs``; each
config is a list of device selections with ``mig-enabled`` and a ``mig-devices`` count per
profile. We emit one config per distinct layout of the plan (named ``cotenant-<n>``), each
with a ``device-filter`` of the GPU model's PCI device IDs where we know them (from
mig-parted's default config, ../shared/reference/mig.md), so a node labelled
``nvidia.com/mig.config=cotenant-0`` gets that layout from the GPU operator.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from cotenant.model.mig import MigLayout
from cotenant.policies.partition.problem import PartitionProblem, Plan, served

# PCI device IDs (device + NVIDIA vendor 10DE), as mig-parted's device-filter lists them.
DEVICE_FILTERS: dict[str, list[str]] = {
    "A100-40GB": ["0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"],
    "A100-80GB": ["0x20B210DE", "0x20B510DE"],
    "H100-80GB": ["0x233010DE", "0x233110DE", "0x232210DE"],
}


def layout_key(layout: MigLayout) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(layout.profile_counts().items()))


def to_mig_parted(plan: Plan, gpu_model: str) -> dict[str, Any]:
    """A mig-parted config document with one named config per distinct layout."""
    configs: dict[str, Any] = {}
    seen: dict[tuple[tuple[str, int], ...], str] = {}
    for gpu in plan.gpus:
        key = layout_key(gpu.layout)
        if key in seen:
            continue
        name = f"cotenant-{len(seen)}"
        seen[key] = name
        selection: dict[str, Any] = {"devices": "all", "mig-enabled": True}
        if gpu_model in DEVICE_FILTERS:
            selection["device-filter"] = list(DEVICE_FILTERS[gpu_model])
        selection["mig-devices"] = dict(key)
        configs[name] = [selection]
    return {"version": "v1", "mig-configs": configs}


def to_json(problem: PartitionProblem, plan: Plan, gpu_model: str) -> dict[str, Any]:
    """The plan with per-GPU layouts and assignments, and per-service capacity vs demand."""
    have = served(problem, plan)
    per_layout = Counter(str(g.layout) for g in plan.gpus)
    return {
        "gpu_model": gpu_model,
        "solver": plan.solver,
        "gpus": plan.gpu_count,
        "lower_bound": plan.lower_bound,
        "optimal": plan.optimal,
        "gap": round(plan.gap, 4),
        "seconds": round(plan.seconds, 4),
        "layouts": dict(per_layout),
        "gpu_plans": [
            {
                "gpu": i,
                "layout": str(g.layout),
                "instances": [{"instance": str(p), "service": s} for p, s in g.assignment],
            }
            for i, g in enumerate(plan.gpus)
        ],
        "services": [
            {
                "name": name,
                "demand_rps": round(float(problem.demand[i]), 3),
                "capacity_rps": round(float(have[i]), 3),
            }
            for i, name in enumerate(problem.services)
        ],
    }
