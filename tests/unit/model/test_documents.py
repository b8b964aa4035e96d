"""Strict JSON and YAML: repeated keys, byte-order marks and broken text are named errors."""

from __future__ import annotations

import pytest

from cotenant.errors import InputError
from cotenant.model.documents import csv_records, loads_json, loads_yaml
from cotenant.model.serving import parse_spec


def test_json_refuses_a_repeated_key_at_any_depth() -> None:
    assert loads_json('{"a": {"b": 1}, "c": [{"b": 2}]}', "d.json") == {
        "a": {"b": 1}, "c": [{"b": 2}]}
    with pytest.raises(InputError, match=r"d\.json: key 'b' appears twice in one object"):
        loads_json('{"a": {"b": 1, "b": 2}}', "d.json")


def test_json_reads_a_utf8_byte_order_mark_and_names_bad_bytes() -> None:
    assert loads_json(b'\xef\xbb\xbf{"a": 1}', "d.json") == {"a": 1}
    assert loads_json('\ufeff{"a": 1}', "d.json") == {"a": 1}
    with pytest.raises(InputError, match=r"d\.json: is not UTF-8 \(byte 8\)"):
        loads_json(b'{"a": "\xff"}', "d.json")
    with pytest.raises(InputError, match=r"d\.json:2: not valid JSON"):
        loads_json('{"a": 1,\n}', "d.json")


def test_yaml_refuses_a_repeated_key_with_its_line() -> None:
    assert loads_yaml("a: 1\nb:\n  a: 2\n", "s.yaml") == {"a": 1, "b": {"a": 2}}
    with pytest.raises(InputError) as info:
        loads_yaml("a: 1\nb:\n  c: 2\n  c: 3\n", "s.yaml")
    assert info.value.where == "s.yaml:4"
    assert "key 'c' appears twice" in info.value.rule


def test_yaml_merge_keys_may_be_overridden_but_not_repeated() -> None:
    text = (
        "base: &b {model: bert, rate: 5}\n"
        "other: &o {sloMs: 9}\n"
        "one: {<<: *b, rate: 7}\n"
        "two:\n  <<: [*b, *o]\n  name: x\n"
    )
    doc = loads_yaml(text, "s.yaml")
    assert doc["one"] == {"model": "bert", "rate": 7}
    assert doc["two"] == {"model": "bert", "rate": 5, "sloMs": 9, "name": "x"}
    with pytest.raises(InputError, match="key 'rate' appears twice"):
        loads_yaml("base: &b {rate: 5}\none: {<<: *b, rate: 7, rate: 8}\n", "s.yaml")


def test_yaml_errors_name_the_line() -> None:
    with pytest.raises(InputError) as info:
        loads_yaml("a: [1, 2\nb: 3\n", "s.yaml")
    assert info.value.where.startswith("s.yaml:")
    assert "not valid YAML" in info.value.rule
    assert loads_yaml("\ufeffa: 1\n", "s.yaml") == {"a": 1}


def test_json_refusals_are_exact() -> None:
    with pytest.raises(InputError) as info:
        loads_json('{"a": 1, "a": 2}', "d.json")
    assert (str(info.value), info.value.hint) == ("d.json: key 'a' appears twice in one object",
                                                  "keep one")
    with pytest.raises(InputError) as info:
        loads_json("1" * 5000, "d.json")
    assert str(info.value) == "d.json: not valid JSON: a number with too many digits"
    with pytest.raises(InputError) as info:
        loads_json("[" * 100_000 + "]" * 100_000, "d.json")
    assert str(info.value) == "d.json: not valid JSON: nested too deeply"


def spec_with(**service: object) -> dict[str, object]:
    one = {"name": "s", "model": "m", "rate": 10, "sloMs": 50, **service}
    return {"apiVersion": "cotenant/v1alpha1", "kind": "ServingPlan", "gpu": "A100-40GB",
            "services": [one]}


@pytest.mark.parametrize(
    ("service", "message"),
    [
        ({"rate": -1}, "p.services[0].rate: -1 must be >= 0"),
        ({"rate": -0.5}, "p.services[0].rate: -0.5 must be >= 0"),
        ({"sloMs": 0}, "p.services[0].sloMs: 0 must be > 0"),
        ({"sloMs": -2}, "p.services[0].sloMs: -2 must be > 0"),
        ({"rate": 10**400}, "p.services[0].rate: is too large a number"),
        ({"rate": float("inf")}, "p.services[0].rate: inf must be a finite number"),
        ({"rate": True}, "p.services[0].rate: True is not a number"),
        ({"sloMs": "50"}, "p.services[0].sloMs: '50' is not a number"),
    ],
)
def test_service_numbers_are_checked(service: dict[str, object], message: str) -> None:
    with pytest.raises(InputError) as info:
        parse_spec(spec_with(**service), "p")
    assert str(info.value) == message


def test_service_numbers_at_their_bounds_are_taken() -> None:
    [svc] = parse_spec(spec_with(rate=0, sloMs=0.5), "p").services
    assert (svc.rate, svc.slo_ms) == (0.0, 0.5)
    [svc] = parse_spec(spec_with(rate=0.25, sloMs=1), "p").services
    assert (svc.rate, svc.slo_ms) == (0.25, 1.0)


def test_yaml_refusals_are_exact() -> None:
    with pytest.raises(InputError) as info:
        loads_yaml("a: 1\nb:\n  c: 2\n  c: 3\n", "d.yaml")
    assert (str(info.value), info.value.hint) == (
        "d.yaml:4: key 'c' appears twice in one mapping", "keep one")
    with pytest.raises(InputError) as info:
        loads_yaml("a: [1\nb: 2\n", "d.yaml")
    assert str(info.value).startswith("d.yaml:2: not valid YAML: ")
    with pytest.raises(InputError) as info:
        loads_yaml("[" * 20_000 + "]" * 20_000, "d.yaml")
    assert str(info.value) == "d.yaml: not valid YAML: nested too deeply"
    assert loads_yaml("\ufeffa: [1, {b: 2}]\n", "d.yaml") == {"a": [1, {"b": 2}]}


def test_yaml_an_unhashable_key_is_yamls_own_error() -> None:
    with pytest.raises(InputError, match=r"^d\.yaml:1: not valid YAML"):
        loads_yaml("? [1]\n: 2\n", "d.yaml")


def test_csv_rows_carry_their_line_and_malformed_ones_are_named() -> None:
    text = ["a, b\n", "\n", " 1 ,2\n", "  \n", '"3",4\n']
    assert list(csv_records(text, "f.csv")) == [(1, ["a", "b"]), (3, ["1", "2"]),
                                                (5, ["3", "4"])]
    with pytest.raises(InputError, match=r'^f\.csv:1: malformed CSV header: '):
        list(csv_records(['"a\n'], "f.csv"))
    with pytest.raises(InputError, match=r"^f\.csv:2: malformed CSV row: "):
        list(csv_records(["a,b\n", '1,"2\n'], "f.csv"))


def base_spec(**top: object) -> dict[str, object]:
    return {"apiVersion": "cotenant/v1alpha1", "kind": "ServingPlan", "gpu": "A100-40GB",
            "services": [{"name": "s", "model": "m", "rate": 10, "sloMs": 50}], **top}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], "p: the document must be a mapping with apiVersion, kind, ..."),
        (base_spec(kind="Deployment"), "p.kind: must be 'ServingPlan'"),
        (base_spec(apiVersion="v2"), "p.apiVersion: must be 'cotenant/v1alpha1'"),
        (base_spec(gpu=None), "p.gpu: missing; e.g. gpu: A100-40GB"),
        (base_spec(gpu="Z9"), "p.gpu: unknown GPU model 'Z9'"),
        (base_spec(services=[]), "p.services: must be a non-empty list of services"),
        (base_spec(services=["s"]), "p.services[0]: each service must be a mapping"),
        (base_spec(services=[{"name": "s", "model": "m", "rate": 1}]),
         "p.services[0].sloMs: missing"),
        (base_spec(services=[{"name": "", "model": "m", "rate": 1, "sloMs": 5}]),
         "p.services[0].name: must be a non-empty string"),
        (base_spec(services=[{"name": 3, "model": "m", "rate": 1, "sloMs": 5}]),
         "p.services[0].name: must be a non-empty string"),
        (base_spec(services=[{"name": "s", "model": "", "rate": 1, "sloMs": 5}]),
         "p.services[0].model: must be a non-empty string"),
        (base_spec(services=[{"name": "s", "model": 3, "rate": 1, "sloMs": 5}]),
         "p.services[0].model: must be a non-empty string"),
        (base_spec(services=[{"name": "s", "model": "m", "rate": 1, "sloMs": 5}] * 2),
         "p.services[1].name: service 's' appears twice"),
    ],
)
def test_a_malformed_serving_plan_is_one_exact_message(document: object, message: str) -> None:
    with pytest.raises(InputError) as info:
        parse_spec(document, "p")
    assert str(info.value).startswith(message)
