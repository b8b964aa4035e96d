"""The synthetic generator and its fit to openb."""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cotenant.errors import InputError
from cotenant.model.gpu import CATALOG
from cotenant.model.workload import Node, Pod, PodShape, Qos
from cotenant.traces.openb import load_nodes, load_pods
from cotenant.traces.synthetic import (
    FORMAT,
    SyntheticParams,
    default_params,
    fit_openb,
    generate_nodes,
    generate_pods,
    load_params,
    request_class,
)


def class_weights(params: SyntheticParams) -> dict[str, float]:
    out: Counter[str] = Counter()
    for (cpu, mem, num_gpu, milli), w in zip(params.shapes, params.shape_weights, strict=True):
        out[request_class(PodShape(cpu, mem, num_gpu, milli))] += w
    return dict(out)


# --- the embedded default ----------------------------------------------------------------------


def test_default_params_load_and_describe_openb() -> None:
    params = default_params()
    assert params.nodes == 1213
    assert params.pods == 8152
    assert len(params.shapes) == len(params.shape_weights) > 0
    assert len(params.node_types) == len(params.node_weights) > 0
    assert all(len(s) == 4 for s in params.shapes)
    assert all(model in CATALOG for model, _, _, _ in params.node_types)


def test_default_weights_sum_to_one() -> None:
    params = default_params()
    assert math.isclose(sum(params.shape_weights), 1.0, abs_tol=1e-9)
    assert math.isclose(sum(params.node_weights), 1.0, abs_tol=1e-9)
    assert all(w > 0 for w in params.shape_weights)
    for cls, dist in params.qos.items():
        assert cls in {"cpu", "fractional", "whole"}
        assert math.isclose(sum(dist.values()), 1.0, abs_tol=1e-9), cls
        assert all(Qos(q) for q in dist)


def test_default_quantiles_are_101_and_non_decreasing() -> None:
    params = default_params()
    tables = [params.arrival_gap, *params.lifetime.values()]
    assert "LS" in params.lifetime
    for table in tables:
        assert len(table) == 101
        assert all(a <= b for a, b in itertools.pairwise(table))


# --- JSON ------------------------------------------------------------------------------------


def test_json_round_trip() -> None:
    params = default_params()
    text = params.to_json()
    assert json.loads(text)["format"] == FORMAT
    again = SyntheticParams.from_json(text)
    assert again == params
    assert again.to_json() == text


def test_load_params_reads_a_written_file(tmp_path: Path) -> None:
    params = default_params()
    path = tmp_path / "p.json"
    path.write_text(params.to_json(), encoding="utf-8")
    assert load_params(path) == params


def test_from_json_rejects_invalid_json() -> None:
    with pytest.raises(InputError) as info:
        SyntheticParams.from_json('{"format": ', "p.json")
    assert info.value.where.startswith("p.json:")
    assert "not valid JSON" in info.value.rule


@pytest.mark.parametrize(
    "text",
    ["[1, 2]", "3", '{"source": "x"}', '{"format": "something-else/v9"}'],
)
def test_from_json_rejects_wrong_format(text: str) -> None:
    with pytest.raises(InputError, match="not a synthetic-parameters file"):
        SyntheticParams.from_json(text, "p.json")


def test_from_json_rejects_missing_field() -> None:
    data = json.loads(default_params().to_json())
    del data["shapes"]
    with pytest.raises(InputError, match=r"p\.json: missing field shapes"):
        SyntheticParams.from_json(json.dumps(data), "p.json")


def _weights_short(d: dict[str, Any]) -> None:
    d["shape_weights"].pop()


def _weight_negative(d: dict[str, Any]) -> None:
    d["shape_weights"][3] = -d["shape_weights"][3]


def _weight_nan(d: dict[str, Any]) -> None:
    d["node_weights"][0] = float("nan")


def _pods_text(d: dict[str, Any]) -> None:
    d["pods"] = "8152"


def _milli_over(d: dict[str, Any]) -> None:
    d["shapes"][0][3] = 5000


def _unknown_model(d: dict[str, Any]) -> None:
    d["node_types"][0][0] = "H900"


def _quantiles_fall(d: dict[str, Any]) -> None:
    d["arrival_gap"][50] = -1.0


def _qos_class_missing(d: dict[str, Any]) -> None:
    del d["qos"]["whole"]


def _qos_unknown(d: dict[str, Any]) -> None:
    d["qos"]["cpu"]["Platinum"] = 0.0


def _extra_field(d: dict[str, Any]) -> None:
    d["shape_weigths"] = []


@pytest.mark.parametrize(
    ("change", "where", "rule"),
    [
        (_weights_short, "p.json:shape_weights", "list of 151 weights"),
        (_weight_negative, "p.json:shape_weights[3]", "must be >= 0"),
        (_weight_nan, "p.json:node_weights[0]", "not a finite number"),
        (_pods_text, "p.json:pods", "'8152' is not an integer"),
        (_milli_over, "p.json:shapes[0].gpu_milli", "5000 must be in 0..1000"),
        (_unknown_model, "p.json:node_types[0].model", "'H900' is not a known GPU model"),
        (_quantiles_fall, "p.json:arrival_gap[50]", "below the quantile before it"),
        (_qos_class_missing, "p.json:shapes[", "qos has no 'whole' entry"),
        (_qos_unknown, "p.json:qos.cpu", "must map qos"),
        (_extra_field, "p.json", "unknown field shape_weigths"),
    ],
)
def test_from_json_names_the_field_and_rule(
    change: Callable[[dict[str, Any]], None], where: str, rule: str
) -> None:
    data = json.loads(default_params().to_json())
    change(data)
    with pytest.raises(InputError) as info:
        SyntheticParams.from_json(json.dumps(data), "p.json")
    assert info.value.where.startswith(where)
    assert rule in info.value.rule


def test_weights_off_by_rounding_are_renormalised() -> None:
    """5e-7 off is rounding in a hand-edited file: accepted, and scaled so numpy's choice()
    (which wants 1 within ~1e-8) draws from it."""
    data = json.loads(default_params().to_json())
    data["shape_weights"][0] += 5e-7
    params = SyntheticParams.from_json(json.dumps(data), "p.json")
    assert math.isclose(math.fsum(params.shape_weights), 1.0, abs_tol=1e-12)
    assert len(generate_pods(params, 50, np.random.default_rng(0))) == 50


def test_refit_of_a_trace_without_cpu_pods_loads(tmp_path: Path) -> None:
    """A trace with no CPU-only pods fits a qos table without the 'cpu' class: still valid."""
    params = default_params()
    pods = [p for p in generate_pods(params, 300, np.random.default_rng(1)) if p.shape.num_gpu]
    nodes = generate_nodes(params, 20, np.random.default_rng(1))
    fitted = fit_openb(pods, nodes, "no cpu pods")
    assert "cpu" not in fitted.qos
    assert SyntheticParams.from_json(fitted.to_json()) == fitted


# --- generation --------------------------------------------------------------------------------


def test_generate_nodes_full_size_reproduces_fitted_counts() -> None:
    params = default_params()
    nodes = generate_nodes(params, params.nodes, np.random.default_rng(3))
    assert len(nodes) == params.nodes
    got = Counter(
        (n.gpu_model.name, n.gpu_count, n.cpu_milli, n.memory_mib)
        for n in nodes
        if n.gpu_model is not None
    )
    want = {
        tuple(t): round(w * params.nodes)
        for t, w in zip(params.node_types, params.node_weights, strict=True)
    }
    assert dict(got) == want
    assert sum(n.gpu_count for n in nodes) == 6212
    assert len({n.name for n in nodes}) == len(nodes)


@pytest.mark.parametrize("count", [1, 7, 60, 500])
def test_generate_nodes_any_size_has_exact_count(count: int) -> None:
    nodes = generate_nodes(default_params(), count, np.random.default_rng(0))
    assert len(nodes) == count
    assert all(n.gpu_count > 0 and n.gpu_model is not None for n in nodes)


def test_generate_nodes_seed_shuffles_but_keeps_mix() -> None:
    params = default_params()
    a = generate_nodes(params, 100, np.random.default_rng(1))
    b = generate_nodes(params, 100, np.random.default_rng(2))

    def mix(nodes: list[Node]) -> Counter[tuple[int, int]]:
        return Counter((n.gpu_count, n.cpu_milli) for n in nodes)

    assert mix(a) == mix(b)
    assert [n.gpu_count for n in a] != [n.gpu_count for n in b]


def test_generate_pods_is_deterministic_per_seed() -> None:
    params = default_params()
    a = generate_pods(params, 500, np.random.default_rng(11))
    b = generate_pods(params, 500, np.random.default_rng(11))
    c = generate_pods(params, 500, np.random.default_rng(12))
    assert a == b
    assert a != c


def test_generated_request_mix_matches_fitted_weights() -> None:
    params = default_params()
    pods = generate_pods(params, 20_000, np.random.default_rng(5))
    assert len(pods) == 20_000
    seen = Counter(request_class(p.shape) for p in pods)
    fitted = class_weights(params)
    assert set(fitted) == {"cpu", "fractional", "whole"}
    for cls, weight in fitted.items():
        assert abs(seen[cls] / len(pods) - weight) < 0.02, cls
    shapes = set(params.shapes)
    assert all(
        (p.shape.cpu_milli, p.shape.memory_mib, p.shape.num_gpu, p.shape.gpu_milli) in shapes
        for p in pods
    )


def test_generated_times_are_ordered() -> None:
    pods = generate_pods(default_params(), 2000, np.random.default_rng(9))
    assert pods[0].creation_time == 0
    created = [p.creation_time for p in pods]
    assert created == sorted(created)
    assert created[-1] > 0
    assert all(p.deletion_time is not None and p.deletion_time > p.creation_time for p in pods)
    assert len({p.name for p in pods}) == len(pods)


def test_generated_qos_follows_request_class() -> None:
    params = default_params()
    pods = generate_pods(params, 5000, np.random.default_rng(4))
    for p in pods:
        assert params.qos[request_class(p.shape)].get(p.qos.value, 0.0) > 0.0


# --- fitting -----------------------------------------------------------------------------------


def _pod(name: str, shape: PodShape, qos: Qos, created: int, deleted: int | None) -> Pod:
    return Pod(name, shape, qos, created, deleted)


CPU = PodShape(4000, 8192, 0, 0)
FRAC = PodShape(6000, 12288, 1, 500)
WHOLE = PodShape(12000, 16384, 2, 1000)


def test_fit_on_tiny_trace() -> None:
    pods = [
        _pod("a", CPU, Qos.LS, 0, 10),
        _pod("b", CPU, Qos.BE, 10, 20),
        _pod("c", CPU, Qos.BE, 30, None),
        _pod("d", FRAC, Qos.BE, 30, 130),
        _pod("e", FRAC, Qos.BE, 40, 41),
        _pod("f", WHOLE, Qos.LS, 100, 1100),
    ]
    nodes = [
        Node("n0", 64000, 262144, 2, CATALOG.get("P100")),
        Node("n1", 96000, 393216, 8, CATALOG.get("G2")),
        Node("n2", 96000, 393216, 8, CATALOG.get("G2")),
        Node("n3", 32000, 131072, 0, None),
    ]
    params = fit_openb(pods, nodes, "tiny")
    assert params.source == "tiny"
    assert params.pods == 6
    assert params.nodes == 4
    assert params.shapes == [(4000, 8192, 0, 0), (6000, 12288, 1, 500), (12000, 16384, 2, 1000)]
    assert params.shape_weights == pytest.approx([3 / 6, 2 / 6, 1 / 6])
    assert params.qos == {
        "cpu": pytest.approx({"BE": 2 / 3, "LS": 1 / 3}),
        "fractional": {"BE": 1.0},
        "whole": {"LS": 1.0},
    }
    # CPU-only nodes are not node types; the most common type comes first
    assert params.node_types == [("G2", 8, 96000, 393216), ("P100", 2, 64000, 262144)]
    assert params.node_weights == pytest.approx([2 / 3, 1 / 3])
    # lifetimes per qos from pods with a deletion time: LS lives 10 and 1000 s
    assert set(params.lifetime) == {"LS", "BE"}
    assert params.lifetime["LS"][0] == pytest.approx(math.log1p(10), abs=1e-6)
    assert params.lifetime["LS"][-1] == pytest.approx(math.log1p(1000), abs=1e-6)
    assert params.lifetime["BE"][0] == pytest.approx(math.log1p(1), abs=1e-6)
    # gaps between sorted creation times: 10, 20, 0, 10, 60
    assert params.arrival_gap[0] == 0.0
    assert params.arrival_gap[-1] == pytest.approx(math.log1p(60), abs=1e-6)
    # and it survives a JSON trip
    assert SyntheticParams.from_json(params.to_json()) == params


def test_fit_needs_pods_and_nodes() -> None:
    node = Node("n0", 64000, 262144, 2, CATALOG.get("P100"))
    with pytest.raises(InputError, match="at least one pod"):
        fit_openb([], [node], "empty")
    with pytest.raises(InputError, match="at least one pod"):
        fit_openb([_pod("a", CPU, Qos.LS, 0, 1)], [], "empty")


def test_fitted_params_generate_a_workload() -> None:
    pods = [_pod(f"p{i}", s, Qos.LS, i, i + 5) for i, s in enumerate([CPU, FRAC, WHOLE] * 4)]
    nodes = [Node("n0", 96000, 393216, 8, CATALOG.get("G2"))]
    params = fit_openb(pods, nodes, "tiny")
    rng = np.random.default_rng(0)
    gen = generate_pods(params, 30, rng)
    assert {p.shape for p in gen} <= {CPU, FRAC, WHOLE}
    assert all(p.deletion_time is not None and p.deletion_time - p.creation_time >= 1 for p in gen)
    assert [n.gpu_count for n in generate_nodes(params, 3, rng)] == [8, 8, 8]


def test_params_fitted_without_deletion_times_still_generate() -> None:
    pods = [_pod(f"p{i}", s, Qos.LS, 0, None) for i, s in enumerate([CPU, FRAC, WHOLE])]
    params = fit_openb(pods, [Node("n0", 96000, 393216, 8, CATALOG.get("G2"))], "no-deletions")
    assert params.lifetime == {}
    generated = generate_pods(params, 10, np.random.default_rng(0))
    assert len(generated) == 10


@pytest.mark.shared_data
def test_fit_of_real_trace_is_the_embedded_default(openb_dir: Path) -> None:
    pods = load_pods(openb_dir / "openb_pod_list_default.csv")
    nodes = load_nodes(openb_dir / "openb_node_list_gpu_node.csv")
    fitted = fit_openb(pods, nodes, "refit")
    shipped = default_params()
    assert fitted.pods == shipped.pods
    assert fitted.nodes == shipped.nodes
    assert fitted.shapes == shipped.shapes
    assert fitted.shape_weights == pytest.approx(shipped.shape_weights, rel=0, abs=1e-9)
    assert fitted.node_types == shipped.node_types
    assert fitted.node_weights == pytest.approx(shipped.node_weights, rel=0, abs=1e-9)
    assert fitted.qos.keys() == shipped.qos.keys()
    for cls, dist in fitted.qos.items():
        assert dist == pytest.approx(shipped.qos[cls], rel=0, abs=1e-9), cls
    assert fitted.lifetime.keys() == shipped.lifetime.keys()
    for qos, table in fitted.lifetime.items():
        assert table == pytest.approx(shipped.lifetime[qos], rel=0, abs=1e-9), qos
    assert fitted.arrival_gap == pytest.approx(shipped.arrival_gap, rel=0, abs=1e-9)
