"""``cotenant k8s``: its commands are listed, and bad input is one line and exit 2 before any
connection to a cluster is tried."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from .test_cli import assert_one_error_line, run

Capsys = pytest.CaptureFixture[str]

pytest.importorskip("kubernetes")
pytest.importorskip("grpc")


def test_help_lists_both_daemons(capsys: Capsys) -> None:
    code, out, _ = run(capsys, "k8s", "--help")
    assert code == 0
    assert "extender" in out
    assert "device-plugin" in out


def test_unknown_policy_is_named(capsys: Capsys) -> None:
    code, _, err = run(capsys, "k8s", "extender", "--policy", "fdg")
    assert code == 2
    assert "unknown placement policy 'fdg'" in assert_one_error_line(err)


def test_missing_kubeconfig_is_one_line(capsys: Capsys, tmp_path: Path) -> None:
    code, _, err = run(capsys, "k8s", "extender", "--kubeconfig", str(tmp_path / "none"))
    assert code == 2
    assert "cannot load a Kubernetes configuration" in assert_one_error_line(err)


def test_device_plugin_refuses_an_unknown_resource(capsys: Capsys, tmp_path: Path) -> None:
    code, _, err = run(capsys, "k8s", "device-plugin", "--node", "n1", "--backend", "fake",
                       "--resource", "nvidia.com/gpus", "--kubeconfig", str(tmp_path / "none"))
    assert code == 2
    assert "'nvidia.com/gpus' is not a resource cotenant advertises" in assert_one_error_line(err)


def test_device_plugin_needs_a_node_name(capsys: Capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NODE_NAME", raising=False)
    code, _, err = run(capsys, "k8s", "device-plugin")
    assert code == 2
    assert "--node" in assert_one_error_line(err)


def test_snapshot_without_a_cluster_is_one_line(capsys: Capsys, tmp_path: Path) -> None:
    code, _, err = run(capsys, "k8s", "snapshot", "--kubeconfig", str(tmp_path / "none"),
                       "--out", str(tmp_path / "snap"))
    assert code == 2
    assert "cannot load a Kubernetes configuration" in assert_one_error_line(err)
    assert not (tmp_path / "snap").exists()


EXAMPLES = Path(__file__).parents[3] / "examples"


def test_mig_dry_run_prints_the_staged_order_and_carries_it_out(capsys: Capsys,
                                                                 tmp_path: Path) -> None:
    out_file = tmp_path / "mig-parted.yaml"
    code, out, _ = run(capsys, "k8s", "mig", str(EXAMPLES / "serving-plan.yaml"), "--current",
                       str(EXAMPLES / "current-deployment.yaml"), "--nodes", "a,b,c,d",
                       "--gpus-per-node", "1", "--dry-run", "--time-limit", "2",
                       "--mig-parted", str(out_file))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("   1. d -> cotenant-node-")
    assert any("(intermediate: room for temporary replicas)" in line for line in lines)
    assert any("needs image-tagger on a" in line for line in lines)
    assert "label d nvidia.com/mig.config=cotenant-node-" in out
    assert lines[-2].endswith("done")
    labelled = {line.split("=")[1].split(":")[0] for line in lines if " label " in line}
    document = yaml.safe_load(out_file.read_text())
    assert labelled == set(document["mig-configs"])  # the ConfigMap has every config labelled


def test_mig_dry_run_exits_1_where_no_order_is_safe(capsys: Capsys) -> None:
    code, out, _ = run(capsys, "k8s", "mig", str(EXAMPLES / "serving-plan.yaml"), "--current",
                       str(EXAMPLES / "current-deployment.yaml"), "--nodes", "big",
                       "--gpus-per-node", "4", "--dry-run", "--time-limit", "2")
    assert code == 1
    assert "stop: big cannot be drained: " in out.splitlines()[-1]
    assert "nothing was changed (--partial carries out the changes before it" in out
    assert " label " not in out
    assert " drain " not in out


def test_mig_dry_run_of_a_fresh_pool_is_done(capsys: Capsys) -> None:
    code, out, _ = run(capsys, "k8s", "mig", str(EXAMPLES / "serving-plan.yaml"), "--nodes",
                       "a,b", "--gpus-per-node", "1", "--dry-run", "--time-limit", "2")
    assert code == 0
    assert out.splitlines()[-1].endswith("done")


@pytest.mark.parametrize(("args", "message"), [
    (["--nodes", " , ", "--gpus-per-node", "1"], "--nodes: names no node"),
    (["--nodes", "a", "--gpus-per-node", "1"], "nodes: 1 node(s) of 1 GPUs hold 1 GPUs"),
])
def test_mig_bad_input_is_one_line(capsys: Capsys, args: list[str], message: str) -> None:
    code, _, err = run(capsys, "k8s", "mig", str(EXAMPLES / "serving-plan.yaml"), *args,
                       "--dry-run", "--time-limit", "1")
    assert code == 2
    assert message in assert_one_error_line(err)


def test_mig_missing_spec_is_one_line(capsys: Capsys, tmp_path: Path) -> None:
    code, _, err = run(capsys, "k8s", "mig", str(tmp_path / "none.yaml"), "--nodes", "a",
                       "--gpus-per-node", "1", "--dry-run")
    assert code == 2
    assert "cannot read" in assert_one_error_line(err)


def test_mig_with_a_missing_kubeconfig_fails_before_planning(capsys: Capsys,
                                                             tmp_path: Path) -> None:
    code, _, err = run(capsys, "k8s", "mig", str(EXAMPLES / "serving-plan.yaml"), "--nodes",
                       "a,b", "--gpus-per-node", "1", "--kubeconfig", str(tmp_path / "none"),
                       "--mig-parted", str(tmp_path / "out.yaml"))
    assert code == 2
    assert "cannot load a Kubernetes configuration" in assert_one_error_line(err)
    assert not (tmp_path / "out.yaml").exists()
