"""``cotenant agent``: run the node agent, ask it for its status, submit and stop workloads.

``run`` is the daemon (until SIGINT); the other commands talk to its HTTP API with the bearer
token from ``--token-file`` (default ``<state-dir>/token``, created by ``run`` with mode 0600).
"""

from __future__ import annotations

import ipaddress
import json
import signal
import threading
import time
from pathlib import Path
from typing import Annotated
from urllib.parse import quote

import typer
from rich.console import Console

from cotenant.agent.api import AgentServer
from cotenant.agent.backends import BACKEND_NAMES, cgroup_start, open_backend
from cotenant.agent.colocation.enforce import ENFORCEABLE
from cotenant.agent.mig import MigManager
from cotenant.agent.scrapehosts import ScrapeHosts
from cotenant.agent.service import AgentService
from cotenant.agent.spec import WorkloadSpec
from cotenant.cli.agent_inputs import (
    AgentReplyError,
    PolicyOptions,
    call_agent,
    colocation_policy_of,
    ensure_token,
    parse_listen,
    read_token,
    runtime_settings,
)
from cotenant.cli.checks import finite, out_dir
from cotenant.errors import InputError, PermanentError, UnknownNameError
from cotenant.model.documents import loads_json
from cotenant.policies.colocation import COLOCATION
from cotenant.report.tables import fitted_tables

app = typer.Typer(help="The node agent: MPS, MIG, workloads, metrics.", no_args_is_help=True)

DEFAULT_STATE = Path(".cotenant")
DEFAULT_URL = "http://127.0.0.1:8470"
StateDir = Annotated[Path, typer.Option(help="state directory (SQLite, MPS dirs, token)")]
TokenFile = Annotated[
    Path | None, typer.Option(help="file holding the API bearer token [<state-dir>/token]")
]
Url = Annotated[str, typer.Option(help="the agent's API")]
AGENT_POLICIES = [n for n in COLOCATION if COLOCATION.create(n).mechanism in ENFORCEABLE]
"""The co-location policies the agent can enforce (MPS shares, priority by the runtime)."""


@app.command()
def run(
    backend: Annotated[str, typer.Option(help=f"one of: {', '.join(BACKEND_NAMES)}")] = "nvml",
    gpus: Annotated[str, typer.Option(help="fake backend: MODEL:COUNT")] = "A100-40GB:4",
    fake_mig: Annotated[
        str | None, typer.Option(help="fake backend: every GPU in MIG mode with this layout "
                                 "(e.g. 3g.20gb,2g.10gb,1g.5gb,1g.5gb), to try workloads "
                                 "with a mig_instance")
    ] = None,
    state_dir: StateDir = DEFAULT_STATE,
    listen: Annotated[str, typer.Option(help="HOST:PORT of the API")] = "127.0.0.1:8470",
    token_file: TokenFile = None,
    policy: Annotated[
        str, typer.Option(help="the co-location policy (its share sizing, compute guard and "
                          f"recovery rules): one of {', '.join(AGENT_POLICIES)}, or "
                          "module:attr")
    ] = "cotenant-pause",
    share_policy: Annotated[
        str | None, typer.Option(hidden=True, help="renamed --policy")
    ] = None,
    online_share: Annotated[
        int | None, typer.Option(help="mps-fixed: the online SM share % (default 50)")
    ] = None,
    guard: Annotated[
        bool | None, typer.Option("--guard/--no-guard", help="mps-fixed: add the compute "
                                  "guard that pauses first (default off; the dynamic policies "
                                  "have their own)")
    ] = None,
    min_online_share: Annotated[
        int | None,
        typer.Option(help="muxflow, cotenant-pause: the online share never goes below this % "
                     "(a floor for load bursts the guard sees seconds late; default 10)"),
    ] = None,
    share_window_s: Annotated[
        float | None,
        typer.Option(callback=finite,
                     help="the policy sizes the online share on the peak load of this many "
                     "seconds (> 0): a fall in load gives offline more SMs only once it has "
                     "lasted this long (the policy's own: 60)"),
    ] = None,
    scrape_interval_s: Annotated[
        float | None,
        typer.Option(min=0.1, callback=finite,
                     help="seconds between reads of each online service's "
                     "latency_metric histogram (its p99 feeds the compute guard, which acts "
                     "as a read finishes, not at the next tick; a window with under 20 "
                     "requests grows, up to 5 s. The policy's guard's own: 0.25)"),
    ] = None,
    guard_pause_s: Annotated[
        float | None,
        typer.Option(min=0.0, callback=finite,
                     help="the compute guard first pauses an online service's offline "
                     "co-runner (SIGSTOP) this long; a p99 still over the SLO then throttles "
                     "(0: throttle at once; the policy's guard's own: 10)"),
    ] = None,
    priority_lease_s: Annotated[
        float | None,
        typer.Option(callback=finite, help="priority policies: the runtime holds offline "
                     "operators until this long after the online service's last module call "
                     "(also how long a crashed online process can hold them; default 0.02)"),
    ] = None,
    priority_max_hold_s: Annotated[
        float | None,
        typer.Option(callback=finite, help="priority policies: the longest one wait of an "
                     "offline operator for the online service (default 0.1)"),
    ] = None,
    priority_floor: Annotated[
        float | None,
        typer.Option(callback=finite, help="priority policies: the least part of the time "
                     "the offline job runs however busy the online service is, 0 to <1 "
                     "(default 0.1)"),
    ] = None,
    cgroups_: Annotated[
        str | None,
        typer.Option("--cgroups", help="nvml backend: run each workload in a cgroup v2 of its "
                     "own below this directory, to find, freeze and kill all its processes "
                     "(auto: cotenant-workloads-<hash of --state-dir> in the agent's own "
                     "cgroup, where it may write; off: by process group and environment token "
                     "only; default auto)"),
    ] = None,
    scrape_hosts: Annotated[
        str, typer.Option(help="hosts, addresses or networks (comma-separated, e.g. "
                          "10.0.0.0/8) a latency_metric URL may name besides loopback and "
                          "this node's own addresses")
    ] = "",
    interval: Annotated[
        float, typer.Option(min=0.01, callback=finite, help="seconds between reconcile ticks")
    ] = 1.0,
    ticks: Annotated[
        int, typer.Option(min=0, help="stop after this many ticks (0: until SIGINT)")
    ] = 0,
) -> None:
    """Run the agent until SIGINT. The fake backend runs anywhere: fake GPUs, and each
    workload's argv run as a real process with the environment it would get on a GPU (an
    argv starting with fake-workload is simulated instead)."""
    if backend not in BACKEND_NAMES:
        raise UnknownNameError("backend", backend, BACKEND_NAMES)
    host, port = parse_listen(listen)
    out_dir(state_dir, "--state-dir")
    if share_policy is not None:
        raise InputError("--share-policy", "is now --policy, a co-location policy with its "
                         "share sizing, guard and recovery", hint="static: --policy mps-fixed "
                         "--online-share N --guard; dynamic: --policy cotenant-pause")
    chosen = colocation_policy_of(policy, PolicyOptions(
        online_share, min_online_share, share_window_s, guard, guard_pause_s,
        scrape_interval_s))
    settings = runtime_settings(chosen, priority_lease_s, priority_max_hold_s, priority_floor)
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)  # owner-only from the start
    token = ensure_token(token_file or state_dir / "token")
    if cgroups_ is not None and backend != "nvml":
        raise InputError("--cgroups", f"is a setting of the nvml backend, not {backend!r}",
                         hint="leave it out")
    if fake_mig is not None and backend != "fake":
        raise InputError("--fake-mig", f"is a setting of the fake backend, not {backend!r}",
                         hint="on a real node: cotenant mig apply")
    root = cgroup_start.open_root(cgroups_ or "auto", state_dir) if backend == "nvml" else None
    # the fake's programs (durations, checkpoints, warm-ups) run on the agent's clock
    try:
        node = open_backend(backend, gpus=gpus, state_dir=state_dir, cgroup_root=root,
                            fake_mig=fake_mig is not None, clock=time.time,
                            real_processes=True)
    except PermanentError as exc:
        if backend == "nvml":  # no GPU or driver here: say how to try the agent without one
            exc.hint = (f"{exc.hint}; " if exc.hint else "") + (
                "without a GPU, try laptop mode: --backend fake")
        raise
    if fake_mig is not None:
        manager = MigManager(node)
        for info in node.gpus():
            manager.apply(info.index, fake_mig)
    hosts = ScrapeHosts(scrape_hosts.split(","))
    service = AgentService(node, state_dir, chosen, runtime_settings=settings,
                           scrape_hosts=hosts)
    try:
        server = AgentServer((host, port), service, token)
    except OSError as exc:  # an unknown host, an address in use or not on this machine
        service.close()
        raise InputError("--listen", f"cannot listen on {listen}: {exc.strerror or exc}") from exc
    thread = threading.Thread(target=server.serve_forever, args=(0.2,), daemon=True)
    thread.start()
    service.start_watching()  # the guard acts on a scraped p99 between ticks
    # The handlers go in before the banner: whoever waits for the banner (systemd, a test) may
    # signal at once, and a signal before them would kill the agent mid-way.
    stop = StopRequest()
    previous = {signum: signal.signal(signum, stop) for signum in STOP_SIGNALS}
    count = 0
    try:
        shown = f"[{host}]" if ":" in host else host  # an IPv6 address in a URL
        typer.echo(f"cotenant agent: {backend} backend, {len(node.gpus())} GPUs, API on "
                   f"http://{shown}:{server.server_address[1]} (token in "
                   f"{token_file or state_dir / 'token'}), state in {state_dir}")
        typer.echo(f"cotenant agent: co-location policy {chosen.name} "
                   f"({chosen.mechanism.value} shares)")
        if settings is not None:
            typer.echo(f"cotenant agent: the priority runtime holds offline work while online "
                       f"works (lease {settings.lease_s:g} s, at most {settings.max_hold_s:g} "
                       f"s a wait, floor {settings.floor:g}); boards in {state_dir}/priority")
        if fake_mig is not None:
            typer.echo(f"cotenant agent: every GPU in MIG mode with {fake_mig}; a workload "
                       "names its instance in mig_instance")
        if backend == "nvml":
            typer.echo("cotenant agent: workload processes found by "
                       + (f"their cgroup below {root}" if root else "process group and token"))
        else:
            typer.echo(f"cotenant agent: workloads run as processes of this host (logs in "
                       f"{state_dir / 'logs'}); an argv starting with fake-workload is simulated")
        if not _loopback(host):
            typer.echo(f"cotenant agent: warning: the API listens on {host}, beyond this "
                       "host: anyone who can reach it and holds the token can run programs "
                       "here", err=True)
        last_error = ""
        while not stop.requested and (ticks == 0 or count < ticks):
            try:
                service.tick()
                last_error = ""
            except Exception as exc:  # a bug or a backend fault: keep supervising
                text = f"{type(exc).__name__}: {exc!s:.200}"
                if text != last_error:
                    typer.echo(f"cotenant agent: tick failed ({text}); carrying on", err=True)
                last_error = text
            count += 1
            stop.sleep(interval)
    except KeyboardInterrupt:
        stop.requested = True
    finally:
        # the shutdown is short and must not be cut: it resumes paused offline clients
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)
        try:
            if stop.requested:
                kept = ("simulated workloads end with this process, real ones keep running; "
                        "the next run restarts the first and re-adopts the others"
                        if backend == "fake"
                        else "workloads keep running; the next run re-adopts them")
                typer.echo(f"cotenant agent: stopping ({kept})")
            server.shutdown()
            server.server_close()
            service.close()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)  # Ctrl-C; systemd stops with SIGTERM


def _loopback(host: str) -> bool:
    """Whether ``host`` (of --listen) is reachable from this host only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class StopRequest:
    """The handler for :data:`STOP_SIGNALS`: the first asks the agent to stop once its tick
    is done (a tick cut anywhere could leave a workload started but not recorded, so never
    stopped), a second stops it at once."""

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, *_: object) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def sleep(self, seconds: float) -> None:
        """Sleep ``seconds``, or less once a stop is asked for (a signal does not cut
        :func:`time.sleep` short)."""
        deadline = time.monotonic() + seconds
        while not self.requested and (left := deadline - time.monotonic()) > 0:
            time.sleep(min(left, 0.1))


def _pct(value: object) -> str:
    """A percentage for a table; ``-`` where the agent reports none (MIG mode)."""
    return f"{value:.0f}" if isinstance(value, int | float) else "-"


@app.command()
def status(
    url: Url = DEFAULT_URL,
    state_dir: StateDir = DEFAULT_STATE,
    token_file: TokenFile = None,
    json_out: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """GPUs and workloads of a running agent."""
    token = read_token(token_file or state_dir / "token")
    gpus = call_agent(url, token, "GET", "/v1/gpus")
    workloads = call_agent(url, token, "GET", "/v1/workloads")
    try:
        downtime = call_agent(url, token, "GET", "/v1/downtime")
    except AgentReplyError as exc:  # an agent older than the route
        if exc.code != 404:
            raise
        downtime = {"busy_pct": None, "kinds": {}}
    try:
        health = call_agent(url, token, "GET", "/v1/health")
    except AgentReplyError as exc:  # an agent older than the route
        if exc.code != 404:
            raise
        health = {}
    if json_out:
        typer.echo(json.dumps({"gpus": gpus, "workloads": workloads, "downtime": downtime,
                               "health": health}, indent=2))
        return
    _print_health(health)
    console = Console()
    gpu_rows = [
        [str(g["index"]), g["model"], _pct(g["utilisation_pct"]),
         f"{g['memory_used_mib']}/{g['memory_total_mib']}", "on" if g["mig_enabled"] else "off",
         str(g["online_share_pct"] or "-")]
        for g in gpus
    ]
    console.print(*fitted_tables(
        ["gpu", "model", "util %", "memory MiB", "MIG", "online share %"], gpu_rows,
        console.width, title="GPUs", left=("model", "MIG"),
    ))
    workload_rows = [
        [w["name"], w["role"],
         f"{w['gpu']} {w['mig_instance']}" if w.get("mig_instance") else str(w["gpu"]),
         w["status"], str(w["pid"] or "-"),
         str(w["restarts"]), str(w["applied_pct"] or "-"), w["last_exit"][:40]]
        for w in workloads
    ]
    console.print(*fitted_tables(
        ["name", "role", "gpu", "status", "pid", "restarts", "SM %", "last exit"],
        workload_rows, console.width, title="Workloads",
        left=("name", "role", "status", "last exit"),
    ))
    for key, title in (("kinds", "Offline downtime (until >= {:g}% SM of its own)"),
                       ("lower_bounds", "Offline downtime, lower bounds (until its MPS daemon "
                        "was >= {:g}% SM)")):
        kinds = downtime.get(key) or {}
        if not kinds:
            continue
        rows = [[kind, str(k["count"]), f"{k['median_s']:.1f}", f"{k['p90_s']:.1f}",
                 f"{k['max_s']:.1f}", str(k["simulator_option"])] for kind, k in kinds.items()]
        console.print(*fitted_tables(
            ["offline down per", "count", "median s", "p90 s", "max s", "simulator option"],
            rows, console.width, title=title.format(downtime["busy_pct"]),
            left=("offline down per", "simulator option"),
        ))


def _print_health(health: dict[str, object]) -> None:
    """What needs the operator: failing state writes, rows set aside, unadopted processes."""
    storage = health.get("storage")
    if isinstance(storage, dict) and storage.get("degraded"):
        typer.echo(f"state: writes failing ({storage['degraded']}); supervising from memory, "
                   f"{storage.get('errors')} failed writes so far", err=True)
    for key, what in (("quarantined", "state row set aside"), ("orphans", "process")):
        found = health.get(key)
        if isinstance(found, dict):
            for name, why in found.items():
                typer.echo(f"{what} {name}: {why}", err=True)


@app.command()
def submit(
    spec_path: Annotated[Path, typer.Argument(metavar="SPEC.json", help="a workload spec")],
    url: Url = DEFAULT_URL,
    state_dir: StateDir = DEFAULT_STATE,
    token_file: TokenFile = None,
) -> None:
    """Submit a workload spec (JSON: name, argv list, role, gpu, sm_share, mem_limit_mib, env,
    or mig_instance such as "3g.20gb@4" on a GPU in MIG mode)."""
    try:
        raw = spec_path.read_bytes()
    except OSError as exc:
        raise InputError(str(spec_path), f"cannot read: {exc.strerror}") from exc
    data = loads_json(raw, str(spec_path))
    spec = WorkloadSpec.from_dict(data, str(spec_path))
    token = read_token(token_file or state_dir / "token")
    record = call_agent(url, token, "POST", "/v1/workloads", spec.to_dict())
    typer.echo(f"{record['name']}: {record['status']}")


@app.command()
def stop(
    name: Annotated[str, typer.Argument(help="workload name")],
    url: Url = DEFAULT_URL,
    state_dir: StateDir = DEFAULT_STATE,
    token_file: TokenFile = None,
) -> None:
    """Stop a workload (SIGTERM; it is not restarted)."""
    token = read_token(token_file or state_dir / "token")
    record = call_agent(url, token, "DELETE", f"/v1/workloads/{quote(name, safe='')}")
    typer.echo(f"{record['name']}: {record['status']}")


@app.command()
def report(
    name: Annotated[str, typer.Argument(help="online workload name")],
    p99_ms: Annotated[float, typer.Option("--p99-ms", min=0.0, callback=finite,
                                         help="its measured p99 latency (ms)")],
    url: Url = DEFAULT_URL,
    state_dir: StateDir = DEFAULT_STATE,
    token_file: TokenFile = None,
) -> None:
    """Report an online service's measured p99 to the compute guard (a sidecar calls this,
    or POSTs to /v1/workloads/NAME/p99, every few seconds)."""
    token = read_token(token_file or state_dir / "token")
    reply = call_agent(url, token, "POST", f"/v1/workloads/{quote(name, safe='')}/p99",
                  {"p99_ms": p99_ms})
    typer.echo(f"{reply['workload']}: GPU {reply['gpu']}, online share "
               f"{reply['online_share_pct'] if reply['online_share_pct'] is not None else '-'} %")
