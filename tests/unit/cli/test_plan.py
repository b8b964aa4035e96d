"""``cotenant plan mig`` end to end on the default profile table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cotenant.cli.main import main
from cotenant.model.gpu import CATALOG

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "serving-plan.yaml"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(list(args))
    out, err = capsys.readouterr()
    code = info.value.code
    return (code if isinstance(code, int) else 0), out, err


def spec_file(tmp_path: Path, **service: object) -> Path:
    doc = {
        "apiVersion": "cotenant/v1alpha1",
        "kind": "ServingPlan",
        "gpu": "A100-40GB",
        "services": [{"name": "svc", "model": "resnet50", "rate": 100, "sloMs": 50, **service}],
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def test_example_plan_meets_every_demand(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out_yaml = tmp_path / "mig.yaml"
    code, out, _ = run(
        capsys, "plan", "mig", str(EXAMPLE), "--json", "--mig-parted", str(out_yaml)
    )
    assert code == 0
    data = json.loads(out)
    assert data["gpus"] >= data["lower_bound"] >= 1
    for svc in data["services"]:
        assert svc["capacity_rps"] >= svc["demand_rps"]
    whole = json.loads(run(capsys, "plan", "mig", str(EXAMPLE), "--json", "--solver",
                           "whole-gpu")[1])
    assert data["gpus"] < whole["gpus"]
    geometry = CATALOG.get("A100-40GB").mig
    assert geometry is not None
    configs = yaml.safe_load(out_yaml.read_text())["mig-configs"]
    for (selection,) in configs.values():
        names = [n for n, c in selection["mig-devices"].items() for _ in range(c)]
        geometry.parse(",".join(names))


def test_unmeetable_slo_names_service_and_best_latency(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(capsys, "plan", "mig", str(spec_file(tmp_path, sloMs=2)))
    assert code == 2
    line = err.strip()
    assert "\n" not in line
    assert "svc" in line
    assert "best latency available is 14.8 ms" in line  # resnet50 on 7g.40gb, batch 32


def test_unknown_model_lists_known(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "plan", "mig", str(spec_file(tmp_path, model="gpt-9")))
    assert code == 2
    assert "gpt-9" in err
    assert "resnet50" in err
    assert "spec.yaml.services[0] (svc): unknown DNN model 'gpt-9'" in err  # file and place
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("service", "needle"),
    [({"rate": -1}, "services[0].rate"), ({"speed": 3}, "services[0].speed: unknown key")],
)
def test_bad_spec_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, service: dict[str, object], needle: str
) -> None:
    code, _, err = run(capsys, "plan", "mig", str(spec_file(tmp_path, **service)))
    assert code == 2
    assert needle in err
    assert len(err.strip().splitlines()) == 1


def test_malformed_yaml(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: [unclosed\n", encoding="utf-8")
    code, _, err = run(capsys, "plan", "mig", str(bad))
    assert code == 2
    assert "bad.yaml" in err
    assert "not valid YAML" in err


CURRENT = ROOT / "examples" / "current-deployment.yaml"


def test_reconfiguration_from_current_deployment_round_trips(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    saved = tmp_path / "next.yaml"
    code, out, _ = run(
        capsys, "plan", "mig", str(EXAMPLE), "--current", str(CURRENT), "--json",
        "--save", str(saved),
    )
    assert code == 0
    data = json.loads(out)
    steps = data["reconfiguration"]["steps"]
    assert steps
    kinds = {"create-instance", "start-replica", "move-traffic", "stop-replica",
             "destroy-instance", "repartition"}
    assert {s.split()[0] for s in steps} <= kinds
    # The free GPU 3 is built before any replica stops.
    first_stop = next(i for i, s in enumerate(steps) if s.startswith("move-traffic"))
    assert any(s.startswith("start-replica gpu3") for s in steps[:first_stop])
    # The saved deployment is valid input again: replanning from it needs no change at all
    # to the services it already serves.
    code, out, _ = run(
        capsys, "plan", "mig", str(EXAMPLE), "--current", str(saved), "--json", "--solver", "greedy"
    )
    assert code == 0
    again = json.loads(out)["reconfiguration"]
    assert again["drained_gpus"] == 0


def test_current_in_the_spec_is_parsed_strictly(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    doc = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    doc["current"] = [{"gpu": 0, "instances": [{"instance": "2g.10gb@1", "service": "dedup"}]}]
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    code, _, err = run(capsys, "plan", "mig", str(path))
    assert code == 2
    assert err.count("\n") == 1
    assert "spec.yaml.current[0].instances" in err
    assert "may start only at" in err
    doc["current"] = [{"gpu": 0, "instances": [{"instance": "7g.40gb@0", "service": "dedup"}]}]
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    code, out, _ = run(capsys, "plan", "mig", str(path), "--json")
    assert code == 0
    assert json.loads(out)["reconfiguration"]["steps"]


def test_plan_json_gpu_plans_are_valid_as_current(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Yesterday's plan.json is today's ``current``: its ``gpu_plans`` (with their ``layout``
    strings) parse, and replanning the same spec from them drains nothing."""
    code, out, _ = run(capsys, "plan", "mig", str(EXAMPLE), "--json", "--solver", "greedy")
    assert code == 0
    gpu_plans = json.loads(out)["gpu_plans"]
    assert all("layout" in g for g in gpu_plans)
    doc = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    doc["current"] = gpu_plans
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    code, out, _ = run(capsys, "plan", "mig", str(path), "--json", "--solver", "greedy")
    assert code == 0
    assert json.loads(out)["reconfiguration"]["drained_gpus"] == 0
    doc["current"][0]["layout"] = "1g.5gb@6"  # not what its instances make
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    code, _, err = run(capsys, "plan", "mig", str(path))
    assert code == 2
    assert err.count("\n") == 1
    assert "spec.yaml.current[0].layout: '1g.5gb@6' does not match the instances" in err


def test_deployment_on_another_gpu_model_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    other = tmp_path / "cur.yaml"
    text = CURRENT.read_text(encoding="utf-8")
    for a, b in (("A100-40GB", "A100-80GB"), ("7g.40gb", "7g.80gb"), ("4g.20gb", "4g.40gb"),
                 ("3g.20gb", "3g.40gb")):
        text = text.replace(a, b)
    other.write_text(text, encoding="utf-8")
    code, _, err = run(capsys, "plan", "mig", str(EXAMPLE), "--current", str(other))
    assert code == 2
    assert err.startswith("cotenant: error: --current: deployment is on A100-80GB")


def test_out_writes_plan_picture_and_report(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, _ = run(capsys, "plan", "mig", str(EXAMPLE), "--out", str(tmp_path / "r"))
    assert code == 0
    assert (tmp_path / "r" / "layouts.png").stat().st_size > 1000
    data = json.loads((tmp_path / "r" / "plan.json").read_text(encoding="utf-8"))
    assert data["gpus"] >= 1
    assert "layouts.png" in (tmp_path / "r" / "index.html").read_text(encoding="utf-8")


def test_mig_parted_per_node_covers_every_planned_gpu(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out_yaml = tmp_path / "mig.yaml"
    code, out, _ = run(capsys, "plan", "mig", str(EXAMPLE), "--json", "--mig-parted",
                       str(out_yaml), "--gpus-per-node", "4")
    assert code == 0
    data = json.loads(out)
    nodes = data["mig_parted_nodes"]
    assert sum(nodes.values()) == -(-data["gpus"] // 4)  # every planned GPU on some node
    configs = yaml.safe_load(out_yaml.read_text())["mig-configs"]
    assert set(configs) == set(nodes)
    geometry = CATALOG.get("A100-40GB").mig
    assert geometry is not None
    planned: dict[str, int] = {}
    for name, selections in configs.items():
        devices = sorted(d for sel in selections for d in sel["devices"])
        assert devices == [0, 1, 2, 3]  # each device of a node gets exactly one layout
        for sel in selections:
            if not sel["mig-enabled"]:
                continue
            names = [n for n, c in sel["mig-devices"].items() for _ in range(c)]
            layout = str(sorted(geometry.parse(",".join(names)).profile_counts().items()))
            planned[layout] = planned.get(layout, 0) + len(sel["devices"]) * nodes[name]
    expected: dict[str, int] = {}
    for layout, count in data["layouts"].items():
        key = str(sorted(geometry.parse(layout).profile_counts().items()))
        expected[key] = expected.get(key, 0) + count
    assert planned == expected  # the nodes hold exactly the plan's layouts
    code, _, err = run(capsys, "plan", "mig", str(EXAMPLE), "--gpus-per-node", "4")
    assert code == 2
    assert "--mig-parted" in err
