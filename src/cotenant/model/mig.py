"""MIG profiles, placements and layouts, with validity defined by each GPU model's rules.

A MIG GPU has memory slices (8 on A100/H100/H200, 4 on A30). A GPU instance of a profile sits
at an allowed *start* slice and covers ``size`` consecutive slices; two instances may not
overlap (NVML: "Creation of new GPU instance will fail if there is overlap with the already
occupied memory slices"), their compute slices may not exceed the GPU's, and some profiles
(the ``+me`` media-extension ones) allow one instance per GPU. Sources:
``../shared/reference/mig.md`` (``nvidia-smi mig -lgipp`` output, go-nvml mocks, MIG guide).

:class:`MigLayout` is a value type: a frozen set of placed instances. It is valid iff every
instance sits at an allowed start of its profile, none overlap, and per-profile counts hold.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import pairwise

from cotenant.errors import InvalidLayoutError

_PROFILE_RE = re.compile(r"^(?P<g>\d)g\.(?P<mem>\d+)gb(?P<me>\+me)?$")


@dataclass(frozen=True, order=True)
class MigProfile:
    """One GPU-instance profile of a GPU model, e.g. ``3g.40gb`` on an A100-80GB.

    ``nvml_id`` is the GI profile ID ``nvidia-smi mig -lgip`` lists. A100/H100/H200: 19 = 1
    slice, 20 = 1 slice + media extensions, 15 = 1 slice double memory, 14 = 2 slices, 9 = 3
    slices, 5 = 4 slices, 0 = 7 slices. A30 numbers by its own sizes: 14 = 1 slice, 21 = 1
    slice + media extensions, 5 = 2 slices, 6 = 2 slices + media extensions, 0 = 4 slices.
    """

    name: str
    nvml_id: int
    compute_slices: int
    memory_slices: int
    memory_mib: int
    sms: int
    starts: tuple[int, ...]
    max_count: int
    driver_note: str = ""
    """Where NVIDIA documents a minimum driver for the profile (A30's ``+me`` ones), that
    requirement; empty where none is documented."""

    @staticmethod
    def parse_name(name: str) -> tuple[int, int, bool]:
        """Split ``"3g.40gb"`` into (compute slices, memory GB, media extensions)."""
        match = _PROFILE_RE.match(name.strip())
        if match is None:
            raise InvalidLayoutError(
                f"MIG profile {name!r} is not of the form <N>g.<M>gb[+me]",
                hint="for example 1g.10gb, 3g.40gb, 1g.5gb+me",
            )
        return int(match["g"]), int(match["mem"]), match["me"] is not None

    @property
    def media_extensions(self) -> bool:
        """Whether the profile takes the GPU's media extensions (``+me``: JPEG decoder, OFA)."""
        return self.name.strip().endswith("+me")

    @property
    def k8s_resource(self) -> str:
        """The device plugin's mixed-strategy resource name, ``nvidia.com/mig-3g.40gb``."""
        return f"nvidia.com/mig-{self.name}"


@dataclass(frozen=True, order=True)
class MigPlacement:
    """A GPU instance of ``profile`` covering memory slices [start, start + size)."""

    profile: MigProfile
    start: int

    @property
    def end(self) -> int:
        return self.start + self.profile.memory_slices

    def overlaps(self, other: MigPlacement) -> bool:
        return self.start < other.end and other.start < self.end

    def __str__(self) -> str:
        return f"{self.profile.name}@{self.start}"


@dataclass(frozen=True)
class MigLayout:
    """A set of placed GPU instances on one GPU; build through :meth:`MigGeometry.layout`."""

    placements: tuple[MigPlacement, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "placements", tuple(sorted(self.placements, key=lambda p: (p.start, p.profile)))
        )

    def profile_counts(self) -> Counter[str]:
        """The multiset view (what mig-parted configs list): profile name -> count."""
        return Counter(p.profile.name for p in self.placements)

    def compute_slices(self) -> tuple[int, ...]:
        """Compute slices left to right, as NVIDIA's table of A100 partitions lists them."""
        return tuple(p.profile.compute_slices for p in self.placements)

    def __str__(self) -> str:
        return ",".join(str(p) for p in self.placements) or "(empty)"


@dataclass(frozen=True)
class DriverNote:
    """A layout that needs more than the GPU model's first MIG driver: every layout holding
    all of ``profiles`` together gets ``note``."""

    profiles: tuple[str, ...]
    note: str


@dataclass(frozen=True)
class MigGeometry:
    """The MIG rules of one GPU model: its slices, profiles and driver notes."""

    memory_slices: int
    compute_slices: int
    profiles: tuple[MigProfile, ...]
    driver_notes: tuple[DriverNote, ...] = ()

    def notes(self, layout: MigLayout) -> tuple[str, ...]:
        """The driver requirements ``layout`` brings (its profiles' and its combinations')."""
        names = set(layout.profile_counts())
        found = [p.driver_note for p in self.profiles if p.name in names and p.driver_note]
        found += [n.note for n in self.driver_notes if set(n.profiles) <= names]
        return tuple(dict.fromkeys(found))

    def maximal_layouts(self, profile_names: tuple[str, ...]) -> tuple[MigLayout, ...]:
        """:meth:`enumerate_maximal` over ``profile_names``, computed once per geometry and
        set of names (a planner builds many problems over the same few)."""
        return _maximal(self, tuple(sorted(set(profile_names))))

    def profile(self, name: str) -> MigProfile:
        for profile in self.profiles:
            if profile.name == name.strip():
                return profile
        MigProfile.parse_name(name)  # raises on a malformed name
        valid = ", ".join(p.name for p in self.profiles)
        raise InvalidLayoutError(f"MIG profile {name!r} does not exist here; valid: {valid}")

    def check(self, placements: tuple[MigPlacement, ...]) -> None:
        """Raise :class:`InvalidLayoutError` naming the first rule ``placements`` break."""
        for p in placements:
            if p.profile not in self.profiles:
                raise InvalidLayoutError(f"{p}: profile is not one of this GPU model's")
            if p.start not in p.profile.starts:
                starts = ",".join(map(str, p.profile.starts))
                raise InvalidLayoutError(
                    f"{p}: {p.profile.name} may start only at memory slice {{{starts}}}"
                )
        ordered = sorted(placements, key=lambda p: p.start)
        for a, b in pairwise(ordered):
            if a.overlaps(b):
                raise InvalidLayoutError(f"{a} and {b} overlap in memory slices")
        used = sum(p.profile.compute_slices for p in placements)
        if used > self.compute_slices:
            raise InvalidLayoutError(
                f"layout uses {used} compute slices; the GPU has {self.compute_slices}"
            )
        counts = Counter(p.profile for p in placements)
        for profile, n in counts.items():
            if n > profile.max_count:
                raise InvalidLayoutError(
                    f"{n} instances of {profile.name}; at most {profile.max_count} per GPU"
                )
        media = [p.profile.name for p in placements if p.profile.media_extensions]
        if len(media) > 1:  # the GPU has one JPEG decoder and one OFA, and +me takes both
            raise InvalidLayoutError(
                f"{' and '.join(media)} both take the media extensions; at most one +me "
                "instance per GPU"
            )

    def layout(self, placements: tuple[MigPlacement, ...] | list[MigPlacement]) -> MigLayout:
        """A validated layout."""
        placed = tuple(placements)
        self.check(placed)
        return MigLayout(placed)

    def parse(self, text: str) -> MigLayout:
        """Parse ``"3g.40gb@0,2g.20gb@4,1g.10gb@6"``. Names without ``@start`` are placed by a
        depth-first search over allowed starts (larger instances first, lowest start first),
        so any multiset that fits somewhere is accepted, as mig-parted's configs expect."""
        items = [t.strip() for t in text.split(",")] if text.strip() else []
        if "" in items:
            raise InvalidLayoutError(f"{text!r}: an empty item between commas",
                                     hint='e.g. "3g.20gb,2g.10gb"; "" is the empty layout')
        fixed: list[MigPlacement] = []
        floating: list[MigProfile] = []
        for item in items:
            name, _, start = item.partition("@")
            profile = self.profile(name)
            if start:
                if not (start.isascii() and start.isdigit()):
                    raise InvalidLayoutError(f"{item!r}: start must be a slice number")
                fixed.append(MigPlacement(profile, int(start)))
            else:
                floating.append(profile)
        found = self._place(tuple(fixed), sorted(floating, key=lambda p: -p.memory_slices))
        if found is None:
            names = ", ".join(p.name for p in floating)
            raise InvalidLayoutError(f"{text!r}: no valid starts for {names} exist together")
        return self.layout(found)

    def _place(
        self, placed: tuple[MigPlacement, ...], todo: list[MigProfile]
    ) -> tuple[MigPlacement, ...] | None:
        """Depth-first search for starts of ``todo`` beside ``placed`` (None if none)."""
        self.check(placed)
        if not todo:
            return placed
        profile, rest = todo[0], todo[1:]
        for start in profile.starts:
            candidate = (*placed, MigPlacement(profile, start))
            try:
                self.check(candidate)
            except InvalidLayoutError:
                continue
            done = self._place(candidate, rest)
            if done is not None:
                return done
        return None

    def can_add(self, layout: MigLayout, placement: MigPlacement) -> bool:
        try:
            self.check((*layout.placements, placement))
        except InvalidLayoutError:
            return False
        return True

    def enumerate_maximal(self, profile_names: tuple[str, ...] | None = None) -> list[MigLayout]:
        """Every maximal valid layout using ``profile_names`` (default: one profile per compute
        size, the ones NVIDIA's partition table uses). Maximal: no further instance of those
        profiles fits. Depth-first over placements in slice order."""
        if profile_names is None:
            by_size: dict[int, MigProfile] = {}
            for p in self.profiles:
                if p.name.endswith("+me"):
                    continue
                best = by_size.get(p.compute_slices)
                if best is None or p.memory_slices < best.memory_slices:
                    by_size[p.compute_slices] = p
            candidates = [MigPlacement(p, s) for p in by_size.values() for s in p.starts]
        else:
            chosen = [self.profile(n) for n in profile_names]
            candidates = [MigPlacement(p, s) for p in chosen for s in p.starts]
        candidates.sort(key=lambda c: (c.start, c.profile.compute_slices))
        found: set[MigLayout] = set()

        def grow(current: tuple[MigPlacement, ...], index: int) -> None:
            extended = False
            for i in range(index, len(candidates)):
                cand = candidates[i]
                try:
                    self.check((*current, cand))
                except InvalidLayoutError:
                    continue
                extended = True
                grow((*current, cand), i + 1)
            if not extended and all(
                not self.can_add(MigLayout(current), c) for c in candidates
            ):
                found.add(MigLayout(current))

        grow((), 0)
        return sorted(found, key=lambda lay: lay.compute_slices(), reverse=True)


@lru_cache(maxsize=64)
def _maximal(geometry: MigGeometry, names: tuple[str, ...]) -> tuple[MigLayout, ...]:
    return tuple(geometry.enumerate_maximal(names))
