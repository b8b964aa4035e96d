"""A deployment document (what runs today) parsed into the model: the round trip, and each
malformed document refused with one exact message naming the place and the rule."""

from __future__ import annotations

from typing import Any

import pytest

from cotenant.errors import InputError
from cotenant.model.deployment import deployment_document, parse_deployment

GOOD: dict[str, Any] = {
    "apiVersion": "cotenant/v1alpha1", "kind": "Deployment", "gpu": "A100-40GB",
    "gpus": [
        {"gpu": 0, "layout": "3g.20gb@4, 4g.20gb@0",
         "instances": [{"instance": "4g.20gb@0", "service": "a"},
                       {"instance": "3g.20gb@4"}]},
        {"gpu": 1, "layout": "(empty)", "instances": []},
    ],
}


def test_a_deployment_round_trips() -> None:
    deployment = parse_deployment(GOOD)
    assert deployment.gpu.name == "A100-40GB"
    first, second = deployment.gpus
    assert str(first.layout) == "4g.20gb@0,3g.20gb@4"
    assert [(str(p), s) for p, s in first.assignment] == [("4g.20gb@0", "a"), ("3g.20gb@4", None)]
    assert first.services() == {"a"}
    assert not second.layout.placements
    again = deployment_document(deployment)
    assert again == {
        "apiVersion": "cotenant/v1alpha1", "kind": "Deployment", "gpu": "A100-40GB",
        "gpus": [{"gpu": 0, "instances": [{"instance": "4g.20gb@0", "service": "a"},
                                          {"instance": "3g.20gb@4"}]},
                 {"gpu": 1, "instances": []}],
    }
    assert parse_deployment(again) == deployment


def gpu0(**changes: Any) -> dict[str, Any]:
    return {**GOOD, "gpus": [{**GOOD["gpus"][0], **changes}]}


def inst0(**changes: Any) -> dict[str, Any]:
    return gpu0(layout=None, instances=[{"instance": "4g.20gb@0", **changes}])


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], "d: the document must be a mapping with apiVersion, kind, ..."),
        ({**GOOD, "extra": 1}, "d.extra: unknown key; allowed: apiVersion, gpu, gpus, kind"),
        ({**GOOD, "apiVersion": "v1"}, "d.apiVersion: must be 'cotenant/v1alpha1'"),
        ({**GOOD, "kind": "Plan"}, "d.kind: must be 'Deployment'"),
        ({**GOOD, "gpu": "Z9"}, "d.gpu: unknown GPU model 'Z9'"),
        ({**GOOD, "gpu": "T4"}, "d.gpu: T4 has no MIG; use one of"),
        ({**GOOD, "gpus": {}}, "d.gpus: must be a list of GPUs"),
        ({**GOOD, "gpus": [{"gpu": 1, "instances": []}]},
         "d.gpus[0].gpu: list GPUs in order 0, 1, ...; got 1"),
        ({**GOOD, "gpus": [{"gpu": True, "instances": []}]},
         "d.gpus[0].gpu: list GPUs in order 0, 1, ...; got True"),
        ({**GOOD, "gpus": ["x"]}, "d.gpus[0]: each GPU must be a mapping with gpu and instances"),
        (gpu0(mig=1), "d.gpus[0].mig: unknown key; allowed: gpu, instances, layout"),
        (gpu0(instances="4g.20gb@0"), "d.gpus[0].instances: must be a list (empty for a free "
                                      "GPU)"),
        (gpu0(instances=["4g.20gb@0"]), "d.gpus[0].instances[0]: each instance must be a "
                                        "mapping with instance and service"),
        (inst0(svc="a"), "d.gpus[0].instances[0].svc: unknown key; allowed: instance, service"),
        (inst0(instance="4g.20gb"), "d.gpus[0].instances[0].instance: '4g.20gb' must be "
                                    "PROFILE@START, e.g. 3g.20gb@4"),
        (inst0(instance="4g.20gb@x"), "d.gpus[0].instances[0].instance: '4g.20gb@x' must be "
                                      "PROFILE@START, e.g. 3g.20gb@4"),
        (inst0(instance=4), "d.gpus[0].instances[0].instance: 4 must be PROFILE@START, e.g. "
                            "3g.20gb@4"),
        (inst0(instance="5g.20gb@0"), "d.gpus[0].instances[0].instance: MIG profile '5g.20gb' "
                                      "does not exist here; valid: 1g.5gb, 1g.5gb+me,"),
        (inst0(service=""), "d.gpus[0].instances[0].service: must be a service name or absent "
                            "(idle)"),
        (inst0(service=3), "d.gpus[0].instances[0].service: must be a service name or absent "
                           "(idle)"),
        (gpu0(instances=[{"instance": "4g.20gb@0"}, {"instance": "4g.20gb@0"}]),
         "d.gpus[0].instances: "),
        (gpu0(layout=7), "d.gpus[0].layout: must be a layout string such as "
                         "4g.20gb@0,3g.20gb@4"),
        (gpu0(layout="4g.20gb@0"), "d.gpus[0].layout: '4g.20gb@0' does not match the "
                                   "instances (4g.20gb@0,3g.20gb@4)"),
    ],
)
def test_a_malformed_deployment_is_one_exact_message(document: Any, message: str) -> None:
    with pytest.raises(InputError) as info:
        parse_deployment(document, "d")
    assert str(info.value).startswith(message)
