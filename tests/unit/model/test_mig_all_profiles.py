"""Every profile laid out: placements against NVIDIA's documented ones (``nvidia-smi mig
-lgipp``, go-nvml's A30 mock), layouts over all profiles (``1g.10gb``, ``+me``) valid and
maximal, mig-parted's ``all-*`` configs among them, and the driver notes."""

from __future__ import annotations

import pytest

from cotenant.errors import InvalidLayoutError
from cotenant.model.gpu import CATALOG
from cotenant.model.mig import MigGeometry, MigLayout, MigPlacement

# ../shared/reference/mig.md section 2: `nvidia-smi mig -lgipp` on A100 and H100 (NVML GI
# profile id -> allowed starts, size in memory slices), the same on every A100-class model;
# section 3: the A30 (go-nvml a30.go, MIG user guide).
LGIPP_A100 = {19: ((0, 1, 2, 3, 4, 5, 6), 1), 20: ((0, 1, 2, 3, 4, 5, 6), 1),
              15: ((0, 2, 4, 6), 2), 14: ((0, 2, 4), 2), 9: ((0, 4), 4), 5: ((0,), 4),
              0: ((0,), 8)}
LGIPP_A30 = {14: ((0, 1, 2, 3), 1), 21: ((0, 1, 2, 3), 1), 5: ((0, 2), 2), 6: ((0, 2), 2),
             0: ((0,), 4)}
# instances per GPU (MIG user guide tables; mig-parted's all-* configs)
COUNT_A100 = {19: 7, 20: 1, 15: 4, 14: 3, 9: 2, 5: 1, 0: 1}
COUNT_A30 = {14: 4, 21: 1, 5: 2, 6: 1, 0: 1}
A100_CLASS = ["A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB"]


def geometry(gpu: str) -> MigGeometry:
    found = CATALOG.get(gpu).mig
    assert found is not None
    return found


@pytest.mark.parametrize("gpu", [*A100_CLASS, "A30"])
def test_every_profile_sits_where_nvidia_lists_it(gpu: str) -> None:
    table, counts = (LGIPP_A30, COUNT_A30) if gpu == "A30" else (LGIPP_A100, COUNT_A100)
    profiles = geometry(gpu).profiles
    assert {p.nvml_id for p in profiles} == set(table)
    for p in profiles:
        assert (p.starts, p.memory_slices) == table[p.nvml_id], p.name
        assert p.max_count == counts[p.nvml_id], p.name


@pytest.mark.parametrize("gpu", [*A100_CLASS, "A30"])
def test_every_profile_alone_fills_the_gpu_to_nvidias_count(gpu: str) -> None:
    # mig-parted's all-<profile> configs: as many instances as the table says, no more
    geo = geometry(gpu)
    for p in geo.profiles:
        full = geo.parse(",".join([p.name] * p.max_count))
        assert len(full.placements) == p.max_count
        if p.max_count < len(p.starts) or p.media_extensions:
            continue
        with pytest.raises(InvalidLayoutError):
            geo.parse(",".join([p.name] * (p.max_count + 1)))


def test_a100_40gb_1g10gb_takes_two_memory_slices_at_even_starts() -> None:
    geo = geometry("A100-40GB")
    four = geo.parse("1g.10gb,1g.10gb,1g.10gb,1g.10gb")
    assert [p.start for p in four.placements] == [0, 2, 4, 6]
    with pytest.raises(InvalidLayoutError, match="may start only at"):
        geo.parse("1g.10gb@1")
    with pytest.raises(InvalidLayoutError, match="overlap"):
        geo.parse("1g.10gb@0,1g.5gb@1")
    # beside a 3g at 0 and a 2g at 4, a 1g.10gb fills slices 6-7 (6 compute slices in all)
    assert geo.parse("3g.20gb@0,2g.10gb@4,1g.10gb@6").compute_slices() == (3, 2, 1)


@pytest.mark.parametrize("gpu", [*A100_CLASS, "A30"])
def test_layouts_over_all_profiles_are_valid_and_maximal(gpu: str) -> None:
    geo = geometry(gpu)
    names = tuple(p.name for p in geo.profiles)
    layouts = geo.maximal_layouts(names)
    assert len(set(layouts)) == len(layouts)
    every = [MigPlacement(p, s) for p in geo.profiles for s in p.starts]
    for layout in layouts:
        geo.check(layout.placements)
        assert not any(geo.can_add(layout, c) for c in every), layout
    # the one-profile-per-size layouts are among them
    default = set(geo.enumerate_maximal())
    assert default <= set(layouts)


def test_mig_parted_all_configs_fit_in_a_planned_layout() -> None:
    geo = geometry("A100-40GB")
    layouts = geo.maximal_layouts(tuple(p.name for p in geo.profiles))
    counts = [layout.profile_counts() for layout in layouts]
    configs = [{"1g.10gb": 4}, {"1g.5gb": 7}, {"2g.10gb": 3}, {"3g.20gb": 2},
               {"4g.20gb": 1}, {"7g.40gb": 1}, {"1g.5gb+me": 1},
               {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},  # all-balanced
               {"1g.10gb": 2, "1g.5gb": 2, "2g.10gb": 1}, {"1g.5gb+me": 1, "1g.5gb": 6}]
    for config in configs:
        assert any(all(c[k] >= n for k, n in config.items()) for c in counts), config


def test_one_media_extension_per_gpu_in_every_layout() -> None:
    geo = geometry("H100-80GB")
    for layout in geo.maximal_layouts(tuple(p.name for p in geo.profiles)):
        assert sum(p.profile.media_extensions for p in layout.placements) <= 1


def test_driver_notes_name_the_layouts_that_need_one() -> None:
    a100 = geometry("A100-40GB")
    assert any("4g + 3g" in n for n in a100.notes(a100.parse("4g.20gb,3g.20gb")))
    assert a100.notes(a100.parse("3g.20gb,3g.20gb")) == ()
    assert a100.notes(MigLayout()) == ()
    a30 = geometry("A30")
    assert a30.notes(a30.parse("2g.12gb+me,1g.6gb,1g.6gb")) == (
        "2g.12gb+me needs an R525 or later driver (NVIDIA's MIG user guide)",)
    assert any("R470" in n for n in a30.notes(a30.parse("1g.6gb+me")))
