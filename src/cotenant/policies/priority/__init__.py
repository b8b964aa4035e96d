"""Priority time sharing of one GPU between a high-priority inference job and best-effort
training: the schedulers (time slicing, MPS, MPS with priority, TGS, REEF, Tally, Orion) as
pure policies, by name in :data:`PRIORITY`."""

from cotenant.policies.priority.registry import PRIORITY
from cotenant.policies.priority.scheduler import (
    Blocks,
    Observation,
    Preemption,
    RateControl,
    Scheduler,
    Sharing,
    rate_step,
)

__all__ = ["PRIORITY", "Blocks", "Observation", "Preemption", "RateControl", "Scheduler",
           "Sharing", "rate_step"]
