"""``cotenant sweep``: many runs of a simulator from one ``kind: Sweep`` file, on this
machine's cores or a Ray cluster (``--ray``).

Each run's result is written to ``--out``'s ``results.jsonl`` the moment it finishes, so a
sweep that is stopped (Ctrl-C: the queued runs are cancelled, exit 130) keeps what it
finished; the table, ``sweep.json`` and the page come at the end. A run that fails is named
with its settings as it fails, the others go on, and the command exits 1 after writing every
result.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from cotenant.cli.options import (
    JsonOpt,
    OutOpt,
    RayOpt,
    WorkersOpt,
    check_executor,
    executor_for,
)
from cotenant.cli.progress import announce, count, progress_bar
from cotenant.report.html import HtmlTable, render_report
from cotenant.report.output import ReportDir
from cotenant.sim.sweep.executor import RunFailure, SweepError
from cotenant.sim.sweep.run import SweepResult, plan, run_sweep
from cotenant.sim.sweep.simulators import Plan
from cotenant.sim.sweep.spec import Sweep, label, value_text

app = typer.Typer(help="Sweeps: many runs of a simulator, here or on a Ray cluster.",
                  no_args_is_help=True)
STREAM = "results.jsonl"


@app.command("run")
def run(
    file: Annotated[Path, typer.Argument(help="a Sweep file (YAML): simulator, base, grid, "
                                         "seeds")],
    ray: RayOpt = None,
    workers: WorkersOpt = None,
    json_out: JsonOpt = False,
    out: OutOpt = None,
) -> None:
    """Run every combination of a sweep's grid, once per seed, and summarise each run."""
    sweep = Sweep.load(file)
    check_executor(ray, workers)  # before the inputs are built, which can take a while
    planned = plan(sweep)  # every setting checked, the inputs built, before any run
    err = Console(stderr=True, highlight=False, markup=False)
    with executor_for(ray, workers) as executor:
        where = f"Ray ({ray})" if ray else count(min(executor.workers, len(planned.tasks)),
                                                 "process", "processes")
        announce(f"{count(len(planned.tasks), 'run')} of the {sweep.simulator} simulator "
                 f"({planned.description}) on {where}")
        stream = _open_stream(out)
        finished: list[int] = []
        try:
            with progress_bar(json_out) as progress:
                task = progress.add_task(sweep.simulator, total=len(planned.tasks))

                def done(result: SweepResult) -> None:
                    finished.append(result.index)
                    progress.update(task, advance=1, description=label(result.settings))
                    if not result.ok:
                        err.print(f"run {result.index} ({label(result.settings)}) failed: "
                                  f"{result.error}")
                    if stream is not None:
                        stream.write(json.dumps(result.as_dict(), default=str) + "\n")
                        stream.flush()

                results = run_sweep(planned, executor, done)
        except KeyboardInterrupt:
            kept = f", kept in {out / STREAM}" if out is not None else ""
            typer.echo(f"interrupted: {len(finished)} of {len(planned.tasks)} runs had "
                       f"finished{kept}", err=True)
            raise typer.Exit(130) from None
        finally:
            if stream is not None:
                stream.close()
    document = {"simulator": sweep.simulator, "workload": planned.description,
                "notes": planned.notes, "runs": [r.as_dict() for r in results]}
    if json_out:
        typer.echo(json.dumps(document, indent=2, default=str))
    else:
        console = Console()
        for note in planned.notes:
            console.print(note)
        console.print(_table(planned, results))
    if out is not None:
        headers, rows = _rows(planned, results)
        with ReportDir(out) as report:
            report.write_text("sweep.json", json.dumps(document, indent=2, default=str))
            report.write_text("index.html", render_report(
                f"cotenant: {sweep.simulator} sweep", {"sweep": str(file),
                                                       "workload": planned.description,
                                                       "runs": len(results)},
                [HtmlTable(headers, rows, caption="Each run's settings and summary "
                           f"(every figure in sweep.json, as they finished in {STREAM}).")],
                notes=planned.notes))
        err.print(f"report: {out / 'index.html'}")
    failed = [(label(r.settings), RunFailure(r.index, r.error or "")) for r in results
              if not r.ok]
    if failed:
        raise SweepError(failed, len(results))


def _open_stream(out: Path | None) -> IO[str] | None:
    if out is None:
        return None
    out.mkdir(parents=True, exist_ok=True)
    return (out / STREAM).open("w", encoding="utf-8")


def _rows(planned: Plan, results: list[SweepResult]) -> tuple[list[str], list[list[str]]]:
    axes = list(planned.points[0]) if planned.points else []
    headers = [*axes, *planned.columns]
    rows = []
    for r in results:
        cells = [value_text(r.settings[a]) for a in axes]
        if r.summary is None:
            cells += [f"failed: {r.error}", *[""] * (len(planned.columns) - 1)]
        else:
            cells += [value_text(r.summary.get(c)) for c in planned.columns]
        rows.append(cells)
    return headers, rows


def _table(planned: Plan, results: list[SweepResult]) -> Table:
    headers, rows = _rows(planned, results)
    table = Table(title=f"{len(results)} runs")
    for h in headers:
        table.add_column(h, justify="left" if h in planned.points[0] else "right")
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))  # an error's text is not markup
    return table
