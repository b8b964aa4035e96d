"""``cotenant simulate colocation``: online/offline co-location under each sharing policy.

A run is a :class:`~cotenant.sim.colocation.scenario.ColocationScenario`: ``--config FILE``
reads one, and each flag given replaces one of its fields (the defaults otherwise). By default
the scenario's policies run side by side; ``--frontier`` runs every setting of every policy and
reports offline work against the late requests each adds to the dedicated deployment's.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from cotenant.cli.checks import finite, once_each
from cotenant.cli.options import (
    JsonOpt,
    NodesOpt,
    OutOpt,
    PodsOpt,
    RayOpt,
    WorkersOpt,
    executor_for,
)
from cotenant.cli.progress import announce, count, progress_bar
from cotenant.errors import InputError
from cotenant.policies.colocation import COLOCATION
from cotenant.report.colocation import (
    BUDGET_CAPTION,
    COLOCATION_CAPTION,
    FRONTIER_CAPTION,
    budget_rows,
    colocation_plot,
    colocation_rows,
    colocation_tables,
    frontier_plot,
    frontier_rows,
    frontier_tables,
    pareto_rows,
)
from cotenant.report.html import Figure, HtmlTable, render_report
from cotenant.report.output import ReportDir
from cotenant.sim.colocation.frontier import frontier, settings, verdict
from cotenant.sim.colocation.inputs import workload_of
from cotenant.sim.colocation.records import ColocationRun, common_jct
from cotenant.sim.colocation.run import run_colocation
from cotenant.sim.colocation.scenario import (
    MAX_GPUS,
    MAX_HOURS,
    ColocationScenario,
    PolicySpec,
)
from cotenant.sim.colocation.workload import ColocationWorkload
from cotenant.sim.sweep.executor import Executor

app = typer.Typer()


@app.command()
def colocation(
    config: Annotated[Path | None, typer.Option(
        "--config", help="a ColocationScenario file (YAML); the flags below override it")] = None,
    pods: PodsOpt = None,
    nodes: NodesOpt = None,
    load: Annotated[Path | None, typer.Option(
        "--load", help="GenAI duty-cycle file (default: synthetic duty cycles)")] = None,
    memory: Annotated[Path | None, typer.Option(
        "--memory", help="GenAI memory-used file: online memory over time (needs --load)")] = None,
    policy: Annotated[list[str] | None, typer.Option(
        "--policy", "-p", help="co-location policy, repeatable (default: the scenario's, or "
        "all seven); parameters go in a scenario file")] = None,
    seed: Annotated[int | None, typer.Option(
        min=0, help="seed of the workload draw and the faults (default 42)")] = None,
    hours: Annotated[float | None, typer.Option(
        min=0.02, max=MAX_HOURS, callback=finite, help="simulated hours (default 24)")] = None,
    gpus: Annotated[int | None, typer.Option(
        min=1, max=MAX_GPUS, help="online GPUs of the synthetic workload (default 2000)")] = None,
    load_scale: Annotated[float | None, typer.Option(
        callback=finite, help="multiply the duty cycles (capped at 1): a busier fleet")] = None,
    slo_multiple: Annotated[float | None, typer.Option(
        callback=finite, help="SLO = this x the model's solo batch time (default 5)")] = None,
    reaction_s: Annotated[float | None, typer.Option(
        min=0.0, callback=finite, help="seconds from the end of a p99 report window until "
        "the guard's action lands (default 0.089, measured)")] = None,
    calibration: Annotated[str | None, typer.Option(
        help="interference calibration: tally (published, A100) or h200 (measured)")] = None,
    load_signal: Annotated[str | None, typer.Option(
        help="the load the policies see: auto (default: counted from the request rate under "
        "MPS, the service's own otherwise), service, requests or whole-gpu")] = None,
    run_frontier: Annotated[bool, typer.Option(
        "--frontier", help="every setting of every policy: offline work against late "
        "requests")] = False,
    workers: WorkersOpt = None,
    ray: RayOpt = None,
    json_out: JsonOpt = False,
    out: OutOpt = None,
) -> None:
    """Online/offline co-location: dedicated GPUs, fixed-split MPS, time slicing, priority,
    MuxFlow and cotenant's policies, on one workload with the same bursts and faults.

    With no options it runs seven policies over 24 simulated hours on the embedded synthetic
    workload (2,000 online GPUs fitted to openb, synthetic GenAI duty cycles).
    """
    if run_frontier and policy:
        raise InputError("--frontier", "runs every policy setting itself",
                         hint="leave out -p/--policy")
    scenario = ColocationScenario.load(config) if config is not None else ColocationScenario()
    specs = None
    if policy:
        specs = tuple(PolicySpec(COLOCATION.canonical(n))
                      for n in once_each([COLOCATION.canonical(n) for n in policy], "--policy"))
    scenario = scenario.override(
        pods=pods, nodes=nodes, load=load, memory=memory, seed=seed, hours=hours, gpus=gpus,
        load_scale=load_scale, slo_multiple=slo_multiple, reaction_s=reaction_s,
        calibration=calibration, load_signal=load_signal, policies=specs,
        frontier=run_frontier or None)
    if (workers is not None or ray is not None) and not scenario.frontier:
        raise InputError("--workers/--ray", "spread the frontier's runs; the side-by-side "
                         "policies run in this process", hint="add --frontier")
    policies = scenario.build_policies()  # bad parameters fail before the workload is built
    notes: list[str] = []
    work = workload_of(scenario, notes)
    err = Console(stderr=True)
    about = _settings(scenario, work)
    if scenario.frontier:
        with executor_for(ray, workers) as executor:
            _frontier(scenario, work, about, notes, json_out, out, err, executor)
        return
    runs: list[ColocationRun] = []
    announce(f"{count(len(policies), 'run')} ({', '.join(p.name for p in policies)}) of "
             f"{work.gpus:,} online GPUs x {work.intervals:,} intervals")
    with progress_bar(json_out) as progress:
        task = progress.add_task("co-location", total=len(policies) * work.intervals)
        for chosen in policies:
            progress.update(task, description=chosen.name)
            runs.append(run_colocation(work, chosen, scenario.seed, scenario.config(),
                                       on_interval=lambda _s: progress.advance(task)))
    rows = _rows(runs)
    if json_out:
        typer.echo(json.dumps({"settings": about, "policies": rows, "notes": notes},
                              indent=2, default=str))
    else:
        console = Console()
        console.print(work.description)
        for note in notes:
            console.print(note)
        console.print(*colocation_tables(rows, console.width))
    if out is not None:
        with ReportDir(out) as report:
            image = report.save("colocation.png", lambda p: colocation_plot(
                runs, p, "Co-location over simulated time"))
            report.write_text("summary.json", json.dumps(
                {"settings": about, "policies": rows}, indent=2, default=str))
            report.write_text("index.html", render_report(
                "cotenant: online/offline co-location", about,
                [HtmlTable(*colocation_rows(rows), caption=COLOCATION_CAPTION)],
                [Figure(image)], notes))
        err.print(f"report: {out / 'index.html'}")


def _rows(runs: list[ColocationRun]) -> list[dict[str, object]]:
    """Each run's summary, with its late requests over dedicated's where dedicated ran."""
    common = common_jct(runs)
    floor = next((r.violation_pct for r in runs if r.policy == "dedicated"), math.nan)
    return [{**r.summary(), "jct_common_min": common[r.policy],
             "added_violation_pct": (None if math.isnan(floor)
                                     else round(r.violation_pct - floor, 3))} for r in runs]


def _settings(s: ColocationScenario, work: ColocationWorkload) -> dict[str, object]:
    w, world = s.workload, s.world
    return {
        "workload": work.description, "online GPUs": work.gpus, "offline jobs": work.jobs,
        "intervals": f"{work.intervals} x {work.interval_s} s, {work.substeps} sub-steps each",
        "seed": s.seed, "offline arrivals": w.arrivals, "load scale": w.load_scale,
        "SLO": f"{w.slo_multiple:g} x the model's solo batch time",
        "burst alpha": w.burst_alpha, "offline start (s)": world.offline_start_s,
        "share change (s)": world.share_change_s, "guard reaction (s)": world.reaction_s,
        "calibration": f"{world.calibration} ({world.statistic})",
        "load signal": world.load_signal,
        "rejected": work.rejected or "none",
    }


def _frontier(s: ColocationScenario, work: ColocationWorkload, about: dict[str, object],
              notes: list[str], json_out: bool, out: Path | None, err: Console,
              executor: Executor) -> None:
    runs = settings()
    announce(f"frontier: {len(runs) + 1} runs of {work.gpus:,} online GPUs x "
             f"{work.intervals:,} intervals (dedicated, the reference, among them) on "
             f"{count(min(executor.workers, len(runs) + 1), 'worker')}; the bar estimates "
             "the time left as they finish")
    with progress_bar(json_out) as progress:
        task = progress.add_task("frontier", total=len(runs) + 1)

        def advance(name: str, label: str) -> None:
            progress.update(task, advance=1, description=f"{name} {label}")

        floor, points = frontier(work, s.seed, s.config(), runs, on_run=advance,
                                 executor=executor)
    about["dedicated late requests (%)"] = round(floor, 3)
    found = verdict(points)
    for v in found:
        notes.append(f"adding at most {v['budget_added_pct']:g} points of late requests: "
                     f"most offline work by {v['winner'] or 'no policy'}")
    if json_out:
        typer.echo(json.dumps({"settings": about, "points": [vars(p) for p in points],
                               "verdict": found, "notes": notes}, indent=2, default=str))
    else:
        console = Console()
        console.print(work.description)
        console.print(*frontier_tables(found, len(points), console.width))
        for note in notes:
            console.print(note)
    if out is not None:
        with ReportDir(out) as report:
            image = report.save("frontier.png", lambda p: frontier_plot(
                points, p, "Offline work against late requests"))
            report.write_text("frontier.json", json.dumps(
                {"settings": about, "points": [vars(p) for p in points], "verdict": found},
                indent=2, default=str))
            tables = [
                HtmlTable(*budget_rows(found), caption=BUDGET_CAPTION,
                          title="Offline work within a late-request budget"),
                HtmlTable(*pareto_rows(points), caption=FRONTIER_CAPTION, folded=True,
                          title="The Pareto settings of each policy"),
                HtmlTable(*frontier_rows(points), caption=FRONTIER_CAPTION, folded=True,
                          title="Every setting run"),
            ]
            report.write_text("index.html", render_report(
                "cotenant: co-location frontier", about, tables, [Figure(
                    image, "Each policy's Pareto front as a line; the faint dots are its "
                    "settings another of its settings beats on both axes; a setting adding "
                    "0.001 points or fewer is drawn at 0.001.")], notes))
        err.print(f"report: {out / 'index.html'}")
