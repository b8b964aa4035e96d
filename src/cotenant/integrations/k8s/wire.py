"""kube-scheduler's extender v1 JSON, read and written as the scheduler does.

The Go types of ``k8s.io/kube-scheduler/extender/v1`` (``types.go``) carry no JSON tags, so
the keys are the Go field names (``Pod``, ``Nodes``, ``NodeNames``, ``FailedNodes``,
``FailedAndUnresolvableNodes``, ``Error``, ``Host``, ``Score``, ``PodName``,
``PodNamespace``, ``PodUID``, ``Node``, ``NodeNameToVictims``, ``NodeNameToMetaVictims``,
``Pods``, ``UID``, ``NumPDBViolations``); Go's decoder matches keys case-insensitively, so this
module does too on the way in and writes the Go names on the way out. Of ``Nodes`` (a
``v1.NodeList``) and ``NodeNames`` exactly one is set, the other ``null``: ``NodeNames`` when
the extender is configured ``nodeCacheCapable``, and the reply uses the same one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from cotenant.errors import InputError
from cotenant.integrations.k8s.extender import FilterResult, Priorities
from cotenant.integrations.k8s.fastjson import loads_args


def get(obj: dict[str, Any], key: str) -> Any:
    """``obj[key]`` matched as Go's encoding/json matches: exact first, then case-folded."""
    if key in obj:
        return obj[key]
    folded = key.casefold()
    for k, v in obj.items():
        if k.casefold() == folded:
            return v
    return None


def parse_body(body: bytes, what: str) -> dict[str, Any]:
    try:
        obj = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(what, f"body is not JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise InputError(what, "body must be a JSON object")
    return obj


@dataclass(frozen=True)
class ExtenderArgs:
    """``ExtenderArgs``: the pod and the candidate nodes, by name or as objects."""

    pod: dict[str, Any]
    names: list[str]
    nodes: list[dict[str, Any]] | None  # the NodeList items when sent as objects

    @property
    def cache_capable(self) -> bool:
        return self.nodes is None


def extender_args(body: bytes) -> ExtenderArgs:
    fast = loads_args(body)  # reuses a node-name list decoded before
    obj = fast if fast is not None else parse_body(body, "ExtenderArgs")
    pod = get(obj, "Pod")
    if not isinstance(pod, dict):
        raise InputError("ExtenderArgs.Pod", "must be a Pod object")
    names, node_list = get(obj, "NodeNames"), get(obj, "Nodes")
    if names is not None:
        if not isinstance(names, list) or not set(map(type, names)) <= {str}:
            raise InputError("ExtenderArgs.NodeNames", "must be a list of node names")
        return ExtenderArgs(pod, names, None)  # read only: it may be a remembered list
    if node_list is None:
        raise InputError("ExtenderArgs", "one of Nodes or NodeNames must be set")
    items = get(node_list, "items") if isinstance(node_list, dict) else None
    if items is None and isinstance(node_list, dict):
        items = []
    if not isinstance(items, list) or not all(isinstance(n, dict) for n in items):
        raise InputError("ExtenderArgs.Nodes.items", "must be a list of Node objects")
    out: list[str] = []
    for i, node in enumerate(items):
        meta = get(node, "metadata")
        name = get(meta, "name") if isinstance(meta, dict) else None
        if not isinstance(name, str) or not name:
            raise InputError(f"ExtenderArgs.Nodes.items[{i}].metadata.name", "must be a string")
        out.append(name)
    return ExtenderArgs(pod, out, items)


def filter_result(args: ExtenderArgs | None, result: FilterResult | None,
                  error: str = "") -> dict[str, Any]:
    """``ExtenderFilterResult``; with an error, no node passes."""
    passed = result.passed if result is not None and not error else []
    reply: dict[str, Any] = {
        "Nodes": None,
        "NodeNames": None,
        "FailedNodes": result.failed if result is not None else {},
        "FailedAndUnresolvableNodes": result.unresolvable if result is not None else {},
        "Error": error,
    }
    if args is None or args.cache_capable:
        reply["NodeNames"] = passed
    else:
        assert args.nodes is not None
        keep = set(passed)
        items = [n for n, name in zip(args.nodes, args.names, strict=True) if name in keep]
        reply["Nodes"] = {"metadata": {}, "items": items}
    return reply


def encode(payload: object) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


def filter_reply(args: ExtenderArgs, result: FilterResult) -> bytes:
    """``ExtenderFilterResult`` as JSON, the same document as :func:`filter_result`, joined
    from the index's per-node fragments where the scheduler sent ``NodeNames``."""
    if not args.cache_capable:
        return encode(filter_result(args, result))
    quoted = result.index.quoted(result.names, result.rows)
    never = np.array(result.never, dtype=np.bool_)[result.code]
    tails = np.array([b":" + encode(r) for r in result.reasons], dtype=object)
    passed, failed = result.code == 0, (result.code > 0) & ~never
    parts = [b",".join(quoted[passed].tolist())]
    for chosen in (failed, never):
        parts.append(b",".join((quoted[chosen] + tails[result.code[chosen]]).tolist()))
    return (b'{"Nodes":null,"NodeNames":[%b],"FailedNodes":{%b},'
            b'"FailedAndUnresolvableNodes":{%b},"Error":""}' % tuple(parts))


def host_priorities(scores: list[tuple[str, int]]) -> list[dict[str, Any]]:
    """``HostPriorityList``."""
    return [{"Host": host, "Score": score} for host, score in scores]


_SCORE_TAILS = np.array([b"%d}" % s for s in range(11)], dtype=object)


def priorities_reply(result: Priorities) -> bytes:
    """``HostPriorityList`` as JSON (as :func:`host_priorities` writes it), joined from the
    index's per-node fragments."""
    heads = result.index.host_prefix(result.names, result.rows)
    return b"[" + b",".join((heads + _SCORE_TAILS[result.scores]).tolist()) + b"]"


@dataclass(frozen=True)
class BindingArgs:
    """``ExtenderBindingArgs``."""

    pod_name: str
    namespace: str
    uid: str
    node: str


def binding_args(body: bytes) -> BindingArgs:
    obj = parse_body(body, "ExtenderBindingArgs")
    values = []
    for key in ("PodName", "PodNamespace", "PodUID", "Node"):
        value = get(obj, key)
        if not isinstance(value, str) or (key != "PodNamespace" and not value):
            raise InputError(f"ExtenderBindingArgs.{key}", "must be a non-empty string")
        values.append(value)
    return BindingArgs(values[0], values[1] or "default", values[2], values[3])


@dataclass(frozen=True)
class PreemptionArgs:
    """``ExtenderPreemptionArgs``: the pod and, per node, the victims' UIDs and PDB violations
    (``NodeNameToMetaVictims`` when ``nodeCacheCapable``, else ``NodeNameToVictims``)."""

    pod: dict[str, Any]
    victims: dict[str, tuple[list[str], int]]


def _victims(value: Any, where: str, full_pods: bool) -> tuple[list[str], int]:
    if not isinstance(value, dict):
        raise InputError(where, "must be an object with Pods and NumPDBViolations")
    pods = get(value, "Pods") or []
    violations = get(value, "NumPDBViolations") or 0
    if not isinstance(pods, list) or not isinstance(violations, int):
        raise InputError(where, "Pods must be a list and NumPDBViolations an integer")
    uids = []
    for k, pod in enumerate(pods):
        meta = get(pod, "metadata") if full_pods and isinstance(pod, dict) else pod
        uid = get(meta, "uid" if full_pods else "UID") if isinstance(meta, dict) else None
        if not isinstance(uid, str) or not uid:
            raise InputError(f"{where}.Pods[{k}]", "needs a UID")
        uids.append(uid)
    return uids, violations


def preemption_args(body: bytes) -> PreemptionArgs:
    obj = parse_body(body, "ExtenderPreemptionArgs")
    pod = get(obj, "Pod")
    if not isinstance(pod, dict):
        raise InputError("ExtenderPreemptionArgs.Pod", "must be a Pod object")
    meta, full = get(obj, "NodeNameToMetaVictims"), get(obj, "NodeNameToVictims")
    source, key, full_pods = (meta, "NodeNameToMetaVictims", False) if meta is not None else (
        full, "NodeNameToVictims", True)
    if source is None:
        source = {}
    if not isinstance(source, dict):
        raise InputError(f"ExtenderPreemptionArgs.{key}", "must map node names to victims")
    victims = {node: _victims(v, f"ExtenderPreemptionArgs.{key}[{node}]", full_pods)
               for node, v in source.items()}
    return PreemptionArgs(pod, victims)


def preemption_result(kept: dict[str, tuple[list[str], int]]) -> dict[str, Any]:
    """``ExtenderPreemptionResult``: the nodes kept, their victims as ``MetaVictims``."""
    return {"NodeNameToMetaVictims": {
        node: {"Pods": [{"UID": uid} for uid in uids], "NumPDBViolations": violations}
        for node, (uids, violations) in kept.items()}}
