"""cotenant's decisions as Ray resource requests, with the isolation Ray alone does not give.

Ray's fractional GPUs (``num_gpus=0.5``) are bookkeeping: two such actors share a GPU with no
limit on each one's SMs or memory. Here a decision (an online service keeping ``share``% of
GPU ``gpu`` beside an offline co-runner; or a pod's ``gpu-milli`` placed on a GPU) becomes a
:class:`RayRequest`:

* ``num_gpus``: the fraction, so Ray's GPU totals count it;
* a custom resource per GPU (``cotenant_gpu_<index>``; with a node name,
  ``cotenant_<node>_gpu_<index>``, unique in the cluster; :func:`node_resources` gives what
  a node advertises when it starts, one unit per GPU), requested in the same fraction: Ray
  never books more than the whole of one GPU's shares, and the worker lands on a node that
  advertises that GPU: with a node name, that node alone;
* ``runtime_env.env_vars``: the MPS client environment the node agent gives the same
  process (:meth:`cotenant.agent.mps.MpsManager.client_env`: the pipe of that GPU's daemon,
  the active-thread percentage and the pinned memory limit), and Ray's own
  ``CUDA_VISIBLE_DEVICES`` switched off, since under MPS the daemon's pipe picks the GPU.
  Every request sets every one of these keys (an uncapped one at 100% and the GPU's whole
  memory): Ray merges a job's ``runtime_env`` into each actor's, and a key left out would
  be inherited from the job.

The same dictionaries serve an actor (``Actor.options(**r.actor_options())``), a Ray Serve
deployment (``ray_actor_options=r.actor_options()``, the online service) and a Ray Train
worker (``ScalingConfig(resources_per_worker=r.train_resources())`` with its workers'
``RunConfig(worker_runtime_env=r.runtime_env())``, never the whole job's, the offline
job). The MPS daemons themselves are the node agent's (``cotenant agent run
--state-dir``): the requests point at them and start nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cotenant.agent.backends.base import DaemonConfig
from cotenant.agent.mps import MpsManager
from cotenant.errors import InputError, NotSupportedError
from cotenant.model.workload import MILLI_PER_GPU
from cotenant.policies.colocation import (
    MAX_SHARE_PCT,
    MIN_SHARE_PCT,
    Actions,
    check_share_pct,
    milli_limits,
    offline_thread_pct,
)

RESOURCE_PREFIX = "cotenant_gpu_"
NOSET_VISIBLE = "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"
"""Set in a worker's environment, Ray leaves ``CUDA_VISIBLE_DEVICES`` alone."""
DEFAULT_STATE = Path(".cotenant")
"""The node agent's default ``--state-dir`` (its MPS pipes are under it)."""


NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


def gpu_resource(gpu: int, node: str | None = None) -> str:
    """The Ray custom resource standing for GPU ``gpu``: ``cotenant_gpu_0`` (on any node
    that advertises it) or, for a node, ``cotenant_<node>_gpu_0`` (that node's alone)."""
    if isinstance(gpu, bool) or not isinstance(gpu, int) or gpu < 0:
        raise InputError("gpu", f"must be a GPU index >= 0, got {gpu!r}")
    if node is None:
        return f"{RESOURCE_PREFIX}{gpu}"
    if not isinstance(node, str) or not NODE_NAME.fullmatch(node):
        raise InputError("node", f"{node!r} must be letters, digits, '_' and '-'",
                         hint="the node's name in the cluster, e.g. gpu-node-3")
    return f"cotenant_{node}_gpu_{gpu}"


def node_resources(gpus: Iterable[int], node: str | None = None) -> dict[str, float]:
    """What a node advertises for its GPUs (one unit each), for ``ray start --resources`` or
    ``ray.init(resources=...)``; with its name, resources no other node has."""
    return {gpu_resource(g, node): 1.0 for g in gpus}


@dataclass(frozen=True)
class RayRequest:
    """One process's part of one GPU, as Ray asks for it."""

    gpu: int
    fraction: float
    """Of the GPU, in (0, 1]: Ray's ``num_gpus`` and the GPU's custom resource."""
    env: Mapping[str, str] = field(default_factory=dict)
    node: str | None = None
    """The node whose GPU it is (None: any node that advertises GPU ``gpu``)."""

    def __post_init__(self) -> None:
        gpu_resource(self.gpu, self.node)  # a valid index and node name
        if not (0.0 < self.fraction <= 1.0):
            raise InputError(f"GPU {self.gpu}", f"a fraction of {self.fraction:g} must be in "
                             "(0, 1]")

    @property
    def resources(self) -> dict[str, float]:
        return {gpu_resource(self.gpu, self.node): self.fraction}

    def runtime_env(self) -> dict[str, Any]:
        return {"env_vars": dict(self.env)}

    def actor_options(self) -> dict[str, Any]:
        """For ``.options(**...)`` on an actor or task, or a Serve deployment's
        ``ray_actor_options``."""
        return {"num_gpus": self.fraction, "resources": self.resources,
                "runtime_env": self.runtime_env()}

    def train_resources(self) -> dict[str, float]:
        """For Ray Train's ``ScalingConfig(resources_per_worker=...)``."""
        return {"GPU": self.fraction, **self.resources}


class _EnvOnly:
    """An MPS backend that only names environments: the daemons are the node agent's."""

    def start_daemon(self, config: DaemonConfig) -> None:
        raise NotSupportedError("starting MPS daemons", "the Ray helper (the node agent does)")

    def stop_daemon(self, config: DaemonConfig) -> None:
        raise NotSupportedError("stopping MPS daemons", "the Ray helper (the node agent does)")

    def daemon_healthy(self, config: DaemonConfig) -> bool:
        return False


class RayPlacer:
    """Builds :class:`RayRequest` s for one node whose agent keeps its state in
    ``state_dir`` and whose GPUs have ``gpu_memory_mib`` each; with ``node``, its name in
    the cluster (the requests then book that node's GPUs alone, see :func:`node_resources`)."""

    def __init__(self, gpu_memory_mib: int, state_dir: Path = DEFAULT_STATE,
                 node: str | None = None) -> None:
        if isinstance(gpu_memory_mib, bool) or not isinstance(gpu_memory_mib, int) \
                or gpu_memory_mib <= 0:
            raise InputError("gpu_memory_mib", f"must be a positive integer, got "
                             f"{gpu_memory_mib!r}")
        if node is not None:
            gpu_resource(0, node)  # a valid name
        self.gpu_memory_mib = gpu_memory_mib
        self.node = node
        self.mps = MpsManager(_EnvOnly(), state_dir)

    def _request(self, gpu: int, fraction: float, thread_pct: int | None,
                 mem_limit_mib: int | None) -> RayRequest:
        """Every key set, uncapped ones at 100% and the whole memory, so none is inherited
        from a job-level ``runtime_env`` (Ray merges it into each actor's)."""
        env = self.mps.client_env(
            gpu, MAX_SHARE_PCT if thread_pct is None else thread_pct,
            self.gpu_memory_mib if mem_limit_mib is None else mem_limit_mib)
        return RayRequest(gpu, fraction, {**env, NOSET_VISIBLE: "1"}, self.node)

    def colocation(self, gpu: int, share: int,
                   online_memory_mib: int | None = None) -> tuple[RayRequest, RayRequest]:
        """The online service and its offline co-runner on ``gpu``, the service keeping
        ``share``% (1-99: a share of 0 or 100 leaves one of them no part to book). The
        service runs uncapped, as under the agent (set explicitly: 100% of the threads and
        the whole memory); the co-runner gets the thread cap
        ``100 - share`` and, where ``online_memory_mib`` (the service's peak) is given, the
        memory beside it as its limit (the policies' memory limit)."""
        share = check_share_pct(share, f"GPU {gpu} share")
        if share >= MAX_SHARE_PCT:
            raise InputError(f"GPU {gpu} share", "100 leaves the offline co-runner nothing",
                             hint="run the service alone: RayPlacer.placement(gpu, 1000)")
        limit = None
        if online_memory_mib is not None:
            limit = self.gpu_memory_mib - online_memory_mib
            if limit <= 0:
                raise InputError(f"GPU {gpu} online memory", f"{online_memory_mib} MiB leaves "
                                 f"no memory of {self.gpu_memory_mib} MiB for a co-runner")
        online = self._request(gpu, share / 100, None, None)
        offline = self._request(gpu, (100 - share) / 100, offline_thread_pct(share), limit)
        return online, offline

    def placement(self, gpu: int, milli: int) -> RayRequest:
        """A pod's ``gpu-milli`` placed on ``gpu`` (the extender's decision), limited as the
        device plugin limits it: that share of the SMs and of the memory; a whole GPU
        (1000) is not limited."""
        if isinstance(milli, bool) or not isinstance(milli, int) \
                or not 0 < milli <= MILLI_PER_GPU:
            raise InputError("gpu-milli", f"{milli!r} must be in 1..{MILLI_PER_GPU} for one "
                             "GPU")
        if milli == MILLI_PER_GPU:
            return self._request(gpu, 1.0, None, None)
        return self._request(gpu, milli / MILLI_PER_GPU,
                             *milli_limits(milli, self.gpu_memory_mib))

    def from_actions(self, gpus: Sequence[int],
                     actions: Actions) -> dict[int, tuple[RayRequest, RayRequest]]:
        """The co-location core's :class:`Actions` (one row per entry of ``gpus``) as each
        GPU's pair, at the largest share of its rows (the most protective, as the agent
        takes it); GPUs whose share leaves the co-runner nothing are left out."""
        if len(gpus) != len(actions.share):
            raise InputError("actions", f"{len(actions.share)} rows for {len(gpus)} GPUs")
        shares: dict[int, int] = {}
        for gpu, share in zip(gpus, actions.share.tolist(), strict=True):
            shares[gpu] = max(shares.get(gpu, MIN_SHARE_PCT), int(share))
        return {gpu: self.colocation(gpu, share) for gpu, share in sorted(shares.items())
                if share < MAX_SHARE_PCT}
