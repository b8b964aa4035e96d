"""GPU check of the cotenant runtime: the HP p99 alone, beside BE training under plain
sharing, and beside BE under the runtime (priority time sharing in PyTorch).

Needs PyTorch (and one NVIDIA GPU unless ``--device cpu``). Each side runs as a child process
of this script, as the node agent would start it: the runtime rows start both with the
runtime's environment (:func:`cotenant.runtime.runtime_env`: the startup hook, no change to
either program), the plain rows without it.

* HP: inference of a stack of ``--width`` x ``--width`` linear layers (``--depth`` of them,
  fp16 on a GPU: 2 GiB of weights read per request by default), batch ``--batch``, open
  loop: requests arrive at Poisson times (a seeded schedule, the same in every row) at the
  rate that keeps HP busy ``--load`` of the time alone, and are served one at a time in
  arrival order; a request's latency runs from its *scheduled arrival* to its result on the
  host (``.cpu()``, as a server answers), so time spent queued behind a slow request counts.
  The service time behind the rate is measured once, in the ``hp-alone`` row (median of 50
  requests alone on the device), and passed to every later row: every row offers HP the same
  load, whatever BE does to its service time.
* BE: training of the same stack in fp32, batch 64, SGD, ``loss.item()`` each step.

The runtime's lease (``--lease-s``, 5 ms here against the agent's 20 ms default) must be
shorter than HP's gaps between requests for BE to get more than its floor; the defaults
were chosen without a GPU at hand and may need tuning once the HP request time is seen.

Rows: ``hp-alone``, ``be-alone``, ``be-alone-runtime`` (BE alone with the runtime on: the
cost of its hook), ``plain`` (both, the GPU's default time slicing), ``runtime`` (both, BE
gated while HP works). Each row gives the HP p50/p99 (ms) and p99 over the alone p99,
the BE steps a second over its alone rate within the HP's measured window, and the gate's
counts. Written as JSON and CSV beside ``--out``, rewritten after every row.

    PYTHONPATH=src python3 benchmarks/gpu_priority.py --out gpu_priority.json
    PYTHONPATH=src python3 benchmarks/gpu_priority.py --device cpu --quick --out /tmp/p.json
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CHILD_TIMEOUT_S = 240.0


# --- the two workloads (child processes; they import torch, never cotenant) ------------------


def _stack(torch: Any, width: int, depth: int, device: str, dtype: Any) -> Any:
    """``depth`` linear layers of ``width``, made on ``device`` (no host copy to wait for)."""
    layers: list[Any] = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width, device=device, dtype=dtype), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers)


def arrivals(service_s: float, load: float, seconds: float, seed: int = 1) -> list[float]:
    """Poisson arrival offsets (s) in ``[0, seconds)`` at ``load / service_s`` a second."""
    rng, t = random.Random(seed), 0.0
    out: list[float] = []
    while True:
        t += rng.expovariate(load / service_s)
        if t >= seconds:
            return out
        out.append(t)


def child_hp(args: argparse.Namespace) -> dict[str, Any]:
    import torch  # noqa: PLC0415 - only the children need it

    torch.manual_seed(0)
    dtype = torch.float16 if args.device != "cpu" else torch.float32
    net = _stack(torch, args.width, args.depth, args.device, dtype).eval()
    x = torch.randn(args.batch, args.width, device=args.device, dtype=dtype)
    with torch.inference_mode():
        for _ in range(20):  # warm up
            net(x).cpu()
        service_s = args.service_ms / 1e3
        if service_s <= 0:  # hp-alone: the solo request time (median), for every row's rate
            solo = []
            for _ in range(50):
                t = time.monotonic()
                net(x).cpu()
                solo.append(time.monotonic() - t)
            service_s = sorted(solo)[len(solo) // 2]
        Path(args.ready).touch()
        lat: list[float] = []
        start = time.monotonic()
        for offset in arrivals(service_s, args.load, args.seconds):
            due = start + offset
            if (ahead := due - time.monotonic()) > 0:
                time.sleep(ahead)
            net(x).cpu()
            lat.append(time.monotonic() - due)  # from the scheduled arrival: queueing counts
        end = time.monotonic()
    lat.sort()
    return {"window": [start, end], "requests": len(lat), "service_ms": service_s * 1e3,
            "p50_ms": lat[len(lat) // 2] * 1e3,
            "p99_ms": lat[min(len(lat) - 1, int(0.99 * len(lat)))] * 1e3}


def child_be(args: argparse.Namespace) -> dict[str, Any]:
    import torch  # noqa: PLC0415 - only the children need it

    torch.manual_seed(0)
    net = _stack(torch, args.width, args.depth, args.device, torch.float32)
    opt = torch.optim.SGD(net.parameters(), lr=1e-4)
    x = torch.randn(64, args.width, device=args.device)
    steps: list[float] = []
    stop = Path(args.stop)
    while not stop.exists():
        opt.zero_grad()
        loss = net(x).square().mean()
        loss.backward()
        opt.step()
        loss.item()
        steps.append(time.monotonic())
        if len(steps) == 3:
            Path(args.ready).touch()
    hook = sys.modules.get("_cotenant_runtime.hook")
    active = getattr(hook, "ACTIVE", None)
    stats = vars(active.gate.stats) if active is not None and active.gate else None
    return {"steps": steps, "gate": stats}


# --- the parent ----------------------------------------------------------------------------


def _spawn(role: str, args: argparse.Namespace, tmp: Path, runtime: bool,
           board: Path) -> tuple[subprocess.Popen[bytes], Path, Path]:
    from cotenant.runtime import GateSettings, runtime_env  # noqa: PLC0415 - parent only

    out, ready = tmp / f"{role}.json", tmp / f"{role}.ready"
    ready.unlink(missing_ok=True)
    env = dict(os.environ)
    if runtime:
        settings = GateSettings(lease_s=args.lease_s, max_hold_s=args.max_hold_s,
                                floor=args.floor)
        env.update(runtime_env("hp" if role == "hp" else "be", board, settings,
                               os.environ.get("PYTHONPATH")))
    argv = [sys.executable, __file__, "--child", role, "--result", str(out), "--ready",
            str(ready), "--stop", str(tmp / "stop"), "--device", args.device,
            "--width", str(args.width), "--depth", str(args.depth), "--batch",
            str(args.batch), "--load", str(args.load), "--seconds", str(args.seconds),
            "--service-ms", str(args.service_ms)]
    return subprocess.Popen(argv, env=env), out, ready


def _wait_for(path: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"gpu_priority: a child failed to start (exit {proc.poll()})")
        time.sleep(0.05)


def run_row(name: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """One row: HP and/or BE as child processes; their results."""
    runtime = name in ("runtime", "be-alone-runtime")
    board = tmp / f"{name}.board"
    (tmp / "stop").unlink(missing_ok=True)
    be = hp = None
    row: dict[str, Any] = {"row": name}
    if name != "hp-alone":
        be = _spawn("be", args, tmp, runtime, board)
        _wait_for(be[2], be[0])
    if not name.startswith("be-alone"):
        hp = _spawn("hp", args, tmp, runtime, board)
        if hp[0].wait(timeout=CHILD_TIMEOUT_S + args.seconds) != 0:
            raise SystemExit("gpu_priority: the HP child failed")
        row.update(json.loads(hp[1].read_text()))
    else:
        time.sleep(args.seconds)
    if be is not None:
        (tmp / "stop").touch()
        if be[0].wait(timeout=CHILD_TIMEOUT_S) != 0:
            raise SystemExit("gpu_priority: the BE child failed")
        result = json.loads(be[1].read_text())
        steps = result["steps"]
        lo, hi = row.get("window", [steps[2], steps[-1]])
        inside = [t for t in steps if lo <= t <= hi]
        row["be_steps_per_s"] = (len(inside) - 1) / (inside[-1] - inside[0]) \
            if len(inside) > 1 else 0.0
        row["gate"] = result["gate"]
    row.pop("window", None)
    return row


def _write(rows: list[dict[str, Any]], meta: dict[str, Any], out: Path) -> None:
    alone = {r["row"]: r for r in rows}
    for r in rows:
        if "p99_ms" in r and "hp-alone" in alone:
            r["p99_over_alone"] = r["p99_ms"] / alone["hp-alone"]["p99_ms"]
        if "be_steps_per_s" in r and "be-alone" in alone:
            r["be_over_alone"] = r["be_steps_per_s"] / alone["be-alone"]["be_steps_per_s"]
    out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    fields = ["row", "requests", "p50_ms", "p99_ms", "p99_over_alone", "be_steps_per_s",
              "be_over_alone", "gate_waits", "gate_bounded", "gate_waited_s"]
    with out.with_suffix(".csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fields, extrasaction="ignore")
        writer.writeheader()
        for r in rows:
            gate = r.get("gate") or {}
            writer.writerow({**r, "gate_waits": gate.get("waits"),
                             "gate_bounded": gate.get("bounded"),
                             "gate_waited_s": gate.get("waited_s")})


def _describe(device: str) -> str:
    try:
        import torch  # noqa: PLC0415 - optional

        name = torch.cuda.get_device_name(0) if device != "cpu" else "cpu"
        return f"{name}, torch {torch.__version__}"
    except Exception as exc:  # a description only
        return f"unknown ({type(exc).__name__})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("gpu_priority.json"))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick", action="store_true", help="tiny models, 3 s rows (a smoke "
                        "test of the script, on CPU too)")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--width", type=int, default=8192)
    parser.add_argument("--depth", type=int, default=16)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--load", type=float, default=0.3)
    parser.add_argument("--lease-s", type=float, default=0.005)
    parser.add_argument("--max-hold-s", type=float, default=0.1)
    parser.add_argument("--floor", type=float, default=0.1)
    parser.add_argument("--service-ms", type=float, default=0.0, help="HP's request time "
                        "alone (ms) behind its arrival rate; 0: measured in hp-alone")
    parser.add_argument("--child", choices=["hp", "be"], help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    parser.add_argument("--ready", help=argparse.SUPPRESS)
    parser.add_argument("--stop", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not 0.0 < args.load <= 1.0:
        parser.error(f"--load: {args.load} must be a fraction in (0, 1]")
    if args.child:
        if args.device == "cpu":
            import torch  # noqa: PLC0415

            torch.set_num_threads(1)
        result = child_hp(args) if args.child == "hp" else child_be(args)
        Path(args.result).write_text(json.dumps(result))
        return
    if args.quick:
        args.seconds, args.width, args.depth = min(args.seconds, 3.0), 256, 4
    meta = {"device": _describe(args.device), "date": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                    time.gmtime()),
            "settings": {k: v for k, v in vars(args).items() if k not in (
                "child", "result", "ready", "stop", "out")}}
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="cotenant-priority-") as tmp:
        for name in ("hp-alone", "be-alone", "be-alone-runtime", "plain", "runtime"):
            rows.append(run_row(name, args, Path(tmp)))
            if name == "hp-alone":  # the same offered load in every later row
                args.service_ms = rows[-1]["service_ms"]
            _write(rows, meta, args.out)
            print(json.dumps(rows[-1], default=str), flush=True)
    print(f"wrote {args.out} and {args.out.with_suffix('.csv')}")


if __name__ == "__main__":
    main()
