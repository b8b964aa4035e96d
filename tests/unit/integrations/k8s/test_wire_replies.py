"""The replies joined from per-node JSON fragments are the documents the plain encoder writes."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("kubernetes")

from cotenant.integrations.k8s import wire
from cotenant.integrations.k8s.extender import Extender
from cotenant.integrations.k8s.resources import pod_request
from tests.unit.integrations.k8s.harness import running
from tests.unit.integrations.k8s.objects import node, pod

NAMES = ["a-0", "a-1", "cpu", "small"]
ASKED = [*NAMES, 'stranger "quoted" \u00e9', "a-0x"]


@pytest.mark.parametrize("resources", [
    {"cpu": "1", "cotenant.io/gpu-milli": "250"},
    {"cpu": "1", "nvidia.com/gpu": "8"},
    {"cpu": "200"},
    {"cpu": "1", "memory": "300Gi", "nvidia.com/gpu": "1"},
])
def test_fast_replies_equal_the_plain_documents(resources: dict[str, str]) -> None:
    nodes = [node("a-0"), node("a-1"), node("cpu", gpus=0), node("small", gpus=2, cpu="8",
                                                                     memory="256Gi")]
    with running(nodes) as ext:
        extender: Extender = ext.server.extender
        request = pod_request(pod("p", resources))
        args = wire.extender_args(json.dumps(
            {"Pod": pod("p", resources), "NodeNames": ASKED}).encode())
        result = extender.filter(request, args.names)
        assert json.loads(wire.filter_reply(args, result)) == wire.filter_result(args, result)
        scores = extender.prioritize(request, args.names)
        assert json.loads(wire.priorities_reply(scores)) == wire.host_priorities(scores.items())
