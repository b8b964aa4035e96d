"""The best-effort job's kernel stream: one training iteration repeated, its position, and
running it alone over a stretch of time in one vectorised step.

While HP has no request in flight nothing but BE runs, so the engine jumps BE over such
stretches with cumulative sums instead of one event per kernel (a Llama-2 request leaves
seconds between requests, millions of BE kernels).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from cotenant.perf.kernels import FloatArray, Units


@dataclass
class BeStream:
    """Where BE is in its iteration. ``frac`` is the share of the current kernel left."""

    units: Units
    sms: float
    waves: float
    index: int = 0
    frac: float = 1.0
    factor: float = 1.0
    """Duration multiplier of the current kernel's form (Tally's transformation)."""
    ready_at: float = 0.0
    work_us: float = 0.0
    """Useful kernel work done, in solo microseconds."""
    lost_us: float = 0.0
    kernels: int = 0
    _next_gap: list[int] = field(default_factory=list, repr=False)
    _gaps: list[int] = field(default_factory=list, repr=False)
    _cum: list[float] = field(default_factory=list, repr=False)
    _cache: dict[tuple[float, float], tuple[FloatArray, FloatArray]] = field(
        default_factory=dict, repr=False)
    _dur: list[float] = field(default_factory=list, repr=False)
    _gap: list[float] = field(default_factory=list, repr=False)
    _kind: list[int] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self._dur = self.units.duration_us.tolist()
        self._gap = self.units.gap_us.tolist()
        self._kind = self.units.kind.tolist()
        gaps = np.flatnonzero(self.units.gap_us > 0)
        self._next_gap = np.searchsorted(gaps, np.arange(len(self._dur))).tolist()
        self._gaps = gaps.tolist()
        self._cum = np.concatenate([[0.0], np.cumsum(self.units.duration_us)]).tolist()

    @property
    def duration(self) -> float:
        return self._dur[self.index]

    @property
    def kind(self) -> int:
        return self._kind[self.index]

    def busy_left_us(self) -> float:
        """Solo time until BE reaches its next idle gap (the end of its kernel run)."""
        i = self.index
        left = self.frac * self.duration * self.factor
        g = self._next_gap[i]
        end = self._gaps[g] if g < len(self._gaps) else len(self._dur) - 1
        return left + self._cum[end + 1] - self._cum[i + 1]

    def block_us(self) -> float:
        """One wave of the current kernel's blocks (Orion's waves per kernel)."""
        return self.duration * self.factor / max(1.0, self.waves)

    def progress(self, solo_us: float) -> None:
        """Advance the running kernel by ``solo_us`` of its (formed) solo time."""
        total = self.duration * self.factor
        done = min(self.frac, solo_us / total) if total > 0 else self.frac
        self.frac -= done
        self.work_us += done * self.duration

    def reset(self) -> None:
        """The running kernel is killed: its progress is lost."""
        lost = (1.0 - self.frac) * self.duration
        self.work_us -= lost
        self.lost_us += lost
        self.frac = 1.0

    def finish(self, now: float) -> None:
        """The running kernel ended at ``now``: move to the next, after its gap."""
        self.ready_at = now + self._gap[self.index]
        self.kernels += 1
        self.index = (self.index + 1) % len(self._dur)
        self.frac, self.factor = 1.0, 1.0

    def _tables(self, stretch: float, limit_us: float,
                overhead: float) -> tuple[FloatArray, FloatArray]:
        key = (stretch, limit_us if overhead > 0 else math.inf)
        if key not in self._cache:
            d = self.units.duration_us
            wall = d * np.where(d > key[1], 1.0 + overhead, 1.0) / stretch
            starts = np.concatenate([[0.0], np.cumsum(wall + self.units.gap_us)])
            self._cache[key] = (wall, starts)
        return self._cache[key]

    def run_alone(self, t: float, until: float, *, running: bool, rate: float = 1.0,
                  limit_us: float = math.inf, overhead: float = 0.0) -> bool:
        """Run BE alone from ``t`` to ``until`` at launch rate ``rate`` (TGS), its kernels
        longer than ``limit_us`` ``overhead`` slower (Tally). ``running``: a kernel is on the
        GPU now (else BE starts its next kernel at ``ready_at``). Returns whether a kernel is
        on the GPU at ``until`` (else BE waits for ``ready_at``)."""
        wall, starts = self._tables(rate, limit_us, overhead)
        d, n = self.units.duration_us, len(wall)
        if running:
            need = self.frac * self.duration * self.factor / rate
            if t + need > until:
                self.progress((until - t) * rate)
                return True
            self.progress(need * rate)
            t += need
            self.finish(t)
        t = max(t, self.ready_at)
        if t >= until:
            return False
        i, rel = self.index, until - t
        period, rest = float(starts[-1]), float(starts[-1] - starts[i])
        if rel >= rest:
            self.work_us += float(d[i:].sum())
            self.kernels += n - i
            rel -= rest
            whole = math.floor(rel / period)
            self.work_us += whole * float(d.sum())
            self.kernels += whole * n
            rel -= whole * period
            i = 0
        target = float(starts[i]) + rel
        j = min(int(np.searchsorted(starts, target, side="right")) - 1, n - 1)
        self.work_us += float(d[i:j].sum())
        self.kernels += j - i
        off = target - float(starts[j])
        self.index, self.frac = j, 1.0
        self.factor = float(wall[j] * rate / d[j]) if d[j] > 0 else 1.0
        if off < wall[j]:
            self.progress(off * rate)
            self.ready_at = until
            return True
        self.work_us += float(d[j])
        self.ready_at = until + float(wall[j] + self.units.gap_us[j]) - off
        self.kernels += 1
        self.index, self.factor = (j + 1) % n, 1.0
        return False
