"""Simulated programs for the fake node, and the MPS client settings they obey.

The fake node runs no code: a spawned argv is a *program description* whose events happen on
the injected clock, so tests are deterministic. ``fake-workload`` understands::

    fake-workload --mem-mib 2000        allocate 2000 MiB at start
                  --duration-s 30       exit after 30 s (default: run until signalled)
                  --exit-code 0         exit status at the end of the duration
                  --util-pct 40         SM utilisation it causes while running
                  --warmup-s 20         ... from 20 s after start (before: 0, as a job
                                        loading its checkpoint and data)
                  --grow-mib 3000       allocate 3000 MiB more ...
                  --grow-at-s 5         ... 5 s after start (past a limit: CUDA OOM)
                  --crash-at-s 3        a fatal CUDA error (illegal address) 3 s after start
                  --term-delay-s 5      on SIGTERM/SIGINT, checkpoint for 5 s, then exit by
                                        the signal (default 0: at once; inf: ignore it);
                                        SIGKILL always ends it at once
                  --model resnet50      an online service of that model: while other MPS
                                        clients with a thread percentage run kernels, its
                                        kernels get the rest of the SMs and run slower
                                        (``perf.mps.speed``), so the GPU shows it busy
                                        --util-pct / speed of the time (at most 100)

Any other argv is accepted and runs idle until signalled (the fake records the exact argv, which
is how the tests show that no shell ever sees a workload's command line).

:func:`parse_mem_limit` reads ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`` (``"0=2000M"``, ``"0=2G"``),
the same format :mod:`cotenant.agent.mps` writes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from cotenant.errors import InputError, UnknownNameError
from cotenant.perf import mps

PROGRAM = "fake-workload"
_FLAGS = {
    "--mem-mib": "mem_mib",
    "--duration-s": "duration_s",
    "--exit-code": "exit_code",
    "--util-pct": "util_pct",
    "--warmup-s": "warmup_s",
    "--grow-mib": "grow_mib",
    "--grow-at-s": "grow_at_s",
    "--crash-at-s": "crash_at_s",
    "--term-delay-s": "term_delay_s",
}


@dataclass(frozen=True)
class Program:
    """What a simulated process does, relative to its start time."""

    mem_mib: int = 0
    duration_s: float = math.inf
    exit_code: int = 0
    util_pct: float = 0.0
    warmup_s: float = 0.0
    grow_mib: int = 0
    grow_at_s: float = math.inf
    crash_at_s: float = math.inf
    term_delay_s: float = 0.0
    model: str = ""
    """The online model it serves ("" for none): its utilisation follows its SM share."""

    @staticmethod
    def from_argv(argv: Sequence[str]) -> Program:
        """Parse a ``fake-workload`` argv; any other program idles until signalled."""
        if not argv or argv[0] != PROGRAM:
            return Program()
        values: dict[str, float] = {}
        args = list(argv[1:])
        if len(args) % 2:
            raise InputError(f"{PROGRAM} argv", f"flag {args[-1]!r} has no value")
        model = ""
        for flag, raw in zip(args[::2], args[1::2], strict=True):
            if flag == "--model":
                if raw not in mps.ONLINE_MODELS:
                    raise UnknownNameError("online model", raw, mps.ONLINE_MODELS,
                                           f"{PROGRAM} --model")
                model = raw
                continue
            if flag not in _FLAGS:
                valid = ", ".join(sorted([*_FLAGS, "--model"]))
                raise InputError(f"{PROGRAM} argv", f"unknown flag {flag!r}; valid: {valid}")
            try:
                values[_FLAGS[flag]] = float(raw)
            except ValueError as exc:
                raise InputError(f"{PROGRAM} {flag}", f"{raw!r} is not a number") from exc
        return Program(
            mem_mib=int(values.get("mem_mib", 0)),
            duration_s=values.get("duration_s", math.inf),
            exit_code=int(values.get("exit_code", 0)),
            util_pct=values.get("util_pct", 0.0),
            warmup_s=values.get("warmup_s", 0.0),
            grow_mib=int(values.get("grow_mib", 0)),
            grow_at_s=values.get("grow_at_s", math.inf),
            crash_at_s=values.get("crash_at_s", math.inf),
            term_delay_s=values.get("term_delay_s", 0.0),
            model=model,
        )


def parse_mem_limit(value: str, ordinal: int = 0) -> int | None:
    """The MiB limit for device ``ordinal`` in a ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`` value."""
    for item in value.split(","):
        dev, sep, amount = item.strip().partition("=")
        if not sep or not dev.strip().isdigit() or int(dev) != ordinal:
            continue
        amount = amount.strip().upper().removesuffix("B")
        scale = {"M": 1, "G": 1024}.get(amount[-1:])
        if scale is None or not amount[:-1].isdigit():
            raise InputError("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", f"{item!r} is not <dev>=<N>M|G")
        return int(amount[:-1]) * scale
    return None
