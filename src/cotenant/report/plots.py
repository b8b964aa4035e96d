"""PNG plots of experiment results (matplotlib, Agg backend: no display needed).

* allocation curve: share of GPU capacity allocated against arrived GPU demand, mean over
  seeds, one line per policy (the FGD paper's Figure 9 style);
* fragmentation curve: fragmented share of GPU capacity against arrived demand;
* replay: allocation and fragmentation over simulated time.

The co-location figures are in :mod:`cotenant.report.colocation`, with the co-location
tables, so that the other reports do not import the co-location simulator.

Every figure has one legend, under its panels, and its title; axes say what they count and in
which unit, and a log axis is labelled across the data's range in plain decimals.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from cotenant.sim.bound import BoundSummary
from cotenant.sim.fragmentation import FragmentationRun
from cotenant.sim.replay import ReplayRun


def save(fig: Figure, path: Path) -> Path:
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def legend_below(fig: Figure, ax: Axes, columns: int = 8) -> None:
    """One legend for the whole figure, under its panels, from ``ax``'s lines (the figure
    needs ``layout="constrained"``)."""
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(columns, len(labels)),
               frameon=False)


def _by_policy(runs: Sequence[FragmentationRun]) -> dict[str, list[FragmentationRun]]:
    out: dict[str, list[FragmentationRun]] = {}
    for run in runs:
        out.setdefault(run.policy, []).append(run)
    return out


def mean_curve(runs: Sequence[FragmentationRun]) -> tuple[np.ndarray, np.ndarray]:
    """Allocation curve averaged over runs, on the arrived-demand range they share."""
    top = min(r.arrived_percent for r in runs)
    curves = np.vstack([r.curve(top)[1] for r in runs])
    seen = (~np.isnan(curves)).sum(axis=0)
    total = np.nansum(curves, axis=0)
    mean = np.divide(total, seen, out=np.full(top + 1, np.nan), where=seen > 0)
    return np.arange(top + 1), mean


def allocation_plot(
    runs: Sequence[FragmentationRun], path: Path, title: str,
    bounds: Sequence[BoundSummary] = (),
) -> Path:
    """Mean allocation curves; with ``bounds``, the offline optimum (upper bound, mean over
    seeds) as stars at its demand points."""
    fig, (full, zoom) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    for policy, mine in _by_policy(runs).items():
        xs, ys = mean_curve(mine)
        full.plot(xs, ys, label=policy)
        keep = xs >= 80
        zoom.plot(xs[keep], ys[keep], label=policy)
    shown = [b for b in bounds if np.isfinite(b.upper_mean)]
    for ax, lo in ((full, 0), (zoom, 80)):
        points = [b for b in shown if b.percent >= lo]
        if points:
            ax.plot([b.percent for b in points], [b.upper_mean for b in points], "k*",
                    markersize=9, label="offline optimum (upper bound)")
    full.plot([0, 100], [0, 100], color="grey", linestyle=":", linewidth=0.8,
              label="every arriving pod placed")
    for ax in (full, zoom):
        ax.set_xlabel("arrived GPU demand (% of capacity)")
        ax.set_ylabel("GPU capacity allocated (%)")
        ax.grid(alpha=0.3)
    full.set_title("whole run")
    zoom.set_title("from 80% demand on")
    fig.suptitle(f"{title} (mean over seeds)")
    legend_below(fig, full, columns=4)
    return save(fig, path)


def fragmentation_plot(runs: Sequence[FragmentationRun], path: Path, title: str) -> Path:
    fig, ax = plt.subplots(figsize=(6.5, 4.2), layout="constrained")
    for policy, runs_of_policy in _by_policy(runs).items():
        mine = [r for r in runs_of_policy if r.frag_percent.size]  # a run that drew no pod
        if not mine:
            continue
        top = min(int(r.frag_percent[-1]) for r in mine)
        xs = np.arange(top + 1)
        ys = np.mean(
            [
                np.interp(xs, r.frag_percent, 100.0 * r.frag_milli / r.capacity_milli)
                for r in mine
            ],
            axis=0,
        )
        ax.plot(xs, ys, label=policy)
    ax.set_xlabel("arrived GPU demand (% of capacity)")
    ax.set_ylabel("fragmented GPU capacity (%)")
    ax.set_title(f"{title} (mean over seeds)")
    ax.grid(alpha=0.3)
    if ax.lines:
        ax.legend(fontsize=8, title="policy", title_fontsize=8)
    else:
        ax.text(0.5, 0.5, "no run drew a pod", ha="center", transform=ax.transAxes)
    return save(fig, path)


def replay_plot(runs: Sequence[ReplayRun], path: Path, title: str) -> Path:
    fig, (alloc, frag) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    for run in runs:
        hours = (run.times - (run.times[0] if run.times.size else 0.0)) / 3600.0
        alloc.plot(hours, run.alloc_percent, label=run.policy)
        frag.plot(hours, run.frag_percent, label=run.policy)
    alloc.set_ylabel("GPU capacity allocated (%)")
    frag.set_ylabel("fragmented GPU capacity (%)")
    alloc.set_title("allocated")
    frag.set_title("fragmented (FGD measure)")
    for ax in (alloc, frag):
        ax.set_xlabel("hours since the first pod")
        ax.grid(alpha=0.3)
    seeds = sorted({run.seed for run in runs})
    fig.suptitle(f"{title} (seed {', '.join(map(str, seeds))})")
    legend_below(fig, alloc)
    return save(fig, path)


def decimal_log_axis(ax: Axes) -> None:
    """Label a log x axis at 1, 2 and 5 of every decade in plain decimals (0.02, 0.5, 10),
    so a range under 1 reads as well as one above it."""
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.10g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
