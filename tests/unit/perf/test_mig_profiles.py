"""Tests of the MIG profile table: SLO capacity, derivation rules, CSV round trip and errors."""

from __future__ import annotations

from importlib import resources
from itertools import pairwise
from pathlib import Path

import pytest

from cotenant.errors import InputError, UnknownNameError
from cotenant.model.gpu import CATALOG
from cotenant.perf.mig_profiles import (
    TARGET_GPUS,
    Capacity,
    ProfilePoint,
    ProfileTable,
    default_table,
    derive_default_points,
    format_csv,
    load_csv,
)

BERT = "bert-base-multilingual-cased"
MIGPERF_MODELS = [
    BERT,
    "distiluse-base-multilingual-cased-v1",
    "distiluse-base-multilingual-cased-v2",
    "paraphrase-multilingual-MiniLM-L12-v2",
    "paraphrase-multilingual-mpnet-base-v2",
]
MIGER_MODELS = ["alexnet", "inception_v3", "mobilenet_v2", "resnet50", "vgg16", "vgg19"]
HEADER = "model,gpu,profile,batch,throughput_rps,latency_ms,source\n"


@pytest.fixture(scope="module")
def table() -> ProfileTable:
    return default_table()


def test_models_are_the_measured_ones(table: ProfileTable) -> None:
    assert table.models() == sorted(MIGPERF_MODELS + MIGER_MODELS)


def test_capacity_picks_best_batch_under_slo(table: ProfileTable) -> None:
    # MIGPerf bert-base 40g row: bs64 4833 req/s at 13 ms beats bs128 4785 req/s at 27 ms.
    assert table.capacity(BERT, "A100-40GB", "7g.40gb", 30) == Capacity(4833, 64, 13)
    # bs1..bs32 are 11-12 ms; at 11 ms only bs1, bs8, bs16, bs32 qualify: bs32 2975 req/s.
    assert table.capacity(BERT, "A100-40GB", "7g.40gb", 11) == Capacity(2975, 32, 11)
    # 5g row: bs8 557 req/s at 14 ms; bs16 (597) needs 27 ms.
    assert table.capacity(BERT, "A100-40GB", "1g.5gb", 20) == Capacity(557, 8, 14)
    assert table.capacity(BERT, "A100", "7g.40gb", 1e9) == Capacity(4835, 256, 53)  # alias


def test_capacity_none_below_every_latency(table: ProfileTable) -> None:
    assert table.capacity(BERT, "A100-40GB", "7g.40gb", 10.9) is None
    assert table.capacity("resnet50", "A100-80GB", "1g.10gb", 97.6) is None


def test_capacity_unknown_profile_lists_valid(table: ProfileTable) -> None:
    with pytest.raises(UnknownNameError, match=r"3g\.20gb") as info:
        table.capacity(BERT, "A100-40GB", "3g.40gb", 100)
    assert len(info.value.valid) == 5


def test_best_latency(table: ProfileTable) -> None:
    # Measured rows bottom out at 11 ms; the interpolated 4g.20gb bs8 row is 11 x 738/738.75.
    assert table.best_latency(BERT, "A100-40GB") == round(11 * 738 / 738.75, 2)
    assert table.best_latency("distiluse-base-multilingual-cased-v1", "A100-40GB") == 5
    assert table.best_latency("resnet50", "A100-80GB") == 14.8
    assert table.best_latency(BERT, "H100-80GB") == pytest.approx(11 * 98 / 132, abs=0.01)


@pytest.mark.parametrize("model", MIGPERF_MODELS + MIGER_MODELS)
@pytest.mark.parametrize("gpu", TARGET_GPUS)
def test_capacity_grows_with_compute_slices(table: ProfileTable, model: str, gpu: str) -> None:
    caps = []
    for profile in table.profiles(model, gpu):
        cap = table.capacity(model, gpu, profile, 1e9)
        assert cap is not None
        caps.append(cap.throughput)
    assert all(a < b for a, b in pairwise(caps)), caps


def test_every_model_gpu_has_the_five_compute_profiles(table: ProfileTable) -> None:
    for model in table.models():
        for gpu in TARGET_GPUS:
            names = table.profiles(model, gpu)
            geometry = CATALOG.get(gpu).mig
            assert geometry is not None
            assert [geometry.profile(n).compute_slices for n in names] == [1, 2, 3, 4, 7]
            assert not any(n.endswith("+me") for n in names)


def test_every_profile_exists_in_the_catalog(table: ProfileTable) -> None:
    for p in table.points:
        geometry = CATALOG.get(p.gpu).mig
        assert geometry is not None
        assert p.gpu == CATALOG.get(p.gpu).name
        assert p.profile in [q.name for q in geometry.profiles]


def test_shipped_csv_is_derive_default_points_output() -> None:
    shipped = resources.files("cotenant.perf").joinpath("data/mig_profiles.csv").read_text("utf-8")
    points = derive_default_points()
    assert shipped == format_csv(points)
    assert default_table().points == tuple(points)


def test_measured_rows_carry_citations_and_derived_rows_their_rule(table: ProfileTable) -> None:
    for p in table.points:
        assert p.source.startswith(("MIGPerf arXiv:2301.00407", "MIGER ICPP'24", "derived: "))
        measured_here = (
            p.gpu == "A100-40GB" and p.model in MIGPERF_MODELS and not p.profile.startswith("4g")
        ) or (p.gpu == "A100-80GB" and p.model in MIGER_MODELS)
        assert p.source.startswith("derived: ") != measured_here, p


def _point(table: ProfileTable, model: str, gpu: str, profile: str, batch: int) -> ProfilePoint:
    (found,) = [
        p
        for p in table.points
        if (p.model, p.gpu, p.profile, p.batch) == (model, gpu, profile, batch)
    ]
    return found


def test_derivation_rules(table: ProfileTable) -> None:
    # MIGPerf 4g: linear in compute slices between 3g (2245) and 7g (4835); latency inverse.
    p = _point(table, BERT, "A100-40GB", "4g.20gb", 256)
    assert p.throughput == 2245 + (4835 - 2245) / 4
    assert p.latency_ms == round(114 * 2245 / p.throughput, 2)
    # A100-80GB = A100-40GB of the same compute size (same SMs).
    a40 = _point(table, BERT, "A100-40GB", "3g.20gb", 64)
    a80 = _point(table, BERT, "A100-80GB", "3g.40gb", 64)
    assert (a80.throughput, a80.latency_ms) == (a40.throughput, a40.latency_ms)
    # H100 7g: A100 7g x 132/98 SMs; H200 equals H100.
    h100 = _point(table, BERT, "H100-80GB", "7g.80gb", 256)
    assert h100.throughput == round(4835 * 132 / 98, 2)
    assert h100.latency_ms == round(53 * 98 / 132, 2)
    h200 = _point(table, BERT, "H200-141GB", "7g.141gb", 256)
    assert (h200.throughput, h200.latency_ms) == (h100.throughput, h100.latency_ms)
    # MIGER: throughput = 32 / latency; A100-40GB derived from A100-80GB.
    r80 = _point(table, "resnet50", "A100-80GB", "7g.80gb", 32)
    assert (r80.throughput, r80.latency_ms) == (round(32_000 / 14.8, 2), 14.8)
    r40 = _point(table, "resnet50", "A100-40GB", "1g.5gb", 32)
    assert r40.latency_ms == 97.7


def test_check_lists_valid_names(table: ProfileTable) -> None:
    with pytest.raises(UnknownNameError) as info:
        table.check("gpt-5", "A100-40GB")
    assert BERT in info.value.valid
    assert "resnet50" in str(info.value)
    with pytest.raises(UnknownNameError) as info:
        table.check(BERT, "A30")
    assert info.value.valid == tuple(sorted(TARGET_GPUS))
    with pytest.raises(UnknownNameError):
        table.check(BERT, "no-such-gpu")
    table.check(BERT, "h100")  # aliases resolve through the catalog


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "t.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_load_csv_reads_and_canonicalises(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "model,gpu,profile,batch,throughput_rps,latency_ms\n"
        "m,A100,1g.5gb,8,100.5,20\n\nm,A100,7g.40gb,8,700,3\n",
    )
    table = load_csv(path)
    assert table.profiles("m", "A100-40GB") == ["1g.5gb", "7g.40gb"]
    assert table.capacity("m", "A100-40GB", "1g.5gb", 25) == Capacity(100.5, 8, 20)
    assert table.points[0].source == ""


@pytest.mark.parametrize(
    ("row", "where", "rule"),
    [
        ("m,A100-40GB,1g.5gb,8,fast,20,s", "t.csv:2:throughput_rps", "not a number"),
        ("m,A100-40GB,1g.5gb,8,100,-1,s", "t.csv:2:latency_ms", "negative"),
        ("m,A100-40GB,1g.5gb,8,0,20,s", "t.csv:2:throughput_rps", "> 0"),
        ("m,A100-40GB,1g.5gb,8,nan,20,s", "t.csv:2:throughput_rps", "finite"),
        ("m,A100-40GB,1g.5gb,-8,100,20,s", "t.csv:2:batch", "positive integer"),
        ("m,B200,1g.5gb,8,100,20,s", "t.csv:2:gpu", "unknown GPU model 'B200'"),
        ("m,T4,1g.5gb,8,100,20,s", "t.csv:2:gpu", "T4 has no MIG"),
        ("m,A100-80GB,1g.5gb,8,100,20,s", "t.csv:2:profile", "not a MIG profile of A100-80GB"),
        ("m,A100-40GB,1g.5gb,8,100", "t.csv:2", "5 fields; the header has 7"),
        (",A100-40GB,1g.5gb,8,100,20,s", "t.csv:2:model", "empty model name"),
    ],
)
def test_load_csv_errors_name_the_place(tmp_path: Path, row: str, where: str, rule: str) -> None:
    with pytest.raises(InputError, match=rule) as info:
        load_csv(_write(tmp_path, HEADER + row + "\n"))
    assert info.value.where.endswith(where)


@pytest.mark.parametrize(
    ("header", "column"),
    [
        ("model,gpu,profile,batch,throughput_rps,source", "latency_ms"),
        ("model,gpu,profile,batch,throughput_rps,latency_ms,notes", "notes"),
    ],
)
def test_load_csv_header_errors(tmp_path: Path, header: str, column: str) -> None:
    with pytest.raises(InputError, match="column") as info:
        load_csv(_write(tmp_path, header + "\n"))
    assert info.value.where.endswith(f"t.csv:1:{column}")


def test_a_repeated_row_names_both_lines(tmp_path: Path) -> None:
    row = "m,A100-40GB,1g.5gb,8,100,20,s\n"
    with pytest.raises(InputError) as info:
        load_csv(_write(tmp_path, HEADER + row + row.replace(",100,", ",120,")))
    assert info.value.where.endswith("t.csv:3")
    assert info.value.rule == "m on A100-40GB 1g.5gb at batch 8 is already on line 2"


def test_duplicate_point_rejected() -> None:
    p = ProfilePoint("m", "A100-40GB", "1g.5gb", 8, 1.0, 1.0, "s")
    with pytest.raises(InputError, match="duplicate"):
        ProfileTable([p, p])
