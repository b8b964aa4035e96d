"""``cotenant k8s``: its commands are listed, and bad input is one line and exit 2 before any
connection to a cluster is tried."""

from __future__ import annotations

from pathlib import Path

import pytest

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
