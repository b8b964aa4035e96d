"""``auto`` holds the exact solver's own answer, so it is never worse than ``milp`` given the
same limit (exactly so under a node limit, which does not depend on the CPU a run gets), and
``--time-limit`` bounds the whole ``plan mig`` process, HiGHS's overruns included (they run in
a child process that is killed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from cotenant.cli.main import main
from cotenant.model.gpu import CATALOG
from cotenant.model.serving import Service, ServingSpec
from cotenant.perf.mig_profiles import default_table
from cotenant.policies.partition import PartitionProblem, verify
from cotenant.policies.partition.auto import solve_auto
from cotenant.policies.partition.child import Pending
from cotenant.policies.partition.milp import solve_milp
from cotenant.policies.partition.planner import build_problem

GPU = "A100-40GB"
# (services, demand range req/s): the first two bind the node limit, so the exact solver
# stops before its optimum and what auto adds can matter
FAMILIES = {"large": (1000.0, 100000.0), "mixed": (30.0, 3000.0), "small": (5.0, 500.0)}


def services(n: int, family: str, seed: int) -> list[dict[str, object]]:
    """A generated spec: models of the default table, SLOs 2-6 times the best latency."""
    table = default_table()
    rng = np.random.default_rng(seed)
    lo, hi = FAMILIES[family]
    models = table.models()
    out = []
    for i in range(n):
        model = models[int(rng.integers(len(models)))]
        slo = round(table.best_latency(model, GPU) * float(rng.uniform(2.0, 6.0)), 1)
        rate = round(float(np.exp(rng.uniform(np.log(lo), np.log(hi)))), 1)
        out.append({"name": f"svc-{i}", "model": model, "rate": rate, "sloMs": slo})
    return out


def problem(n: int, family: str, seed: int) -> PartitionProblem:
    spec = ServingSpec(CATALOG.get(GPU), tuple(
        Service(str(s["name"]), str(s["model"]), float(s["rate"]),  # type: ignore[arg-type]
                float(s["sloMs"]))  # type: ignore[arg-type]
        for s in services(n, family, seed)))
    return build_problem(spec, default_table())


@pytest.mark.parametrize(("n", "family", "seed"), [
    (60, "large", 2701), (100, "large", 2703), (60, "mixed", 2704), (120, "mixed", 2705),
])
def test_auto_is_never_worse_than_milp_given_the_same_node_limit(
    n: int, family: str, seed: int
) -> None:
    nodes = 5
    pb = problem(n, family, seed)
    exact = solve_milp(pb, 60.0, node_limit=nodes)
    again = solve_milp(pb, 60.0, node_limit=nodes)
    auto = solve_auto(pb, 60.0, node_limit=nodes)
    for plan in (exact, again, auto):
        verify(pb, plan)
        assert plan.lower_bound <= plan.gpu_count
    assert again.gpu_count == exact.gpu_count  # a node limit repeats exactly
    assert auto.gpu_count <= exact.gpu_count
    assert auto.lower_bound >= exact.lower_bound or auto.optimal


def test_a_child_that_overruns_is_killed_on_time() -> None:
    start = time.perf_counter()
    assert Pending(lambda: time.sleep(30), 0.2).result() is None
    assert time.perf_counter() - start < 2.0
    assert Pending(lambda: 6 * 7, 5.0).result() == 42
    with pytest.raises(ZeroDivisionError):
        Pending(lambda: 1 // 0, 5.0).result()


def test_a_large_answer_is_read_while_waiting_for_another_child() -> None:
    """More than a pipe holds: the child can finish writing only while it is read."""
    slow = Pending(lambda: time.sleep(1.0) or "slow", 5.0)
    large = Pending(lambda: b"x" * 500_000, 0.5)
    slow.wait(large)  # past large's deadline: its answer was read meanwhile
    assert slow.result() == "slow"
    assert large.result() == b"x" * 500_000


def _plan(spec: Path, solver: str, limit: float) -> tuple[float, dict[str, object]]:
    argv = [sys.executable, "-c", "from cotenant.cli.main import main; main()", "plan", "mig",
            str(spec), "--json", "--solver", solver, "--time-limit", str(limit)]
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})
    wall = time.perf_counter() - start
    assert done.returncode == 0, done.stderr[-500:]
    return wall, json.loads(done.stdout)


TOLERANCE_S = 1.0
"""What ``plan mig --time-limit T`` may take beyond start-up (the same command with the
greedy solver and a 0.01 s limit: imports, reading, building, checking, printing) plus T."""


def test_the_time_limit_bounds_the_whole_process(tmp_path: Path) -> None:
    """5,000 services of 30-3,000 req/s: the code that left an overrunning HiGHS solve in a
    thread took start-up + 3.2 s with ``--solver milp --time-limit 1`` (it waited for the
    solve at exit); a killed child takes start-up + about 1 s."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"apiVersion": "cotenant/v1alpha1", "kind": "ServingPlan",
                                "gpu": GPU, "services": services(5000, "mixed", 2706)}),
                    encoding="utf-8")
    limit = 1.0
    for solver in ("greedy", "milp", "auto"):
        start_up, _ = _plan(spec, "greedy", 0.01)
        wall, data = _plan(spec, solver, limit)
        assert float(data["seconds"]) <= limit + 0.1  # type: ignore[arg-type]
        assert wall <= start_up + limit + TOLERANCE_S, (solver, wall, start_up)


def test_node_limit_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"apiVersion": "cotenant/v1alpha1", "kind": "ServingPlan",
                                "gpu": GPU, "services": services(60, "large", 2701)}),
                    encoding="utf-8")
    gpus = {}
    for solver in ("milp", "auto"):
        with pytest.raises(SystemExit) as done:
            main(["plan", "mig", str(spec), "--json", "--solver", solver, "--node-limit", "5",
                  "--time-limit", "60"])
        assert done.value.code in (0, None)
        gpus[solver] = json.loads(capsys.readouterr().out)["gpus"]
    assert gpus["auto"] <= gpus["milp"]
    with pytest.raises(SystemExit) as done:
        main(["plan", "mig", str(spec), "--solver", "greedy", "--node-limit", "5"])
    assert done.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "--node-limit: the greedy solver takes no node limit" in err[0]
