"""The contract between an SM-share policy and whoever enforces it.

The simulator and the node agent both ask one question each interval, per GPU that runs an
online service: *given the online load I observe now, what share of the SMs (MPS active-thread
percentage) must the online service keep?* The offline co-runner gets the rest. The answer is
a pure function of the observation, which carries the current share so that a policy can apply
hysteresis without hidden state (STYLE.md, practice 3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from cotenant.errors import InputError

MIN_SHARE_PCT = 1
MAX_SHARE_PCT = 100


def check_share_pct(value: object, where: str) -> int:
    """``value`` as an SM share in percent, or an :class:`InputError` naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(where, f"SM share must be an integer percentage, got {value!r}")
    if not MIN_SHARE_PCT <= value <= MAX_SHARE_PCT:
        raise InputError(
            where,
            f"SM share {value} is outside {MIN_SHARE_PCT}-{MAX_SHARE_PCT}",
            hint="MPS active-thread percentages run from 1 to 100",
        )
    return value


@dataclass(frozen=True)
class OnlineObservation:
    """What is known about one online service on one GPU at a decision point.

    ``load`` is the offered load as a fraction of what the service can serve alone on the whole
    GPU (its solo duty cycle: 0.3 means the GPU would be busy 30% of the time serving it alone).
    It may exceed 1 in an overload. ``online_share_pct`` is the share in force now.
    """

    model: str
    load: float
    slo_ms: float
    online_share_pct: int = MAX_SHARE_PCT

    def __post_init__(self) -> None:
        if not self.load >= 0.0:
            raise InputError(f"observation {self.model!r}", f"load {self.load} is negative")
        if not self.slo_ms > 0.0:
            raise InputError(f"observation {self.model!r}", f"SLO {self.slo_ms} ms is not positive")
        check_share_pct(self.online_share_pct, f"observation {self.model!r}: online_share_pct")


class SharePolicy(Protocol):
    """Decides the online service's SM share; the offline co-runner gets ``100 - share``."""

    def online_share(self, obs: OnlineObservation) -> int:
        """The online SM share in percent (1-100) to apply from now on."""
        ...
