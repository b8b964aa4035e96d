"""The scheduler extender as a real HTTP server, fed the bodies kube-scheduler sends."""

from __future__ import annotations

import http.client
import json
import urllib.request
from collections.abc import Iterator

import pytest

pytest.importorskip("kubernetes")

from tests.unit.integrations.k8s.harness import Running, running
from tests.unit.integrations.k8s.objects import (
    args_by_name,
    args_by_object,
    binding_args,
    node,
    pod,
)

NAMES = ["gpu-a", "gpu-b", "cpu-only"]
QUARTER = {"cpu": "4", "memory": "16Gi", "cotenant.io/gpu-milli": "250"}


@pytest.fixture
def ext() -> Iterator[Running]:
    with running() as r:
        yield r


def test_filter_by_name_answers_with_node_names_and_reasons(ext: Running) -> None:
    p = pod("a", QUARTER)
    ext.kube.add(p)
    status, reply = ext.post("filter", args_by_name(p, [*NAMES, "stranger"]))
    assert status == 200
    assert set(reply) == {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes",
                          "Error"}
    assert reply["Nodes"] is None
    assert reply["NodeNames"] == ["gpu-a", "gpu-b"]
    assert reply["Error"] == ""
    assert "unknown to the cotenant extender's cache" in reply["FailedNodes"]["stranger"]
    assert reply["FailedAndUnresolvableNodes"] == {
        "cpu-only": "cotenant: asks 250 milli of one GPU, the node has no GPU"}


def test_filter_by_object_answers_with_a_node_list(ext: Running) -> None:
    p = pod("a", {"cpu": "1", "nvidia.com/gpu": "2"})
    nodes = [node(n, gpus=0 if n == "cpu-only" else 8) for n in NAMES]
    status, reply = ext.post("filter", args_by_object(p, nodes))
    assert status == 200
    assert reply["NodeNames"] is None
    assert [n["metadata"]["name"] for n in reply["Nodes"]["items"]] == ["gpu-a", "gpu-b"]
    assert reply["Nodes"]["items"][0] == nodes[0]  # the objects as sent, untouched
    assert "cpu-only" in reply["FailedAndUnresolvableNodes"]


def test_keys_are_matched_case_insensitively(ext: Running) -> None:
    p = pod("a", QUARTER)
    status, reply = ext.post("filter", {"pod": p, "nodes": None, "nodenames": ["gpu-a"]})
    assert (status, reply["NodeNames"]) == (200, ["gpu-a"])
    status, reply = ext.post("prioritize", {"POD": p, "NodeNames": ["gpu-a"]})
    assert (status, reply) == (200, [{"Host": "gpu-a", "Score": 10}])


def test_prioritize_gives_the_policy_choice_ten_alone(ext: Running) -> None:
    # a half-used GPU on gpu-b: FGD packs the next quarter there rather than open a GPU
    ext.kube.add(pod("old", QUARTER | {"cotenant.io/gpu-milli": "500"}, node_name="gpu-b",
                     annotations={"cotenant.io/gpus": "3"}))
    status, reply = ext.post("prioritize", args_by_name(pod("a", QUARTER), NAMES))
    assert status == 200
    assert [h["Host"] for h in reply] == NAMES
    scores = {h["Host"]: h["Score"] for h in reply}
    assert scores["gpu-b"] == 10
    assert 0 <= scores["gpu-a"] < 10
    assert scores["cpu-only"] == 0


def test_bind_annotates_the_gpu_then_binds(ext: Running) -> None:
    ext.kube.add(pod("old", QUARTER | {"cotenant.io/gpu-milli": "500"}, node_name="gpu-b",
                     annotations={"cotenant.io/gpus": "3"}))
    p = pod("a", QUARTER)
    ext.kube.add(p)
    status, reply = ext.post("bind", binding_args("a", "gpu-b"))
    assert (status, reply) == (200, {"Error": ""})
    stored = ext.kube.pods["default/a"]
    assert stored["metadata"]["annotations"] == {"cotenant.io/gpus": "3",
                                                 "cotenant.io/gpu-milli": "250"}
    assert stored["spec"]["nodeName"] == "gpu-b"
    assert ext.kube.bindings == [("default/a", "uid-a", "gpu-b")]
    state = ext.cache.placer().state
    assert state.gpu_free[ext.cache.index("gpu-b"), 3] == 250  # 1000 - 500 - 250


def test_whole_gpus_fill_a_node_then_it_fails_with_a_reason(ext: Running) -> None:
    for i in range(4):
        ext.kube.add(pod(f"w{i}", {"cpu": "1", "nvidia.com/gpu": "2"}))
        assert ext.post("bind", binding_args(f"w{i}", "gpu-a"))[1] == {"Error": ""}
    assert ext.kube.pods["default/w3"]["metadata"]["annotations"]["cotenant.io/gpus"] == "6,7"
    _, reply = ext.post("filter", args_by_name(pod("x", {"nvidia.com/gpu": "1"}), ["gpu-a"]))
    assert reply["NodeNames"] == []
    assert reply["FailedNodes"] == {"gpu-a": "cotenant: asks 1 whole GPUs, fewer are free"}
    _, reply = ext.post("bind", binding_args("x", "gpu-a"))
    assert "no longer fits on gpu-a" in reply["Error"]


def test_an_assumed_pod_expires_if_never_bound(ext: Running) -> None:
    ext.kube.on_pod = None  # the API server accepts the binding but no watch event follows
    ext.cache.on_pod("ADDED", pod("a", {"nvidia.com/gpu": "8"}))
    ext.kube.add(pod("a", {"nvidia.com/gpu": "8"}))
    assert ext.post("bind", binding_args("a", "gpu-a"))[1] == {"Error": ""}
    probe = args_by_name(pod("b", {"nvidia.com/gpu": "1"}), ["gpu-a"])
    assert ext.post("filter", probe)[1]["NodeNames"] == []
    ext.clock.advance(31.0)
    assert ext.post("filter", probe)[1]["NodeNames"] == ["gpu-a"]


def test_a_failed_binding_is_reported_and_not_assumed(ext: Running) -> None:
    ext.cache.on_pod("ADDED", pod("ghost", QUARTER))  # watched, but gone from the API server
    status, reply = ext.post("bind", binding_args("ghost", "gpu-a"))
    assert status == 200
    assert "not found" in reply["Error"]
    assert ext.cache.placed == {}
    assert "uid-ghost" in ext.cache.pending  # the scheduler may retry it
    assert (ext.cache.placer().state.gpu_free[ext.cache.index("gpu-a")] == 1000).all()


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b"{not json", "body is not JSON"),
        (b"[]", "body must be a JSON object"),
        (b'{"Pod": null, "NodeNames": ["gpu-a"]}', "ExtenderArgs.Pod"),
        (b'{"Pod": {"metadata": {"name": "a"}}, "Nodes": null, "NodeNames": null}',
         "one of Nodes or NodeNames"),
        (b'{"Pod": {"metadata": {"name": "a"}}, "NodeNames": "gpu-a"}', "list of node names"),
    ],
)
def test_malformed_bodies_get_a_400_naming_the_problem(ext: Running, body: bytes,
                                                       needle: str) -> None:
    for verb in ("filter", "prioritize"):
        status, reply = ext.post(verb, body)
        assert status == 400
        assert needle in reply["Error"]


def test_an_unknown_resource_fails_the_pod_never_a_node(ext: Running) -> None:
    p = pod("a", {"cpu": "1", "cotenant.io/gpu-mili": "250"})
    status, reply = ext.post("filter", args_by_name(p, NAMES))
    assert status == 200
    assert reply["NodeNames"] == []
    assert "cotenant.io/gpu-mili: unknown resource" in reply["Error"]
    status, reply = ext.post("filter", args_by_object(p, [node("gpu-a")]))
    assert reply["Nodes"] == {"metadata": {}, "items": []}
    assert "unknown resource" in reply["Error"]
    status, reply = ext.post("prioritize", args_by_name(p, NAMES))
    assert status == 400
    assert "unknown resource" in reply["Error"]
    bad_mig = pod("m", {"nvidia.com/mig-9g.99gb": "1"})
    assert "unknown MIG profile" in ext.post("filter", args_by_name(bad_mig, NAMES))[1]["Error"]


def test_bind_of_a_pod_never_seen_is_an_error(ext: Running) -> None:
    status, reply = ext.post("bind", binding_args("nobody", "gpu-a"))
    assert status == 200
    assert "unknown to the cache" in reply["Error"]
    status, reply = ext.post("bind", {"PodName": "a", "PodNamespace": "default"})
    assert status == 400
    assert "ExtenderBindingArgs.PodUID" in reply["Error"]


def test_unknown_verbs_and_health(ext: Running) -> None:
    assert ext.post("preemptx", {})[0] == 404
    with urllib.request.urlopen(f"{ext.server.url}/healthz", timeout=5) as reply:
        assert json.loads(reply.read()) == {"ok": True}


def test_a_bad_content_length_is_a_400(ext: Running) -> None:
    host, port = ext.server.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    conn.putrequest("POST", "/filter")
    conn.putheader("Content-Length", "lots")
    conn.endheaders()
    reply = conn.getresponse()
    assert reply.status == 400
    assert "Content-Length" in json.loads(reply.read())["Error"]
    conn.close()


def test_a_pod_the_watch_cannot_read_is_recorded_not_fatal(ext: Running) -> None:
    ext.cache.on_pod("ADDED", pod("odd", {"cotenant.io/gpu-milli": "1500"}, node_name="gpu-a"))
    assert "must be below 1000" in ext.cache.errors[-1]
    assert ext.cache.placed == {}


def test_mig_instances_are_counted_per_profile() -> None:
    mig_node = node("mig-a", gpus=0, extra={"nvidia.com/mig-1g.10gb": "2"})
    with running([mig_node]) as ext:
        for i in range(2):
            ext.kube.add(pod(f"m{i}", {"nvidia.com/mig-1g.10gb": "1"}))
            assert ext.post("bind", binding_args(f"m{i}", "mig-a"))[1] == {"Error": ""}
        _, reply = ext.post("filter", args_by_name(pod("m2", {"nvidia.com/mig-1g.10gb": "1"}),
                                                   ["mig-a"]))
        assert reply["FailedNodes"] == {
            "mig-a": "cotenant: asks 1 nvidia.com/mig-1g.10gb, fewer are free"}
        _, reply = ext.post("filter", args_by_name(pod("m3", {"nvidia.com/mig-1g.10gb": "3"}),
                                                   ["mig-a"]))
        assert reply["FailedAndUnresolvableNodes"] == {
            "mig-a": "cotenant: asks 3 nvidia.com/mig-1g.10gb, more than the node has"}


def fill_gpu_a(ext: Running) -> None:
    for i in range(4):
        ext.kube.add(pod(f"w{i}", {"cpu": "1", "nvidia.com/gpu": "2"}))
        assert ext.post("bind", binding_args(f"w{i}", "gpu-a"))[1] == {"Error": ""}


def test_preempt_keeps_nodes_where_the_victims_free_enough(ext: Running) -> None:
    fill_gpu_a(ext)
    two = pod("big", {"cpu": "1", "nvidia.com/gpu": "2"})
    four = pod("bigger", {"cpu": "1", "nvidia.com/gpu": "4"})
    meta = {"gpu-a": {"Pods": [{"UID": "uid-w3"}], "NumPDBViolations": 1},
            "gpu-b": {"Pods": [], "NumPDBViolations": 0},
            "stranger": {"Pods": [{"UID": "uid-x"}], "NumPDBViolations": 0}}
    body = {"Pod": two, "NodeNameToVictims": None, "NodeNameToMetaVictims": meta}
    status, reply = ext.post("preempt", body)
    assert status == 200
    assert reply == {"NodeNameToMetaVictims": {
        "gpu-a": {"Pods": [{"UID": "uid-w3"}], "NumPDBViolations": 1},
        "gpu-b": {"Pods": [], "NumPDBViolations": 0}}}  # the unknown node is dropped
    status, reply = ext.post("preempt", body | {"Pod": four})
    assert set(reply["NodeNameToMetaVictims"]) == {"gpu-b"}  # one victim frees only 2 GPUs
    # the scheduler's decision did not change the cache: gpu-a is still full
    assert (ext.cache.placer().state.gpu_free[ext.cache.index("gpu-a")] == 0).all()


def test_preempt_reads_full_victim_pods_too(ext: Running) -> None:
    fill_gpu_a(ext)
    victims = [ext.kube.pods[f"default/w{i}"] for i in (2, 3)]
    body = {"pod": pod("bigger", {"nvidia.com/gpu": "4"}), "nodeNameToMetaVictims": None,
            "nodenametovictims": {"gpu-a": {"pods": victims, "numPDBViolations": 0}}}
    status, reply = ext.post("preempt", body)
    assert status == 200
    assert reply["NodeNameToMetaVictims"] == {"gpu-a": {
        "Pods": [{"UID": "uid-w2"}, {"UID": "uid-w3"}], "NumPDBViolations": 0}}


def test_preempt_with_a_victim_without_uid_is_a_400(ext: Running) -> None:
    body = {"Pod": pod("p", QUARTER), "NodeNameToMetaVictims": {
        "gpu-a": {"Pods": [{}], "NumPDBViolations": 0}}}
    status, reply = ext.post("preempt", body)
    assert status == 400
    assert "NodeNameToMetaVictims[gpu-a].Pods[0]: needs a UID" in reply["Error"]


def test_reasons_are_the_same_text_on_every_node_so_the_scheduler_counts_them() -> None:
    nodes = [node(f"n{i}", gpus=2) for i in range(3)]
    with running(nodes) as ext:
        for i in range(3):
            ext.kube.add(pod(f"w{i}", {"cpu": "1", "nvidia.com/gpu": "2"}))
            assert ext.post("bind", binding_args(f"w{i}", f"n{i}"))[1] == {"Error": ""}
        _, reply = ext.post("filter", args_by_name(pod("x", {"nvidia.com/gpu": "1"}),
                                                   ["n0", "n1", "n2"]))
        assert set(reply["FailedNodes"]) == {"n0", "n1", "n2"}
        assert set(reply["FailedNodes"].values()) == {
            "cotenant: asks 1 whole GPUs, fewer are free"}
        _, reply = ext.post("filter", args_by_name(pod("y", {"cpu": "999"}), ["n0"]))
        assert reply["FailedAndUnresolvableNodes"] == {
            "n0": "cotenant: asks 999000 milli-CPU, more than the node has"}


def test_prioritize_scores_a_name_given_twice_once(ext: Running) -> None:
    p = pod("a", QUARTER)
    ext.kube.add(p)
    _, once = ext.post("prioritize", args_by_name(p, ["gpu-a", "gpu-b"]))
    _, twice = ext.post("prioritize", args_by_name(p, ["gpu-a", "gpu-b", "gpu-a"]))
    assert twice == once
