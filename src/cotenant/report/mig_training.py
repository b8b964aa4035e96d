"""The MIG training simulation's figure: per allocation, the fragmented and used shares of
the cluster's compute slices over time."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt

from cotenant.report.plots import legend_below, save
from cotenant.sim.mig_training import MigTrainingResult

CAPTION = ("Top: the share of compute slices not running a job while jobs wait (free "
           "instances too small for any waiting job, GPUs being drained or remade). Bottom: "
           "the share running the slices jobs asked for. One line per allocation, a step at "
           "every event.")


def mig_training_plot(runs: Sequence[MigTrainingResult], path: Path, title: str) -> Path:
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True,
                                      layout="constrained")
    for run in runs:
        hours = [s[0] / 3600.0 for s in run.series]
        top.step(hours, [100 * s[1] for s in run.series], where="post", label=run.allocation)
        bottom.step(hours, [100 * s[2] for s in run.series], where="post", label=run.allocation)
    top.set_ylabel("fragmented slices (%)")
    bottom.set_ylabel("used slices (%)")
    bottom.set_xlabel("hours since the first job")
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    legend_below(fig, bottom)
    return save(fig, path)
