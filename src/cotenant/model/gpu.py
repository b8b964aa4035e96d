"""The GPU model catalog: memory, SM count and MIG rules for every model cotenant knows.

MIG data come from ``../shared/reference/mig.md``: placements from ``nvidia-smi mig -lgipp``
(identical on A100 and H100), memory and SMs from NVIDIA's go-nvml mocks for A100/A30 and from
real ``nvidia-smi mig -lgip`` rows for H100 (16/32/60/64/132 SMs; the go-nvml H100 mock's SM
counts disagree with hardware and are not used). H200-141GB profiles follow the HAMi allow-list
names (1g.18gb ... 7g.141gb) with the H100 placement rules and SMs; their memory is nominal
(the GB in the name x 1024 MiB) until read from NVML on a real H200.

The openb trace's opaque models G2 and G3 are kept as non-MIG GPUs of unknown memory and SMs.
"""

from __future__ import annotations

from dataclasses import dataclass

from cotenant.errors import InputError, UnknownNameError
from cotenant.model.mig import DriverNote, MigGeometry, MigProfile

_A100_STARTS = {
    1: tuple(range(7)),  # 1 memory slice: 0..6 (slice 7 only as part of a 3g/7g instance)
    2: (0, 2, 4, 6),  # double-memory 1g (profile 15)
}


def _a100_class(
    names: tuple[str, str, str, str, str, str, str],
    memory_mib: tuple[int, int, int, int, int, int, int],
    sms: tuple[int, int, int, int, int],
) -> MigGeometry:
    """The 8-memory-slice / 7-compute-slice geometry shared by A100, H100 and H200.

    ``names``/``memory_mib`` in the order 1g, 1g+me, 1g double memory, 2g, 3g, 4g, 7g; ``sms``
    for 1g, 2g, 3g, 4g, 7g.
    """
    s1, s2, s3, s4, s7 = sms
    rows = (
        (names[0], 19, 1, 1, memory_mib[0], s1, _A100_STARTS[1], 7),
        (names[1], 20, 1, 1, memory_mib[1], s1, _A100_STARTS[1], 1),
        (names[2], 15, 1, 2, memory_mib[2], s1, _A100_STARTS[2], 4),
        (names[3], 14, 2, 2, memory_mib[3], s2, (0, 2, 4), 3),
        (names[4], 9, 3, 4, memory_mib[4], s3, (0, 4), 2),
        (names[5], 5, 4, 4, memory_mib[5], s4, (0,), 1),
        (names[6], 0, 7, 8, memory_mib[6], s7, (0,), 1),
    )
    # NVIDIA's MIG user guide (Supported MIG Profiles) names the driver release for the A30's
    # +me profiles, but in the pages of it we could search no release for 4g + 3g: the note
    # says so and how to check the node, rather than a release we cannot cite
    four_three = DriverNote(
        (names[5], names[4]),
        f"{names[5]} + {names[4]} on one GPU (4g + 3g): NVIDIA's MIG user guide, as far as "
        "we could find, states no minimum driver for this combination; check that the "
        "node's driver lists both placements (nvidia-smi mig -lgipp) before applying",
    )
    return MigGeometry(8, 7, tuple(MigProfile(*row) for row in rows), (four_three,))


_A30 = MigGeometry(
    4,
    4,
    (
        # GI profile IDs as an A30's `nvidia-smi mig -lgip` lists them (not the A100's numbers)
        MigProfile("1g.6gb", 14, 1, 1, 5836, 14, (0, 1, 2, 3), 4),
        MigProfile("1g.6gb+me", 21, 1, 1, 5836, 14, (0, 1, 2, 3), 1,
                   "1g.6gb+me needs an R470 or later driver (NVIDIA's MIG user guide)"),
        MigProfile("2g.12gb", 5, 2, 2, 11672, 28, (0, 2), 2),
        MigProfile("2g.12gb+me", 6, 2, 2, 11672, 28, (0, 2), 1,
                   "2g.12gb+me needs an R525 or later driver (NVIDIA's MIG user guide)"),
        MigProfile("4g.24gb", 0, 4, 4, 23344, 56, (0,), 1),
    ),
)


@dataclass(frozen=True)
class GpuModel:
    """One GPU model. ``memory_mib``/``sms`` are ``None`` for the trace's opaque models."""

    name: str
    memory_mib: int | None
    sms: int | None
    mig: MigGeometry | None = None
    aliases: tuple[str, ...] = ()

    @property
    def supports_mig(self) -> bool:
        return self.mig is not None

    def require_mig(self, where: str) -> MigGeometry:
        """The MIG geometry; an ``InputError`` at ``where`` naming the MIG models if none."""
        if self.mig is None:
            raise InputError(where, f"{self.name} has no MIG; use one of "
                                    f"{', '.join(CATALOG.mig_names())}")
        return self.mig


_MODELS: tuple[GpuModel, ...] = (
    GpuModel("P100", 16384, 56, aliases=("P100-16GB",)),
    GpuModel("T4", 15360, 40, aliases=("T4-16GB",)),
    GpuModel("V100-16GB", 16384, 80, aliases=("V100M16", "V100")),
    GpuModel("V100-32GB", 32768, 80, aliases=("V100M32",)),
    GpuModel("A10", 24576, 72, aliases=("A10-24GB",)),
    GpuModel("A30", 24576, 56, _A30, aliases=("A30-24GB",)),
    GpuModel(
        "A100-40GB",
        40960,
        108,
        _a100_class(
            ("1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
            (4864, 4864, 9856, 9856, 19968, 19968, 40192),
            (14, 28, 42, 56, 98),
        ),
        aliases=("A100", "A100-SXM4-40GB"),
    ),
    GpuModel(
        "A100-80GB",
        81920,
        108,
        _a100_class(
            ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
            (9856, 9856, 19968, 19968, 40192, 40192, 80384),
            (14, 28, 42, 56, 98),
        ),
        aliases=("A100-SXM4-80GB",),
    ),
    GpuModel(
        "H100-80GB",
        81920,
        132,
        _a100_class(
            ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
            (10240, 10240, 20480, 20480, 40960, 40960, 81920),
            (16, 32, 60, 64, 132),
        ),
        aliases=("H100", "H100-SXM5-80GB"),
    ),
    GpuModel(
        "H200-141GB",
        144384,
        132,
        _a100_class(
            ("1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
            (18432, 18432, 35840, 35840, 72704, 72704, 144384),
            (16, 32, 60, 64, 132),
        ),
        aliases=("H200",),
    ),
    GpuModel("G2", None, None),
    GpuModel("G3", None, None),
)


class GpuCatalog:
    """Look-up of GPU models by name or alias, case-insensitive."""

    def __init__(self, models: tuple[GpuModel, ...] = _MODELS) -> None:
        self.models = models
        self._by_key: dict[str, GpuModel] = {}
        for model in models:
            for key in (model.name, *model.aliases):
                self._by_key[key.upper()] = model

    def get(self, name: str) -> GpuModel:
        model = self._by_key.get(name.strip().upper())
        if model is None:
            raise UnknownNameError("GPU model", name, (m.name for m in self.models))
        return model

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.strip().upper() in self._by_key

    def names(self) -> list[str]:
        return [m.name for m in self.models]

    def mig_names(self) -> list[str]:
        return [m.name for m in self.models if m.supports_mig]


CATALOG = GpuCatalog()
