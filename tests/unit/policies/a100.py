"""The A100-40GB's MIG geometry and its five compute profiles (1, 2, 3, 4 and 7 slices),
which the partition tests plan over."""

from __future__ import annotations

from cotenant.model.gpu import CATALOG
from cotenant.model.mig import MigGeometry

_FOUND = CATALOG.get("A100-40GB").mig
assert _FOUND is not None
GEOMETRY: MigGeometry = _FOUND
PROFILES = ("1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")
