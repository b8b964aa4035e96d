"""Benchmark: the co-location simulator's inputs at 20,000-GPU scale.

Times of what the simulator calls (the predictor best of ``--repeat``): loading the real GenAI
duty-cycle and memory traces (when ../shared is present), drawing 20,000 synthetic series of
1,440 one-minute steps with their memory profiles (statistics next to the real ones), and the
pairwise speed predictor on a 20,000 x 300 broadcast (float64 and float32).

    .venv/bin/python benchmarks/coloc_data.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

from cotenant.perf.predictor import default_predictor
from cotenant.traces.genai import load_duty_cycles, synthetic_duty_cycles
from cotenant.traces.genai_synthetic import ZERO, pooled_lag1

GENAI = Path(__file__).resolve().parents[1].parent / "shared/data/alibaba-genai-v2026"


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def stats(values: np.ndarray) -> str:
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return (
        f"mean {values.mean():.4f}, idle {(values < ZERO).mean():.3f}, "
        f"lag-1 {pooled_lag1(values):.3f}, p50/p90/p99 {p50:.3f}/{p90:.3f}/{p99:.3f}"
    )


def memory_stats(profile: np.ndarray | None, duty: np.ndarray) -> str:
    """Memory used over time as a fraction of each series' peak, and its correlation with the
    duty cycle (median over series)."""
    if profile is None:
        return "no memory profile"
    keep = ~np.isnan(profile).any(axis=1)
    rows, load = profile[keep], duty[keep]
    p10, p50, p90 = np.percentile(rows, [10, 50, 90])
    varied = (rows.std(axis=1) > 0) & (load.std(axis=1) > 0)
    corr = [np.corrcoef(m, d)[0, 1] for m, d in zip(rows[varied], load[varied], strict=True)]
    return (
        f"memory/peak p10/p50/p90 {p10:.3f}/{p50:.3f}/{p90:.3f}, "
        f"share >= 0.9 {(rows >= 0.9).mean():.3f}, lag-1 {pooled_lag1(rows):.3f}, "
        f"median corr with duty {np.median(corr):.2f}; per series: std of means "
        f"{rows.mean(axis=1).std():.3f}, median std {np.median(rows.std(axis=1)):.3f}, "
        f"median min {np.median(rows.min(axis=1)):.3f}, "
        f"median max {np.median(rows.max(axis=1)):.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}")
    duty = GENAI / "pod_gpu_duty_cycle_anon.tar.gz"
    if duty.exists():
        start = time.perf_counter()
        real, report = load_duty_cycles(
            duty, memory_path=GENAI / "pod_gpu_memory_used_bytes_anon.tar.gz"
        )
        print(f"load real duty-cycle and memory traces: {time.perf_counter() - start:.2f} s; "
              f"{report}")
        print(f"real      {real.values.shape}: {stats(real.values)}")
        print(f"real      {memory_stats(real.memory_profile, real.values)}")
    start = time.perf_counter()
    synth = synthetic_duty_cycles(20_000, 1_440, np.random.default_rng(0))
    secs = time.perf_counter() - start
    print(f"synthetic {synth.values.shape}: {stats(synth.values)}; drawn in {secs:.2f} s")
    print(f"synthetic {memory_stats(synth.memory_profile, synth.values)}")
    model = default_predictor()
    rng = np.random.default_rng(1)
    a, b = rng.random((3, 20_000, 1)), rng.random((3, 1, 300))
    for dtype in (np.float64, np.float32):
        x, y = a.astype(dtype), b.astype(dtype)
        secs = best(partial(model.predict, *x, *y), args.repeat)
        print(f"predictor 20,000 x 300 ({np.dtype(dtype).name}): {secs * 1000:.0f} ms")


if __name__ == "__main__":
    main()
