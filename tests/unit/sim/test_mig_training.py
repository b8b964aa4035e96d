"""The MIG training simulation: hand-checked runs of the three allocations, invariants on a
synthetic trace, determinism, and the CLI (openb where ../shared has it)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cotenant.cli.main import main
from cotenant.errors import InputError
from cotenant.model.gpu import CATALOG
from cotenant.model.mig import MigLayout
from cotenant.model.training import TrainingJob
from cotenant.sim.mig_training import MigTrainingConfig, simulate
from cotenant.traces.mig_jobs import arrange, synthetic_jobs


def layout(text: str) -> MigLayout:
    geometry = CATALOG.get("A100-40GB").mig
    assert geometry is not None
    return geometry.parse(text)


def test_one_to_many_runs_a_job_on_instances_one_to_one_leaves_idle() -> None:
    # One GPU of 4g + 2g + 1g; three jobs of 3 slices, 100 s each. One to one: only the 4g
    # holds one, so they run one after another (300 s). Flex-MIG runs the second on the
    # 2g + 1g, 5% slower: 105 s, and the third on the 4g when the first ends (200 s).
    jobs = [TrainingJob(f"j{i}", 3, 100.0) for i in range(3)]
    config = MigTrainingConfig(gpus=1, overhead=0.05)
    lay = [layout("4g.20gb,2g.10gb,1g.5gb")]
    static = simulate(jobs, "static", config, lay)
    flex = simulate(jobs, "flex-mig", config, lay)
    assert static.makespan_s == pytest.approx(300.0)
    assert flex.makespan_s == pytest.approx(200.0)
    assert flex.multi_instance_jobs == 1
    assert flex.mean_jct_s == pytest.approx((100 + 105 + 200) / 3)
    assert static.mean_queue_s == pytest.approx(100.0)


def test_dynamic_drains_and_remakes_a_gpu_for_a_job_that_fits_nowhere() -> None:
    jobs = [TrainingJob("small", 3, 100.0), TrainingJob("big", 7, 50.0, arrival_s=1.0)]
    config = MigTrainingConfig(gpus=1, reconfig_s=60.0)
    lay = [layout("3g.20gb,3g.20gb")]
    with pytest.raises(InputError, match="never fit"):
        simulate(jobs, "static", config, lay)
    run = simulate(jobs, "dynamic", config, lay)
    # small runs at once; the GPU drains behind it (100 s), is remade (60 s), then big runs
    assert run.reconfigurations == 1
    assert run.makespan_s == pytest.approx(100 + 60 + 50)
    assert run.mean_queue_s == pytest.approx((0 + 159) / 2)


def test_invariants_and_determinism_on_a_synthetic_trace() -> None:
    rng = np.random.default_rng(3)
    jobs = arrange(synthetic_jobs(300, rng), "poisson", rng, load=0.9, cluster_slices=28)
    config = MigTrainingConfig(gpus=4, gpus_per_node=2)
    for allocation in ("static", "dynamic", "flex-mig"):
        run = simulate(jobs, allocation, config)
        again = simulate(jobs, allocation, config)
        assert run == again
        assert all(0.0 <= frag <= 1.0 and 0.0 <= used <= 1.0 for _, frag, used, _ in run.series)
        assert run.mean_jct_s >= run.mean_queue_s + min(j.work_s for j in jobs) - 1e-6
        assert run.makespan_s >= max(j.work_s for j in jobs)
        if allocation != "flex-mig":
            assert run.multi_instance_jobs == 0


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    with pytest.raises(SystemExit) as done:
        main(["simulate", "mig-training", *args, "--json"])
    assert done.value.code in (0, None)
    data: dict[str, object] = json.loads(capsys.readouterr().out)
    return data


def test_cli_runs_the_three_allocations_on_the_same_jobs(
        capsys: pytest.CaptureFixture[str]) -> None:
    data = _run(capsys, "--synthetic", "80", "--gpus", "2")
    rows = data["allocations"]
    assert isinstance(rows, list)
    assert [r["allocation"] for r in rows] == ["static", "dynamic", "flex-mig"]
    assert all(r["jobs"] == 80 for r in rows)


@pytest.mark.shared_data
def test_cli_reads_openb_best_effort_pods(
        capsys: pytest.CaptureFixture[str], openb_dir: Path) -> None:
    data = _run(capsys, "--pods", str(openb_dir / "openb_pod_list_default.csv"), "--jobs",
                "200", "--gpus", "4")
    settings = data["settings"]
    assert isinstance(settings, dict)
    assert "2947 BE pods as jobs (left out: 450 no GPU, 1 no lifetime)" in settings["jobs"]
