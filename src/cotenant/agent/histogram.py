"""Prometheus histogram arithmetic for the latency scraper (:mod:`cotenant.agent.latency`).

From two reads of a service's ``/metrics`` page, the p99 of the requests served between
them, the way Prometheus's ``increase`` and ``histogram_quantile`` compute it:

* per series (label set) of the histogram's ``_bucket`` samples that match the spec's
  labels, the increase of each bucket's count; a series whose counts fell restarted, and
  its increase is its count; a series new since the last read waits for the next;
* the increases summed per bucket bound, made non-decreasing (a running maximum), and the
  quantile interpolated linearly within the bucket holding it; in the ``+Inf`` bucket it is
  the largest finite bound, and with no finite bound there is none.

Pure functions of the page text; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from prometheus_client.parser import text_string_to_metric_families

from cotenant.agent.spec import LatencyMetric
from cotenant.errors import InputError

Series = dict[frozenset[tuple[str, str]], dict[float, float]]


def read_series(text: str, metric: LatencyMetric) -> Series:
    """Per series of ``metric``'s histogram matching its labels (the labels less ``le``), the
    cumulative count per bucket bound; ``InputError`` when the page has none."""
    name = metric.histogram + "_bucket"
    want = dict(metric.labels)
    out: Series = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name != name or "le" not in sample.labels:
                continue
            if any(sample.labels.get(k) != v for k, v in want.items()):
                continue
            key = frozenset((k, v) for k, v in sample.labels.items() if k != "le")
            out.setdefault(key, {})[float(sample.labels["le"])] = float(sample.value)
    if not any(math.inf in buckets for buckets in out.values()):
        raise InputError(f"latency histogram {metric.histogram}",
                         f"no {name}{{le=\"+Inf\"}} series matching {want or 'any labels'}")
    return out


def increase(before: Series, after: Series) -> dict[float, float]:
    """Per bucket bound, the requests counted between two reads, summed over the series (a
    series whose counts fell restarted: its increase is its count)."""
    total: dict[float, float] = {}
    for key, now in after.items():
        then = before.get(key)
        if then is None:
            continue
        reset = any(now[b] < then.get(b, 0.0) for b in now)
        for bound, count in now.items():
            total[bound] = total.get(bound, 0.0) + (count if reset else count - then.get(bound, 0))
    return total


def histogram_quantile(buckets: Sequence[tuple[float, float]], q: float) -> float | None:
    """The ``q`` quantile of ``(bound, cumulative count)`` pairs sorted by bound, the last
    ``+Inf``, as Prometheus computes it; None when empty or with no finite bound."""
    if len(buckets) < 2 or not math.isinf(buckets[-1][0]):
        return None
    counts, top = [], 0.0
    for _, count in buckets:  # made non-decreasing, as Prometheus does
        top = max(top, count)
        counts.append(top)
    total = counts[-1]
    if not total > 0:
        return None
    rank = q * total
    lower, below = 0.0, 0.0
    for (bound, _), count in zip(buckets, counts, strict=True):
        if count >= rank:
            if math.isinf(bound):
                return lower  # the largest finite bound
            if count == below:
                return bound
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower
