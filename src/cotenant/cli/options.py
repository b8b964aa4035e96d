"""Typer option types shared by the ``simulate`` and ``sweep`` commands, and the sweep
executor the ``--workers``/``--ray`` options choose."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from cotenant.cli.checks import dir_option, once_each
from cotenant.errors import InputError
from cotenant.integrations.ray.executor import RayExecutor, check_reachable
from cotenant.policies.placement import PLACEMENT
from cotenant.sim.sweep.executor import Executor, local_executor

DEFAULT_POLICIES = [
    "random", "dot-product", "gpu-clustering", "gpu-packing", "best-fit", "fgd", "cotenant-pack"
]
MAX_SYNTHETIC = 1_000_000  # pods or nodes drawn: over 100x openb's 8,152 pods and 1,213 nodes

PodsOpt = Annotated[
    Path | None, typer.Option("--pods", help="openb pod list CSV (default: embedded synthetic)")
]
NodesOpt = Annotated[
    Path | None, typer.Option("--nodes", help="openb node list CSV (default: beside --pods)")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="print a JSON summary on stdout")]
OutOpt = Annotated[
    Path | None, typer.Option("--out", callback=dir_option,
                              help="report directory (HTML + PNG); none if omitted")
]
PolicyOpt = Annotated[
    list[str] | None,
    typer.Option("--policy", "-p", help="placement policy, repeatable (default: all seven)"),
]
ParamsOpt = Annotated[
    Path | None, typer.Option("--params", help="fitted synthetic parameters (JSON)")
]


def placement_policies(names: list[str] | None) -> list[str]:
    """The placement policies asked for (their canonical names), each once."""
    return once_each([PLACEMENT.canonical(n) for n in (names or DEFAULT_POLICIES)], "--policy")
WorkersOpt = Annotated[
    int | None, typer.Option(min=1, help="processes of the local pool (default: CPUs)")
]
RayOpt = Annotated[
    str | None, typer.Option(
        "--ray", metavar="auto|local|ADDRESS",
        help="run on a Ray cluster: auto (the one this machine knows, else a new local one), "
        "local (a new local one) or a cluster's address (ray://head:10001); needs "
        "the ray extra")
]


def check_executor(ray: str | None, workers: int | None) -> None:
    """The ``--ray``/``--workers`` options checked, a cluster's address for an answer, so a
    bad option fails before any input is built."""
    if ray is None:
        return
    if workers is not None:
        raise InputError("--workers", "sizes the local pool; on Ray every CPU of the cluster "
                         "runs", hint="leave out --workers or --ray")
    if not ray.strip():
        raise InputError("--ray", "must be auto, local or a cluster's address")
    check_reachable(ray.strip())


@contextmanager
def executor_for(ray: str | None, workers: int | None) -> Iterator[Executor]:
    """The sweep executor the options ask for: a local pool of ``workers`` processes, or a
    Ray cluster (shut down afterwards where this command started it)."""
    if ray is None:
        yield local_executor(workers)
        return
    check_executor(ray, workers)
    with RayExecutor(ray.strip()) as executor:
        yield executor
