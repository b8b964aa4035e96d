"""``cotenant simulate replay``: the time replay, pods placed at their creation time and
removed at their deletion time, with a note when the trace's own concurrency is too low for
the policies to differ, and two ways to raise it (faster arrivals, a smaller cluster)."""

from __future__ import annotations

import json
from typing import Annotated

import numpy as np
import typer
from rich.console import Console

from cotenant.cli.checks import finite
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
from cotenant.cli.progress import count, progress_bar
from cotenant.model.cluster import Cluster
from cotenant.model.workload import Pod
from cotenant.report.html import Figure, HtmlTable, render_report
from cotenant.report.output import ReportDir
from cotenant.report.plots import replay_plot
from cotenant.report.tables import REPLAY_CAPTION, replay_rows, replay_tables
from cotenant.sim.replay import (
    ReplayConfig,
    ReplayRun,
    check_samples,
    peak_demand,
    run_replay,
    sample_nodes,
    speed_up_arrivals,
    speedup_for,
)
from cotenant.traces.source import load_workload

LOW_PEAK_PCT = 10.0
"""Below this peak GPU demand (% of the cluster) the replay barely tests placement."""
TARGET_PEAK_PCT = 50.0
"""What the note's suggested scale aims at: about half the cluster asked for at the peak."""


app = typer.Typer()


@app.command()
def replay(
    pods: PodsOpt = None,
    nodes: NodesOpt = None,
    policy: PolicyOpt = None,
    seed: Annotated[int, typer.Option(min=0, help="seed for tie breaking")] = 42,
    sample_every: Annotated[
        float, typer.Option(min=1.0, callback=finite, help="seconds between samples")
    ] = 3600.0,
    arrival_speedup: Annotated[
        float, typer.Option(min=1.0, callback=finite,
                            help="pods arrive this many times as fast, each keeping its "
                            "lifetime: about as many times the pods alive at once")
    ] = 1.0,
    cluster_fraction: Annotated[
        float, typer.Option(min=0.0, max=1.0, callback=finite,
                            help="replay on this fraction of the nodes (drawn with --seed, "
                            "the same mix of node types)")
    ] = 1.0,
    params: ParamsOpt = None,
    synthetic_pods: Annotated[int | None, typer.Option(min=1, max=MAX_SYNTHETIC)] = None,
    synthetic_nodes: Annotated[int | None, typer.Option(min=1, max=MAX_SYNTHETIC)] = None,
    json_out: JsonOpt = False,
    out: OutOpt = None,
) -> None:
    """Time replay: pods arrive at creation_time and leave at deletion_time."""
    names = placement_policies(policy)
    workload = load_workload(pods, nodes, params=params, synthetic_pods=synthetic_pods,
                             synthetic_nodes=synthetic_nodes)
    cluster, pod_list = workload.cluster, workload.pods
    if cluster_fraction < 1.0:
        cluster = sample_nodes(cluster, cluster_fraction, np.random.default_rng(seed))
    if arrival_speedup > 1.0:
        pod_list = speed_up_arrivals(pod_list, arrival_speedup)
    config = ReplayConfig(sample_every=sample_every)
    check_samples(pod_list, config)  # before the progress bar, so the error is one line
    notes = [_peak_note(cluster, pod_list, arrival_speedup, cluster_fraction)]
    runs: list[ReplayRun] = []
    with progress_bar(json_out) as progress:
        task = progress.add_task("replaying", total=len(names))
        for name in names:
            progress.update(task, description=name)
            runs.append(run_replay(cluster, pod_list, name, seed, config))
            progress.advance(task)
    rows = [_summary(r) for r in runs]
    settings: dict[str, object] = {
        "workload": workload.description,
        "nodes": cluster.size,
        "GPUs": cluster.total_gpus,
        "pods": len(pod_list),
        "seed": seed,
        "sample every (s)": sample_every,
        "arrival speed-up": arrival_speedup,
        "cluster fraction": cluster_fraction,
    }
    data = {"settings": settings, "workload": workload.description, "policies": rows,
            "notes": notes}
    if json_out:
        typer.echo(json.dumps(data, indent=2))
    else:
        console = Console()
        console.print(workload.description)
        console.print(*replay_tables(rows, console.width))
        for note in notes:
            console.print(note)
    if out is not None:
        table = HtmlTable(*replay_rows(rows), caption=REPLAY_CAPTION)
        with ReportDir(out) as report:
            image = report.save("replay.png", lambda p: replay_plot(runs, p, "Time replay"))
            report.write_text("summary.json", json.dumps(data, indent=2))
            report.write_text("index.html", render_report(
                "cotenant: time replay", settings, [table],
                [Figure(image, "GPU capacity allocated and fragmented over the trace's time, "
                        "one line per policy; where policies place alike, their lines "
                        "coincide and the last drawn hides the others.")], notes))
        Console(stderr=True).print(f"report: {out / 'index.html'}")


def _summary(run: ReplayRun) -> dict[str, object]:
    return {
        "policy": run.policy,
        "arrivals": run.arrivals,
        "failed": run.failed,
        "departures": run.departures,
        "alloc_percent_mean": round(float(run.alloc_percent.mean()), 3),
        "alloc_percent_max": round(float(run.alloc_percent.max()), 3),
        "frag_percent_mean": round(float(run.frag_percent.mean()), 3),
        "running_max": int(run.running.max()) if run.running.size else 0,
    }


def _peak_note(cluster: Cluster, pods: list[Pod], speedup: float, fraction: float) -> str:
    """What the trace asks of the cluster at its busiest, and, when that is little, how to
    ask more."""
    peak = peak_demand(cluster, pods)
    line = (f"the trace's busiest moment: {count(peak.pods, 'pod')} alive at once, asking for "
            f"{peak.gpu_percent:.2f}% of the cluster's GPUs")
    if peak.gpu_percent >= LOW_PEAK_PCT or peak.gpu_percent <= 0.0:
        return line
    hints = []
    faster = speedup_for(cluster, pods, TARGET_PEAK_PCT)
    if faster is not None:
        hints.append(f"--arrival-speedup {speedup * faster:.0f} (pods arrive faster, "
                     "lifetimes kept)")
    hints.append(f"--cluster-fraction {fraction * peak.gpu_percent / TARGET_PEAK_PCT:.3g} "
                 "(fewer nodes)")
    return (f"{line}: too little for the placement policies to differ, since nearly every "
            f"pod finds room whatever the policy. To ask about half the cluster at the "
            f"busiest moment, try {' or '.join(hints)}")
