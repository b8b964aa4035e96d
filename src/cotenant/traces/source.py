"""Where a simulation's cluster and pods come from: openb files, or the embedded synthetic
default fitted to openb."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cotenant.errors import InputError
from cotenant.model.cluster import Cluster, ClusterState, never_fits
from cotenant.model.workload import Pod, PodShape
from cotenant.traces.openb import load_nodes, load_pods
from cotenant.traces.synthetic import (
    SyntheticParams,
    default_params,
    generate_nodes,
    generate_pods,
    load_params,
)

DEFAULT_NODE_LIST = "openb_node_list_gpu_node.csv"


@dataclass(frozen=True)
class Workload:
    """A cluster, the pods to run on it, and a line saying where they came from."""

    cluster: Cluster
    pods: list[Pod]
    description: str

    def __post_init__(self) -> None:
        note = unplaceable_note(self.cluster, self.pods)
        if note:
            object.__setattr__(self, "description", f"{self.description}; {note}")


def unplaceable_note(cluster: Cluster, pods: Sequence[Pod]) -> str | None:
    """A note on the pods no node could host even empty (they stay in the run and fail), with
    the first one's reason; None when every pod could be placed somewhere."""
    empty = ClusterState(cluster)
    reasons: dict[PodShape, str | None] = {}
    count, first = 0, ""
    for pod in pods:
        if pod.shape not in reasons:
            reasons[pod.shape] = never_fits(empty, pod.shape)
        why = reasons[pod.shape]
        if why is not None:
            count += 1
            first = first or f"{pod.name} {why}"
    if not count:
        return None
    return (f"{count} of {len(pods)} pods fit no node, even empty, and can only fail "
            f"(first: {first})")


def load_workload(
    pods: Path | None = None,
    nodes: Path | None = None,
    *,
    params: Path | None = None,
    synthetic_pods: int | None = None,
    synthetic_nodes: int | None = None,
    seed: int = 0,
) -> Workload:
    """Pods and nodes from openb CSVs when ``pods`` is given (nodes default to the GPU node
    list beside it), else drawn from fitted synthetic parameters with ``seed``."""
    if pods is not None:
        if not pods.is_file():
            raise InputError(str(pods), "no such pod list file",
                             hint="check the path (../shared/data is beside the repository)")
        if nodes is None:
            nodes = pods.parent / DEFAULT_NODE_LIST
            if not nodes.exists():
                raise InputError(
                    str(pods), f"no node list given and no {DEFAULT_NODE_LIST} beside it",
                    hint="pass --nodes PATH",
                )
        every_node = load_nodes(nodes, gpu_only=False)
        node_list = [n for n in every_node if n.gpu_count > 0]
        if not node_list:
            raise InputError(str(nodes), "no GPU nodes in the node list")
        skipped = len(every_node) - len(node_list)
        note = f" ({skipped} CPU-only nodes left out)" if skipped else ""
        return Workload(
            Cluster(node_list), load_pods(pods), f"openb trace {pods.name} on {nodes.name}{note}"
        )
    if nodes is not None:
        raise InputError(str(nodes), "--nodes needs --pods", hint="or leave both out")
    fitted: SyntheticParams = load_params(params) if params else default_params()
    n_pods = synthetic_pods if synthetic_pods is not None else fitted.pods
    n_nodes = synthetic_nodes if synthetic_nodes is not None else fitted.nodes
    if n_pods < 1 or n_nodes < 1:
        raise InputError("synthetic", "need at least one pod and one node")
    rng = np.random.default_rng(seed)
    node_list = generate_nodes(fitted, n_nodes, rng)
    pod_list = generate_pods(fitted, n_pods, rng)
    return Workload(
        Cluster(node_list),
        pod_list,
        f"synthetic: {n_pods} pods on {n_nodes} nodes fitted to {fitted.source} (seed {seed})",
    )
