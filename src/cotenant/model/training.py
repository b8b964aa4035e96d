"""Training jobs that ask for an amount of GPU in MIG compute slices.

A job asks for ``slices`` compute slices (1-7 on an A100-class GPU: the share of a GPU it
was given, rounded up to slices) and brings ``work_s``: the seconds it runs at exactly that
many slices. How it is given them (one instance of at least that size, or several instances
whose sizes add up to it) is the allocator's business (:mod:`cotenant.policies.flexmig`).
"""

from __future__ import annotations

from dataclasses import dataclass

from cotenant.errors import InputError


@dataclass(frozen=True)
class TrainingJob:
    """One training job: ``slices`` asked for, ``work_s`` seconds of work at that size,
    arriving at ``arrival_s``."""

    name: str
    slices: int
    work_s: float
    arrival_s: float = 0.0

    def __post_init__(self) -> None:
        if not 1 <= self.slices <= 7:
            raise InputError(f"job {self.name!r}.slices", f"{self.slices} must be 1-7")
        if not self.work_s > 0 or self.arrival_s < 0:
            raise InputError(f"job {self.name!r}", "work must be > 0 s and arrival >= 0 s")
