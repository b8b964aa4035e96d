"""``cotenant simulate``: the fragmentation experiment (default), the time replay and the
online/offline co-location simulation."""

from __future__ import annotations

import json
import os
from typing import Annotated

import typer
from rich.console import Console

from cotenant.cli.checks import finite
from cotenant.cli.lazy import lazy_group
from cotenant.cli.options import (
    MAX_SYNTHETIC,
    JsonOpt,
    NodesOpt,
    OutOpt,
    ParamsOpt,
    PodsOpt,
    PolicyOpt,
    placement_policies,
)
from cotenant.cli.progress import announce, count, progress_bar
from cotenant.errors import InputError
from cotenant.report.html import Figure, HtmlTable, render_report
from cotenant.report.output import ReportDir
from cotenant.report.plots import allocation_plot, fragmentation_plot
from cotenant.report.tables import (
    headers,
    summary_caption,
    summary_rows,
    summary_tables,
)
from cotenant.sim.experiment import run_matrix, summarise
from cotenant.sim.fragmentation import FragmentationConfig, FragmentationRun, check_gpu_demand
from cotenant.traces.source import load_workload

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "replay": ("cotenant.cli.replay",
               "Time replay: pods arrive at creation_time and leave at deletion_time."),
    "colocation": ("cotenant.cli.colocation", "Online/offline co-location: dedicated GPUs, "
                   "fixed-split MPS, time slicing, priority, MuxFlow and cotenant's policies, "
                   "on one workload with the same bursts and faults."),
    "mig-training": ("cotenant.cli.mig_training", "Training jobs on MIG GPUs: one-to-one "
                     "static and dynamic MIG against Flex-MIG's one-to-many, on the same "
                     "jobs and layouts."),
}
"""The simulators beside the fragmentation experiment, loaded when they run: the placement
experiment does not import the co-location simulator, nor the other way round."""
app = typer.Typer(help="Run the trace-driven simulator.", no_args_is_help=False,
                  cls=lazy_group(SUBCOMMANDS))
MAX_DEMAND = 100.0  # x capacity: past this a typo, not an experiment, and a run without end



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
    names = placement_policies(policy)
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
    total = len(names) * len(seed_list)
    processes = min(total, workers or os.cpu_count() or 1)  # as run_matrix spreads them
    announce(f"{count(total, 'run')} ({count(len(names), 'policy', 'policies')} x "
             f"{count(len(seed_list), 'seed')}) in {count(processes, 'process', 'processes')}")
    with progress_bar(json_out) as progress:
        task = progress.add_task("simulating", total=total)

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
        data = {"settings": settings, "policies": [s.as_dict() for s in summary]}
        table = HtmlTable(headers(report_at), summary_rows(summary),
                          caption=summary_caption(report_at))
        with ReportDir(out) as report:
            figures = [
                Figure(report.save("allocation.png", lambda p: allocation_plot(
                    runs, p, "GPU allocation as the cluster fills")),
                    "Share of the cluster's GPU capacity allocated as the arrived GPU demand "
                    "grows; the dotted line is every arriving pod placed."),
                Figure(report.save("fragmentation.png", lambda p: fragmentation_plot(
                    runs, p, "Fragmentation")),
                    "Free GPU capacity that the workload's typical pods could not use (FGD's "
                    "measure), as the cluster fills."),
            ]
            report.write_text("summary.json", json.dumps(data, indent=2))
            report.write_text("index.html", render_report(
                "cotenant: fragmentation experiment", settings, [table], figures))
        Console(stderr=True).print(f"report: {out / 'index.html'}")

