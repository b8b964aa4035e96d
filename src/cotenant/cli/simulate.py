"""``cotenant simulate``: the fragmentation experiment (default), the time replay and the
online/offline co-location simulation."""

from __future__ import annotations

import json
import math
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
    RayOpt,
    WorkersOpt,
    executor_for,
    placement_policies,
)
from cotenant.cli.progress import announce, count, progress_bar
from cotenant.errors import InputError
from cotenant.model.cluster import Cluster
from cotenant.model.workload import Pod
from cotenant.report.html import Figure, HtmlTable, render_report
from cotenant.report.output import ReportDir
from cotenant.report.plots import allocation_plot, fragmentation_plot
from cotenant.report.tables import (
    bound_caption,
    headers,
    summary_caption,
    summary_rows,
    summary_tables,
)
from cotenant.sim.bound import (
    DEFAULT_TIME_LIMIT,
    BoundPoint,
    BoundSummary,
    gap_to_bound,
    run_bounds,
    summarise_bounds,
)
from cotenant.sim.experiment import PolicySummary, run_matrix, summarise
from cotenant.sim.fragmentation import FragmentationConfig, FragmentationRun, check_gpu_demand
from cotenant.sim.sweep.executor import Executor
from cotenant.traces.source import load_workload

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "replay": ("cotenant.cli.replay",
               "Time replay: pods arrive at creation_time and leave at deletion_time."),
    "colocation": ("cotenant.cli.colocation", "Online/offline co-location: dedicated GPUs, "
                   "fixed-split MPS, time slicing, priority, MuxFlow and cotenant's policies, "
                   "on one workload with the same bursts and faults."),
    "priority": ("cotenant.cli.priority", "Priority time sharing on one GPU, kernel by kernel: "
                 "an HP inference job and BE training under time slicing, MPS, MPS with "
                 "priority, TGS, REEF, Tally and Orion."),
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
    workers: WorkersOpt = None,
    ray: RayOpt = None,
    params: ParamsOpt = None,
    synthetic_pods: Annotated[int | None, typer.Option(min=1, max=MAX_SYNTHETIC)] = None,
    synthetic_nodes: Annotated[int | None, typer.Option(min=1, max=MAX_SYNTHETIC)] = None,
    bound: Annotated[bool, typer.Option(
        "--bound", help="also the offline optimum of the arrived pods, and each policy's gap "
        "to it")] = False,
    bound_at: Annotated[list[int] | None, typer.Option(
        "--bound-at", help="demand (%) for another optimum on the plot, repeatable "
        "(implies --bound)")] = None,
    bound_time_limit: Annotated[float, typer.Option(
        min=0.1, callback=finite, help="seconds per optimum before HiGHS answers with its "
        "best bound")] = DEFAULT_TIME_LIMIT,
    json_out: JsonOpt = False,
    out: OutOpt = None,
) -> None:
    """The ATC'23 fragmentation experiment: GPUs allocated as arrived demand grows.

    With no options it runs the seven policies over ten seeds on the embedded synthetic
    workload fitted to Alibaba's openb trace. With --bound it also computes, per seed, the
    most any placement of the pods arrived by the report point could allocate (a proven
    upper bound, and whether a placement reaches it).
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
    for at in bound_at or ():
        if not 0 <= at <= max_pct:
            raise InputError("--bound-at", f"{at} must be within 0..{max_pct} (--demand)")
    bound_points = sorted({report_at, *(bound_at or ())}) if bound or bound_at else []
    check_gpu_demand(workload.pods)  # before the progress bar, so the error is one line
    config = FragmentationConfig(demand_multiple=demand)
    seed_list = list(range(seed_start, seed_start + seeds))
    total = len(names) * len(seed_list)
    with executor_for(ray, workers) as executor:
        where = (f"on Ray ({ray})" if ray else "in " + count(
            min(total, executor.workers), "process", "processes"))
        announce(f"{count(total, 'run')} ({count(len(names), 'policy', 'policies')} x "
                 f"{count(len(seed_list), 'seed')}) {where}")
        runs, optima = _run(workload.cluster, workload.pods, names, seed_list, config,
                            bound_points, bound_time_limit, executor, json_out)
    summary = summarise(runs, report_at)
    bounds = summarise_bounds(optima)
    at_report = next((b for b in bounds if b.percent == report_at), None)
    settings = {
        "workload": workload.description,
        "nodes": workload.cluster.size,
        "GPUs": workload.cluster.total_gpus,
        "pods": len(workload.pods),
        "seeds": f"{seed_list[0]}..{seed_list[-1]}",
        "demand multiple": demand,
        "report at (% demand)": report_at,
    }
    data = _document(settings, summary, bounds, at_report)
    if json_out:
        typer.echo(json.dumps(data, indent=2))
    else:
        console = Console()
        console.print(workload.description)
        console.print(*summary_tables(summary, report_at, "Fragmentation experiment",
                                      console.width, at_report))
    if out is not None:
        caption = summary_caption(report_at)
        if at_report is not None:
            caption += "; " + bound_caption(at_report)
        table = HtmlTable(headers(report_at, at_report is not None),
                          summary_rows(summary, at_report), caption=caption)
        with ReportDir(out) as report:
            figures = [
                Figure(report.save("allocation.png", lambda p: allocation_plot(
                    runs, p, "GPU allocation as the cluster fills", bounds)),
                    "Share of the cluster's GPU capacity allocated as the arrived GPU demand "
                    "grows; the dotted line is every arriving pod placed"
                    + ("; stars: the offline optimum's upper bound, mean over seeds."
                       if bounds else ".")),
                Figure(report.save("fragmentation.png", lambda p: fragmentation_plot(
                    runs, p, "Fragmentation")),
                    "Free GPU capacity that the workload's typical pods could not use (FGD's "
                    "measure), as the cluster fills."),
            ]
            report.write_text("summary.json", json.dumps(data, indent=2))
            report.write_text("index.html", render_report(
                "cotenant: fragmentation experiment", settings, [table], figures))
        Console(stderr=True).print(f"report: {out / 'index.html'}")



def _run(cluster: Cluster, pods: list[Pod], names: list[str], seed_list: list[int],
         config: FragmentationConfig, bound_points: list[int], bound_time_limit: float,
         executor: Executor, json_out: bool) -> tuple[list[FragmentationRun], list[BoundPoint]]:
    """The policy runs, then the optima, on ``executor`` under one progress bar."""
    with progress_bar(json_out) as progress:
        task = progress.add_task("simulating", total=len(names) * len(seed_list))

        def done(run: FragmentationRun) -> None:
            progress.update(task, advance=1, description=f"{run.policy} seed {run.seed}")

        runs = run_matrix(cluster, pods, names, seed_list, config, on_done=done,
                          executor=executor)
        optima: list[BoundPoint] = []
        if bound_points:
            task = progress.add_task("offline optimum", total=len(seed_list) * len(bound_points))

            def solved(point: BoundPoint) -> None:
                progress.update(task, advance=1, description=f"optimum seed {point.seed} "
                                f"at {point.percent}%")

            optima = run_bounds(cluster, pods, seed_list, bound_points, config,
                                time_limit=bound_time_limit, on_done=solved,
                                executor=executor)
    return runs, optima


def _document(
    settings: dict[str, object], summary: list[PolicySummary], bounds: list[BoundSummary],
    at_report: BoundSummary | None,
) -> dict[str, object]:
    """The JSON summary: settings, policies (with their gap to the optimum) and optima."""
    policies = []
    for s in summary:
        row = s.as_dict()
        if at_report is not None:
            gap = gap_to_bound(s, at_report)
            row["gap_to_optimum_points"] = round(gap, 3) if math.isfinite(gap) else None
        policies.append(row)
    document: dict[str, object] = {"settings": settings, "policies": policies}
    if bounds:
        document["offline_optimum"] = [b.as_dict() for b in bounds]
    return document
