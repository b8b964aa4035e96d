"""``cotenant simulate mig-training``: training jobs on MIG GPUs, one-to-one (static and
dynamic) against Flex-MIG's one-to-many, on the same jobs and layouts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.console import Console

from cotenant.cli.checks import finite
from cotenant.cli.options import JsonOpt, OutOpt
from cotenant.errors import InputError
from cotenant.model.training import TrainingJob
from cotenant.report.html import Figure, HtmlTable, render_report
from cotenant.report.mig_training import CAPTION, mig_training_plot
from cotenant.report.output import ReportDir
from cotenant.report.tables import fitted_tables
from cotenant.sim.mig_training import Allocation, MigTrainingConfig, simulate
from cotenant.traces.mig_jobs import ARRIVALS, arrange, openb_jobs, synthetic_jobs
from cotenant.traces.openb import iter_pods

app = typer.Typer()


def _jobs(pods: Path | None, synthetic: int | None, rng: np.random.Generator
          ) -> tuple[list[TrainingJob], str]:
    if (pods is None) == (synthetic is None):
        raise InputError("--pods/--synthetic", "give one: an openb pod list, or a number of "
                         "synthetic jobs", hint="e.g. --pods ../shared/data/alibaba-gpu-"
                         "v2023/openb_pod_list_default.csv")
    if pods is not None:
        jobs, left = openb_jobs(iter_pods(pods))
        dropped = ", ".join(f"{n} {why}" for why, n in sorted(left.items())) or "none"
        if not jobs:
            raise InputError(str(pods), "no BE pod of one GPU or less with a lifetime")
        return jobs, f"{pods.name}: {len(jobs)} BE pods as jobs (left out: {dropped})"
    assert synthetic is not None
    return synthetic_jobs(synthetic, rng), f"{synthetic} synthetic jobs (openb's BE mix)"


@app.command("mig-training")
def mig_training(
    pods: Annotated[Path | None, typer.Option(help="openb pod list CSV: its BE pods are "
                                              "the jobs")] = None,
    synthetic: Annotated[int | None, typer.Option(min=1, max=1_000_000,
                                                  help="this many synthetic jobs")] = None,
    jobs: Annotated[int | None, typer.Option(min=1, help="a seeded sample of this many "
                                             "jobs")] = None,
    arrivals: Annotated[str, typer.Option(help=f"one of: {', '.join(ARRIVALS)}")] = "batch",
    load: Annotated[float, typer.Option(min=0.01, max=100.0, callback=finite,
                                        help="poisson: offered load x the cluster")] = 0.9,
    gpus: Annotated[int, typer.Option(min=1, max=100_000)] = 8,
    gpus_per_node: Annotated[int, typer.Option(min=1, max=64)] = 8,
    gpu_model: Annotated[str, typer.Option(help="a MIG GPU model")] = "A100-40GB",
    overhead: Annotated[float, typer.Option(min=0.0, max=5.0, callback=finite, help=(
        "flex-mig: slowdown per instance beyond the first"))] = 0.05,
    reconfig_s: Annotated[float, typer.Option(min=0.0, max=1e6, callback=finite, help=(
        "dynamic: seconds to remake a drained GPU"))] = 60.0,
    drain_after_s: Annotated[float, typer.Option(min=0.0, max=1e8, callback=finite, help=(
        "dynamic: seconds a job that fits nowhere waits before a drain"))] = 0.0,
    seed: Annotated[int, typer.Option(min=0)] = 0,
    json_out: JsonOpt = False,
    out: OutOpt = None,
) -> None:
    """Training jobs on MIG GPUs: one-to-one static and dynamic MIG against Flex-MIG's
    one-to-many, on the same jobs and layouts."""
    rng = np.random.default_rng(seed)
    found, source = _jobs(pods, synthetic, rng)
    config = MigTrainingConfig(gpus, gpus_per_node, gpu_model, overhead, reconfig_s,
                               drain_after_s)
    chosen = arrange(found, arrivals, rng, jobs, load, gpus * 7)
    runs = [simulate(chosen, a, config) for a in Allocation]
    rows = [r.summary() for r in runs]
    static = runs[0]
    for row, run in zip(rows, runs, strict=True):
        row["makespan_vs_static"] = round(1 - run.makespan_s / static.makespan_s, 4)
        row["jct_vs_static"] = round(1 - run.mean_jct_s / static.mean_jct_s, 4)
    settings = {"jobs": f"{source}; {len(chosen)} simulated, arrivals {arrivals}"
                        + (f" at load {load:g}" if arrivals == "poisson" else ""),
                "cluster": f"{gpus} x {gpu_model}, {gpus_per_node} per node",
                "costs": f"overhead {overhead:g} per extra instance, remake {reconfig_s:g} s, "
                         f"drain after {drain_after_s:g} s", "seed": seed}
    if json_out:
        typer.echo(json.dumps({"settings": settings, "allocations": rows}, indent=2))
    else:
        console = Console()
        for key, value in settings.items():
            console.print(f"{key}: {value}")
        head = ["allocation", "makespan h", "vs static", "JCT h", "vs static", "queue h",
                "frag", "used", "remakes", "multi"]
        body = [[str(row["allocation"]), f"{row['makespan_s'] / 3600:.1f}",
                 f"{row['makespan_vs_static']:+.1%}", f"{row['mean_jct_s'] / 3600:.2f}",
                 f"{row['jct_vs_static']:+.1%}", f"{row['mean_queue_s'] / 3600:.2f}",
                 f"{row['fragmented']:.1%}", f"{row['used']:.1%}",
                 str(row["reconfigurations"]), str(row["multi_instance_jobs"])] for row in rows]
        console.print(*fitted_tables(
            head, body, console.width, title="Training jobs on MIG", left=("allocation",),
            caption="vs static: below static one-to-one's (positive: better); frag: slices "
                    "idle while jobs wait; multi: jobs on several instances"))
    if out is not None:
        page = HtmlTable(list(rows[0]), [[str(v) for v in row.values()] for row in rows],
                          caption="Times in seconds; fragmented and used: time-weighted "
                          "shares of the compute slices over the makespan; vs static: the "
                          "share below static one-to-one's (positive: better).")
        with ReportDir(out) as report:
            image = report.save("mig-training.png", lambda p: mig_training_plot(
                runs, p, "Training jobs on MIG"))
            report.write_text("mig-training.json", json.dumps(
                {"settings": settings, "allocations": rows,
                 "series": {r.allocation: r.series for r in runs}}))
            report.write_text("index.html", render_report(
                "cotenant: training jobs on MIG", settings, [page], [Figure(image, CAPTION)]))
        Console(stderr=True).print(f"report: {out / 'index.html'}")
