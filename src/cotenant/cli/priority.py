"""``cotenant simulate priority``: an HP inference job and a BE training job on one GPU,
kernel by kernel, under each priority-sharing scheduler.

A run is a :class:`~cotenant.sim.priority.scenario.PriorityScenario`: ``--config FILE`` reads
one and each flag given replaces one of its fields.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from cotenant.cli.checks import finite
from cotenant.cli.options import JsonOpt
from cotenant.policies.priority import PRIORITY
from cotenant.sim.priority.scenario import PriorityScenario, run_scenario

app = typer.Typer()


@app.command()
def priority(
    config: Annotated[Path | None, typer.Option(
        "--config", help="a PriorityScenario file (YAML); the flags below override it")] = None,
    hp: Annotated[str | None, typer.Option(
        "--hp", help="high-priority inference job: bert or llama (Tally's profiles)")] = None,
    be: Annotated[str | None, typer.Option(
        "--be", help="best-effort training job, e.g. pytorch_resnet50 (Tally's six)")] = None,
    scheduler: Annotated[list[str] | None, typer.Option(
        "--scheduler", "-s", help="scheduler, repeatable (default: all seven); parameters "
        "go in a scenario file")] = None,
    load: Annotated[float | None, typer.Option(
        callback=finite, help="HP arrivals, share of its single-stream capacity (0.5)")] = None,
    requests: Annotated[int | None, typer.Option(min=1, help="HP requests (200)")] = None,
    arrivals: Annotated[str | None, typer.Option(help="periodic or poisson")] = None,
    seed: Annotated[int | None, typer.Option(min=0, help="seed of every draw (0)")] = None,
    hp_trace: Annotated[Path | None, typer.Option(
        "--hp-trace", help="kernel trace (CSV) of one HP request")] = None,
    be_trace: Annotated[Path | None, typer.Option(
        "--be-trace", help="kernel trace (CSV) of one BE iteration")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Priority time sharing on one GPU, kernel by kernel: an HP inference job and BE
    training under time slicing, MPS, MPS with priority, TGS, REEF, Tally and Orion.

    Reports, per scheduler, the HP's p99 and mean latency overhead against HP alone and the
    BE's throughput against BE alone and against TGS's.
    """
    s = PriorityScenario.load_file(config) if config is not None else PriorityScenario()
    chosen = tuple((PRIORITY.canonical(n), ()) for n in scheduler) if scheduler else None
    s = s.override(hp=hp, be=be, schedulers=chosen, load=load, requests=requests,
                   arrivals=arrivals, seed=seed, hp_trace=hp_trace, be_trace=be_trace)
    results = run_scenario(s)
    tgs_runs = [r for r in results if r.scheduler == "tgs"] or \
        [r for r in results if r.scheduler.startswith("tgs(")]  # TGS with parameters
    tgs = tgs_runs[0].be_norm_tput if tgs_runs else None
    rows = [{**r.as_dict(), "be_vs_tgs": round(r.be_norm_tput / tgs, 3) if tgs else None}
            for r in results]
    if json_out:
        typer.echo(json.dumps({"hp": s.hp, "be": s.be, "load": s.load, "seed": s.seed,
                               "hp_trace": str(s.hp_trace) if s.hp_trace else None,
                               "be_trace": str(s.be_trace) if s.be_trace else None,
                               "schedulers": rows}, indent=2))
        return
    hp_name = f"trace {s.hp_trace.name} ({s.hp}'s SMs)" if s.hp_trace else s.hp
    be_name = f"trace {s.be_trace.name} ({s.be}'s SMs)" if s.be_trace and s.be else s.be
    table = Table(title=f"{hp_name} (HP, load {s.load:g}) beside {be_name or 'nothing'} (BE)")
    for col in ("scheduler", "p99 ms", "p99 overhead", "mean overhead", "BE tput",
                "BE vs TGS"):
        table.add_column(col, justify="left" if col == "scheduler" else "right")
    for row in rows:
        table.add_row(str(row["scheduler"]), f"{row['p99_ms']:.3f}",
                      f"{row['p99_overhead_pct']:+.1f}%", f"{row['mean_overhead_pct']:+.1f}%",
                      f"{row['be_norm_tput']:.2f}",
                      "-" if row["be_vs_tgs"] is None else f"{row['be_vs_tgs']:.2f}")
    Console().print(table)
