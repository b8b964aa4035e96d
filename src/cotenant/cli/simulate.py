"""``cotenant simulate``: the fragmentation experiment (default), the time replay and the
online/offline co-location simulation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

from cotenant.cli.checks import finite, once_each
from cotenant.cli.colocation import colocation
from cotenant.cli.options import JsonOpt, NodesOpt, OutOpt, PodsOpt
from cotenant.errors import InputError
from cotenant.policies.placement import PLACEMENT
from cotenant.report.html import write_report
from cotenant.report.plots import (
    allocation_plot,
    fragmentation_plot,
    replay_plot,
)
from cotenant.report.tables import (
    headers,
    summary_rows,
    summary_tables,
)
from cotenant.sim.experiment import run_matrix, summarise
from cotenant.sim.fragmentation import FragmentationConfig, FragmentationRun, check_gpu_demand
from cotenant.sim.replay import ReplayConfig, check_samples, run_replay
from cotenant.traces.source import load_workload

app = typer.Typer(help="Run the trace-driven simulator.", no_args_is_help=False)
DEFAULT_POLICIES = ["random", "dot-product", "gpu-clustering", "gpu-packing", "best-fit", "fgd"]
MAX_DEMAND = 100.0  # x capacity: past this a typo, not an experiment, and a run without end
MAX_SYNTHETIC = 1_000_000  # pods or nodes drawn: over 100x openb's 8,152 pods and 1,213 nodes

PolicyOpt = Annotated[
    list[str] | None,
    typer.Option("--policy", "-p", help="placement policy, repeatable (default: all six)"),
]
ParamsOpt = Annotated[
    Path | None, typer.Option("--params", help="fitted synthetic parameters (JSON)")
]


def _policies(names: list[str] | None) -> list[str]:
    return once_each([PLACEMENT.canonical(n) for n in (names or DEFAULT_POLICIES)], "--policy")


@app.callback(invoke_without_command=True)
def fragmentation(
    ctx: typer.Context,
    pods: PodsOpt = None,
    nodes: NodesOpt = None,
    policy: PolicyOpt = None,
    seeds: Annotated[int, typer.Option(min=1, help="number of seeds")] = 10,
    seed_start: Annotated[int, typer.Option(min=0, help="first seed")] = 42,
    demand: Annotated[
        float, typer.Option(min=0.01, max=MAX_DEMAND, callback=finite,
                            help="arrived GPU demand to reach, x capacity")
    ] = 1.3,
    report_at: Annotated[int, typer.Option(help="arrived demand (%) for the summary")] = 100,
    workers: Annotated[int | None, typer.Option(min=1, help="processes (default: CPUs)")] = None,
    params: ParamsOpt = None,
    synthetic_pods: Annotated[int | None, typer.Option(min=1, max=MAX_SYNTHETIC)] = None,
    synthetic_nodes: Annotated[int | None, typer.Option(min=1, max=MAX_SYNTHETIC)] = None,
    json_out: JsonOpt = False,
    out: OutOpt = None,
) -> None:
    """The ATC'23 fragmentation experiment: GPUs allocated as arrived demand grows.

    With no options it runs the six policies over ten seeds on the embedded synthetic
    workload fitted to Alibaba's openb trace.
    """
    if ctx.invoked_subcommand is not None:
        return
    names = _policies(policy)
    workload = load_workload(
        pods,
        nodes,
        params=params,
        synthetic_pods=synthetic_pods,
        synthetic_nodes=synthetic_nodes,
    )
    max_pct = round(demand * 100)
    if not 0 <= report_at <= max_pct:
        raise InputError("--report-at", f"{report_at} must be within 0..{max_pct} (--demand)")
    check_gpu_demand(workload.pods)  # before the progress bar, so the error is one line
    config = FragmentationConfig(demand_multiple=demand)
    seed_list = list(range(seed_start, seed_start + seeds))
    err = Console(stderr=True)
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        disable=json_out and not err.is_terminal,
    ) as progress:
        task = progress.add_task("simulating", total=len(names) * len(seed_list))

        def done(run: FragmentationRun) -> None:
            progress.update(task, advance=1, description=f"{run.policy} seed {run.seed}")

        runs = run_matrix(
            workload.cluster, workload.pods, names, seed_list, config,
            workers=workers, on_done=done,
        )
    summary = summarise(runs, report_at)
    settings = {
        "workload": workload.description,
        "nodes": workload.cluster.size,
        "GPUs": workload.cluster.total_gpus,
        "pods": len(workload.pods),
        "seeds": f"{seed_list[0]}..{seed_list[-1]}",
        "demand multiple": demand,
        "report at (% demand)": report_at,
    }
    if json_out:
        typer.echo(
            json.dumps(
                {"settings": settings, "policies": [s.as_dict() for s in summary]}, indent=2
            )
        )
    else:
        console = Console()
        console.print(workload.description)
        console.print(*summary_tables(summary, report_at, "Fragmentation experiment",
                                      console.width))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        title = "GPU allocation as the cluster fills"
        images = [
            allocation_plot(runs, out / "allocation.png", title),
            fragmentation_plot(runs, out / "fragmentation.png", "Fragmentation (FGD measure)"),
        ]
        page = write_report(
            out, "cotenant: fragmentation experiment", settings, headers(report_at),
            summary_rows(summary), images,
        )
        (out / "summary.json").write_text(
            json.dumps({"settings": settings, "policies": [s.as_dict() for s in summary]},
                       indent=2)
        )
        Console(stderr=True).print(f"report: {page}")


@app.command()
def replay(
    pods: PodsOpt = None,
    nodes: NodesOpt = None,
    policy: PolicyOpt = None,
    seed: Annotated[int, typer.Option(min=0, help="seed for tie breaking")] = 42,
    sample_every: Annotated[
        float, typer.Option(min=1.0, callback=finite, help="seconds between samples")
    ] = 3600.0,
    params: ParamsOpt = None,
    synthetic_pods: Annotated[int | None, typer.Option(min=1, max=MAX_SYNTHETIC)] = None,
    synthetic_nodes: Annotated[int | None, typer.Option(min=1, max=MAX_SYNTHETIC)] = None,
    json_out: JsonOpt = False,
    out: OutOpt = None,
) -> None:
    """Time replay: pods arrive at creation_time and leave at deletion_time."""
    names = _policies(policy)
    workload = load_workload(
        pods, nodes, params=params, synthetic_pods=synthetic_pods,
        synthetic_nodes=synthetic_nodes,
    )
    config = ReplayConfig(sample_every=sample_every)
    check_samples(workload.pods, config)  # before the progress bar, so the error is one line
    runs = []
    with Progress(console=Console(stderr=True), disable=json_out) as progress:
        task = progress.add_task("replaying", total=len(names))
        for name in names:
            runs.append(run_replay(workload.cluster, workload.pods, name, seed, config))
            progress.advance(task)
    rows = [
        {
            "policy": r.policy,
            "arrivals": r.arrivals,
            "failed": r.failed,
            "departures": r.departures,
            "alloc_percent_mean": round(float(r.alloc_percent.mean()), 3),
            "alloc_percent_max": round(float(r.alloc_percent.max()), 3),
            "frag_percent_mean": round(float(r.frag_percent.mean()), 3),
        }
        for r in runs
    ]
    if json_out:
        typer.echo(json.dumps({"workload": workload.description, "policies": rows}, indent=2))
    else:
        console = Console()
        console.print(workload.description)
        for row in rows:
            console.print(row)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        image = replay_plot(runs, out / "replay.png", "Time replay")
        page = write_report(
            out, "cotenant: time replay", {"workload": workload.description, "seed": seed},
            list(rows[0]), [[str(v) for v in row.values()] for row in rows], [image],
        )
        Console(stderr=True).print(f"report: {page}")


app.command()(colocation)
