"""Co-location of online (latency-critical) and offline (best-effort) work on shared GPUs:
how the SM share is split, which offline job joins which online GPU, and when to protect
the online service. Pure decisions, driven alike by the simulator and the node agent."""

from cotenant.policies.colocation.contract import (
    MAX_SHARE_PCT,
    MIN_SHARE_PCT,
    OnlineObservation,
    SharePolicy,
    check_share_pct,
)
from cotenant.policies.colocation.policy import (
    COLOCATION,
    ColocationPolicy,
    Matching,
    Sharing,
)
from cotenant.policies.colocation.share import DynamicShare, FixedShare

__all__ = [
    "COLOCATION",
    "MAX_SHARE_PCT",
    "MIN_SHARE_PCT",
    "ColocationPolicy",
    "DynamicShare",
    "FixedShare",
    "Matching",
    "OnlineObservation",
    "SharePolicy",
    "Sharing",
    "check_share_pct",
]
