"""Benchmark: Tally's comparison reproduced on the kernel-level priority-sharing simulator.

Every published HP/BE pair (two inference servers at load 0.5 beside six training jobs,
tally-bench on an A100-40GB) under each scheduler: HP p99 ratio and BE normalised
throughput, ours beside the published figure, then the means per scheduler with BE and
system throughput relative to TGS. ``--json`` writes the rows.

    .venv/bin/python benchmarks/priority.py [--requests 200 --llama-requests 20 --seed 0 --hp bert
                                         --max-kernels 1000]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

from cotenant.perf.kernels import DEFAULT_MAX_KERNELS
from cotenant.sim.priority.compare import (
    DEFAULT_SCHEDULERS,
    colocation_check,
    compare,
    summary,
)


def _short(job: str | None) -> str:
    return (job or "-").split("_")[1] if job else "-"


def _print_summary(label: str, table: list[dict[str, object]]) -> None:
    print(f"\nmeans over the {label} pairs")
    print("| scheduler | p99 overhead ours | paper | mean overhead ours | BE tput ours | "
          "paper | BE vs TGS | system vs TGS |")
    print("|---|---|---|---|---|---|---|---|")
    for s in table:
        paper = s["paper_p99_overhead_pct"]
        print(f"| {s['scheduler']} | {s['p99_overhead_pct']}% | "
              f"{'-' if paper is None else f'{paper}%'}"
              f" | {s['mean_overhead_pct']}% | {s['be_norm_tput']} | "
              f"{'-' if s['paper_be_norm_tput'] is None else s['paper_be_norm_tput']} | "
              f"{s.get('be_vs_tgs', '-')} | {s.get('system_vs_tgs', '-')} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=200, help="BERT requests per run")
    ap.add_argument("--llama-requests", type=int, default=20, help="Llama-2 requests per run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scheduler", action="append", help="repeatable (default: all seven)")
    ap.add_argument("--hp", action="append", choices=("bert", "llama"),
                    help="only the pairs of this HP model, repeatable (default: both)")
    ap.add_argument("--max-kernels", type=int, default=DEFAULT_MAX_KERNELS,
                    help="coarsen longer HP requests to this many kernel groups (Llama-2 has "
                         "about 49,000 kernels; 60000 keeps every one)")
    ap.add_argument("--json", type=Path, help="write the rows and summary here")
    args = ap.parse_args()
    started = time.perf_counter()
    rows = compare(tuple(args.scheduler or DEFAULT_SCHEDULERS), requests=args.requests,
                   llama_requests=args.llama_requests, seed=args.seed,
                   hp_models=tuple(args.hp or ("bert", "llama")),
                   max_kernels=args.max_kernels)
    wall = time.perf_counter() - started
    print("| HP | BE | scheduler | p99 x ours | p99 x paper | BE tput ours | BE tput paper |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        o = r.ours
        paper_p99 = "-" if r.paper_p99_ratio is None else f"{r.paper_p99_ratio:.2f}"
        paper_be = "-" if r.paper_be_tput is None else f"{r.paper_be_tput:.2f}"
        print(f"| {_short(o.hp)} | {_short(o.be)} | {o.scheduler} | {o.p99_ratio:.2f} | "
              f"{paper_p99} | {o.be_norm_tput:.2f} | {paper_be} |")
    by_hp = {hp: [r for r in rows if r.ours.hp.startswith(f"onnxruntime_{hp}")]
             for hp in ("bert", "llama")}
    tables = {hp: summary(mine) for hp, mine in by_hp.items() if mine}
    if len(tables) > 1:
        tables["all"] = summary(rows)
    for label, table in tables.items():
        _print_summary(label, table)
    check = colocation_check(rows)
    print("\nco-location calibration (stretch, cost per training job): ours | published")
    for c in check:
        print(" ", json.dumps(c))
    print(f"\n{len(rows)} runs in {wall:.0f} s on {platform.processor() or platform.machine()}, "
          f"python {platform.python_version()}")
    if args.json:
        args.json.write_text(json.dumps({"rows": [r.as_dict() for r in rows],
                                         "summary": tables.get("all") or summary(rows),
                                         "summaries": tables, "colocation": check,
                                         "wall_s": round(wall, 1)},
                                        indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
