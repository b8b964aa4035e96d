"""``cotenant k8s``: the scheduler extender and device plugin daemons, cluster snapshots, and
the MIG controller.

Each command parses its options and calls one library function of
:mod:`cotenant.integrations.k8s.daemon`; the kubernetes and grpc clients (the ``k8s`` extra)
are imported only when a command runs.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Annotated

import typer

from cotenant.cli.checks import file_option, finite
from cotenant.errors import CotenantError, InputError

app = typer.Typer(help="Kubernetes: extender, device plugin, MIG controller.",
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


@app.command("mig")
def mig(
    spec: Annotated[Path, typer.Argument(metavar="SPEC.yaml", help="ServingPlan spec")],
    nodes: Annotated[str, typer.Option(help="the pool's nodes in GPU order, comma-separated: "
                                       "GPU g is on node g // --gpus-per-node")],
    gpus_per_node: Annotated[int, typer.Option(min=1, max=64, help="GPUs per node")],
    current: Annotated[Path | None, typer.Option(
        help="Deployment running today (else the spec's current: block, else empty GPUs)")] = None,
    mig_parted: Annotated[Path | None, typer.Option(
        "--mig-parted", callback=file_option,
        help="write the mig-parted configs the labels name (for the MIG manager's ConfigMap)")
    ] = None,
    profiles: Annotated[Path | None, typer.Option(help="profile CSV for the planner")] = None,
    kubeconfig: Kubeconfig = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="roll out against a fake cluster (every node applies in 30 s, "
                          "every temporary pod is Ready in 20 s, a node's new serving pods "
                          "15 s after it applies): shows the order and where it would "
                          "stop")] = False,
    timeout: Annotated[float, typer.Option(min=1.0, callback=finite,
                                           help="seconds a node may take to apply")] = 900.0,
    ready_timeout: Annotated[float, typer.Option(
        min=1.0, callback=finite,
        help="seconds a temporary pod, or a changed node's new serving pods, may take to "
             "become Ready")] = 300.0,
    poll: Annotated[float, typer.Option(min=0.1, callback=finite,
                                        help="seconds between state reads")] = 5.0,
    time_limit: Annotated[float, typer.Option(min=0.01, callback=finite,
                                              help="seconds for the planner")] = 10.0,
    partial: Annotated[bool, typer.Option(
        "--partial", help="where no safe node order reaches every node, carry out the "
                          "changes before the blocked one that leave no temporary pod or "
                          "intermediate layout behind, instead of refusing")] = False,
) -> None:
    """Apply a ServingPlan's MIG layouts through NVIDIA's MIG manager, node by node, in the
    planner's order, with temporary replicas where a node's services lack slack, never
    draining a node whose services lack it (exit 1 if it stops, or if no safe node order
    reaches every node and --partial is not given)."""
    from cotenant.integrations.k8s.mig.run import MigJob, run_mig  # noqa: PLC0415
    from cotenant.integrations.k8s.mig.steps import Settings  # noqa: PLC0415

    names = tuple(n.strip() for n in nodes.split(",") if n.strip())
    if not names:
        raise InputError("--nodes", "names no node", hint="--nodes gpu-node-0,gpu-node-1")
    job = MigJob(spec, names, gpus_per_node, current, mig_parted, profiles, kubeconfig,
                 dry_run, Settings(timeout, poll, ready_timeout, partial), time_limit=time_limit)
    report = run_mig(job, lambda t, action: typer.echo(f"{t:8.1f} s  {action}"),
                     typer.echo)
    if mig_parted is not None:
        typer.echo(f"wrote {mig_parted}")
    if not report.ok:
        raise typer.Exit(1)
