"""``cotenant k8s``: the scheduler extender and device plugin daemons, and cluster snapshots.

Each command parses its options and calls one library function of
:mod:`cotenant.integrations.k8s.daemon`; the kubernetes and grpc clients (the ``k8s`` extra)
are imported only when a command runs.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Annotated

import typer

from cotenant.errors import CotenantError

app = typer.Typer(help="Kubernetes: the scheduler extender and the GPU device plugin.",
                  no_args_is_help=True)

Kubeconfig = Annotated[Path | None, typer.Option(
    help="kubeconfig file; default: the pod's in-cluster service account")]


def _daemon() -> ModuleType:
    try:
        from cotenant.integrations.k8s import daemon  # noqa: PLC0415 (the optional extra)
    except ImportError as exc:
        raise CotenantError(f"the Kubernetes integration needs {exc.name}",
                            hint="pip install 'cotenant[k8s]'") from None
    return daemon


@app.command()
def extender(
    policy: Annotated[str, typer.Option(help="placement policy (see: cotenant policies)")] = "fgd",
    workload: Annotated[Path | None, typer.Option(
        help="openb pod list whose shapes model the workload for fgd and cotenant-pack "
             "[synthetic openb-like]")] = None,
    host: Annotated[str, typer.Option(help="address to listen on")] = "0.0.0.0",
    port: Annotated[int, typer.Option(min=1, max=65535, help="port to listen on")] = 8888,
    kubeconfig: Kubeconfig = None,
    resync: Annotated[int, typer.Option(min=10, help="seconds between full relists")] = 300,
    assume_ttl: Annotated[float, typer.Option(
        min=1.0, help="seconds a bound pod counts before the watch must confirm it")] = 30.0,
) -> None:
    """Serve kube-scheduler's extender API (filter, prioritize, bind) until SIGTERM."""
    daemon = _daemon()
    config = daemon.ExtenderConfig(
        policy, workload, host, port, kubeconfig, resync, assume_ttl)
    daemon.PLACEMENT.create(policy)  # unknown names fail here, before any connection
    daemon.run_extender(config)


@app.command("device-plugin")
def device_plugin(
    node: Annotated[str, typer.Option(envvar="NODE_NAME", help="this node's name")],
    resource: Annotated[list[str] | None, typer.Option(
        help="resource to advertise, repeatable: cotenant.io/gpu-milli, nvidia.com/gpu, "
             "nvidia.com/mig-<profile> [cotenant.io/gpu-milli]")] = None,
    backend: Annotated[str, typer.Option(help="nvml or fake")] = "nvml",
    gpus: Annotated[str, typer.Option(help="fake backend: MODEL:COUNT")] = "A100-40GB:4",
    state_dir: Annotated[Path, typer.Option(help="the agent's state directory (MPS pipes)")] = (
        Path("/var/lib/cotenant")),
    plugin_dir: Annotated[Path, typer.Option(help="the kubelet's device plugin directory")] = (
        Path("/var/lib/kubelet/device-plugins")),
    kubeconfig: Kubeconfig = None,
) -> None:
    """Serve the kubelet device plugin API and register with the kubelet until SIGTERM."""
    daemon = _daemon()
    config = daemon.DevicePluginConfig(
        node, tuple(resource or ("cotenant.io/gpu-milli",)), backend, gpus, state_dir,
        plugin_dir, kubeconfig)
    daemon.run_device_plugin(config)


@app.command()
def snapshot(
    out: Annotated[Path, typer.Option(help="directory for the two openb lists")] = Path(
        "snapshot"),
    kubeconfig: Kubeconfig = None,
) -> None:
    """Write the cluster's Nodes and Pods as openb node and pod lists (for cotenant simulate)."""
    nodes, pods, skipped = _daemon().take_snapshot(kubeconfig, out)
    for line in skipped:
        typer.echo(f"skipped {line}", err=True)
    typer.echo(f"wrote {nodes} and {pods}")
