"""Which MIG instance a workload runs on, checked against what the GPU has now.

A workload names its instance as ``"<profile>@<start>"`` (``WorkloadSpec.mig_instance``); CUDA
is pointed at it by the MIG device's UUID, which NVML gives only while the instance exists
and which changes when the instance is remade, so the supervisor looks it up at every start.
A GPU in MIG mode runs only workloads that name an instance (the agent runs no MPS inside a
MIG instance), and a GPU not in MIG mode none that do.
"""

from __future__ import annotations

from cotenant.agent.backends.base import MigBackend, MigDevice
from cotenant.agent.spec import WorkloadSpec
from cotenant.errors import InputError


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
