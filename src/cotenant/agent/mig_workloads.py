"""Which MIG instance a workload runs on, checked against what the GPU has now; a training
job spanning several instances as one workload per instance.

A workload names its instance as ``"<profile>@<start>"`` (``WorkloadSpec.mig_instance``); CUDA
is pointed at it by the MIG device's UUID, which NVML gives only while the instance exists
and which changes when the instance is remade, so the supervisor looks it up at every start.
A GPU in MIG mode runs only workloads that name an instance (the agent runs no MPS inside a
MIG instance), and a GPU not in MIG mode none that do.

A job over several instances (``WorkloadSpec.mig_instances``, Flex-MIG's one-to-many
allocation) runs as one process per instance (:func:`rank_specs`): workload ``<job>.r<i>``
on instance i, pointed at that instance's UUID like any MIG workload, with the variables of
``torch.distributed``'s ``env://`` rendezvous (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``): every rank is on this node, so the
master is 127.0.0.1. Each rank's CUDA sees one device, its instance, as ``cuda:0`` (CUDA
enumerates one MIG instance per process), so ``LOCAL_RANK`` is 0 and ``LOCAL_WORLD_SIZE`` 1
in every rank: code that picks its device by ``LOCAL_RANK``, as torchrun's users do, picks
``cuda:0``; a local rank of i would name a device the process does not have. MIG
instances have no peer-to-peer path and stock NCCL refuses two ranks on one GPU's instances
(it sees one PCI device), so a job uses a backend that goes through host memory (``gloo``,
or NCCL with the Flex-MIG paper's changes).
"""

from __future__ import annotations

import zlib
from dataclasses import replace

from cotenant.agent.backends.base import MigBackend, MigDevice
from cotenant.agent.spec import WorkloadSpec
from cotenant.errors import InputError

PORT_BASE, PORT_SPAN = 29500, 2000
"""A job without ``master_port`` rendezvouses at ``PORT_BASE`` plus a hash of its name
modulo ``PORT_SPAN`` (29500 is ``torch.distributed``'s usual port)."""


def master_port(spec: WorkloadSpec) -> int:
    """The port of ``spec``'s rendezvous: its own, or one derived from its name."""
    if spec.master_port is not None:
        return spec.master_port
    return PORT_BASE + zlib.crc32(spec.name.encode()) % PORT_SPAN


def rank_specs(spec: WorkloadSpec) -> list[WorkloadSpec]:
    """One workload per instance of ``spec.mig_instances`` (module docstring)."""
    size = len(spec.mig_instances)
    port = master_port(spec)
    out = []
    for rank, (gpu, instance) in enumerate(spec.mig_instances):
        name = f"{spec.name}.r{rank}"
        if len(name) > 63:
            raise InputError(f"workload {spec.name!r}.name", f"too long for {size} ranks "
                             f"({name!r} is over 63 characters)")
        env = dict(spec.env) | {
            "RANK": str(rank), "WORLD_SIZE": str(size), "LOCAL_RANK": "0",
            "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
        }
        out.append(replace(spec, name=name, gpu=gpu, mig_instance=instance, mig_instances=(),
                           master_port=port, job=spec.name, env=tuple(sorted(env.items()))))
    return out


def check_mig(backend: MigBackend, spec: WorkloadSpec, mig_mode: bool) -> None:
    """An error unless ``spec`` names an existing instance exactly when its GPU is in MIG
    mode (``mig_mode``)."""
    where = f"workload {spec.name!r}"
    if spec.mig_instance is None:
        if mig_mode:
            raise InputError(f"{where}.gpu", f"GPU {spec.gpu} is in MIG mode: name one of its "
                             "instances in mig_instance (the agent runs no MPS inside a MIG "
                             "instance)", hint=instances_hint(backend, spec.gpu))
        return
    if not mig_mode:
        raise InputError(f"{where}.mig_instance", f"GPU {spec.gpu} is not in MIG mode",
                         hint="leave mig_instance out to run on the whole GPU")
    mig_device(backend, spec)


def mig_device(backend: MigBackend, spec: WorkloadSpec) -> MigDevice:
    """The MIG device ``spec`` names, as the GPU has it now."""
    for device in backend.mig_devices(spec.gpu):
        if str(device.placement) == spec.mig_instance:
            return device
    raise InputError(f"workload {spec.name!r}.mig_instance",
                     f"GPU {spec.gpu} has no MIG instance {spec.mig_instance}",
                     hint=instances_hint(backend, spec.gpu))


def instances_hint(backend: MigBackend, gpu: int) -> str:
    names = [str(d.placement) for d in backend.mig_devices(gpu)]
    return (f"its instances: {', '.join(names)}" if names
            else "it has no instances: apply a layout with cotenant mig apply")
