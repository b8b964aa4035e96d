"""Co-location of online (latency-critical) and offline (best-effort) work on shared GPUs: the
one decision core the simulator and the node agent both call.

An :class:`Observation` of a node (or of the whole fleet) goes in with the core's
:class:`GpuState`; :class:`Actions` come out of :meth:`ColocationPolicy.decide`. A policy is
composed of small pure parts: share sizing, the compute guard, admission, recovery and the
matching of offline jobs with GPUs; :data:`COLOCATION` names them.
"""

from cotenant.policies.colocation.admission import Admission
from cotenant.policies.colocation.contract import (
    MAX_SHARE_PCT,
    MIN_SHARE_PCT,
    Actions,
    GpuState,
    Mechanism,
    Observation,
    Why,
    check_share_pct,
    milli_limits,
    offline_thread_pct,
)
from cotenant.policies.colocation.guard import (
    RATE_SPAN_S,
    GuardSettings,
    rate_span_s,
    report_window_s,
)
from cotenant.policies.colocation.policy import ColocationPolicy, Matching
from cotenant.policies.colocation.recovery import Fault, Next, Recovery, Response
from cotenant.policies.colocation.registry import COLOCATION
from cotenant.policies.colocation.share import DynamicShare, FixedShare, need

__all__ = [
    "COLOCATION",
    "MAX_SHARE_PCT",
    "MIN_SHARE_PCT",
    "RATE_SPAN_S",
    "Actions",
    "Admission",
    "ColocationPolicy",
    "DynamicShare",
    "Fault",
    "FixedShare",
    "GpuState",
    "GuardSettings",
    "Matching",
    "Mechanism",
    "Next",
    "Observation",
    "Recovery",
    "Response",
    "Why",
    "check_share_pct",
    "milli_limits",
    "need",
    "offline_thread_pct",
    "rate_span_s",
    "report_window_s",
]
