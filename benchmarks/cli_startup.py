"""Benchmark: how long the ``cotenant`` command takes to start, for commands that do no work.

Each command runs ``--repeats`` times as a fresh process through the installed entry point
(``.venv/bin/cotenant``, beside this interpreter), the way a user types it; the figure is the
wall time from spawn to exit. The target is under 0.3 s for ``cotenant --help`` and
``cotenant version``: every command used to import the whole package (numpy, pandas, scipy,
matplotlib) before it parsed its arguments.

    .venv/bin/python benchmarks/cli_startup.py [--repeats 20]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = (["--help"], ["version"], ["simulate", "--help"], ["agent", "status", "--help"])


def entry_point() -> Path:
    """The ``cotenant`` script of this interpreter's environment."""
    script = Path(sys.executable).parent / "cotenant"
    if not script.exists():
        sys.exit(f"no {script}: run ./scripts/setup.sh first")
    return script


def wall_times(argv: list[str], repeats: int) -> list[float] | str:
    """Seconds from spawn to exit of ``argv``, ``repeats`` times (after one warm-up run, so
    the page cache holds the package); the last line of its error where it fails."""
    env = {**os.environ, "COLUMNS": "100"}
    warm = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    if warm.returncode != 0:
        return (warm.stderr.strip().splitlines() or [f"exit {warm.returncode}"])[-1]
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True, env=env)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    script = entry_point()
    rows: list[dict[str, object]] = []
    for command in COMMANDS:
        times = wall_times([str(script), *command], args.repeats)
        name = " ".join(["cotenant", *command])
        if isinstance(times, str):
            rows.append({"command": name, "error": times})
            continue
        rows.append({
            "command": name,
            "median_s": round(statistics.median(times), 3),
            "min_s": round(min(times), 3),
            "max_s": round(max(times), 3),
        })
    print(json.dumps({
        "python": platform.python_version(), "machine": platform.machine(),
        "cpus": os.cpu_count(), "repeats": args.repeats, "commands": rows,
    }, indent=2))


if __name__ == "__main__":
    main()
