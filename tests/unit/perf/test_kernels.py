"""Kernel-level job profiles: Tally's jobs mapped to Orion's, a unit's kernels drawn log-linearly
between the duration quantiles and scaled to the unit's busy time, launch gaps spread over a
request or left as one idle gap after an iteration, long requests coarsened into groups."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cotenant.errors import UnknownNameError
from cotenant.perf.kernels import (
    COMPUTE,
    MEMORY,
    ORION_FOR,
    QUANTILES,
    UNKNOWN,
    KernelProfile,
    OrionStats,
    _coarsen,
    _gaps,
    _kind_shares,
    _orion_for,
    be_jobs,
    hp_jobs,
    kernel_profile,
    orion_stats,
)

TRAINING = ("pytorch_whisper-large-v3_train_16", "pytorch_resnet50_train_128",
            "pytorch_pointnet_train_128", "pytorch_pegasus-x-base_train_4",
            "pytorch_gpt2-large_train_1", "pytorch_bert_train_32")
"""tally_jobs.csv's training rows, in file order."""
TOY_QUANTILES = (0.5, 2.0, 4.0, 8.0, 16.0, 32.0)


def toy(kernels: int, passes: int = 1, *, high_priority: bool = True,
        compute: float = 0.5, memory: float = 0.3) -> KernelProfile:
    orion = OrionStats("toy", kernels, 0.1, 0.5, TOY_QUANTILES, 1.0, compute, memory)
    return KernelProfile("toy", high_priority, orion, 1200.0, 330.0, passes)


def log_linear(u: float) -> float:
    """The duration at quantile ``u`` of TOY_QUANTILES, geometric between the two around it."""
    for lo, hi, a, b in zip(QUANTILES, QUANTILES[1:], TOY_QUANTILES, TOY_QUANTILES[1:],
                            strict=False):
        if lo <= u <= hi:
            return float(a * (b / a) ** ((u - lo) / (hi - lo)))
    raise AssertionError(u)


def test_the_jobs_are_tallys_by_kind_in_file_order() -> None:
    assert hp_jobs() == ("onnxruntime_llama-2-7b_infer_single-stream_1",
                         "onnxruntime_bert_infer_single-stream_1")
    assert be_jobs() == TRAINING


def test_each_job_maps_to_its_orion_profile_by_name_prefix() -> None:
    assert _orion_for("pytorch_resnet50_train_128") == orion_stats()["resnet50_32_fb1"]
    assert _orion_for("onnxruntime_bert_infer_x").profile == "bert_2_fwd"
    assert _orion_for("pytorch_bert_train_32").profile == "bert_8_fb1"
    assert _orion_for("pytorch_pointnet_train_128").kernels == 890  # MobileNetV2's row
    with pytest.raises(UnknownNameError) as info:
        _orion_for("pytorch_llama_train")
    assert (info.value.kind, info.value.name) == ("kernel profile", "pytorch_llama_train")
    assert info.value.valid == tuple(sorted(ORION_FOR))
    assert str(info.value).startswith("unknown kernel profile 'pytorch_llama_train'; valid: ")


def test_a_profile_takes_its_lengths_from_tallys_table() -> None:
    # tally_jobs.csv: BERT alone 4.05 ms at 89.08% utilisation; Orion's bert_2_fwd is 48.63 ms
    bert = kernel_profile("bert")
    assert bert.busy_us == pytest.approx(4050 * 0.8908)
    assert bert.idle_us == pytest.approx(4050 * (1 - 0.8908))
    assert (bert.passes, bert.high_priority) == (1, True)
    # Llama-2: 1963.886 ms at 90.847%, about 107 forward passes of Orion's 16.67 ms
    assert kernel_profile("llama-2-7b").passes == round(1963886 * 0.90847 / 16670)
    # ResNet-50 training: Orion's 95.28 ms of kernels at 99.506% utilisation
    resnet = kernel_profile("pytorch_resnet50")
    assert resnet.busy_us == pytest.approx(95280)
    assert resnet.idle_us == pytest.approx(95280 * (1 / 0.99506 - 1))
    assert (resnet.passes, resnet.high_priority) == (1, False)


def test_the_kind_shares_are_orions_and_the_rest_unknown() -> None:
    assert _kind_shares(toy(4).orion) == pytest.approx([0.5, 0.3, 0.2])
    # shares over 1 leave nothing unknown rather than a negative share
    assert _kind_shares(toy(4, compute=0.7, memory=0.6).orion) == [0.7, 0.6, 0.0]


def test_a_unit_draws_log_linearly_between_the_quantiles_and_keeps_its_busy_time() -> None:
    units = toy(4, passes=3).sample(np.random.default_rng(1))
    u = np.random.default_rng(1).random(12)  # the first draws are the kernels' quantiles
    raw = np.array([log_linear(x) for x in u])
    np.testing.assert_allclose(units.duration_us, raw * 1200.0 / raw.sum(), rtol=1e-12)
    assert units.busy_us == pytest.approx(1200.0)
    assert units.length_us == pytest.approx(1530.0)
    assert units.kind.dtype == np.int8
    assert set(units.kind.tolist()) <= {COMPUTE, MEMORY, UNKNOWN}


def test_the_kinds_are_drawn_at_their_shares() -> None:
    kind = toy(20_000).sample(np.random.default_rng(2), max_kernels=20_000).kind
    shares = [float(np.mean(kind == k)) for k in (COMPUTE, MEMORY, UNKNOWN)]
    assert shares == pytest.approx([0.5, 0.3, 0.2], abs=0.015)


def test_a_requests_idle_time_is_spread_between_its_kernels() -> None:
    units = toy(4, passes=3).sample(np.random.default_rng(3))
    assert units.gap_us.tolist() == [30.0] * 11 + [0.0]  # 330 us over 11 gaps
    one = toy(1).sample(np.random.default_rng(3))
    assert one.gap_us.tolist() == [330.0]  # a single kernel: the idle time after it
    assert _gaps(2, 330.0, per_kernel=True).tolist() == [330.0, 0.0]
    assert _gaps(3, 330.0, per_kernel=True).tolist() == [165.0, 165.0, 0.0]


def test_an_iterations_idle_time_is_one_gap_at_its_end() -> None:
    units = toy(4, passes=3, high_priority=False).sample(np.random.default_rng(4))
    assert units.gap_us.tolist() == [0.0] * 11 + [330.0]
    assert _gaps(3, 330.0, per_kernel=False).tolist() == [0.0, 0.0, 330.0]


def test_a_long_unit_is_coarsened_into_groups_that_keep_its_time() -> None:
    fine = toy(4, passes=3).sample(np.random.default_rng(25))
    coarse = toy(4, passes=3).sample(np.random.default_rng(25), max_kernels=5)
    # 12 kernels, at most 5: groups of ceil(12 / 5) = 3
    assert len(coarse.duration_us) == 4
    np.testing.assert_allclose(coarse.duration_us, fine.duration_us.reshape(4, 3).sum(axis=1))
    assert coarse.gap_us.tolist() == [110.0] * 3 + [0.0]
    assert coarse.kind.dtype == np.int8
    c, m = COMPUTE, MEMORY
    assert fine.kind.tolist() == [c, m, c, m, m, m, c, c, c, c, m, m]
    # by hand: a mixed group, all memory, all compute, a mixed group
    assert coarse.kind.tolist() == [UNKNOWN, MEMORY, COMPUTE, UNKNOWN]
    at_limit = toy(4, passes=3).sample(np.random.default_rng(25), max_kernels=12)
    np.testing.assert_array_equal(at_limit.duration_us, fine.duration_us)


def test_coarsening_pads_the_last_group_and_marks_mixed_groups_unknown() -> None:
    kind = np.array([COMPUTE, COMPUTE, COMPUTE, MEMORY, MEMORY, COMPUTE, MEMORY], dtype=np.int8)
    dur, kinds = _coarsen(np.arange(1.0, 8.0), kind, 3)
    assert dur.tolist() == [6.0, 15.0, 7.0]
    assert kinds.tolist() == [COMPUTE, UNKNOWN, UNKNOWN]  # the padded group is mixed too
    assert kinds.dtype == np.int8
    dur, kinds = _coarsen(np.arange(1.0, 7.0), kind[1:], 2)
    assert dur.tolist() == [3.0, 7.0, 11.0]
    assert kinds.tolist() == [COMPUTE, MEMORY, UNKNOWN]
    dur, kinds = _coarsen(np.array([4.0, 5.0, 6.0]), np.full(3, MEMORY, dtype=np.int8), 2)
    assert (dur.tolist(), kinds.tolist()) == ([9.0, 6.0], [MEMORY, UNKNOWN])
    assert math.isclose(float(dur.sum()), 15.0)
