"""MIG partition planning: choose every GPU's MIG layout and which instance serves which
service, so that every service meets its demand on the fewest GPUs. Optimisers are
registered by name in :data:`PARTITION`."""

from cotenant.model.deployment import GpuPlan
from cotenant.policies.partition import auto, baseline, genetic, greedy, mcts, milp
from cotenant.policies.partition.problem import PartitionProblem, Plan, verify
from cotenant.policies.partition.registry import PARTITION

__all__ = [
    "PARTITION",
    "GpuPlan",
    "PartitionProblem",
    "Plan",
    "auto",
    "baseline",
    "genetic",
    "greedy",
    "mcts",
    "milp",
    "verify",
]
