"""``cotenant plan mig``: MIG layouts that meet every service's demand on the fewest GPUs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.table import Table

from cotenant.cli.checks import dir_option, file_option, finite
from cotenant.errors import InputError
from cotenant.model.deployment import Deployment, deployment_document, parse_deployment
from cotenant.model.documents import loads_json, loads_yaml
from cotenant.model.serving import parse_spec
from cotenant.perf.mig_profiles import ProfileTable, default_table, load_csv
from cotenant.policies.partition import PARTITION
from cotenant.policies.partition.export import node_counts, to_json, to_mig_parted
from cotenant.policies.partition.planner import DEFAULT_TIME_LIMIT, plan_spec
from cotenant.policies.partition.reconfig import Reconfiguration, SearchBound, plan_steps
from cotenant.report.html import Figure, HtmlTable, render_report
from cotenant.report.layouts import layout_plot
from cotenant.report.output import ReportDir, write_text_atomic

app = typer.Typer(help="Plan GPU partitions.", no_args_is_help=True)


def _load_yaml(path: Path) -> Any:
    """A YAML document; one written as JSON (an object) goes to the JSON parser first, which
    reads a spec of 100,000 services in a second where YAML takes ten or more."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(str(path), f"cannot read: {exc.strerror}") from exc
    if text.lstrip("\ufeff \t\r\n").startswith("{"):
        try:
            return loads_json(text, str(path))
        except InputError:  # YAML's flow style ({a: 1}) is not JSON: YAML says what is wrong
            pass
    return loads_yaml(text, str(path))


FOLD_ROWS = 25
"""A longer step list starts folded in the HTML report (plan.json has it whole)."""


def _write_report(out: Path, data: dict[str, Any], planned: Deployment, gpu: str) -> None:
    geometry = planned.gpu.mig
    assert geometry is not None
    settings = {
        "solver": data["solver"],
        "GPUs": data["gpus"],
        "lower bound on GPUs": data["lower_bound"],
        "proven optimal": data["optimal"],
        "gap to the lower bound": f"{data['gap']:.1%}",
        "solver time (s)": round(data["seconds"], 3),
        "layouts (GPUs each)": data["layouts"],
    }
    rows = [
        [r["name"], f"{r['demand_rps']:.1f}", f"{r['capacity_rps']:.1f}"] for r in data["services"]
    ]
    tables = [HtmlTable(["service", "demand (req/s)", "planned capacity (req/s)"], rows)]
    change = data.get("reconfiguration")
    if change is not None:
        steps = change["steps"]
        settings["reconfiguration"] = f"{len(steps)} steps, {change['drained_gpus']} GPUs drained"
        tables.append(HtmlTable(["#", "step"], [[str(n), s] for n, s in enumerate(steps, 1)],
                                title="Reconfiguration steps, in order",
                                folded=len(steps) > FOLD_ROWS))
    with ReportDir(out) as report:
        report.write_text("plan.json", json.dumps(data, indent=2))
        picture = report.save("layouts.png", lambda p: layout_plot(
            tuple(g for g in planned.gpus if g.assignment), geometry, p, f"MIG layouts on {gpu}"))
        report.write_text("index.html", render_report(
            f"MIG plan: {data['gpus']} x {gpu}", settings, tables,
            [Figure(picture, "Each bar is a GPU layout across the GPU's memory slices; each box "
                    "an instance with its profile and the service it serves.")]))


@app.command("mig")
def mig(
    spec_path: Annotated[Path, typer.Argument(metavar="SPEC.yaml", help="ServingPlan spec")],
    solver: Annotated[
        str, typer.Option(help=f"one of: {', '.join(PARTITION.names())}")
    ] = "auto",
    time_limit: Annotated[
        float,
        typer.Option(min=0.01, callback=finite,
                     help="seconds for the solver (more can close the gap on big plans)"),
    ] = DEFAULT_TIME_LIMIT,
    profiles: Annotated[
        Path | None, typer.Option(help="profile CSV (model,gpu,profile,batch,...)")
    ] = None,
    mig_parted: Annotated[
        Path | None, typer.Option("--mig-parted", callback=file_option,
                                  help="write a mig-parted config here")
    ] = None,
    gpus_per_node: Annotated[
        int | None, typer.Option(min=1, max=64, help="with --mig-parted: one config per "
                                 "distinct node of this many GPUs, not per layout")
    ] = None,
    current_path: Annotated[
        Path | None,
        typer.Option("--current", help="Deployment running today: adds safe reconfiguration steps"),
    ] = None,
    save: Annotated[
        Path | None, typer.Option("--save", callback=file_option,
                                  help="write the planned Deployment (YAML) here")
    ] = None,
    out: Annotated[
        Path | None, typer.Option(callback=dir_option,
                                  help="write plan.json, layouts.png and index.html here")
    ] = None,
    search_states: Annotated[
        int, typer.Option(min=1, help="with --current: states the search for a safe order "
                          "may explore where the ordering rules find none")
    ] = SearchBound.states,
    search_seconds: Annotated[
        float, typer.Option(min=0.01, callback=finite,
                            help="with --current: seconds that search may take")
    ] = SearchBound.seconds,
    node_limit: Annotated[
        int | None, typer.Option(min=1, help="milp and auto: stop HiGHS's branch and bound "
                                 "after this many nodes too (a limit that repeats exactly)")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print the plan as JSON")] = False,
) -> None:
    """Plan MIG layouts and instance assignments for a ServingPlan spec."""
    if gpus_per_node is not None and mig_parted is None:
        raise InputError("--gpus-per-node", "shapes the --mig-parted config, and none is "
                         "written", hint="add --mig-parted FILE")
    spec = parse_spec(_load_yaml(spec_path), str(spec_path))
    current = spec.current
    if current_path is not None:
        if current is not None:
            raise InputError("--current", f"{spec_path} has its own current: block",
                             hint="give the deployment running today once: in the spec or "
                             "with --current")
        current = parse_deployment(_load_yaml(current_path), str(current_path))
    if current is not None and current.gpu != spec.gpu:
        raise InputError(
            "--current", f"deployment is on {current.gpu.name}, spec on {spec.gpu.name}"
        )
    table: ProfileTable = load_csv(profiles) if profiles else default_table()
    problem, plan = plan_spec(spec, table, solver, time_limit, node_limit)
    data = to_json(problem, plan, spec.gpu.name)
    change: Reconfiguration | None = None
    planned = Deployment(spec.gpu, plan.gpus)
    if current is not None:
        change = plan_steps(problem, current.gpus, plan.gpus,
                            SearchBound(search_states, search_seconds))
        planned = Deployment(spec.gpu, change.target)
        data["reconfiguration"] = {
            "found_by": change.method,
            "gpu_of_plan_gpu": list(change.placement),
            "drained_gpus": change.drained,
            "steps": [str(step) for step in change.steps],
        }
    if save is not None:
        write_text_atomic(save, yaml.safe_dump(deployment_document(planned), sort_keys=False))
    if mig_parted is not None:
        write_text_atomic(mig_parted, yaml.safe_dump(
            to_mig_parted(plan, spec.gpu.name, gpus_per_node), sort_keys=False))
        if gpus_per_node is not None:  # which label goes on how many nodes
            data["mig_parted_nodes"] = node_counts(plan, spec.gpu.name, gpus_per_node)
    if out is not None:
        _write_report(out, data, planned, spec.gpu.name)
    if json_out:
        typer.echo(json.dumps(data, indent=2))
        return
    console = Console()
    status = "optimal" if plan.optimal else f"gap {plan.gap:.1%} to lower bound {plan.lower_bound}"
    console.print(
        f"{plan.gpu_count} x {spec.gpu.name} ({plan.solver}, {status}, {plan.seconds:.2f} s)"
    )
    layouts = Table(title="layouts")
    layouts.add_column("layout")
    layouts.add_column("GPUs", justify="right")
    for layout, count in data["layouts"].items():
        layouts.add_row(layout, str(count))
    console.print(layouts)
    services = Table(title="services")
    for col in ("service", "demand req/s", "capacity req/s"):
        services.add_column(col, justify="left" if col == "service" else "right")
    for row in data["services"]:
        services.add_row(row["name"], f"{row['demand_rps']:.1f}", f"{row['capacity_rps']:.1f}")
    console.print(services)
    for note in data["driver_notes"]:
        console.print(f"note: {note}")
    for name, count in data.get("mig_parted_nodes", {}).items():
        console.print(f"label {count} node(s) nvidia.com/mig.config={name}")
    if change is not None:
        steps = Table(title=f"reconfiguration ({change.drained} GPUs drained)")
        steps.add_column("#", justify="right")
        steps.add_column("step")
        for n, step in enumerate(change.steps, 1):
            steps.add_row(str(n), str(step))
        console.print(steps)
