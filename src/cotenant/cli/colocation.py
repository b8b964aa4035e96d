"""``cotenant simulate colocation``: online/offline co-location under each sharing policy.

By default it runs the four policies side by side; ``--frontier`` instead runs MuxFlow and
every setting of the two static baselines (online share, admitted peak load) and reports
offline throughput against SLO violations, the fair comparison between policies whose
defaults sit at different violation rates.
"""

from __future__ import annotations

import json
import math
from dataclasses import astuple
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

from cotenant.cli.checks import finite, once_each
from cotenant.cli.colocation_inputs import (
    guard_note,
    muxflow_from_options,
    verdict,
    workload_from_options,
)
from cotenant.cli.options import JsonOpt, NodesOpt, OutOpt, PodsOpt
from cotenant.errors import InputError
from cotenant.policies.colocation import COLOCATION, ColocationPolicy
from cotenant.report.html import write_report
from cotenant.report.plots import colocation_plot, frontier_plot
from cotenant.report.tables import (
    colocation_rows,
    colocation_tables,
    frontier_rows,
    frontier_tables,
)
from cotenant.sim.colocation import run_colocation
from cotenant.sim.colocation_faults import FaultRates
from cotenant.sim.colocation_frontier import frontier, settings
from cotenant.sim.colocation_records import ColocationConfig, ColocationRun, common_jct
from cotenant.sim.colocation_workload import ARRIVALS, ColocationWorkload

COLOCATION_POLICIES = ["dedicated", "mps-fixed", "time-slicing", "muxflow"]
# Bounds that keep a typo from a run that would not end: a leap year, fifty times the 20,000
# GPUs the scale benchmark runs, a thousand times the online GPU-time.
MAX_HOURS = 24 * 366
MAX_GPUS = 1_000_000
MAX_OFFLINE_DEMAND = 1000.0
MAX_FAULT_SCALE = math.floor(1.0 / sum(astuple(FaultRates())))  # a probability sum of 1


def colocation(
    pods: PodsOpt = None,
    nodes: NodesOpt = None,
    load: Annotated[
        Path | None,
        typer.Option("--load", help="GenAI duty-cycle file (default: synthetic duty cycles)"),
    ] = None,
    memory: Annotated[
        Path | None,
        typer.Option("--memory", help="GenAI memory-used file: online memory over time "
                     "(needs --load; default with --load: memory constant at its peak)"),
    ] = None,
    policy: Annotated[
        list[str] | None,
        typer.Option("--policy", "-p", help="co-location policy, repeatable (default: all four)"),
    ] = None,
    seed: Annotated[int, typer.Option(min=0, help="seed of the workload draw and the faults")] = 42,
    hours: Annotated[float, typer.Option(min=0.02, max=MAX_HOURS, callback=finite,
                                   help="simulated hours")] = 24.0,
    gpus: Annotated[
        int | None, typer.Option(min=1, max=MAX_GPUS,
                                 help="online GPUs of the synthetic workload (no --pods; "
                                 "default 2000)")
    ] = None,
    offline_demand: Annotated[
        float, typer.Option(min=0.0, max=MAX_OFFLINE_DEMAND, callback=finite,
                            help="offline work, x online GPU-time of the horizon")
    ] = 2.0,
    arrivals: Annotated[
        str, typer.Option(help=f"offline arrivals: {' or '.join(ARRIVALS)} (all at time 0)")
    ] = "spread",
    load_scale: Annotated[
        float, typer.Option(callback=finite,
                            help="multiply the duty cycles (capped at 1): a busier "
                            "fleet")
    ] = 1.0,
    slo_headroom: Annotated[
        float, typer.Option(min=1.01, callback=finite,
                            help="SLO = this x the p99 alone at peak load")
    ] = 1.5,
    fault_scale: Annotated[
        float, typer.Option(min=0.0, max=MAX_FAULT_SCALE, callback=finite,
                            help="multiply the default fault rates (their sum stays <= 1)")
    ] = 1.0,
    mps_share: Annotated[
        int | None, typer.Option(min=1, max=100, help="online SM share (%) of mps-fixed "
                                 "(default 50)")
    ] = None,
    offline_start_s: Annotated[
        float, typer.Option(min=0.0, callback=finite,
                            help="seconds an offline job is down when placed")
    ] = 30.0,
    share_change_s: Annotated[
        float, typer.Option(min=0.0, callback=finite,
                            help="seconds a running offline job is down when its MPS "
                            "share changes (a restart; 0 = shares change in place)")
    ] = 30.0,
    guard_reaction_s: Annotated[
        float | None,
        typer.Option(min=0.0, callback=finite,
                     help="seconds MuxFlow's compute guard takes to act on a p99 "
                     "rise (an assumption; from 1% of an interval, 0.6 s at 1 min, an interval "
                     "whose p99 crossed the SLO stays a violation; default 0.5)"),
    ] = None,
    load_window: Annotated[
        int | None,
        typer.Option(min=1, help="MuxFlow's shares and matching follow the peak load of this "
                     "many past intervals (default 1)"),
    ] = None,
    min_online_share: Annotated[
        int | None,
        typer.Option(min=1, max=100, help="MuxFlow's online share never goes below this % (a "
                     "floor for bursts a slow guard sees late; default 10)"),
    ] = None,
    run_frontier: Annotated[
        bool, typer.Option("--frontier", help="offline work against SLO violations instead")
    ] = False,
    admit_quantiles: Annotated[
        list[float] | None,
        typer.Option("--admit-quantile", callback=finite,
                     help="--frontier: admit the baselines by this "
                     "quantile of each service's load (repeat for several; default 1 = the "
                     "peak; 0.99 helps where nearly every service peaks at 1)"),
    ] = None,
    admit_from_history: Annotated[
        bool, typer.Option("--admit-from-history", help="--frontier: admit the baselines by "
                           "the load seen so far (none in the first hour), not the whole run's")
    ] = False,
    json_out: JsonOpt = False,
    out: OutOpt = None,
) -> None:
    """Online/offline co-location: dedicated GPUs, fixed-split MPS, time slicing, MuxFlow.

    With no options it runs the four policies over 24 simulated hours on the embedded
    synthetic workload (2,000 online GPUs fitted to openb, synthetic GenAI duty cycles).
    """
    names = once_each([COLOCATION.canonical(n) for n in (policy or COLOCATION_POLICIES)],
                      "--policy")
    if admit_quantiles and not run_frontier:  # checked before the workload is built
        raise InputError("--admit-quantile", "is a --frontier setting",
                         hint="add --frontier, or leave it out")
    if admit_from_history and not run_frontier:
        raise InputError("--admit-from-history", "is a --frontier setting",
                         hint="add --frontier, or leave it out")
    quantiles = tuple(admit_quantiles or (1.0,))
    for q in quantiles:
        if not 0.0 < q <= 1.0:
            raise InputError("--admit-quantile", f"{q:g} must be in (0, 1]")
    mux = muxflow_from_options(guard_reaction_s, load_window, min_online_share)
    given = [name for name, value in (("--guard-reaction-s", guard_reaction_s),
                                      ("--load-window", load_window),
                                      ("--min-online-share", min_online_share))
             if value is not None]
    if not run_frontier and "muxflow" not in names and given:
        verb = "is a MuxFlow setting" if len(given) == 1 else "are MuxFlow settings"
        raise InputError("/".join(given), f"{verb} and MuxFlow does not run",
                         hint="add -p muxflow, or leave it out")
    if mps_share is not None and not run_frontier and "mps-fixed" not in names:
        raise InputError("--mps-share", "is the mps-fixed policy's split and mps-fixed does "
                         "not run", hint="add -p mps-fixed, or leave it out")
    rng = np.random.default_rng(seed)
    notes: list[str] = []
    work = workload_from_options(pods, nodes, load, memory, rng, hours, gpus, offline_demand,
                                 arrivals, load_scale, slo_headroom, notes)
    config = ColocationConfig(faults=FaultRates().scaled(fault_scale),
                              offline_start_s=offline_start_s,
                              share_change_s=share_change_s)
    settings_out: dict[str, object] = {
        "workload": work.description,
        "online GPUs": work.gpus,
        "offline jobs": work.jobs,
        "offline arrivals": arrivals,
        "load scale": load_scale,
        "intervals": f"{work.intervals} x {work.interval_s} s",
        "seed": seed,
        "offline start (s)": offline_start_s,
        "share change (s)": share_change_s,
        "MuxFlow guard reaction (s)": mux.guard_reaction_s,
        "MuxFlow load window (intervals)": mux.load_window,
        "MuxFlow minimum online share (%)": getattr(mux.share, "min_share", None),
        "rejected": work.rejected or "none",
    }
    if run_frontier or "muxflow" in names:
        notes.append(guard_note(mux.guard_reaction_s, work.interval_s))
    err = Console(stderr=True)
    if run_frontier:
        if policy or mps_share is not None:
            raise InputError("--frontier", "runs every policy setting itself",
                             hint="leave out -p/--policy and --mps-share")
        settings_out["admission quantiles"] = ", ".join(f"{q:g}" for q in quantiles)
        settings_out["admission by"] = ("the load seen so far" if admit_from_history
                                        else "the whole run's load (foresight)")
        _frontier(work, seed, config, quantiles, mux, admit_from_history, settings_out, notes,
                  json_out, out, err)
        return
    mps_share = 50 if mps_share is None else mps_share
    if "mps-fixed" in names:
        settings_out["mps-fixed online share (%)"] = mps_share
    runs: list[ColocationRun] = []
    with _progress(err, json_out) as progress:
        task = progress.add_task("co-location", total=len(names) * work.intervals)
        for name in names:
            progress.update(task, description=name)
            chosen = (
                COLOCATION.create(name, share=mps_share) if name == "mps-fixed"
                else mux if name == "muxflow" else COLOCATION.create(name)
            )
            runs.append(run_colocation(work, chosen, seed, config,
                                       on_interval=lambda _s: progress.advance(task)))
    common = common_jct(runs)  # every policy's JCT over one set of jobs
    rows = [{**r.summary(), "jct_common_min": common[r.policy]} for r in runs]
    if json_out:
        typer.echo(json.dumps({"settings": settings_out, "policies": rows, "notes": notes},
                              indent=2, default=str))
    else:
        console = Console()
        console.print(work.description)
        for note in notes:
            console.print(note)
        console.print(*colocation_tables(rows, console.width))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        image = colocation_plot(runs, out / "colocation.png", "Co-location over time")
        head, body = colocation_rows(rows)
        page = write_report(
            out, "cotenant: online/offline co-location", settings_out, head, body, [image], notes
        )
        (out / "summary.json").write_text(
            json.dumps({"settings": settings_out, "policies": rows}, indent=2, default=str)
        )
        err.print(f"report: {page}")


def _progress(err: Console, json_out: bool) -> Progress:
    return Progress(
        "[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), console=err, disable=json_out and not err.is_terminal,
    )


def _frontier(
    work: ColocationWorkload, seed: int, config: ColocationConfig,
    quantiles: tuple[float, ...], mux: ColocationPolicy, history: bool,
    settings_out: dict[str, object], notes: list[str], json_out: bool, out: Path | None,
    err: Console,
) -> None:
    with _progress(err, json_out) as progress:
        task = progress.add_task("frontier", total=len(settings(quantiles=quantiles)))

        def advance(name: str, label: str) -> None:
            progress.update(task, advance=1, description=f"{name} {label}")

        points = frontier(work, seed, config, on_run=advance, quantiles=quantiles,
                          muxflow=mux, history=history)
    notes.extend(verdict(points))
    if json_out:
        typer.echo(json.dumps({"settings": settings_out, "points": [vars(p) for p in points],
                               "notes": notes}, indent=2, default=str))
    else:
        console = Console()
        console.print(work.description)
        console.print(*frontier_tables(points, console.width))
        for note in notes:
            console.print(note)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        image = frontier_plot(points, out / "frontier.png", "Offline work against SLO misses")
        head, body = frontier_rows(points)
        page = write_report(out, "cotenant: co-location frontier", settings_out, head, body,
                            [image], notes)
        (out / "frontier.json").write_text(
            json.dumps({"settings": settings_out, "points": [vars(p) for p in points]},
                       indent=2, default=str)
        )
        err.print(f"report: {page}")
