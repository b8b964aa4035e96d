"""``cotenant trace``: check an openb trace, and fit synthetic parameters to one; load the GenAI
duty-cycle trace and report what the loader kept, filled and rejected."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from cotenant.cli.checks import file_option, finite
from cotenant.errors import InputError
from cotenant.model.cluster import Cluster
from cotenant.report.output import write_text_atomic
from cotenant.report.tables import counts
from cotenant.traces.bursts import fit_alpha
from cotenant.traces.genai import fit_genai, load_duty_cycles
from cotenant.traces.openb import load_nodes, load_pods
from cotenant.traces.requests import load_requests
from cotenant.traces.source import unplaceable_note
from cotenant.traces.synthetic import fit_openb

app = typer.Typer(help="Inspect and fit cluster traces.", no_args_is_help=True)


@app.command()
def check(
    pods: Annotated[Path, typer.Argument(help="openb pod list CSV")],
    nodes: Annotated[Path | None, typer.Option(help="openb node list CSV")] = None,
) -> None:
    """Validate a trace strictly and print what it holds."""
    pod_list = load_pods(pods)
    gpu_milli = sum(p.shape.gpu_milli_total for p in pod_list)
    typer.echo(f"{pods.name}: {len(pod_list)} pods, GPU demand {gpu_milli / 1000:.1f} GPUs")
    if nodes is not None:
        every_node = load_nodes(nodes, gpu_only=False)
        gpus = sum(n.gpu_count for n in every_node)
        gpu_nodes = sum(1 for n in every_node if n.gpu_count)
        typer.echo(
            f"{nodes.name}: {gpu_nodes} GPU nodes, {gpus} GPUs, "
            f"{len(every_node) - gpu_nodes} CPU-only nodes (left out of simulations)"
        )
        if gpus:
            typer.echo(f"demand / capacity: {gpu_milli / (1000 * gpus):.1%}")
        else:
            typer.echo("demand / capacity: no GPU in the node list")
        gpu_list = [n for n in every_node if n.gpu_count]
        note = unplaceable_note(Cluster(gpu_list), pod_list) if gpu_list else None
        typer.echo(f"placeable: {note}" if note else "placeable: every pod fits some node")


@app.command()
def fit(
    pods: Annotated[Path, typer.Argument(help="openb pod list CSV")],
    nodes: Annotated[Path, typer.Argument(help="openb node list CSV")],
    out: Annotated[
        Path, typer.Option(callback=file_option, help="where to write the parameters (JSON)")
    ],
) -> None:
    """Fit synthetic-workload parameters to a trace (what the embedded default was made by)."""
    params = fit_openb(load_pods(pods), load_nodes(nodes), f"{pods.name} + {nodes.name}")
    try:
        write_text_atomic(out, params.to_json())
    except OSError as exc:
        raise InputError(str(out), f"cannot write parameters: {exc.strerror}") from exc
    typer.echo(f"wrote {out}: {len(params.shapes)} pod shapes, {len(params.node_types)} node types")


@app.command()
def genai(
    path: Annotated[Path, typer.Argument(help="GenAI duty-cycle trace (.tar.gz or .csv)")],
    interval: Annotated[int, typer.Option(min=1, help="grid step in seconds")] = 60,
    max_gap: Annotated[int, typer.Option(min=0, help="longest gap interpolated, in steps")] = 5,
    min_coverage: Annotated[
        float, typer.Option(min=0.0, max=1.0, callback=finite, help="reject series covering less")
    ] = 0.5,
    memory: Annotated[Path | None, typer.Option(help="GPU memory-used trace")] = None,
    out: Annotated[
        Path | None, typer.Option(callback=file_option, help="write fitted synthetic parameters")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print JSON on stdout")] = False,
) -> None:
    """Load per-pod GPU duty cycles strictly; report what was kept, filled, held, rejected."""
    series, report = load_duty_cycles(
        path, interval_s=interval, max_gap_intervals=max_gap, min_coverage=min_coverage,
        memory_path=memory,
    )
    values = series.values
    stats = {
        "series": len(series.names),
        "intervals": series.n_intervals,
        "interval_s": series.interval_s,
        "mean_duty": float(values.mean()) if values.size else 0.0,
        "p50_duty": float(np.percentile(values, 50)) if values.size else 0.0,
        "p99_duty": float(np.percentile(values, 99)) if values.size else 0.0,
    }
    if out is not None:
        params = fit_genai(series, source=path.name)
        try:
            write_text_atomic(out, params.to_json() + "\n")
        except OSError as exc:
            raise InputError(str(out), f"cannot write parameters: {exc.strerror}") from exc
    if json_out:
        typer.echo(json.dumps({"report": asdict(report), "stats": stats}, indent=2))
        return
    rejected = ", ".join(f"{n} {why}" for why, n in report.rejected.items()) or "none"
    typer.echo(
        f"{path.name}: {report.rows_read} rows, {report.series_read} series; kept "
        f"{report.series_kept}, rejected {rejected}"
    )
    typer.echo(
        f"grid: {stats['intervals']} steps of {interval} s; filled {report.filled_points} "
        f"points across short gaps, held {report.held_points} at the series mean "
        f"({report.long_gaps} long gaps, and outside each series' span)"
    )
    typer.echo(
        f"duty cycle: mean {stats['mean_duty']:.1%}, p50 {stats['p50_duty']:.1%}, "
        f"p99 {stats['p99_duty']:.1%}"
    )
    if memory is not None:
        typer.echo(f"memory: {report.memory_summary(memory.name)}")
    if out is not None:
        typer.echo(f"wrote {out}")


@app.command()
def bursts(
    path: Annotated[Path, typer.Argument(help="GenAI duty-cycle trace (.tar.gz or .csv)")],
    requests: Annotated[Path | None, typer.Option(
        help="GenAI request series (qps.tar.gz): fit it too, as a check")] = None,
    substeps: Annotated[int, typer.Option(min=2, max=60, help="sub-steps per minute")] = 6,
    json_out: Annotated[bool, typer.Option("--json", help="print JSON on stdout")] = False,
) -> None:
    """Fit the burst model (load inside the minute) to the duty cycles, and to the requests."""
    series, _ = load_duty_cycles(path)
    fits = {"duty cycles": fit_alpha(series.values, substeps)}
    notes = []
    if requests is not None:
        req = load_requests(requests)
        fits["requests"] = fit_alpha(req.values, substeps)
        notes.append(f"requests: {req.rows} rows, {len(req.names)} containers on a "
                     f"{req.interval_s:g} s grid, {req.zero_slots} slots without a request, "
                     f"rejected ({counts(req.rejected)})")
    rows = {k: {"alpha": round(a, 3), "variance_time_slope": round(b, 3),
                "hurst": round(1 + b / 2, 3), "cv2_one_interval": round(c, 3)}
            for k, (a, b, c) in fits.items()}
    if json_out:
        typer.echo(json.dumps({"substeps": substeps, "fits": rows, "notes": notes}, indent=2))
        return
    for name, r in rows.items():
        typer.echo(f"{name}: alpha {r['alpha']} at {substeps} sub-steps (slope "
                   f"{r['variance_time_slope']}, Hurst {r['hurst']}, CV2 "
                   f"{r['cv2_one_interval']})")
    for note in notes:
        typer.echo(note)
