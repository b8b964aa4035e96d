"""Tally's comparison reproduced: each published HP/BE pair under each scheduler, beside the
figures Tally's benchmark measured (``perf/data/tally_pairs.csv``, A100-40GB).

The published HP is an inference server at load 0.5; the simulated HP is the same model's
single-stream profile with requests at half its capacity. Schedulers without a published
column (REEF, Orion) are simulated only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cotenant.perf import published
from cotenant.perf.interference import interference, stretch_from_p99_ratio
from cotenant.perf.kernels import DEFAULT_MAX_KERNELS
from cotenant.perf.mps import TALLY_HP_LOAD
from cotenant.policies.priority import PRIORITY
from cotenant.sim.priority.run import Pair, PairResult, run_pair

PAPER_COLUMN = {"tally": "tally", "mps": "mps", "mps-priority": "mps_priority",
                "time-slicing": "time_slicing", "tgs": "tgs"}
"""Our scheduler -> the published column."""
DEFAULT_SCHEDULERS = ("tally", "tgs", "time-slicing", "mps", "mps-priority", "reef", "orion")
HP_OF = {"onnxruntime_bert": "bert", "onnxruntime_llama-2-7b": "llama"}


@dataclass(frozen=True)
class ComparedRow:
    ours: PairResult
    paper_p99_ratio: float | None
    paper_be_tput: float | None

    def as_dict(self) -> dict[str, object]:
        return {**self.ours.as_dict(), "paper_p99_ratio": self.paper_p99_ratio,
                "paper_be_norm_tput": self.paper_be_tput}


def _hp_name(server_job: str) -> str:
    return next(v for k, v in HP_OF.items() if server_job.startswith(k))


def compare(schedulers: tuple[str, ...] = DEFAULT_SCHEDULERS, *, requests: int = 200,
            llama_requests: int = 20, seed: int = 0,
            hp_models: tuple[str, ...] = ("bert", "llama"),
            max_kernels: int = DEFAULT_MAX_KERNELS) -> list[ComparedRow]:
    """Every published pair (of the HP models named) under every scheduler, the same draws
    for each scheduler; HP requests longer than ``max_kernels`` kernels are coarsened."""
    rows = []
    for pair in published.tally_pairs():
        hp = _hp_name(pair.hp_job)
        if hp not in hp_models:
            continue
        n = llama_requests if hp == "llama" else requests
        for name in schedulers:
            result = run_pair(PRIORITY.create(name), Pair(hp, pair.be_job, requests=n,
                                                                  max_kernels=max_kernels), seed)
            col = PAPER_COLUMN.get(PRIORITY.canonical(name))
            rows.append(ComparedRow(result, pair.hp_p99_ratio[col] if col else None,
                                    pair.be_norm_tput[col] if col else None))
    return rows


def summary(rows: list[ComparedRow]) -> list[dict[str, object]]:
    """Per scheduler: mean p99 overhead and BE throughput, ours and published, and BE
    throughput and system throughput (HP 1 + BE) relative to TGS's."""
    names = list(dict.fromkeys(r.ours.scheduler for r in rows))
    tgs = [r for r in rows if r.ours.scheduler == "tgs"]
    out = []
    for name in names:
        mine = [r for r in rows if r.ours.scheduler == name]
        ours_p99 = float(np.mean([r.ours.p99_ratio for r in mine]))
        ours_be = float(np.mean([r.ours.be_norm_tput for r in mine]))
        paper = [r for r in mine if r.paper_p99_ratio is not None]
        row: dict[str, object] = {
            "scheduler": name, "pairs": len(mine),
            "p99_overhead_pct": round(100 * (ours_p99 - 1), 1),
            "mean_overhead_pct": round(100 * (float(np.mean(
                [r.ours.mean_ratio for r in mine])) - 1), 1),
            "be_norm_tput": round(ours_be, 3),
            "paper_p99_overhead_pct": round(100 * (float(np.mean(
                [r.paper_p99_ratio or 0 for r in paper])) - 1), 1) if paper else None,
            "paper_be_norm_tput": round(float(np.mean(
                [r.paper_be_tput or 0 for r in paper])), 3) if paper else None,
        }
        if tgs:
            tgs_be = float(np.mean([r.ours.be_norm_tput for r in tgs]))
            row["be_vs_tgs"] = round(ours_be / tgs_be, 3) if tgs_be > 0 else None
            row["system_vs_tgs"] = round((1 + ours_be) / (1 + tgs_be), 3)
        out.append(row)
    return out


def colocation_check(rows: list[ComparedRow]) -> list[dict[str, object]]:
    """Per training job, the co-location simulator's priority and time-slicing parameters
    (stretch and cost, :mod:`cotenant.perf.interference`, from Tally's published table at
    its mean) beside the same parameters derived the same way from this model's runs."""
    published_cal = interference("tally", "mean")
    jobs = [j.name for j in published.tally_jobs() if j.kind == "training"]
    out = []
    for i, job in enumerate(jobs):
        row: dict[str, object] = {"be": job}
        for name, stretch, cost in (("tally", "priority_stretch", "priority_cost"),
                                    ("time-slicing", "ts_stretch", "ts_cost")):
            mine = [r.ours for r in rows if r.ours.scheduler == name and r.ours.be == job]
            if not mine:
                continue
            ratio = float(np.mean([r.p99_ratio for r in mine]))
            tput = float(np.mean([r.be_norm_tput for r in mine]))
            row[f"{name}_stretch_ours"] = round(stretch_from_p99_ratio(ratio), 3)
            row[f"{name}_stretch_published"] = round(float(getattr(published_cal, stretch)[i]), 3)
            row[f"{name}_cost_ours"] = round((1.0 - tput) / TALLY_HP_LOAD, 3)
            row[f"{name}_cost_published"] = round(float(getattr(published_cal, cost)[i]), 3)
        out.append(row)
    return out
