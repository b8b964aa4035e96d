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

__all__ = [
    "MAX_SHARE_PCT",
    "MIN_SHARE_PCT",
    "OnlineObservation",
    "SharePolicy",
    "check_share_pct",
]
