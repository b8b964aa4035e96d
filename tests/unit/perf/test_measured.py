"""The published per-slice tables: a MIGPerf figure's four slices and a MIGER batch-32 row,
built from hand-made rows with a distinct value in every cell."""

from __future__ import annotations

import pytest

from cotenant.errors import InputError
from cotenant.perf.measured import (
    MEASURED,
    MIGER_ONLINE_MS,
    MIGER_PROFILES,
    MeasuredTable,
    _miger,
    _migperf,
)

ROWS = tuple(
    (tuple(100.0 * k + b for b in range(1, 10)), tuple(1000.0 * k + b for b in range(1, 10)))
    for k in range(1, 5))
"""(throughput, latency) per slice, 5g, 10g, 20g, 40g, at each of the nine batch sizes:
101..109 and 1001..1009 for 5g, 201..209 and 2001..2009 for 10g, and so on."""


def test_a_migperf_table_reads_its_slices_as_compute_profiles() -> None:
    table = _migperf("m", "fig/m_*.svg", ROWS)
    assert (table.model, table.gpu) == ("m", "A100-40GB")
    assert table.source == ("MIGPerf arXiv:2301.00407 HuaizhengZhang/MIGProfiler "
                            "assets/pictures/infer/fig/m_*.svg (slice '20g' read as 3g.20gb)")
    assert table.batches == (1, 2, 4, 8, 16, 32, 64, 128, 256)
    assert dict(table.throughput) == {"1g.5gb": ROWS[0][0], "2g.10gb": ROWS[1][0],
                                      "3g.20gb": ROWS[2][0], "7g.40gb": ROWS[3][0]}
    assert dict(table.latency_ms) == {"1g.5gb": ROWS[0][1], "2g.10gb": ROWS[1][1],
                                      "3g.20gb": ROWS[2][1], "7g.40gb": ROWS[3][1]}
    assert table.throughput["3g.20gb"][8] == 309.0
    assert table.latency_ms["7g.40gb"][0] == 4001.0


@pytest.mark.parametrize(("tput", "latency", "where", "rule"), [
    ({"1g.5gb": (1.0, 2.0)}, {"1g.5gb": (1.0, 2.0, 3.0)}, "1g.5gb throughput",
     "2 values for 3 batch sizes"),
    ({"1g.5gb": (1.0, 2.0, 3.0)}, {"1g.5gb": (1.0, 2.0, 3.0, 4.0)}, "1g.5gb latency_ms",
     "4 values for 3 batch sizes"),
    ({"1g.5gb": (1.0, 2.0, 3.0), "7g.40gb": (7.0, 8.0)},
     {"1g.5gb": (1.0, 2.0, 3.0), "7g.40gb": (7.0, 8.0, 9.0)}, "7g.40gb throughput",
     "2 values for 3 batch sizes"),
])
def test_a_table_whose_rows_do_not_match_its_batches_is_refused(
        tput: dict[str, tuple[float, ...]], latency: dict[str, tuple[float, ...]], where: str,
        rule: str) -> None:
    with pytest.raises(InputError) as info:
        MeasuredTable("m", "A100-40GB", "src", (1, 2, 4), tput, latency)
    assert (info.value.where, info.value.rule) == (f"measured table m on A100-40GB: {where}", rule)


def test_a_table_needs_a_latency_for_each_profile_with_a_throughput_and_back() -> None:
    for tput, latency in (({"1g.5gb": (1.0,), "7g.40gb": (2.0,)}, {"1g.5gb": (3.0,)}),
                          ({"1g.5gb": (1.0,)}, {"1g.5gb": (3.0,), "7g.40gb": (2.0,)})):
        with pytest.raises(InputError) as info:
            MeasuredTable("m", "A100-40GB", "src", (1,), tput, latency)
        assert info.value.where == "measured table m on A100-40GB"
        assert info.value.rule == (f"profiles with throughputs ({', '.join(tput)}) differ from "
                                   f"those with latencies ({', '.join(latency)})")


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
