"""``cotenant agent`` and ``cotenant mig apply|export`` on the fake backend; bad input gives one
line and exit 2."""

from __future__ import annotations

import ctypes.util
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from cotenant.agent.api import AgentServer
from cotenant.agent.backends import FakeNode
from cotenant.agent.service import AgentService
from cotenant.agent.spec import WorkloadSpec
from cotenant.agent.state import StateStore, Status
from cotenant.cli.agent import StopRequest
from cotenant.cli.agent_inputs import PolicyOptions, colocation_policy_of, parse_listen
from cotenant.errors import InputError
from cotenant.policies.colocation import COLOCATION, DynamicShare, FixedShare

from .test_cli import assert_one_error_line, run

Capsys = pytest.CaptureFixture[str]


def test_mig_apply_on_fake(capsys: Capsys) -> None:
    code, out, _ = run(capsys, "mig", "apply", "3g.20gb,2g.10gb,1g.5gb,1g.5gb", "--gpu", "0",
                       "--backend", "fake")
    assert code == 0
    assert out.strip() == "GPU 0: applied 2g.10gb@0,1g.5gb@2,1g.5gb@3,3g.20gb@4 (changed)"


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["mig", "apply", "3g.20gb,3g.20gb,3g.20gb", "--gpu", "0", "--backend", "fake"],
         "no valid starts"),
        (["mig", "apply", "5g.20gb", "--gpu", "0", "--backend", "fake"], "does not exist"),
        (["mig", "apply", "7g.40gb", "--gpu", "4", "--backend", "fake", "--gpus", "A100:4"],
         "no such GPU"),
        (["mig", "apply", "1g.5gb", "--gpu", "0", "--backend", "fake", "--gpus", "T4"],
         "does not support MIG"),
        (["mig", "apply", "1g.5gb", "--gpu", "0", "--backend", "nope"], "unknown backend"),
        (["mig", "export", "--backend", "fake", "--gpus", "A100:x"], "count must be"),
        (["mig", "export", "--backend", "fake", "--gpus", "A100:0"],
         "--gpus: 'A100:0': count must be an integer 1..64"),
        (["agent", "run", "--backend", "fake", "--policy", "mps-fixed", "--online-share",
          "0"], "outside 1-100"),
        (["agent", "run", "--backend", "fake", "--policy", "mps-fixed", "--online-share",
          "101"], "outside 1-100"),
        (["agent", "run", "--backend", "fake", "--online-share", "50"],
         "--online-share: is a setting of the mps-fixed policy, not 'cotenant-pause'"),
        (["agent", "run", "--backend", "fake", "--share-policy", "static"],
         "--share-policy: is now --policy"),
        (["agent", "run", "--backend", "fake", "--policy", "time-slicing"],
         "co-location policy 'time-slicing': shares GPUs by time-slicing; the node agent "
         "enforces MPS shares and priority sharing only"),
        (["agent", "run", "--backend", "fake", "--policy", "dedicated"],
         "the node agent enforces MPS shares and priority sharing only (hint: use one of: "
         "mps-fixed, priority, muxflow, cotenant-pause, cotenant-priority)"),
        (["agent", "run", "--backend", "fake", "--guard"],
         "--guard: is a setting of the mps-fixed policy, not 'cotenant-pause'"),
        (["agent", "run", "--backend", "fake", "--policy", "mps-fixed", "--guard-pause-s", "5"],
         "--guard-pause-s: is a setting of the compute guard, which policy 'mps-fixed' does "
         "not have"),
        (["agent", "run", "--backend", "fake", "--share-window-s", "0"],
         "--share-window-s: 0 s must be a finite number > 0"),
        (["agent", "run", "--backend", "fake", "--cgroups", "off"],
         "--cgroups: is a setting of the nvml backend, not 'fake'"),
        (["agent", "run", "--backend", "fake", "--listen", "no-such-host.invalid:0"],
         "--listen: cannot listen on no-such-host.invalid:0"),
        (["agent", "run", "--backend", "fake", "--listen", "nowhere"], "HOST:PORT"),
        (["agent", "run", "--backend", "gpu"], "unknown backend"),
        (["agent", "run", "--backend", "fake", "--policy", "nope"],
         "unknown co-location policy 'nope'"),
        (["agent", "run", "--backend", "fake", "--policy", "os:path"],
         "os:path: is a module, not a co-location policy factory"),
        (["agent", "run", "--backend", "fake", "--policy", "os:getcwd"],
         "'os:getcwd' made a str, not a co-location policy"),
        (["agent", "run", "--backend", "fake", "--policy", "os:getenv"],
         "os:getenv: cannot build a co-location policy with no arguments"),
        (["agent", "run", "--backend", "fake", "--min-online-share", "0"], "outside 1-100"),
        (["agent", "run", "--backend", "fake", "--policy", "mps-fixed",
          "--min-online-share", "50"], "a setting of the dynamic share sizing (muxflow, "
                                       "cotenant-pause), not 'mps-fixed'"),
        (["agent", "run", "--backend", "fake", "--listen", "127.0.0.1:0", "--share-window-s",
          "inf"], "--share-window-s: inf must be a finite number"),
        (["agent", "run", "--backend", "fake", "--listen", "127.0.0.1:0",
          "--scrape-interval-s", "inf"], "--scrape-interval-s: inf must be a finite"),
        (["agent", "run", "--backend", "fake", "--listen", "127.0.0.1:0",
          "--guard-pause-s", "inf"], "--guard-pause-s: inf must be a finite"),
        (["agent", "run", "--backend", "nvml", "--cgroups", "/nonexistent/cotenant"],
         "--cgroups: /nonexistent/cotenant: cannot run a process in a cgroup v2"),
        (["mig", "apply", "7g.40gb", "--gpu", "0", "--backend", "fake", "--drain", "--grace-s",
          "inf"], "--grace-s: inf must be a finite number"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    capsys: Capsys, tmp_path: Path, argv: list[str], needle: str
) -> None:
    code, out, err = run(capsys, *argv, *(["--state-dir", str(tmp_path)]))
    assert code == 2
    assert out == ""
    assert needle in assert_one_error_line(err)


def test_listen_takes_an_ipv6_host_in_brackets() -> None:
    assert parse_listen("[::1]:8470") == ("::1", 8470)
    assert parse_listen("0.0.0.0:0") == ("0.0.0.0", 0)
    with pytest.raises(InputError, match="an IPv6 host goes in brackets"):
        parse_listen("::1:8470")


@pytest.mark.skipif(not socket.has_ipv6, reason="no IPv6 on this host")
def test_the_agent_listens_on_ipv6(capsys: Capsys, tmp_path: Path) -> None:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("::1 cannot be bound here")
    code, out, _ = run(capsys, "agent", "run", "--backend", "fake", "--state-dir", str(tmp_path),
                       "--listen", "[::1]:0", "--interval", "0.01", "--ticks", "2")
    assert code == 0
    assert "API on http://[::1]:" in out


def test_a_state_dir_that_is_a_file_or_a_foreign_database(
    capsys: Capsys, tmp_path: Path
) -> None:
    taken = tmp_path / "file"
    taken.write_text("x", encoding="utf-8")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "agent.db").write_text("not sqlite at all\n" * 100, encoding="utf-8")
    for state_dir, needle in ((taken, "--state-dir: " + str(taken) + " exists and is not a "
                               "directory"),
                              (foreign, f"{foreign / 'agent.db'}: is not the agent's state "
                               "database")):
        code, _out, err = run(capsys, "agent", "run", "--backend", "fake", "--state-dir",
                             str(state_dir), "--listen", "127.0.0.1:0", "--ticks", "1")
        assert code == 2
        assert needle in assert_one_error_line(err)
    assert (foreign / "agent.db").read_text(encoding="utf-8").startswith("not sqlite")


def test_mig_export_yaml(capsys: Capsys) -> None:
    code, out, _ = run(capsys, "mig", "export", "--backend", "fake", "--gpus", "H100-80GB:2")
    assert code == 0
    doc = yaml.safe_load(out)
    assert doc["mig-configs"]["cotenant-current"][0]["devices"] == [0, 1]


def test_agent_run_fake_for_a_few_ticks(capsys: Capsys, tmp_path: Path) -> None:
    code, out, _ = run(capsys, "agent", "run", "--backend", "fake", "--gpus", "H100:2",
                       "--state-dir", str(tmp_path), "--listen", "127.0.0.1:0",
                       "--interval", "0.01", "--ticks", "3", "--guard-pause-s", "0")
    assert code == 0
    assert "fake backend, 2 GPUs" in out
    token = tmp_path / "token"
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    assert (tmp_path / "agent.db").exists()


def test_the_fake_backends_programs_run_on_the_agents_clock(
    capsys: Capsys, tmp_path: Path
) -> None:
    """A fake program's duration elapses in ``agent run`` (its clock used to stand still, so
    no fake job ever ended, checkpointed or warmed up there)."""
    store = StateStore(tmp_path / "agent.db")
    store.add(WorkloadSpec.from_dict({"name": "job", "role": "offline", "gpu": 0,
                                      "argv": ["fake-workload", "--duration-s", "0.05"]}),
              time.time())
    store.close()
    code, _, _ = run(capsys, "agent", "run", "--backend", "fake", "--state-dir", str(tmp_path),
                     "--listen", "127.0.0.1:0", "--interval", "0.1", "--ticks", "4")
    assert code == 0
    store = StateStore(tmp_path / "agent.db")
    try:
        record = store.get("job")
        assert record is not None
        assert record.status is Status.COMPLETED
    finally:
        store.close()


def test_submit_validates_locally(capsys: Capsys, tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"name": "x", "argv": ["a"], "role": "offline", "gpu": 0,
                                "sm_share": 0}), encoding="utf-8")
    code, _, err = run(capsys, "agent", "submit", str(spec), "--token-file", str(spec))
    assert code == 2
    assert "spec.json.sm_share: SM share 0 is outside 1-100" in assert_one_error_line(err)
    spec.write_text(json.dumps({"name": "x", "argv": "sh -c id", "role": "offline", "gpu": 0}),
                    encoding="utf-8")
    code, _, err = run(capsys, "agent", "submit", str(spec))
    assert code == 2
    assert "argv" in assert_one_error_line(err)


def test_status_without_agent_is_one_line(capsys: Capsys, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("t", encoding="utf-8")
    code, _, err = run(capsys, "agent", "status", "--url", "http://127.0.0.1:9",
                       "--token-file", str(token))
    assert code == 2
    assert "cannot reach the agent" in assert_one_error_line(err)


@pytest.fixture
def live_agent(tmp_path: Path) -> Iterator[tuple[str, Path, AgentService]]:
    service = AgentService(FakeNode.build("A100-40GB", 2), tmp_path,
                           COLOCATION.create("mps-fixed", share=70))
    server = AgentServer(("127.0.0.1", 0), service, "tok")
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    token = tmp_path / "token"
    token.write_text("tok\n", encoding="utf-8")
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", token, service
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
        service.close()


def test_submit_status_stop_against_a_live_agent(
    capsys: Capsys, tmp_path: Path, live_agent: tuple[str, Path, AgentService]
) -> None:
    url, token, service = live_agent
    spec = tmp_path / "web.json"
    spec.write_text(json.dumps({"name": "web", "argv": ["fake-workload"], "role": "online",
                                "gpu": 1, "model": "resnet50"}), encoding="utf-8")
    assert run(capsys, "agent", "submit", str(spec), "--url", url, "--token-file",
               str(token))[1].strip() == "web: pending"
    code, out, _ = run(capsys, "agent", "status", "--url", url, "--token-file", str(token),
                       "--json")
    assert code == 0
    data = json.loads(out)
    assert [w["name"] for w in data["workloads"]] == ["web"]
    assert len(data["gpus"]) == 2
    code, out, _ = run(capsys, "agent", "status", "--url", url, "--token-file", str(token))
    assert code == 0
    assert "Workloads" in out
    assert "Offline downtime" not in out  # nothing measured yet
    auth = ("--url", url, "--token-file", str(token))
    code, _, err = run(capsys, "agent", "report", "web", "--p99-ms", "12.5", *auth)
    assert code == 2  # not running yet
    assert "HTTP 400: p99 report for 'web': only a running online" in assert_one_error_line(err)
    service.tick()  # starts it
    service.tick()  # the co-location controller sees it running
    code, out, _ = run(capsys, "agent", "report", "web", "--p99-ms", "12.5", *auth)
    assert code == 0
    assert out.strip() == "web: GPU 1, online share 100 %"  # no co-runner: the whole GPU
    assert run(capsys, "agent", "stop", "web", *auth)[1].strip() == "web: stopping"
    code, _, err = run(capsys, "agent", "report", "a b?#", "--p99-ms", "1", *auth)
    assert code == 2  # the name is escaped, so the agent answers for that name
    assert "HTTP 404: no workload 'a b?#'" in assert_one_error_line(err)
    bad = tmp_path / "bad"
    bad.write_text("nope", encoding="utf-8")
    code, _, err = run(capsys, "agent", "status", "--url", "agent.local", "--token-file",
                       str(token))
    assert code == 2  # no scheme: one line, no traceback
    assert "--url agent.local: unknown url type" in assert_one_error_line(err)
    code, _, err = run(capsys, "agent", "status", "--url", url, "--token-file", str(bad))
    assert code == 2
    assert "HTTP 401" in assert_one_error_line(err)


def test_a_stop_signal_ends_the_agent_between_ticks() -> None:
    """The first SIGINT/SIGTERM is kept for the loop to act on once its tick is done (a tick
    cut short could leave a workload started but not recorded); a second one stops it at
    once."""
    stop = StopRequest()
    stop(signal.SIGTERM, None)
    assert stop.requested
    started = time.monotonic()
    stop.sleep(30.0)  # a stop asked for: no sleep
    assert time.monotonic() - started < 1.0
    with pytest.raises(KeyboardInterrupt):
        stop(signal.SIGINT, None)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_the_agent_stops_on_sigterm_or_sigint(tmp_path: Path, signum: int) -> None:
    agent = subprocess.Popen(
        [sys.executable, "-c", "from cotenant.cli.main import main; main()", "agent", "run",
         "--backend", "fake", "--gpus", "H100:1", "--state-dir", str(tmp_path),
         "--listen", "127.0.0.1:0", "--interval", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert agent.stdout is not None
        assert "fake backend" in agent.stdout.readline()  # it runs: its loop sleeps 60 s
        agent.send_signal(signum)
        out, _ = agent.communicate(timeout=30)
    finally:
        agent.kill()
        agent.wait()
    assert agent.returncode == 0
    assert "cotenant agent: stopping" in out


def test_agent_run_builds_its_policy_from_the_registry_and_its_options() -> None:
    """``--policy`` names a COLOCATION policy; each option sets that policy's own setting
    (``--min-online-share`` the floor of its dynamic sizing, for a guard that sees the p99
    seconds late; ``--share-window-s`` its load window; the guard's pause and scrape)."""
    default = colocation_policy_of("cotenant-pause")
    assert default == COLOCATION.create("cotenant-pause")
    floored = colocation_policy_of("muxflow", PolicyOptions(min_online_share=60))
    assert floored.share == DynamicShare(min_share=60)
    fixed = colocation_policy_of("mps-fixed", PolicyOptions(online_share=40, guard=True,
                                                            pause_s=5.0, scrape_s=1.0))
    assert fixed.share == FixedShare(40)
    assert fixed.guard is not None
    assert (fixed.guard.pause_s, fixed.guard.scrape_s) == (5.0, 1.0)
    assert colocation_policy_of("mps-fixed").guard is None
    windowed = colocation_policy_of("cotenant-pause", PolicyOptions(load_window_s=30.0))
    assert windowed.load_window_s == 30.0


def test_agent_run_fake_in_mig_mode(capsys: Capsys, tmp_path: Path) -> None:
    code, out, _ = run(capsys, "agent", "run", "--backend", "fake", "--gpus", "A100-40GB:2",
                       "--fake-mig", "3g.20gb,2g.10gb,1g.5gb,1g.5gb", "--state-dir",
                       str(tmp_path), "--listen", "127.0.0.1:0", "--interval", "0.01",
                       "--ticks", "2")
    assert code == 0
    assert "every GPU in MIG mode with 3g.20gb,2g.10gb,1g.5gb,1g.5gb" in out
    code, _, err = run(capsys, "agent", "run", "--backend", "fake", "--fake-mig", "9g.99gb",
                       "--state-dir", str(tmp_path / "b"), "--listen", "127.0.0.1:0",
                       "--ticks", "1")
    assert code == 2
    assert "9g.99gb" in assert_one_error_line(err)
    code, _, err = run(capsys, "agent", "run", "--backend", "nvml", "--fake-mig", "7g.40gb",
                       "--state-dir", str(tmp_path / "c"), "--ticks", "1")
    assert code == 2
    assert "--fake-mig" in assert_one_error_line(err)


def test_status_shows_the_offline_downtime_the_agent_measured(
    capsys: Capsys, tmp_path: Path, live_agent: tuple[str, Path, AgentService]
) -> None:
    url, token, service = live_agent
    service.submit({"name": "train", "role": "offline", "gpu": 0,
                    "argv": ["fake-workload", "--util-pct", "60"]})
    service.tick()  # starts it; busy at once
    auth = ("--url", url, "--token-file", str(token))
    code, out, _ = run(capsys, "agent", "status", "--json", *auth)
    assert code == 0
    downtime = json.loads(out)["downtime"]
    # an MPS client, sampled on its daemon as NVML does: a lower bound, kept apart
    assert downtime["kinds"] == {}
    assert list(downtime["lower_bounds"]) == ["start"]
    assert downtime["lower_bounds"]["start"]["count"] == 1
    code, out, _ = run(capsys, "agent", "status", *auth)
    assert code == 0
    assert "Offline downtime, lower bounds" in out
    assert "world.offlineStartS" in out


class _OldAgent(BaseHTTPRequestHandler):
    """An agent from before ``/v1/downtime``: it answers 404 there."""

    def do_GET(self) -> None:
        replies = {"/v1/gpus": [], "/v1/workloads": []}
        body = json.dumps(replies.get(self.path, {"error": f"no route GET {self.path}"}))
        self.send_response(200 if self.path in replies else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, format: str, *args: object) -> None:
        return


def test_status_of_an_agent_without_the_downtime_route(capsys: Capsys, tmp_path: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _OldAgent)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    token = tmp_path / "token"
    token.write_text("tok\n", encoding="utf-8")
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        code, out, _ = run(capsys, "agent", "status", "--url", url, "--token-file", str(token))
        assert code == 0
        assert "Workloads" in out
        assert "Offline downtime" not in out
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.skipif(ctypes.util.find_library("nvidia-ml") is not None,
                    reason="an NVIDIA driver is installed here")
def test_agent_run_without_a_gpu_leaves_an_owner_only_state_dir_and_names_laptop_mode(
        capsys: Capsys, tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        code, out, err = run(capsys, "agent", "run", "--state-dir", str(tmp_path / "state"),
                             "--listen", "127.0.0.1:0")
    finally:
        os.umask(old)
    assert code != 0
    assert out == ""
    assert "--backend fake" in assert_one_error_line(err)
    assert stat.S_IMODE((tmp_path / "state").stat().st_mode) == 0o700
