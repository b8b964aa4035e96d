"""The shipped tables' reader, the SLO multiple's check and the job profiles' occupancies, by
value: line numbers as in the files, each refusal word for word, medians by hand."""

from __future__ import annotations

from importlib import resources

import numpy as np
import pytest

from cotenant.errors import InputError
from cotenant.perf import mps, published
from cotenant.perf.jobs import job_profiles, online_occupancy
from cotenant.perf.slo import check_multiple

FILES = ("tally_jobs.csv", "tally_pairs.csv", "gavel_jobs.csv", "gavel_pairs.csv",
         "orion_occupancy.csv")


@pytest.mark.parametrize("name", FILES)
def test_each_row_carries_the_line_it_is_on_in_the_file(name: str) -> None:
    lines = resources.files("cotenant.perf").joinpath(f"data/{name}").read_text(
        "utf-8").splitlines()
    rows = published.table(name)
    first = next(n for n, line in enumerate(lines, 1) if not line.startswith("#")) + 1
    assert [n for n, _ in rows] == list(range(first, len(lines) + 1))
    for n, row in rows:
        assert lines[n - 1].split(",")[0] == next(iter(row.values()))


def test_a_cell_is_a_finite_number_at_least_0() -> None:
    assert published.number("f.csv", 3, {"c": "0"}, "c") == 0.0
    assert published.number("f.csv", 3, {"c": "50"}, "c", 100.0) == 0.5
    with pytest.raises(InputError) as info:
        published.number("f.csv", 3, {"c": "-3"}, "c")
    assert (info.value.where, info.value.rule) == ("f.csv:3:c", "-3.0 must be a finite number >= 0")
    with pytest.raises(InputError) as info:
        published.number("f.csv", 3, {"c": "n/a"}, "c")
    assert (info.value.where, info.value.rule) == ("f.csv:3:c", "'n/a' is not a number")


def test_tallys_gpu_memory_comes_from_the_catalogue(monkeypatch: pytest.MonkeyPatch) -> None:
    assert published.tally_gpu_memory_mib() == 40960.0
    monkeypatch.setattr(published, "TALLY_GPU", "G2")  # a catalogue GPU without its memory
    with pytest.raises(InputError) as info:
        published.tally_gpu_memory_mib()
    assert (info.value.where, info.value.rule) == ("G2", "the catalog does not know this "
                                                         "GPU's memory")


def test_the_slo_multiple_must_exceed_one_batch_time() -> None:
    assert check_multiple(1.5) == 1.5
    for bad, text in ((1.0, "1"), (float("inf"), "inf"), (float("nan"), "nan")):
        with pytest.raises(InputError) as info:
            check_multiple(bad)
        assert (info.value.where, info.value.rule) == ("slo multiple",
                                                       f"{text} must be a finite number > 1")
        assert info.value.hint == "the SLO is this many solo batch times, e.g. 5"
    with pytest.raises(InputError, match=r"^--slo-multiple: 0\.5 must"):
        check_multiple(0.5, "--slo-multiple")


def test_jobs_without_an_orion_profile_take_their_kinds_median() -> None:
    # orion_occupancy.csv training rows 0.906, 0.917, 0.738, 0.929, 0.870: median 0.906;
    # inference rows 0.547, 0.515, 0.515, 0.975, 0.825: median 0.547
    jobs = job_profiles()
    assert jobs.occupancy[jobs.names.index("pytorch_pointnet_train_128")] == 0.906
    assert jobs.occupancy[jobs.names.index("pytorch_bert_train_32")] == 0.929
    models = np.array([mps.model_index(m) for m in ("vgg16", "resnet152", "deeplabv3")])
    assert online_occupancy(models).tolist() == [0.547, 0.515, 0.547]
