"""The planner over every profile, at scale, with honest bounds: a ``1g.10gb`` table row is
planned (one GPU, not two), the sparse program grows linearly with the services, a spec
beyond the GPU bound is one line, the slice bound proves greedy plans optimal on tight SLOs,
and ``auto`` is never worse than the exact solver."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cotenant.cli.main import main
from cotenant.errors import InputError
from cotenant.model.gpu import CATALOG
from cotenant.model.serving import Service, ServingSpec
from cotenant.perf.mig_profiles import ProfilePoint, ProfileTable, default_table
from cotenant.policies.partition import PARTITION, PartitionProblem, verify
from cotenant.policies.partition.formulation import formulate, min_slices, slice_bound
from cotenant.policies.partition.milp import lp_bound
from cotenant.policies.partition.planner import build_problem, plan_spec
from tests.strategies import demands

A100 = CATALOG.get("A100-40GB")
# req/s at batch 8 per profile: without 1g.10gb no A100-40GB layout serves 390 req/s
# (4g + 3g: 340), four 1g.10gb instances serve 400
RATES = {"1g.5gb": 40.0, "1g.10gb": 100.0, "2g.10gb": 80.0, "3g.20gb": 150.0,
         "4g.20gb": 190.0, "7g.40gb": 330.0}


def table(rates: dict[str, float] = RATES) -> ProfileTable:
    return ProfileTable([ProfilePoint("m", "A100-40GB", p, 8, r, 20.0, "test")
                         for p, r in rates.items()])


def test_a_1g10gb_row_is_planned_one_gpu_not_two(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    csv = tmp_path / "profiles.csv"
    csv.write_text("model,gpu,profile,batch,throughput_rps,latency_ms\n" + "".join(
        f"m,A100-40GB,{p},8,{r},20\n" for p, r in RATES.items()), encoding="utf-8")
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({
        "apiVersion": "cotenant/v1alpha1", "kind": "ServingPlan", "gpu": "A100-40GB",
        "services": [{"name": "a", "model": "m", "rate": 390, "sloMs": 50}]}), "utf-8")
    with pytest.raises(SystemExit) as done:
        main(["plan", "mig", str(spec), "--profiles", str(csv), "--json"])
    assert done.value.code in (0, None)
    data = json.loads(capsys.readouterr().out)
    assert data["gpus"] == 1
    assert data["optimal"]
    assert data["layouts"] == {"1g.10gb@0,1g.10gb@2,1g.10gb@4,1g.10gb@6": 1}
    # without the 1g.10gb row the same service takes two GPUs
    without = {p: r for p, r in RATES.items() if p != "1g.10gb"}
    spec_obj = ServingSpec(A100, (Service("a", "m", 390.0, 50.0),))
    _, plan = plan_spec(spec_obj, table(without), "milp", 5.0)
    assert plan.gpu_count == 2


def test_media_extension_rows_are_planned_where_the_table_has_them() -> None:
    rates = {**RATES, "1g.5gb+me": 45.0}
    problem = build_problem(ServingSpec(A100, (Service("a", "m", 45.0, 50.0),)), table(rates))
    assert "1g.5gb+me" in problem.profiles
    assert "1g.10gb" in problem.profiles
    assert any("1g.5gb+me" in lay.profile_counts() for lay in problem.layouts)
    plan = PARTITION.get("auto")(problem, 2.0)
    verify(problem, plan)


def test_default_table_plans_over_the_five_compute_profiles() -> None:
    spec = ServingSpec(A100, (Service("a", "resnet50", 500.0, 100.0),))
    problem = build_problem(spec, default_table())
    assert problem.profiles == ("1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")
    assert len(problem.layouts) == 19


def _services(n: int, seed: int) -> PartitionProblem:
    rng = np.random.default_rng(seed)
    base = rng.uniform(20, 200, n)
    rate = base[:, None] * np.array([1.0, 1.9, 2.7, 3.4, 6.0])[None, :]
    geometry = A100.mig
    assert geometry is not None
    return PartitionProblem(geometry, tuple(f"s{i}" for i in range(n)),
                            rng.uniform(5, 500, n), ("1g.5gb", "2g.10gb", "3g.20gb",
                                                     "4g.20gb", "7g.40gb"), rate)


def test_the_program_grows_linearly_with_the_services() -> None:
    small, large = formulate(_services(1_000, 1)), formulate(_services(10_000, 1))
    # three rows and 20 nonzeros per service (each of its 5 variables in its profile's
    # instance row, its demand row and its two cut rows): a dense matrix grows 100-fold
    assert large.matrix.nnz <= 10.1 * small.matrix.nnz
    assert large.matrix.shape[0] <= 10.1 * small.matrix.shape[0]
    assert large.matrix.nnz <= 20 * 10_000 + 200


def test_a_spec_beyond_the_gpu_bound_is_one_line() -> None:
    # 21,000 services that only a 7g meets: at least 21,000 GPUs
    services = tuple(Service(f"s{i}", "m", 1.0, 50.0) for i in range(21_000))
    with pytest.raises(InputError, match="need at least 21,000 GPUs; the planner plans up to"):
        build_problem(ServingSpec(A100, services), table({"7g.40gb": 330.0}))


def test_tight_slos_the_slice_bound_proves_the_greedy_plan() -> None:
    # 30 services of 10 req/s that only a 7g instance meets: each takes a GPU. The LP
    # relaxation without cuts gave 30 x 10/330 = 1 GPU, a 97% gap; the cuts close it.
    problem = _services(30, 2)
    problem = PartitionProblem(problem.geometry, problem.services, np.full(30, 10.0),
                               problem.profiles, np.where(np.arange(5) == 4, 330.0, 0.0)[None, :]
                               .repeat(30, axis=0))
    assert slice_bound(problem) == 30
    plan = PARTITION.get("greedy")(problem, 1.0)
    assert plan.gpu_count == 30
    assert plan.optimal
    assert plan.gap == 0.0


def test_min_slices_is_the_integer_knapsack() -> None:
    rate = np.array([[100.0, 190.0, 260.0, 330.0, 650.0]] * 4)
    slices = np.array([1, 2, 3, 4, 7])
    demand = np.array([0.0, 100.0, 101.0, 5000.0])
    # 100 -> one 1g; 101 -> two slices (1g + 1g or a 2g); 5000 -> fifty 1g (100 per slice)
    assert list(min_slices(rate, slices, demand)) == [0, 1, 2, 50]


@st.composite
def problems(draw: st.DrawFn) -> PartitionProblem:
    n = draw(st.integers(1, 10))
    geometry = A100.mig
    assert geometry is not None
    rate = []
    for _ in range(n):
        base = draw(st.floats(10, 400))
        cut = draw(st.integers(0, 4))  # a tight SLO rules out the smaller profiles
        rate.append([0.0 if j < cut else base * s
                     for j, s in enumerate([1.0, 1.9, 2.7, 3.4, 6.2])])
    demand = [draw(demands(r)) for r in rate]
    return PartitionProblem(geometry, tuple(f"s{i}" for i in range(n)), np.array(demand),
                            ("1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
                            np.array(rate))


@settings(max_examples=30, deadline=None)
@given(problems())
def test_bounds_hold_and_auto_is_never_worse_than_the_exact_solver(pb: PartitionProblem) -> None:
    exact = PARTITION.get("milp")(pb, 5.0)
    auto = PARTITION.get("auto")(pb, 5.0)
    verify(pb, exact)
    verify(pb, auto)
    assert auto.gpu_count <= exact.gpu_count
    for plan in (exact, auto):
        assert slice_bound(pb) <= plan.lower_bound <= plan.gpu_count
    if exact.optimal:
        assert lp_bound(pb) <= exact.gpu_count
        assert auto.gpu_count == exact.gpu_count
