"""Reading pods and nodes: Kubernetes quantities, effective requests, and the rules that make a
request something cotenant can (or cannot) schedule."""

from __future__ import annotations

from decimal import Decimal

import pytest

from cotenant.errors import InputError, UnknownNameError
from cotenant.integrations.k8s.resources import node_spec, pod_request, quantity
from cotenant.model.workload import PodShape


@pytest.mark.parametrize(("text", "value"), [
    ("500m", Decimal("0.5")), ("2", Decimal(2)), (4, Decimal(4)), ("16Gi", Decimal(16 << 30)),
    ("1e3", Decimal(1000)), ("1.5k", Decimal(1500)), ("100M", Decimal(10**8)),
])
def test_quantities(text: object, value: Decimal) -> None:
    assert quantity(text, "x") == value


@pytest.mark.parametrize("text", ["", "abc", "1Qi", "-1", "nan", True, None, 1.5])
def test_bad_quantities_name_the_place(text: object) -> None:
    with pytest.raises(InputError, match=r"^pod p:cpu"):
        quantity(text, "pod p:cpu")


def raw_pod(containers: list[dict[str, str]], inits: list[dict[str, str]] | None = None,
            annotations: dict[str, str] | None = None) -> dict[str, object]:
    def spec(reqs: list[dict[str, str]]) -> list[dict[str, object]]:
        return [{"name": f"c{i}", "resources": {"requests": r}} for i, r in enumerate(reqs)]
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u1",
                         "annotations": annotations or {}},
            "spec": {"containers": spec(containers), "initContainers": spec(inits or [])}}


def test_effective_requests_sum_containers_and_take_the_largest_init() -> None:
    req = pod_request(raw_pod([{"cpu": "1", "memory": "1Gi"}, {"cpu": "500m"}],
                              [{"cpu": "4", "memory": "512Mi"}]))
    assert req.shape == PodShape(4000, 1024, 0, 0)
    assert (req.key, req.uid, req.role) == ("ns/p", "u1", "online")


def test_shares_whole_gpus_and_roles() -> None:
    share = pod_request(raw_pod([{"cotenant.io/gpu-milli": "300"}],
                                annotations={"cotenant.io/role": "Offline",
                                             "cotenant.io/slo-ms": "50",
                                             "cotenant.io/model": "llama"}))
    assert share.shape == PodShape(0, 0, 1, 300)
    assert (share.role, share.slo_ms, share.model) == ("offline", 50.0, "llama")
    assert pod_request(raw_pod([{"cotenant.io/gpu-milli": "2000"}])).shape == PodShape(
        0, 0, 2, 1000)
    assert pod_request(raw_pod([{"nvidia.com/gpu": "1"}])).shape == PodShape(0, 0, 1, 1000)
    assert pod_request(raw_pod([{"nvidia.com/mig-3g.20gb": "2"}])).mig == (("3g.20gb", 2),)


@pytest.mark.parametrize(("requests", "annotations", "needle"), [
    ({"cotenant.io/gpu-milli": "1500"}, {}, "below 1000 .* or a multiple of 1000"),
    ({"cotenant.io/gpu-milli": "250", "nvidia.com/gpu": "1"}, {}, "ask for one of"),
    ({"nvidia.com/gpu": "0.5"}, {}, "must be a whole number"),
    ({"nvidia.com/gpus": "1"}, {}, "nvidia.com/gpus: unknown resource"),
    ({"cpu": "1"}, {"cotenant.io/role": "batch"}, "must be one of online, offline"),
    ({"cpu": "1"}, {"cotenant.io/slo-ms": "fast"}, "slo-ms"),
])
def test_what_cannot_be_scheduled_is_named(requests: dict[str, str],
                                           annotations: dict[str, str], needle: str) -> None:
    with pytest.raises(InputError, match=needle):
        pod_request(raw_pod([requests], annotations=annotations))


def test_other_domains_are_left_to_the_scheduler() -> None:
    req = pod_request(raw_pod([{"cpu": "1", "example.com/fpga": "1", "hugepages-2Mi": "4Mi"}]))
    assert req.shape == PodShape(1000, 0, 0, 0)


def test_nodes() -> None:
    spec = node_spec({"metadata": {"name": "n", "labels": {"cotenant.io/gpu-model": "A30"}},
                      "status": {"allocatable": {"cpu": "32", "memory": "128Gi",
                                                 "cotenant.io/gpu-milli": "4000",
                                                 "nvidia.com/mig-1g.6gb": "4"}}})
    assert (spec.node.cpu_milli, spec.node.memory_mib, spec.node.gpu_count) == (
        32_000, 131_072, 4)
    assert spec.node.gpu_model is not None
    assert spec.node.gpu_model.name == "A30"
    assert spec.mig == (("1g.6gb", 4),)
    with pytest.raises(UnknownNameError, match="unknown GPU model 'Z9'"):
        node_spec({"metadata": {"name": "n", "labels": {"cotenant.io/gpu-model": "Z9"}},
                   "status": {"allocatable": {"nvidia.com/gpu": "1"}}})
    with pytest.raises(InputError, match=r"Node\.metadata\.name"):
        node_spec({"metadata": {}})
