"""The published per-slice tables: a MIGPerf figure's four slices and a MIGER batch-32 row,
built from hand-made rows with a distinct value in every cell."""

from __future__ import annotations

import pytest

from cotenant.perf.measured import MEASURED, MIGER_ONLINE_MS, MIGER_PROFILES, _miger, _migperf

ROWS = (
    ((1.0, 2.0), (11.0, 12.0)),
    ((3.0, 4.0), (13.0, 14.0)),
    ((5.0, 6.0), (15.0, 16.0)),
    ((7.0, 8.0), (17.0, 18.0)),
)
"""(throughput, latency) per slice, 5g, 10g, 20g, 40g, two batch sizes each."""


def test_a_migperf_table_reads_its_slices_as_compute_profiles() -> None:
    table = _migperf("m", "fig/m_*.svg", ROWS)
    assert (table.model, table.gpu) == ("m", "A100-40GB")
    assert table.source == ("MIGPerf arXiv:2301.00407 HuaizhengZhang/MIGProfiler "
                            "assets/pictures/infer/fig/m_*.svg (slice '20g' read as 3g.20gb)")
    assert table.batches == (1, 2, 4, 8, 16, 32, 64, 128, 256)
    assert dict(table.throughput) == {"1g.5gb": (1.0, 2.0), "2g.10gb": (3.0, 4.0),
                                      "3g.20gb": (5.0, 6.0), "7g.40gb": (7.0, 8.0)}
    assert dict(table.latency_ms) == {"1g.5gb": (11.0, 12.0), "2g.10gb": (13.0, 14.0),
                                      "3g.20gb": (15.0, 16.0), "7g.40gb": (17.0, 18.0)}


def test_a_migperf_table_needs_all_four_slices() -> None:
    with pytest.raises(ValueError, match="zip"):
        _migperf("m", "fig", ROWS[:3])


def test_a_miger_row_is_batch_32_with_throughput_32_over_the_latency() -> None:
    table = _miger("net", (16.0, 8.0, 5.0, 4.0, 3.0))
    assert table is not None
    assert (table.model, table.gpu, table.batches) == ("net", "A100-80GB", (32,))
    assert table.source == ("MIGER ICPP'24 Css22/ICPP-MIGER jobs/profile/online_result/net "
                            "(batch-32 latency; throughput = 32/latency)")
    assert dict(table.latency_ms) == {"1g.10gb": (16.0,), "2g.20gb": (8.0,), "3g.40gb": (5.0,),
                                      "4g.40gb": (4.0,), "7g.80gb": (3.0,)}
    # 32 requests per batch: 2000, 4000, 6400, 8000 and 10666.67 (two decimals) per second
    assert dict(table.throughput) == {"1g.10gb": (2000.0,), "2g.20gb": (4000.0,),
                                      "3g.40gb": (6400.0,), "4g.40gb": (8000.0,),
                                      "7g.80gb": (10666.67,)}


def test_a_miger_row_with_an_error_on_any_slice_is_left_out() -> None:
    assert _miger("net", (None, 8.0, 5.0, 4.0, 3.0)) is None
    assert _miger("net", (16.0, 8.0, 5.0, 4.0, None)) is None
    with pytest.raises(ValueError, match="zip"):
        _miger("net", (16.0, 8.0, 5.0, 4.0))


def test_the_shipped_tables_are_the_five_migperf_figures_and_the_complete_miger_rows() -> None:
    complete = [m for m, row in MIGER_ONLINE_MS.items() if None not in row]
    assert complete == ["alexnet", "inception_v3", "mobilenet_v2", "resnet50", "vgg16", "vgg19"]
    assert [t.model for t in MEASURED[5:]] == complete
    assert {t.gpu for t in MEASURED[:5]} == {"A100-40GB"}
    resnet = MEASURED[5 + complete.index("resnet50")]
    assert dict(resnet.latency_ms) == {p: (ms,) for p, ms in zip(
        MIGER_PROFILES, (97.7, 49.7, 30.0, 25.8, 14.8), strict=True)}
