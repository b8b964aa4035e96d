"""The manifests in deploy/kubernetes, validated offline: every object round-trips through the
official client's models unchanged (a misspelt or misplaced field does not), the scheduler
configuration's extender matches the extender's routes and resources, and every cotenant
command line in them parses with the CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
import yaml

from cotenant.cli.main import app
from cotenant.integrations.k8s.resources import GPU_MILLI, NVIDIA_GPU

client = pytest.importorskip("kubernetes.client")

DEPLOY = Path(__file__).resolve().parents[4] / "deploy" / "kubernetes"
EXTENDER_FIELDS = {  # KubeSchedulerConfiguration v1 Extender (k8s.io/kube-scheduler/config/v1)
    "urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "bindVerb", "weight",
    "enableHTTPS", "tlsConfig", "httpTimeout", "nodeCacheCapable", "managedResources",
    "ignorable",
}


def documents() -> list[dict[str, Any]]:
    docs = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    return docs


def test_there_are_manifests() -> None:
    kinds = {d["kind"] for d in documents()}
    assert {"Deployment", "DaemonSet", "ConfigMap", "ClusterRole"} <= kinds


@pytest.mark.parametrize("doc", documents(), ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_objects_round_trip_through_the_client_models(doc: dict[str, Any]) -> None:
    model = getattr(client, "V1" + doc["kind"])
    assert client.ApiClient().sanitize_for_serialization(model.from_dict(doc)) == doc


def scheduler_config() -> dict[str, Any]:
    (cm,) = [d for d in documents() if d["kind"] == "ConfigMap"]
    config: dict[str, Any] = yaml.safe_load(cm["data"]["scheduler-config.yaml"])
    return config


def containers() -> list[dict[str, Any]]:
    return [c for d in documents() if d["kind"] in ("Deployment", "DaemonSet")
            for c in d["spec"]["template"]["spec"]["containers"]]


def test_the_scheduler_config_points_at_the_extender() -> None:
    config = scheduler_config()
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    (ext,) = config["extenders"]
    assert set(ext) <= EXTENDER_FIELDS
    assert (ext["filterVerb"], ext["prioritizeVerb"], ext["preemptVerb"], ext["bindVerb"]) == (
        "filter", "prioritize", "preempt", "bind")
    assert ext["nodeCacheCapable"] is True
    assert config["percentageOfNodesToScore"] == 100  # every feasible node reaches the policy
    assert {r["name"] for r in ext["managedResources"]} == {GPU_MILLI, NVIDIA_GPU}
    (extender,) = [c for c in containers() if c["name"] == "extender"]
    port = extender["args"][extender["args"].index("--port") + 1]
    assert ext["urlPrefix"] == f"http://127.0.0.1:{port}"
    assert extender["readinessProbe"]["httpGet"]["port"] == int(port)


def test_cotenant_command_lines_parse() -> None:
    command = typer.main.get_command(app)
    for c in containers():
        if c["command"][0] != "cotenant":
            continue
        argv = [*c["command"][1:], *c.get("args", [])]
        group = command.get_command(None, argv[0])  # type: ignore[attr-defined]
        sub = group.get_command(None, argv[1])
        env = {e["name"] for e in c.get("env", [])}
        args = argv[2:] + (["--node", "from-env"] if "NODE_NAME" in env else [])
        sub.make_context(f"cotenant {argv[0]} {argv[1]}", args)  # raises on a bad option
