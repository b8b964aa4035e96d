"""MIG through NVML for the nvml backend: list, create and destroy GPU instances.

Every GPU instance gets one compute instance spanning it (the usual layout). GPU instance
profile IDs are the catalog's ``nvml_id`` (A100/H100/H200: 19, 20, 15, 14, 9, 5, 0; A30:
14, 21, 5, 6, 0), checked against NVML's
profile list (``nvmlDeviceGetGpuInstanceProfileInfo``); compute-instance profile IDs are asked
of NVML for each instance, not assumed. Placements come from NVML itself
(``nvmlDeviceGetGpuInstancePossiblePlacements_v2``). A profile the GPU or driver lacks is
skipped when listing, and a GPU instance whose compute instance cannot be made is destroyed
again, so a failed create leaves nothing half-made for the next attempt to trip on. The agent
never switches MIG mode: that needs a GPU reset and is left to the operator
(``nvidia-smi -mig 1``).
"""

from __future__ import annotations

import ctypes
from contextlib import suppress
from typing import Any

from cotenant.agent.backends.base import MigDevice
from cotenant.agent.backends.nvml_lib import NOT_THERE, NvmlLib, map_nvml_error
from cotenant.errors import CotenantError, InputError, PermanentError
from cotenant.model.gpu import CATALOG
from cotenant.model.mig import MigLayout, MigPlacement, MigProfile

_CI_PROFILE = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4}  # NVML_COMPUTE_INSTANCE_PROFILE_<g>_SLICE


class NvmlMig:
    """The :class:`~cotenant.agent.backends.base.MigBackend` half of the nvml backend."""

    def __init__(self, lib: NvmlLib) -> None:
        self.lib = lib
        self._gi_enum: dict[tuple[int, int], int] = {}

    def _profiles(self, index: int) -> tuple[MigProfile, ...]:
        name, _ = self.lib.model(self.lib.handle(index))
        model = CATALOG.get(name)
        if model.mig is None:
            raise PermanentError(f"GPU {index} ({model.name}) has no MIG profiles")
        return model.mig.profiles

    def _profile_enum(self, handle: Any, index: int, profile_id: int) -> int:
        key = (index, profile_id)
        if key not in self._gi_enum:
            for enum in range(int(self.lib.nv.NVML_GPU_INSTANCE_PROFILE_COUNT)):
                try:
                    info = self.lib.nv.nvmlDeviceGetGpuInstanceProfileInfo(handle, enum)
                except self.lib.nv.NVMLError:
                    continue
                self._gi_enum[(index, int(info.id))] = enum
        if key not in self._gi_enum:
            raise PermanentError(f"GPU {index}: NVML knows no GPU instance profile {profile_id}")
        return self._gi_enum[key]

    def _instances(self, index: int) -> list[tuple[Any, MigPlacement]]:
        nv, handle = self.lib.nv, self.lib.handle(index)
        found: list[tuple[Any, MigPlacement]] = []
        for profile in self._profiles(index):
            array = (nv.c_nvmlGpuInstance_t * 8)()
            count = ctypes.c_uint(0)
            try:
                nv.nvmlDeviceGetGpuInstances(handle, profile.nvml_id, array, ctypes.byref(count))
            except nv.NVMLError as exc:
                if int(exc.value) in NOT_THERE:  # this GPU or driver lacks the profile
                    continue
                raise map_nvml_error(int(exc.value), "nvmlDeviceGetGpuInstances",
                                     str(exc)) from exc
            for gi in array[: count.value]:
                with self.lib.call("nvmlGpuInstanceGetInfo"):
                    info = nv.nvmlGpuInstanceGetInfo(gi)
                found.append((gi, MigPlacement(profile, int(info.placement.start))))
        return found

    def mig_devices(self, gpu: int) -> list[MigDevice]:
        """Each MIG device's UUID, matched to its GPU instance's placement by the instance ID."""
        nv, handle = self.lib.nv, self.lib.handle(gpu)
        by_id: dict[int, MigPlacement] = {}
        for gi, placement in self._instances(gpu):
            with self.lib.call("nvmlGpuInstanceGetInfo"):
                by_id[int(nv.nvmlGpuInstanceGetInfo(gi).id)] = placement
        with self.lib.call("nvmlDeviceGetMaxMigDeviceCount"):
            slots = int(nv.nvmlDeviceGetMaxMigDeviceCount(handle))
        found: list[MigDevice] = []
        for slot in range(slots):
            try:
                mig = nv.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
            except nv.NVMLError as exc:
                if int(exc.value) in NOT_THERE:  # an empty slot
                    continue
                raise map_nvml_error(int(exc.value), "nvmlDeviceGetMigDeviceHandleByIndex",
                                     str(exc)) from exc
            with self.lib.call("nvmlDeviceGetGpuInstanceId"):
                gi_id = int(nv.nvmlDeviceGetGpuInstanceId(mig))
            with self.lib.call("nvmlDeviceGetUUID"):
                uuid = str(nv.nvmlDeviceGetUUID(mig))
            if gi_id in by_id:
                found.append(MigDevice(gpu, by_id[gi_id], uuid))
        return found

    def mig_layout(self, gpu: int) -> MigLayout:
        return MigLayout(tuple(p for _, p in self._instances(gpu)))

    def possible_starts(self, gpu: int, profile: str) -> tuple[int, ...]:
        nv, handle = self.lib.nv, self.lib.handle(gpu)
        prof = self._find(gpu, profile)
        array = (nv.c_nvmlGpuInstancePlacement_t * 8)()
        count = ctypes.c_uint(len(array))
        with self.lib.call("nvmlDeviceGetGpuInstancePossiblePlacements_v2"):
            nv.nvmlDeviceGetGpuInstancePossiblePlacements(handle, prof.nvml_id, array,
                                                          ctypes.byref(count))
        return tuple(sorted(int(p.start) for p in array[: count.value]))

    def _find(self, gpu: int, name: str) -> MigProfile:
        for profile in self._profiles(gpu):
            if profile.name == name:
                return profile
        raise InputError(f"GPU {gpu}", f"no MIG profile {name!r}")

    def create_instance(self, gpu: int, profile: str, start: int | None = None) -> MigPlacement:
        nv, handle = self.lib.nv, self.lib.handle(gpu)
        prof = self._find(gpu, profile)
        self._profile_enum(handle, gpu, prof.nvml_id)
        with self.lib.call("nvmlDeviceCreateGpuInstance"):
            if start is None:
                gi = nv.nvmlDeviceCreateGpuInstance(handle, prof.nvml_id)
            else:
                place = nv.c_nvmlGpuInstancePlacement_t(start, prof.memory_slices)
                gi = nv.nvmlDeviceCreateGpuInstanceWithPlacement(
                    handle, prof.nvml_id, ctypes.byref(place)
                )
        try:
            with self.lib.call("nvmlGpuInstanceGetInfo"):
                info = nv.nvmlGpuInstanceGetInfo(gi)
            with self.lib.call("nvmlGpuInstanceCreateComputeInstance"):
                nv.nvmlGpuInstanceCreateComputeInstance(
                    gi, self._ci_profile_id(gi, prof.compute_slices))
        except CotenantError:
            # no half-made instance: a retry would find it and the layout would not verify
            with suppress(nv.NVMLError):
                nv.nvmlGpuInstanceDestroy(gi)
            raise
        return MigPlacement(prof, int(info.placement.start))

    def _ci_profile_id(self, gi: Any, compute_slices: int) -> int:
        """NVML's ID of the compute-instance profile spanning ``compute_slices`` slices."""
        nv = self.lib.nv
        with self.lib.call("nvmlGpuInstanceGetComputeInstanceProfileInfo"):
            info = nv.nvmlGpuInstanceGetComputeInstanceProfileInfo(
                gi, _CI_PROFILE[compute_slices], nv.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
        return int(info.id)

    def destroy_instance(self, gpu: int, placement: MigPlacement) -> None:
        nv = self.lib.nv
        for gi, found in self._instances(gpu):
            if found != placement:
                continue
            for slices in _CI_PROFILE:
                array = (nv.c_nvmlComputeInstance_t * 8)()
                count = ctypes.c_uint(0)
                try:
                    nv.nvmlGpuInstanceGetComputeInstances(
                        gi, self._ci_profile_id(gi, slices), array, ctypes.byref(count))
                except (nv.NVMLError, CotenantError):  # a profile this instance cannot have
                    continue
                for ci in array[: count.value]:
                    with self.lib.call("nvmlComputeInstanceDestroy"):
                        nv.nvmlComputeInstanceDestroy(ci)
            with self.lib.call("nvmlGpuInstanceDestroy"):
                nv.nvmlGpuInstanceDestroy(gi)
            return
        raise PermanentError(f"GPU {gpu}: no GPU instance {placement}")

