"""The ColocationScenario document: strict keys with their paths, overrides, the workload."""

from __future__ import annotations

from pathlib import Path

import pytest

from cotenant.errors import InputError, UnknownNameError
from cotenant.sim.colocation.inputs import workload_of
from cotenant.sim.colocation.scenario import ColocationScenario

HEAD = "apiVersion: cotenant/v1alpha1\nkind: ColocationScenario\n"


def _load(tmp_path: Path, body: str) -> ColocationScenario:
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + body)
    return ColocationScenario.load(path)


def test_a_scenario_file_sets_every_section(tmp_path: Path) -> None:
    s = _load(tmp_path, """
seed: 9
workload: {gpus: 20, hours: 0.5, sloMultiple: 10, burstAlpha: .inf, substeps: 3}
world: {calibration: h200, statistic: max, reactionS: 0.3, shareChangeS: 0,
        loadSignal: whole-gpu}
policies: [dedicated, {name: mps-fixed, share: 75, guard: adaptive, memory_limit: true}]
""")
    assert s.seed == 9
    assert s.workload.gpus == 20
    assert s.workload.slo_multiple == 10.0
    cfg = s.config()
    assert (cfg.calibration, cfg.statistic, cfg.reaction_s, cfg.share_change_s,
            cfg.load_signal) == ("h200", "max", 0.3, 0.0, "whole-gpu")
    assert ColocationScenario().config().load_signal == "auto"
    pols = s.build_policies()
    assert pols[1].guard is not None
    assert pols[1].guard.adaptive
    assert pols[1].memory_limit
    notes: list[str] = []
    w = workload_of(s, notes)
    assert w.gpus == 20
    assert w.substeps == 3
    assert w.intervals == 30
    assert w.fine is not None
    assert (w.fine == w.fine[:, :, :1]).all()


def test_flags_override_single_fields(tmp_path: Path) -> None:
    s = _load(tmp_path, "workload: {gpus: 20, hours: 2}\n").override(hours=1.0, seed=4,
                                                                     gpus=None)
    assert s.workload.hours == 1.0
    assert s.workload.gpus == 20
    assert s.seed == 4


@pytest.mark.parametrize(("body", "where"), [
    ("workload: {gpus: 5, bogus: 1}\n", "workload.bogus"),
    ("bogus: 1\n", "s.yaml.bogus"),
    ("workload: {hours: -1}\n", "workload.hours"),
    ("workload: {gpus: 0}\n", "workload.gpus"),
    ("workload: {sloMultiple: 1}\n", "workload.slo_multiple"),
    ("world: {calibration: nope}\n", "world.calibration"),
    ("world: {loadSignal: exact}\n", "world.loadSignal"),
    ("world: {loadSignal: 1}\n", "world.loadSignal"),
    ("world: {reactionS: .nan}\n", "world.reaction_s"),
    ("workload: {memory: m.csv}\n", "workload.memory"),
    ("policies: []\n", "policies"),
    ("policies: [{share: 3}]\n", "policies[0]"),
    ("seed: -1\n", "seed"),
    ("frontier: 1\n", "frontier"),
])
def test_bad_input_is_one_line_naming_the_place(tmp_path: Path, body: str, where: str) -> None:
    with pytest.raises(InputError) as err:
        _load(tmp_path, body)
    assert where in str(err.value)
    assert "\n" not in str(err.value)


def test_wrong_kind_and_bad_policy_parameters(tmp_path: Path) -> None:
    path = tmp_path / "k.yaml"
    path.write_text("apiVersion: cotenant/v1alpha1\nkind: ServingPlan\n")
    with pytest.raises(InputError, match="kind"):
        ColocationScenario.load(path)
    s = _load(tmp_path, "policies: [{name: muxflow, share_pct: 3}]\n")
    with pytest.raises(InputError, match=r"policies\[0\]"):
        s.build_policies()
    with pytest.raises(UnknownNameError):
        _load(tmp_path, "policies: [nope]\n").build_policies()
