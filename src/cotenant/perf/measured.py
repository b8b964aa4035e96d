"""Published per-MIG-slice inference measurements, kept verbatim as compact literals.

Each :class:`MeasuredTable` is one model on one GPU model: per MIG profile, throughput
(requests/s) and latency (ms per batch) at each batch size, with its citation. The numbers are
copied from ``../shared/reference/calibration.md`` (sections 1 and 2), which extracted them from:

* MIGPerf / MIGProfiler (Zhang et al., arXiv:2301.00407; repo ``HuaizhengZhang/MIGProfiler``,
  ``assets/pictures/infer/<model>/*_{throughput,latency}_bsz_compare.svg``): blocking PyTorch
  HuggingFace inference on an A100-40GB, seq_len 64, one client, 1000 batches. The figures label
  slices 5g/10g/20g/40g; we read them as 1g.5gb, 2g.10gb, 3g.20gb and 7g.40gb. "20g" could also
  be 4g.20gb (same 20 GB; the label cannot tell them apart). We follow calibration.md's "most
  likely" reading, 3g.20gb, and interpolate 4g (see :mod:`cotenant.perf.mig_profiles`); were it
  4g.20gb, our 3g rows would be too high (56 SMs' data put on 42) and our 4g rows too low.
  Latencies are published as whole milliseconds.
* MIGER (ICPP'24, DOI 10.1145/3673038.3673089; repo ``Css22/ICPP-MIGER``,
  ``jobs/profile/online_result/<model>``): seconds per batch-32 inference on each A100-80GB
  profile, converted to ms; throughput is 32 / latency. Only models measured on all five
  profiles are kept (resnet101/152, unet, deeplabv3 and bert report "error" on small slices).

Turning these into a full table for every GPU and profile is :mod:`cotenant.perf.mig_profiles`'s
job; this module only holds the published numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cotenant.errors import InputError

_MIGPERF_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
_MIGPERF = "MIGPerf arXiv:2301.00407 HuaizhengZhang/MIGProfiler assets/pictures/infer/{}"
_MIGER = (
    "MIGER ICPP'24 Css22/ICPP-MIGER jobs/profile/online_result/{} "
    "(batch-32 latency; throughput = 32/latency)"
)


@dataclass(frozen=True)
class MeasuredTable:
    """One model on one GPU model; ``throughput``/``latency_ms`` map profile -> per batch."""

    model: str
    gpu: str
    source: str
    batches: tuple[int, ...]
    throughput: Mapping[str, tuple[float, ...]]
    latency_ms: Mapping[str, tuple[float, ...]]

    def __post_init__(self) -> None:
        """Every profile has a throughput and a latency at each batch size, or a one-line
        :class:`~cotenant.errors.InputError` naming the table, the profile and the column."""
        where = f"measured table {self.model} on {self.gpu}"
        if set(self.throughput) != set(self.latency_ms):
            raise InputError(where, f"profiles with throughputs ({', '.join(self.throughput)}) "
                             f"differ from those with latencies ({', '.join(self.latency_ms)})")
        for column, rows in (("throughput", self.throughput), ("latency_ms", self.latency_ms)):
            for profile, row in rows.items():
                if len(row) != len(self.batches):
                    raise InputError(f"{where}: {profile} {column}", f"{len(row)} values for "
                                     f"{len(self.batches)} batch sizes")


def _migperf(
    model: str, figure: str, rows: tuple[tuple[tuple[float, ...], tuple[float, ...]], ...]
) -> MeasuredTable:
    """A MIGPerf table; ``rows`` are (throughput, latency) for 5g, 10g, 20g, 40g."""
    names = ("1g.5gb", "2g.10gb", "3g.20gb", "7g.40gb")
    return MeasuredTable(
        model,
        "A100-40GB",
        _MIGPERF.format(figure) + " (slice '20g' read as 3g.20gb)",
        _MIGPERF_BATCHES,
        {name: row[0] for name, row in zip(names, rows, strict=True)},
        {name: row[1] for name, row in zip(names, rows, strict=True)},
    )


MIGER_PROFILES = ("1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")
MIGER_ONLINE_MS: dict[str, tuple[float | None, ...]] = {
    "alexnet": (10.6, 5.6, 3.7, 2.9, 1.8),
    "inception_v3": (106.4, 53.5, 32.4, 26.7, 16.6),
    "mobilenet_v2": (51.0, 26.0, 15.3, 13.2, 7.8),
    "resnet50": (97.7, 49.7, 30.0, 25.8, 14.8),
    "resnet152": (None, 105.6, 63.1, 55.7, 32.6),
    "vgg16": (143.5, 73.1, 44.8, 36.9, 22.3),
    "vgg19": (167.5, 85.2, 52.4, 43.2, 26.1),
    "unet": (None, 88.1, 52.8, 44.5, 26.5),
    "bert": (None, None, 264.0, 221.6, 136.6),
    "deeplabv3": (None, 254.6, 191.8, 175.0, 138.9),
}
"""MIGER ``online_result``: ms per batch-32 inference on each profile of
:data:`MIGER_PROFILES` (A100-80GB); None where the source reports an error."""


def _miger(model: str, latency_ms: tuple[float | None, ...]) -> MeasuredTable | None:
    """A MIGER batch-32 table; None unless every profile was measured."""
    if any(ms is None for ms in latency_ms):
        return None
    rows = [(n, ms) for n, ms in zip(MIGER_PROFILES, latency_ms, strict=True) if ms is not None]
    return MeasuredTable(
        model,
        "A100-80GB",
        _MIGER.format(model),
        (32,),
        {n: (round(32_000 / ms, 2),) for n, ms in rows},
        {n: (ms,) for n, ms in rows},
    )


# fmt: off
MEASURED: tuple[MeasuredTable, ...] = (
    _migperf("bert-base-multilingual-cased", "bert-base/bert-base_*_bsz_compare.svg", (
        ((90, 178, 340, 557, 597, 604, 630, 637, 642), (11, 11, 12, 14, 27, 53, 102, 201, 399)),
        ((90, 181, 357, 732, 1284, 1309, 1286, 1334, 1350), (11, 11, 11, 11, 12, 24, 50, 96, 190)),
        ((90, 180, 335, 738, 1469, 2069, 2203, 2182, 2245), (11, 11, 12, 11, 11, 15, 29, 59, 114)),
        ((90, 173, 345, 741, 1461, 2975, 4833, 4785, 4835), (11, 12, 12, 11, 11, 11, 13, 27, 53)),
    )),
    _migperf("distiluse-base-multilingual-cased-v1", "distil-v1/distil_v1_*_bsz_compare.svg", (
        ((180, 360, 681, 1089, 1192, 1206, 1259, 1273, 1282), (6, 6, 6, 7, 13, 27, 51, 101, 200)),
        ((178, 361, 716, 1445, 2499, 2614, 2571, 2665, 2697), (6, 6, 6, 6, 6, 12, 25, 48, 95)),
        ((176, 353, 671, 1446, 2835, 4081, 4416, 4360, 4485), (6, 6, 6, 6, 6, 8, 14, 29, 57)),
        ((181, 353, 706, 1495, 2954, 5888, 9496, 9586, 9662), (6, 6, 6, 5, 5, 5, 7, 13, 26)),
    )),
    _migperf("distiluse-base-multilingual-cased-v2", "distil-v2/distil_v2_*_bsz_compare.svg", (
        ((180, 365, 692, 1088, 1193, 1207, 1259, 1273, 1283), (6, 5, 6, 7, 13, 27, 51, 101, 200)),
        ((176, 356, 699, 1409, 2494, 2615, 2569, 2664, 2697), (6, 6, 6, 6, 6, 12, 25, 48, 95)),
        ((180, 363, 689, 1475, 2878, 4086, 4418, 4361, 4487), (6, 6, 6, 5, 6, 8, 14, 29, 57)),
        ((180, 350, 697, 1473, 2931, 5888, 9495, 9582, 9662), (6, 6, 6, 5, 5, 5, 7, 13, 26)),
    )),
    _migperf("paraphrase-multilingual-mpnet-base-v2", "mpnet/mpnet_*_bsz_compare.svg", (
        ((91, 182, 345, 552, 592, 601, 628, 635, 640), (11, 11, 12, 14, 27, 53, 102, 202, 400)),
        ((91, 183, 356, 740, 1271, 1301, 1280, 1329, 1345), (11, 11, 11, 11, 13, 25, 50, 96, 190)),
        ((89, 179, 335, 731, 1448, 2053, 2193, 2172, 2237), (11, 11, 12, 11, 11, 16, 29, 59, 114)),
        ((89, 172, 344, 734, 1448, 2949, 4800, 4752, 4815), (11, 12, 12, 11, 11, 11, 13, 27, 53)),
    )),
    _migperf("paraphrase-multilingual-MiniLM-L12-v2", "MiniLM/MiniLM_*_bsz_compare.svg", (
        ((88, 178, 355, 734, 1433, 1419, 1432, 1474, 1440), (11, 11, 11, 11, 11, 23, 45, 87, 178)),
        ((90, 175, 367, 748, 1495, 2891, 2896, 2885, 2967), (11, 11, 11, 11, 11, 11, 22, 44, 86)),
        ((90, 172, 345, 737, 1485, 2939, 4857, 5064, 5044), (11, 12, 12, 11, 11, 11, 13, 25, 51)),
        ((87, 170, 363, 723, 1488, 2950, 5907, 10608, 10760), (11, 12, 11, 11, 11, 11, 11, 12, 24)),
    )),
    *(t for m, row in MIGER_ONLINE_MS.items() if (t := _miger(m, row)) is not None),
)
# fmt: on
"""Every measured table, MIGPerf (A100-40GB, 9 batch sizes) then MIGER (A100-80GB, batch 32)."""
