"""The pair predictor's edges by value: predictions clipped to [FLOOR, 1] (held out too),
integer and float32 inputs, the penalty chosen per scheme, the shipped pair sets' features
recomputed from the CSV files, and each refusal word for word."""

from __future__ import annotations

import csv
import itertools
from importlib import resources

import numpy as np
import pytest

from cotenant.errors import InputError
from cotenant.perf.predictor import (
    FLOOR,
    RIDGE,
    RIDGE_GRID,
    PairPredictor,
    PairRow,
    SoloProfile,
    _inner_ridge,
    evaluate,
    fit_predictor,
    gavel_pairs,
    tally_pairs,
)


def five_jobs(seed: int, speeds: tuple[float, ...] | None = None) -> list[PairRow]:
    """Every pair of five random jobs: each job in four pairs, speeds drawn from ``speeds``
    (uniform in [0, 1] when None)."""
    rng = np.random.default_rng(seed)
    jobs = {f"j{i}": SoloProfile(*rng.uniform(0.0, 1.0, 3).tolist()) for i in range(5)}

    def draw() -> float:
        return float(rng.choice(speeds) if speeds else rng.uniform(0.0, 1.0))

    return [PairRow(a, b, jobs[a], jobs[b], draw(), draw())
            for a, b in itertools.combinations(sorted(jobs), 2)]


def test_predictions_are_clipped_to_the_floor_and_to_one() -> None:
    low = PairPredictor(coef=(-1.0, 0.0, 0.0, 0.0, 0.0, 0.0), n_rows=1)
    assert low.predict_pair(SoloProfile(0.5, 0.5, 0.1), SoloProfile(0.2, 0.2, 0.3)) == (FLOOR,
                                                                                      FLOOR)
    high = PairPredictor(coef=(2.0, 0.0, 0.0, 0.0, 0.0, 0.0), n_rows=1)
    assert high.predict_pair(SoloProfile(0.5, 0.5, 0.1), SoloProfile(0.2, 0.2, 0.3)) == (1.0,
                                                                                       1.0)


def test_integer_and_float32_inputs() -> None:
    model = PairPredictor(coef=(0.5, 0.25, -0.125, 0.0625, 0.03125, -0.015625), n_rows=1)
    # 0.5 + 0.25 - 0.125 x 0 + 0.0625 x 1 x 0 + 0.03125 x 1 - 0.015625 x 0, and for b:
    # 0.5 + 0 - 0.125 + 0 + 0 - 0.015625
    a, b = model.predict(1, 1, 1, 0, 0, 0)
    assert (float(a), float(b)) == (0.78125, 0.359375)
    f32 = [np.full(3, v, dtype=np.float32) for v in (0.5, 0.5, 0.25, 0.75, 0.75, 0.5)]
    sa, sb = model.predict(*f32)
    assert sa.dtype == np.dtype(np.float32)
    assert sb.dtype == np.dtype(np.float32)
    want_a, want_b = model.predict_pair(SoloProfile(0.5, 0.5, 0.25), SoloProfile(0.75, 0.75, 0.5))
    np.testing.assert_allclose(sa, want_a, rtol=1e-6)
    np.testing.assert_allclose(sb, want_b, rtol=1e-6)


def test_the_fit_keeps_its_penalty_and_names_its_refusals() -> None:
    assert fit_predictor(five_jobs(1), ridge=0.5).ridge == 0.5
    assert fit_predictor(five_jobs(1)).ridge == RIDGE
    with pytest.raises(InputError) as info:
        fit_predictor([])
    assert (info.value.where, info.value.rule) == ("predictor", "no pairs to fit on")
    with pytest.raises(InputError) as info:
        fit_predictor(five_jobs(1), ridge=-0.5)
    assert (info.value.where, info.value.rule) == ("predictor", "ridge -0.5 must be >= 0")


def test_held_out_predictions_are_clipped_like_the_predictors() -> None:
    rows = five_jobs(15, speeds=(0.02, 1.0))
    errors, raw = [], []
    for i, row in enumerate(rows):
        model = fit_predictor(rows[:i] + rows[i + 1:])
        sa, sb = model.predict_pair(row.a, row.b)
        errors += [sa - row.speed_a, sb - row.speed_b]
        w = np.asarray(model.coef)
        for me, other in ((row.a, row.b), (row.b, row.a)):
            raw.append(float(w @ [1.0, me.gpu_util, other.gpu_util,
                                  me.sm_activity * other.sm_activity, me.memory_frac,
                                  other.memory_frac]))
    assert min(raw) < FLOOR  # both clips are exercised
    assert max(raw) > 1.0
    report = evaluate(rows, scheme="pair")
    assert report.mae == pytest.approx(float(np.abs(errors).mean()), rel=1e-12)


def test_the_default_scheme_is_leave_one_job_out() -> None:
    rows = five_jobs(3)
    default, job = evaluate(rows), evaluate(rows, scheme="job")
    assert (default.scheme, default.dataset, default.mae) == ("job", "", job.mae)
    assert default.n_predictions == 2 * 2 * len(rows)


def test_the_nested_penalty_is_chosen_by_the_folds_own_scheme() -> None:
    rows = five_jobs(14)  # the two schemes prefer different penalties here
    def error(ridge: float, scheme: str) -> float:
        return evaluate(rows, scheme=scheme, ridge=ridge).mae

    best = {s: min(RIDGE_GRID, key=lambda r: error(r, s)) for s in ("job", "pair")}
    assert best["job"] != best["pair"]
    assert {s: _inner_ridge(rows, s) for s in ("job", "pair")} == best


def test_evaluation_refusals_name_the_place_and_the_rule() -> None:
    with pytest.raises(InputError) as info:
        evaluate(five_jobs(1), scheme="fold")
    assert (info.value.where, info.value.rule) == ("scheme", "'fold' is not one of job, pair")
    for dataset, where in (("", "predictor"), ("toy", "toy")):
        with pytest.raises(InputError) as info:
            evaluate([], scheme="pair", dataset=dataset)
        assert (info.value.where, info.value.rule) == (
            where, "need pairs of at least two jobs to evaluate")


def test_gavel_features_are_the_v100_speedup_over_the_largest() -> None:
    pairs = gavel_pairs()
    assert [(r.job_a, r.job_b) for r in pairs] == [(r.job_a, r.job_b)
                                                  for r in gavel_pairs("V100")]
    assert [r.speed_a for r in pairs] == [r.speed_a for r in gavel_pairs("V100")]
    assert all(r.a.memory_frac == 0.0 and r.b.memory_frac == 0.0 for r in pairs)
    assert all(r.a.gpu_util == r.a.sm_activity for r in pairs)
    text = resources.files("cotenant.perf").joinpath("data/gavel_jobs.csv").read_text("utf-8")
    jobs = list(csv.DictReader(line for line in text.splitlines() if not line.startswith("#")))
    speedup = {j["job"]: float(j["v100_steps_per_s"]) / float(j["p100_steps_per_s"])
               for j in jobs}
    util = {r.job_a: r.a.gpu_util for r in pairs}
    assert util == pytest.approx({job: s / max(speedup.values()) for job, s in speedup.items()})
    with pytest.raises(InputError) as info:
        gavel_pairs("K80")
    assert (info.value.where, info.value.rule) == ("gavel_pairs.csv",
                                                   "no pairs for GPU 'K80'; have V100, P100")


def test_tally_pairs_refuse_an_unknown_mechanism() -> None:
    with pytest.raises(InputError) as info:
        tally_pairs("mig")
    assert info.value.where == "predictor mechanism"
    assert info.value.rule == "'mig' is not one of tally, mps, mps_priority, time_slicing, tgs"
