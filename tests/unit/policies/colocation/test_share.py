"""DynamicShare: SLO-keeping share with hysteresis, identical scalar and array paths."""

from __future__ import annotations

import numpy as np
import pytest

from cotenant.errors import InputError, UnknownNameError
from cotenant.perf import mps
from cotenant.policies.colocation import OnlineObservation, SharePolicy
from cotenant.policies.colocation.share import DynamicShare, FixedShare


def _p99(model: str, load: float, share: int, policy: DynamicShare) -> float:
    return float(
        mps.p99_ms(
            np.array([load]), np.array([share / 100]), mps.SERIAL_FRACTION[model],
            mps.L100_MS[model], policy.interference,
        )[0]
    )


def test_share_keeps_the_slo_with_margin_and_is_small_at_low_load() -> None:
    policy = DynamicShare()
    obs = OnlineObservation("resnet50", load=0.05, slo_ms=80.0, online_share_pct=100)
    fresh = OnlineObservation("resnet50", load=0.05, slo_ms=80.0, online_share_pct=10)
    share = policy.online_share(fresh)
    assert _p99("resnet50", 0.05, share, policy) <= 80.0 * (1.0 - policy.margin)
    assert share < 60
    # the default drops straight to the need (a change is a restart: make it count)
    assert policy.online_share(obs) == share
    # a capped policy lowers by at most max_drop per decision
    assert DynamicShare(max_drop=10).online_share(obs) == 90


def test_default_lowers_only_for_a_large_move() -> None:
    policy = DynamicShare()
    idx = np.array([mps.model_index("resnet50")])
    need = int(policy.needed(idx, np.array([0.05]), np.array([80.0]))[0])
    near = OnlineObservation("resnet50", 0.05, 80.0, need + policy.step - 1)
    far = OnlineObservation("resnet50", 0.05, 80.0, need + policy.step)
    assert policy.online_share(near) == need + policy.step - 1
    assert policy.online_share(far) == need


def test_raises_at_once_when_the_slo_is_at_risk() -> None:
    policy = DynamicShare()
    low = policy.online_share(OnlineObservation("bert", 0.02, 400.0, 20))
    high = policy.online_share(OnlineObservation("bert", 0.4, 400.0, low))
    need = int(policy.needed(np.array([mps.model_index("bert")]), np.array([0.4]),
                             np.array([400.0]))[0])
    assert high == min(need, 100) > low


def test_hysteresis_keeps_the_share_for_small_moves() -> None:
    policy = DynamicShare(step=5)
    idx = np.array([mps.model_index("vgg16")])
    need = int(policy.needed(idx, np.array([0.1]), np.array([120.0]))[0])
    kept = policy.online_share(OnlineObservation("vgg16", 0.1, 120.0, need + 4))
    assert kept == need + 4


def test_array_path_equals_scalar_path() -> None:
    policy = DynamicShare()
    rng = np.random.default_rng(1)
    models = rng.integers(0, len(mps.ONLINE_MODELS), 50)
    loads = rng.uniform(0, 0.6, 50)
    slo = mps.ONLINE_L100[models] * 4
    current = rng.integers(1, 101, 50)
    arr = policy.shares(models, loads, slo, current)
    for i in range(50):
        obs = OnlineObservation(mps.ONLINE_MODELS[models[i]], float(loads[i]), float(slo[i]),
                                int(current[i]))
        assert policy.online_share(obs) == arr[i]
    assert np.all((arr >= 1) & (arr <= 100))


def test_bad_settings_and_unknown_model_are_one_line_errors() -> None:
    with pytest.raises(InputError):
        DynamicShare(margin=1.5)
    with pytest.raises(InputError):
        FixedShare(0)
    with pytest.raises(UnknownNameError):
        DynamicShare().online_share(OnlineObservation("nope", 0.1, 10.0))
    assert FixedShare(60).online_share(OnlineObservation("bert", 0.1, 10.0)) == 60


def test_both_policies_satisfy_the_share_policy_protocol() -> None:
    policies: list[SharePolicy] = [DynamicShare(), FixedShare(40)]
    obs = OnlineObservation("resnet50", 0.1, 100.0, 50)
    assert all(1 <= p.online_share(obs) <= 100 for p in policies)
