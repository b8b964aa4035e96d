"""The MIG profile table by value on hand-made points: the capacity under many SLOs at once
against a brute-force search, ties and boundaries, the SM rule below the smallest measured
profile, and the table's errors word for word (place and rule)."""

from __future__ import annotations

import numpy as np
import pytest

from cotenant.errors import InputError, UnknownNameError
from cotenant.model.gpu import CATALOG
from cotenant.perf.measured import MeasuredTable
from cotenant.perf.mig_profiles import Capacity, ProfilePoint, ProfileTable, _derive


def point(batch: int, tput: float, latency: float, profile: str = "1g.5gb",
          model: str = "m", gpu: str = "A100-40GB") -> ProfilePoint:
    return ProfilePoint(model, gpu, profile, batch, tput, latency, "s")


CURVE = [point(1, 100.0, 10.0), point(2, 150.0, 12.0), point(4, 140.0, 20.0),
         point(8, 300.0, 30.0), point(16, 250.0, 31.0)]
"""A 1g.5gb curve whose throughput does not grow with latency everywhere."""


def test_capacities_are_the_best_throughput_within_each_slo() -> None:
    table = ProfileTable(CURVE)
    slo = np.array([5.0, 10.0, 11.0, 12.0, 25.0, 30.0, 30.5, 1e9])
    got = table.capacities("m", "A100-40GB", "1g.5gb", slo)
    assert got.tolist() == [0.0, 100.0, 100.0, 150.0, 150.0, 300.0, 300.0, 300.0]


def test_capacities_agree_with_a_brute_force_search_over_the_points() -> None:
    rng = np.random.default_rng(11)
    points = [point(b, float(t), float(lat)) for b, t, lat in zip(
        range(1, 41), rng.integers(1, 60, 40), rng.integers(1, 30, 40), strict=True)]
    table = ProfileTable(points)
    slo = np.arange(0.0, 32.0, 0.5)
    want = [max((p.throughput for p in points if p.latency_ms <= s), default=0.0) for s in slo]
    assert table.capacities("m", "A100-40GB", "1g.5gb", slo).tolist() == want
    for s, best in zip(slo, want, strict=True):
        cap = table.capacity("m", "A100-40GB", "1g.5gb", float(s))
        assert (cap.throughput if cap else 0.0) == best


def test_a_capacity_tie_goes_to_the_smaller_batch() -> None:
    table = ProfileTable([point(4, 200.0, 9.0), point(8, 200.0, 9.5), point(2, 90.0, 5.0)])
    assert table.capacity("m", "A100", "1g.5gb", 10.0) == Capacity(200.0, 4, 9.0)
    assert table.capacity("m", "A100", " 1g.5gb ", 9.0) == Capacity(200.0, 4, 9.0)


def test_below_the_smallest_measured_profile_throughput_scales_with_the_sms() -> None:
    # measured on 3g (42 SMs) and 7g (98): 1g (14 SMs) is 3g x 14/42
    table = MeasuredTable("m", "A100-40GB", "src", (1, 2),
                          {"3g.20gb": (30.0, 60.0), "7g.40gb": (70.0, 140.0)},
                          {"3g.20gb": (2.0, 4.0), "7g.40gb": (3.0, 5.0)})
    target = CATALOG.get("A100-40GB").require_mig("test").profile("1g.5gb")
    rows = _derive(table, "A100-40GB", target)
    assert [(p.batch, p.throughput, p.latency_ms) for p in rows] == [(1, 10.0, 6.0),
                                                                   (2, 20.0, 12.0)]
    assert rows[0].source == "derived: A100-40GB 3g.20gb x 14/42 SMs"


def test_check_names_the_table_and_the_gpus_with_data() -> None:
    default = ProfileTable([point(1, 1.0, 1.0)])
    with pytest.raises(UnknownNameError) as info:
        default.check("x", "A100-40GB")
    assert str(info.value) == "unknown DNN model 'x' in profile table; valid: m"
    assert (info.value.kind, info.value.name) == ("DNN model", "x")
    named = ProfileTable([point(1, 1.0, 1.0)], "my.csv")
    with pytest.raises(UnknownNameError, match=r"^unknown DNN model 'x' in my\.csv; valid: m$"):
        named.check("x", "A100-40GB")
    for gpu in ("H100-80GB", "no-such-gpu"):
        with pytest.raises(UnknownNameError) as info:
            named.check("m", gpu)
        assert str(info.value) == (f"unknown GPU model with data for m {gpu!r}; "
                                   "valid: A100-40GB")
        assert info.value.name == gpu


def test_an_unknown_profile_names_the_model_and_gpu() -> None:
    table = ProfileTable([point(1, 1.0, 1.0), point(1, 2.0, 1.0, "7g.40gb")])
    with pytest.raises(UnknownNameError) as info:
        table.capacity("m", "A100", "2g.10gb", 5.0)
    assert str(info.value) == ("unknown MIG profile with data for m on A100 '2g.10gb'; "
                               "valid: 1g.5gb, 7g.40gb")
    assert info.value.name == "2g.10gb"


def test_a_point_on_an_alias_or_unknown_gpu_or_profile_is_refused_by_name() -> None:
    valid = ", ".join(CATALOG.mig_names())
    for gpu in ("A100", "B200"):
        with pytest.raises(InputError) as info:
            ProfileTable([point(8, 1.0, 1.0, gpu=gpu)])
        assert info.value.where == f"m/{gpu}/1g.5gb/bs8"
        assert info.value.rule == f"unknown GPU model {gpu!r}; valid MIG GPUs: {valid}"
    with pytest.raises(InputError) as info:
        ProfileTable([point(8, 1.0, 1.0, "1g.10gb+me")])
    assert info.value.where == "m/A100-40GB/1g.10gb+me/bs8"
    assert info.value.rule == "profile is not one of A100-40GB's MIG profiles"
    with pytest.raises(InputError) as info:
        ProfileTable([point(8, 1.0, 1.0), point(8, 2.0, 3.0)])
    assert (info.value.where, info.value.rule) == ("m/A100-40GB/1g.5gb/bs8",
                                                   "duplicate operating point")
