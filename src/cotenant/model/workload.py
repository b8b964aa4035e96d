"""Pods and nodes as the openb trace describes them, as frozen value objects.

A pod asks for CPU (milli-cores), memory (MiB) and GPUs. ``num_gpu == 1`` with
``gpu_milli < 1000`` is a *fractional* pod: it takes that share of one GPU's memory and at
least that share of its compute time (openb maintainers, alibaba/clusterdata issue 193).
``num_gpu > 1`` takes whole GPUs on one node. ``gpu_spec`` restricts the GPU models a pod may
use; empty means any.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from cotenant.model.gpu import GpuModel

MILLI_PER_GPU = 1000


class Qos(StrEnum):
    """Quality of service classes of the openb trace."""

    LS = "LS"  # latency sensitive: online
    BE = "BE"  # best effort: offline
    BURSTABLE = "Burstable"
    GUARANTEED = "Guaranteed"

    @property
    def online(self) -> bool:
        return self is not Qos.BE


@dataclass(frozen=True, slots=True)
class PodShape:
    """What a pod asks for, without identity: the key of placement scores and FGD's workload."""

    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    gpu_spec: tuple[str, ...] = ()

    @property
    def fractional(self) -> bool:
        return self.num_gpu == 1 and self.gpu_milli < MILLI_PER_GPU

    @property
    def gpu_milli_total(self) -> int:
        """GPU demand in milli-GPUs: ``gpu_milli`` for a fractional pod, 1000 x num_gpu else."""
        if self.num_gpu == 0:
            return 0
        return self.gpu_milli if self.fractional else MILLI_PER_GPU * self.num_gpu


@dataclass(frozen=True, slots=True)
class Pod:
    """One pod of a trace, with its arrival and departure (seconds from trace start)."""

    name: str
    shape: PodShape
    qos: Qos = Qos.LS
    creation_time: int = 0
    deletion_time: int | None = None

    @property
    def duration(self) -> int | None:
        if self.deletion_time is None:
            return None
        return self.deletion_time - self.creation_time


@dataclass(frozen=True, slots=True)
class Node:
    """One machine: CPU, memory and ``gpu_count`` GPUs of one model (or none)."""

    name: str
    cpu_milli: int
    memory_mib: int
    gpu_count: int
    gpu_model: GpuModel | None
