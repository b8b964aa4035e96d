"""GPU calibration of co-location: online latency beside a training job, measured alike for
every sharing mechanism, the cost of pausing and of restarting the offline job.

Needs one NVIDIA GPU, PyTorch (torchvision if present, else a hand-built ResNet-50) and, for
the MPS rows, ``nvidia-cuda-mps-control``. It never changes MIG mode, clocks, power or compute
mode; it starts an MPS control daemon under a private directory and quits it at the end.

Online service: ResNet-50 inference, batch 32, fp32 (TF32 allowed), open-loop Poisson
arrivals at a duty cycle ``load`` of its solo capacity (``load / S`` batches a second, ``S``
its solo batch time), FIFO, one batch at a time, as ``perf.mps`` models a service; a request's
latency is its completion less its arrival. Offline job: ResNet-50 training, batch 64, SGD,
``loss.item()`` every step (as a training loop that logs its loss does).

Rows, each the same statistic (the online p99 over its solo p99 at the same load, and the
offline steps a second over its solo rate):

* ``solo``: each side alone (no MPS);
* ``time-slicing``: both, no MPS (the GPU's default time slicing);
* ``mps-<p>``: under MPS, the online client uncapped and the offline one capped at
  ``100 - p`` percent of the threads (what the node agent sets for an online share ``p``);
  ``mps-plain``: both uncapped (Tally's "MPS"); ``mps-cap-<p>``: the online client alone,
  capped at ``p`` (its speed at a share, MIGER's MPS rows);
* ``pause``: with the offline job running beside a busy online service, SIGSTOP to the job:
  the time until the online batch time is back within 10% of solo (the kernels already
  queued draining), per stop;
* ``start``: spawn of the training process until its first step ends, and until its
  throughput is steady (what ``offline_start_s`` and ``share_change_s`` assume).

Writes one JSON file, rewritten after every row, so a run cut short keeps what it measured:

    PYTHONUNBUFFERED=1 python3 benchmarks/gpu_colocation.py --out OUT.json [--seconds 10]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CHILD_TIMEOUT_S = 90.0
DEVICE = os.environ.get("COTENANT_GPU_DEVICE", "cuda")
"""``cpu`` runs the whole script on a tiny model without a GPU: a smoke test of its logic."""
SMOKE = DEVICE == "cpu"


def _sync(torch: Any) -> None:
    if not SMOKE:
        torch.cuda.synchronize()


# --- the two workloads (run as child processes) -------------------------------------------


def _resnet50() -> Any:
    import torch  # noqa: PLC0415 - only the children import torch

    if SMOKE:
        nn = torch.nn
        return nn.Sequential(nn.Conv2d(3, 8, 3, 2), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                             nn.Flatten(), nn.Linear(8, 1000))
    try:
        import torchvision  # noqa: PLC0415

        return torchvision.models.resnet50()
    except ImportError:  # pragma: no cover - the image has torchvision
        return _plain_resnet50(torch)


def _plain_resnet50(torch: Any) -> Any:
    """ResNet-50's layer shapes (He et al. 2016), for an image without torchvision."""
    nn = torch.nn

    class Bottleneck(nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self, cin: int, width: int, stride: int) -> None:
            super().__init__()
            cout = width * 4
            self.body = nn.Sequential(
                nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width),
                nn.ReLU(), nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout))
            self.skip = (nn.Identity() if stride == 1 and cin == cout else nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)))

        def forward(self, x: Any) -> Any:
            return torch.relu(self.body(x) + self.skip(x))

    layers: list[Any] = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                         nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            layers.append(Bottleneck(cin, width, stride if i == 0 else 1))
            cin = width * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 1000)]
    return nn.Sequential(*layers)


def child_train(beats: str) -> None:
    """Train until killed; one line per step: the wall time it ended."""
    started = time.time()
    import torch  # noqa: PLC0415

    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.benchmark = True
    model = _resnet50().to(DEVICE).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(64, 3, 224, 224, device=DEVICE)
    y = torch.randint(0, 1000, (64,), device=DEVICE)
    loss_fn = torch.nn.CrossEntropyLoss()
    with open(beats, "a", encoding="utf-8") as out:
        out.write(f"start {started}\n")
        out.flush()
        while True:
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            loss.item()
            out.write(f"{time.time()}\n")
            out.flush()


def child_online(result: str, load: float, seconds: float, seed: int, closed: bool) -> None:
    """Serve batches of 32: measure the solo-like batch time here first, then either an
    open-loop Poisson stream at ``load`` (latencies) or, with ``closed``, back-to-back
    batches with their start and end times (the pause rows)."""
    import random  # noqa: PLC0415

    import torch  # noqa: PLC0415

    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.benchmark = True
    model = _resnet50().to(DEVICE).eval()
    x = torch.randn(32, 3, 224, 224, device=DEVICE)
    with torch.inference_mode():
        for _ in range(30):
            model(x)
        _sync(torch)
        times = []
        for _ in range(40):
            t0 = time.perf_counter()
            model(x)
            _sync(torch)
            times.append(time.perf_counter() - t0)
        times.sort()
        service_s = times[len(times) // 2]
        out: dict[str, Any] = {"service_ms_here": 1000 * service_s, "load": load}
        if closed:
            spans = []
            end = time.time() + seconds
            while time.time() < end:
                a = time.time()
                model(x)
                _sync(torch)
                spans.append((a, time.time()))
                time.sleep(0.002)
            out["spans"] = spans
        else:
            rng = random.Random(seed)
            rate = load / float(os.environ.get("COTENANT_SERVICE_S", service_s))
            arrivals, t = [], 0.0
            while t < seconds:
                t += rng.expovariate(rate)
                arrivals.append(t)
            latencies, busy = [], 0.0
            origin = time.perf_counter()
            for arrival in arrivals:
                now = time.perf_counter() - origin
                if now < arrival:
                    time.sleep(max(0.0, arrival - now - 0.0005))
                    while time.perf_counter() - origin < arrival:
                        pass
                a = time.perf_counter()
                model(x)
                _sync(torch)
                done = time.perf_counter()
                busy += done - a
                latencies.append(done - origin - arrival)
            out["latencies_ms"] = [1000 * v for v in latencies]
            out["busy_fraction"] = busy / (time.perf_counter() - origin)
    Path(result).write_text(json.dumps(out), encoding="utf-8")


# --- orchestration -------------------------------------------------------------------------


def quantile(values: list[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return math.nan
    i = min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))
    return s[i]


class Run:
    """The measurement's state: where files go, the MPS environment, the results so far."""

    def __init__(self, out: Path, seconds: float, work: Path) -> None:
        self.out = out
        self.seconds = seconds
        self.work = work
        self.results: dict[str, Any] = {"rows": {}, "errors": {}}
        self.mps_env: dict[str, str] = {}
        self.solo_service_s: float | None = None

    def save(self) -> None:
        self.out.write_text(json.dumps(self.results, indent=1), encoding="utf-8")

    def env(self, pct: int | None) -> dict[str, str]:
        env = dict(os.environ, **self.mps_env)
        if pct is not None:
            env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(pct)
        if self.solo_service_s is not None:
            env["COTENANT_SERVICE_S"] = str(self.solo_service_s)
        return env

    def start_train(self, pct: int | None, tag: str) -> tuple[subprocess.Popen[bytes], Path,
                                                                 float]:
        beats = self.work / f"beats-{tag}-{time.time():.0f}"
        t0 = time.time()
        proc = subprocess.Popen([sys.executable, __file__, "train", str(beats)],
                                env=self.env(pct), start_new_session=True)
        return proc, beats, t0

    @staticmethod
    def steps(beats: Path) -> list[float]:
        try:
            lines = beats.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        return [float(v) for v in lines if v and not v.startswith("start")]

    def wait_steps(self, beats: Path, n: int, timeout: float) -> bool:
        end = time.time() + timeout
        while time.time() < end:
            if len(self.steps(beats)) >= n:
                return True
            time.sleep(0.1)
        return False

    def online(self, load: float, pct: int | None, closed: bool = False,
               seconds: float | None = None) -> dict[str, Any]:
        result = self.work / f"online-{time.time():.3f}.json"
        cmd = [sys.executable, __file__, "online", str(result), str(load),
               str(seconds or self.seconds), "7", "1" if closed else "0"]
        subprocess.run(cmd, env=self.env(pct), check=True, timeout=CHILD_TIMEOUT_S)
        data: dict[str, Any] = json.loads(result.read_text(encoding="utf-8"))
        return data

    def row(self, name: str, fn: Any) -> None:
        t0 = time.time()
        print(f"[{time.strftime('%H:%M:%S')}] {name}", flush=True)
        try:
            self.results["rows"][name] = fn()
        except Exception as exc:  # one failed row never stops the others
            self.results["errors"][name] = f"{type(exc).__name__}: {exc}"
            print(f"  failed: {exc}", flush=True)
        self.results["rows"].setdefault(name, {})
        if isinstance(self.results["rows"][name], dict):
            self.results["rows"][name]["wall_s"] = round(time.time() - t0, 1)
        self.save()


def stop(proc: subprocess.Popen[bytes]) -> None:
    with_group = os.getpgid(proc.pid) if proc.poll() is None else None
    if with_group is not None:
        os.killpg(with_group, signal.SIGCONT)
        os.killpg(with_group, signal.SIGKILL)
    proc.wait(timeout=30)


def summary(online: dict[str, Any]) -> dict[str, Any]:
    lat = online["latencies_ms"]
    return {"requests": len(lat), "p50_ms": quantile(lat, 0.5), "p99_ms": quantile(lat, 0.99),
            "mean_ms": sum(lat) / len(lat), "busy_fraction": online["busy_fraction"],
            "service_ms_here": online["service_ms_here"]}


def rate(steps: list[float], t0: float, t1: float) -> float:
    inside = [s for s in steps if t0 <= s <= t1]
    return (len(inside) - 1) / (inside[-1] - inside[0]) if len(inside) > 2 else math.nan


def beside(run: Run, name: str, load: float, online_pct: int | None,
           offline_pct: int | None, solo: dict[str, Any], solo_rate: float) -> dict[str, Any]:
    proc, beats, _ = run.start_train(offline_pct, name)
    try:
        if not run.wait_steps(beats, 20, CHILD_TIMEOUT_S):
            raise RuntimeError("the training job made no 20 steps")
        t0 = time.time()
        got = summary(run.online(load, online_pct))
        t1 = time.time()
        got["offline_steps_per_s"] = rate(run.steps(beats), t0, t1)
    finally:
        stop(proc)
    got["p99_ratio"] = got["p99_ms"] / solo["p99_ms"]
    got["offline_norm_tput"] = got["offline_steps_per_s"] / solo_rate
    return got


def solo_train(run: Run, pct: int | None, tag: str) -> dict[str, Any]:
    proc, beats, t0 = run.start_train(pct, tag)
    try:
        if not run.wait_steps(beats, 1, CHILD_TIMEOUT_S):
            raise RuntimeError("no first step")
        first = run.steps(beats)[0]
        time.sleep(min(run.seconds, 5.0))
        steps = run.steps(beats)
    finally:
        stop(proc)
    start_line = [v for v in (beats.read_text(encoding="utf-8").splitlines()) if
                  v.startswith("start")]
    steady = rate(steps, steps[len(steps) // 2], steps[-1])
    # steady: the first step from which a 10-step window runs within 10% of the steady rate
    ready = next((steps[i] for i in range(len(steps) - 10)
                  if 10 / (steps[i + 10] - steps[i]) >= 0.9 * steady), math.nan)
    return {"steps_per_s": steady, "spawn_to_first_step_s": first - t0,
            "spawn_to_steady_s": ready - t0,
            "python_start_s": float(start_line[0].split()[1]) - t0 if start_line else None}


def pause_rows(run: Run, solo_service_ms: float, stops: int = 5) -> dict[str, Any]:
    proc, beats, _ = run.start_train(None, "pause")
    drains: list[float] = []
    try:
        if not run.wait_steps(beats, 20, CHILD_TIMEOUT_S):
            raise RuntimeError("the training job made no 20 steps")
        pgid = os.getpgid(proc.pid)
        marks: list[float] = []
        result = run.work / "pause-online.json"
        cmd = [sys.executable, __file__, "online", str(result), "1.0",
               str(4 + 2.5 * stops), "7", "1"]
        online = subprocess.Popen(cmd, env=run.env(None))
        time.sleep(6.0)  # its start-up and warm-up
        for _ in range(stops):
            marks.append(time.time())
            os.killpg(pgid, signal.SIGSTOP)
            time.sleep(1.0)
            os.killpg(pgid, signal.SIGCONT)
            time.sleep(1.5)
        online.wait(timeout=CHILD_TIMEOUT_S)
        spans = json.loads(result.read_text(encoding="utf-8"))["spans"]
    finally:
        stop(proc)
    for mark in marks:
        after = [(a, b) for a, b in spans if b > mark]
        back = next((b for a, b in after if (b - a) * 1000 <= 1.1 * solo_service_ms), math.nan)
        drains.append(back - mark)
    return {"stops": len(marks), "drain_s": drains,
            "drain_median_s": quantile(drains, 0.5), "drain_max_s": max(drains)}


def start_mps(run: Run) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="cotenant-mps-"))
    run.mps_env = {"CUDA_MPS_PIPE_DIRECTORY": str(base / "pipe"),
                   "CUDA_MPS_LOG_DIRECTORY": str(base / "log")}
    for d in run.mps_env.values():
        Path(d).mkdir(parents=True)
    env = dict(os.environ, **run.mps_env)
    subprocess.run(["nvidia-cuda-mps-control", "-d"], env=env, check=True, timeout=30)
    time.sleep(1.0)
    return {"pipe": run.mps_env["CUDA_MPS_PIPE_DIRECTORY"]}


def stop_mps(run: Run) -> None:
    if not run.mps_env:
        return
    env = dict(os.environ, **run.mps_env)
    run.mps_env = {}
    try:
        subprocess.run(["nvidia-cuda-mps-control"], input=b"quit\n", env=env, timeout=30,
                       check=False)
    except OSError as exc:  # never started: nothing to quit
        run.results["errors"]["mps-quit"] = str(exc)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "train":
        child_train(sys.argv[2])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "online":
        child_online(sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]),
                     sys.argv[6] == "1")
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--loads", type=float, nargs="+", default=[0.45])
    parser.add_argument("--shares", type=int, nargs="+", default=[50, 70])
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cotenant-gpu-"))
    run = Run(args.out, args.seconds, work)
    import torch  # noqa: PLC0415

    run.results["device"] = {"torch": torch.__version__, "date": time.strftime("%Y-%m-%d")}
    if not SMOKE:
        props = torch.cuda.get_device_properties(0)
        run.results["device"].update(name=props.name, sms=props.multi_processor_count,
                                     memory_mib=props.total_memory // 2**20)
    run.save()
    rows = run.results["rows"]
    run.row("start", lambda: {"samples": [solo_train(run, None, f"s{i}") for i in range(3)]})
    train_rate = rows["start"]["samples"][-1]["steps_per_s"] if "samples" in rows[
        "start"] else math.nan
    for load in args.loads:
        run.row(f"solo@{load}", lambda load=load: summary(run.online(load, None)))
        if run.solo_service_s is None and "service_ms_here" in rows[f"solo@{load}"]:
            run.solo_service_s = rows[f"solo@{load}"]["service_ms_here"] / 1000.0
        run.row(f"time-slicing@{load}", lambda load=load: beside(
            run, "ts", load, None, None, rows[f"solo@{load}"], train_rate))
    solo_ms = rows[f"solo@{args.loads[0]}"].get("service_ms_here", math.nan)
    run.row("pause", lambda: pause_rows(run, solo_ms))
    run.row("mps-daemon", lambda: start_mps(run))
    try:
        if "mps-daemon" in run.results["errors"]:
            return
        for load in args.loads:
            run.row(f"mps-solo@{load}", lambda load=load: summary(run.online(load, None)))
            base = rows[f"mps-solo@{load}"]
            for p in args.shares:
                run.row(f"mps-{p}@{load}", lambda load=load, p=p, base=base: beside(
                    run, f"mps{p}", load, None, 100 - p, base, train_rate))
            if load == args.loads[0]:
                run.row(f"mps-plain@{load}", lambda load=load, base=base: beside(
                    run, "mpsplain", load, None, None, base, train_rate))
        for p in args.shares:
            run.row(f"mps-cap-{p}", lambda p=p: summary(run.online(args.loads[0], p)))
        run.row("mps-start", lambda: solo_train(run, 100 - args.shares[0], "mpsstart"))
    finally:
        stop_mps(run)
        run.save()


if __name__ == "__main__":
    main()
