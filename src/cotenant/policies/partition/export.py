"""Plans as data for other tools: JSON, and NVIDIA mig-parted configs.

mig-parted (``NVIDIA/mig-parted``) reads ``version: v1`` with named ``mig-configs``; each
config is a list of device selections with ``mig-enabled`` and a ``mig-devices`` count per
profile. We emit one config per distinct layout of the plan (named ``cotenant-<n>``), each
with a ``device-filter`` of the GPU model's PCI device IDs where we know them (from
mig-parted's default config, ../shared/reference/mig.md), so a node labelled
``nvidia.com/mig.config=cotenant-0`` gets that layout from the GPU operator on all its GPUs.

A node whose GPUs need different layouts cannot be described that way. With
``gpus_per_node`` the plan's GPUs are dealt onto nodes of that many GPUs (every node about
the same mix, so most nodes share a config) and each distinct node gets one config that
gives every device index its own layout; a node's unused GPUs get MIG mode off. A node
config's name comes from its content (``cotenant-node-<8 hex digits>``, see
:func:`node_config_name`): the same layouts always get the same name and different ones a
different name, so a node labelled by an earlier plan shows a config of this one only if it
has this one's layouts. :func:`node_counts` says
how many nodes take each config. A whole-GPU plan (``Plan.speedup`` above 1: no MIG, each
GPU shown as one 7g instance) is one config with MIG mode off: a 7g instance would lose the
SMs and memory MIG keeps back (98 of 108 SMs on an A100), and the plan was sized without them.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Any

from cotenant.errors import InputError
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


def to_mig_parted(plan: Plan, gpu_model: str, gpus_per_node: int | None = None) -> dict[str, Any]:
    """A mig-parted config document with one named config per distinct layout, or with
    ``gpus_per_node`` one per distinct node (see the module docstring)."""
    if plan.speedup != 1.0:  # whole GPUs, MIG mode off (the plan shows each as one 7g)
        whole: dict[str, Any] = {"devices": "all", "mig-enabled": False}
        if gpu_model in DEVICE_FILTERS:
            whole["device-filter"] = list(DEVICE_FILTERS[gpu_model])
        name = "cotenant-0" if gpus_per_node is None else node_config_name(WHOLE, gpu_model,
                                                                            gpus_per_node)
        return {"version": "v1", "mig-configs": {name: [whole]}}
    if gpus_per_node is not None:
        return _per_node(plan, gpu_model, gpus_per_node)
    configs: dict[str, Any] = {}
    seen: set[tuple[tuple[str, int], ...]] = set()
    for gpu in plan.gpus:
        key = layout_key(gpu.layout)
        if key in seen:
            continue
        name = f"cotenant-{len(seen)}"
        seen.add(key)
        selection: dict[str, Any] = {"devices": "all", "mig-enabled": True}
        if gpu_model in DEVICE_FILTERS:
            selection["device-filter"] = list(DEVICE_FILTERS[gpu_model])
        selection["mig-devices"] = dict(key)
        configs[name] = [selection]
    return {"version": "v1", "mig-configs": configs}


def node_layouts(plan: Plan, gpus_per_node: int) -> list[tuple[tuple[tuple[str, int], ...], ...]]:
    """The plan's GPUs packed onto nodes of ``gpus_per_node``: per node, each device's layout.
    The layouts are dealt round-robin, so every node gets about the same mix and most nodes
    are alike (one config); like layouts sit on consecutive devices."""
    if gpus_per_node < 1:
        raise InputError("gpus per node", f"{gpus_per_node} must be at least 1")
    keys = sorted((layout_key(g.layout) for g in plan.gpus), key=_layout_order)
    nodes = -(-len(keys) // gpus_per_node)
    return [tuple(sorted(keys[i::nodes], key=_layout_order)) for i in range(nodes)]


def _layout_order(key: tuple[tuple[str, int], ...]) -> tuple[int, tuple[tuple[str, int], ...]]:
    return -len(key), key


def node_counts(plan: Plan, gpu_model: str, gpus_per_node: int) -> dict[str, int]:
    """How many nodes take each node config of :func:`to_mig_parted`, by name."""
    if plan.speedup != 1.0:  # whole GPUs: every node the one config with MIG mode off
        return {node_config_name(WHOLE, gpu_model, gpus_per_node):
                len(node_layouts(plan, gpus_per_node))}
    return dict(Counter(node_config_name(node, gpu_model, gpus_per_node)
                        for node in node_layouts(plan, gpus_per_node)))


def _per_node(plan: Plan, gpu_model: str, gpus_per_node: int) -> dict[str, Any]:
    return mig_parted_configs(node_layouts(plan, gpus_per_node), gpu_model, gpus_per_node)[0]


NodeKey = tuple[tuple[tuple[str, int], ...], ...]
WHOLE: NodeKey = ((("whole-gpu", 1),),)
"""The key of a whole-GPU node config (MIG mode off on every device)."""


def node_config_name(keys: NodeKey, gpu_model: str, gpus_per_node: int) -> str:
    """The name of the node config for ``gpu_model`` devices with ``keys`` layouts on nodes
    of ``gpus_per_node``: ``cotenant-node-`` and the first 8 hex digits of a SHA-256 of the
    three, so it changes exactly when the config's content does (two models with the same
    profile names, A100-80GB and H100-80GB, differ in their device filter)."""
    text = json.dumps([[list(map(list, key)) for key in keys], gpu_model, gpus_per_node])
    return f"cotenant-node-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def mig_parted_configs(node_keys: list[NodeKey], gpu_model: str,
                       gpus_per_node: int) -> tuple[dict[str, Any], list[str]]:
    """The mig-parted document for nodes whose devices have ``node_keys`` layouts (one config
    per distinct node, named by :func:`node_config_name`, in order of first use), and each
    node's config name."""
    names: dict[NodeKey, str] = {}
    configs: dict[str, Any] = {}
    for keys in node_keys:
        if keys in names:
            continue
        name = names[keys] = node_config_name(keys, gpu_model, gpus_per_node)
        selections: list[dict[str, Any]] = []
        for key in dict.fromkeys(keys):  # each distinct layout, in device order
            selection: dict[str, Any] = {
                "devices": [i for i, k in enumerate(keys) if k == key], "mig-enabled": True}
            if gpu_model in DEVICE_FILTERS:
                selection["device-filter"] = list(DEVICE_FILTERS[gpu_model])
            selection["mig-devices"] = dict(key)
            selections.append(selection)
        if len(keys) < gpus_per_node:  # a node the plan does not fill
            selections.append({"devices": list(range(len(keys), gpus_per_node)),
                               "mig-enabled": False})
        configs[name] = selections
    return {"version": "v1", "mig-configs": configs}, [names[k] for k in node_keys]


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
        "driver_notes": sorted({n for g in plan.gpus for n in problem.geometry.notes(g.layout)}),
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
