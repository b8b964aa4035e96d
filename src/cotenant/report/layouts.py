"""The per-GPU layout picture of a MIG plan: one bar per GPU across its memory slices, each
instance a box labelled with its profile and the service it serves (hatched when idle, a
legend says so; slices left white are not partitioned).

Plans of hundreds of GPUs repeat a few configurations, so identical GPUs (same layout, same
services) are drawn once with their count; ``max_rows`` caps the rows, largest groups first.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle

from cotenant.model.deployment import GpuPlan
from cotenant.model.mig import MigGeometry
from cotenant.report.plots import save


def layout_plot(
    gpus: tuple[GpuPlan, ...], geometry: MigGeometry, path: Path, title: str, max_rows: int = 24
) -> Path:
    """Draw ``gpus`` into ``path`` (PNG)."""
    groups = Counter(gpus).most_common()
    shown = groups[:max_rows]
    services = sorted({s for g, _ in shown for s in g.services()})
    cmap = plt.get_cmap("tab20")
    colour = {s: cmap(i % 20) for i, s in enumerate(services)}
    fig, ax = plt.subplots(figsize=(11, 0.65 * len(shown) + 1.9), layout="constrained")
    for row, (gpu, _) in enumerate(shown):
        y = len(shown) - 1 - row
        for placement, service in gpu.assignment:
            width = placement.profile.memory_slices
            ax.add_patch(
                Rectangle(
                    (placement.start, y + 0.08), width, 0.84,
                    facecolor="white" if service is None else colour[service],
                    edgecolor="black", hatch="//" if service is None else None, linewidth=0.8,
                )
            )
            label = placement.profile.name + ("\nidle" if service is None else f"\n{service}")
            ax.text(placement.start + width / 2, y + 0.5, label, ha="center", va="center",
                    fontsize=9, clip_on=True,
                    bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.7, "pad": 1})
    ax.set_xlim(0, geometry.memory_slices)
    ax.set_ylim(0, len(shown))
    ax.set_yticks([len(shown) - 0.5 - row for row in range(len(shown))],
                  [f"{count} GPU{'s' if count > 1 else ''}" for _, count in shown])
    ax.set_ylabel("GPUs with this layout")
    ax.set_xticks(range(geometry.memory_slices + 1))
    ax.set_xlabel(f"memory slice (1/{geometry.memory_slices} of the GPU's memory; "
                  "white: not partitioned)")
    hidden = sum(c for _, c in groups[max_rows:])
    more = f" ({hidden} more GPUs in {len(groups) - max_rows} other configurations)"
    ax.set_title(f"{title}: {len(gpus)} GPUs{more if hidden else ''}")
    idle = Rectangle((0, 0), 1, 1, facecolor="white", edgecolor="black", hatch="//",
                     label="instance serving no service (idle)")
    fig.legend(handles=[idle], loc="outside lower right", fontsize=9, frameon=False)
    return save(fig, path)
