"""The token-protected HTTP API over a fake node: 401s, specs that cannot reach a shell, 400s."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from cotenant.agent import supervisor
from cotenant.agent.api import AgentServer
from cotenant.agent.backends import FakeNode, ManualClock
from cotenant.agent.backends.fake import MPS_SERVER_MIB
from cotenant.agent.metrics import CONTENT_TYPE
from cotenant.agent.service import AgentService
from cotenant.errors import InputError
from cotenant.policies.colocation import COLOCATION

from .harness import OFFLINE, ONLINE, fixed

TOKEN = "s3cret-token"


class Client:
    def __init__(self, url: str, service: AgentService, node: FakeNode) -> None:
        self.url, self.service, self.node = url, service, node

    def call(self, method: str, path: str, body: object = None, token: str | None = TOKEN,
             raw: bytes | None = None) -> tuple[int, bytes]:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        request = urllib.request.Request(self.url + path, data=data, method=method)
        if token is not None:
            request.add_header("Authorization", f"Bearer {token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            payload = exc.read()
            exc.close()
            return exc.code, payload


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Client]:
    clock = ManualClock(1000.0)
    node = FakeNode.build("A100-40GB", 2, clock)
    service = AgentService(node, tmp_path, fixed(70), clock=clock)
    server = AgentServer(("127.0.0.1", 0), service, TOKEN)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield Client(f"http://127.0.0.1:{server.server_address[1]}", service, node)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
        service.close()


@pytest.mark.parametrize("path", ["/v1/workloads", "/v1/gpus", "/metrics", "/nope"])
@pytest.mark.parametrize("token", [None, "wrong", "", "s3cret-token-x"])
def test_without_the_right_token_every_route_is_401(
    client: Client, path: str, token: str | None
) -> None:
    code, body = client.call("GET", path, token=token)
    assert code == 401
    assert json.loads(body) == {"error": "missing or wrong bearer token"}


def test_post_and_delete_need_the_token_too(client: Client) -> None:
    assert client.call("POST", "/v1/workloads", ONLINE, token="bad")[0] == 401
    assert client.call("DELETE", "/v1/workloads/web", token=None)[0] == 401
    assert client.service.workloads() == []


def test_submit_list_stop_and_gpus(client: Client) -> None:
    code, body = client.call("POST", "/v1/workloads", ONLINE)
    assert code == 201
    assert json.loads(body)["status"] == "pending"
    client.call("POST", "/v1/workloads", OFFLINE)
    client.service.tick()
    code, body = client.call("GET", "/v1/workloads")
    assert code == 200
    assert {w["name"]: w["status"] for w in json.loads(body)} == {
        "web": "running", "train": "running"}
    client.service.tick()
    code, body = client.call("GET", "/v1/gpus")
    gpus = json.loads(body)
    assert [g["index"] for g in gpus] == [0, 1]
    assert gpus[0]["online_share_pct"] == 70
    assert client.call("DELETE", "/v1/workloads/train")[0] == 200
    assert client.call("DELETE", "/v1/workloads/ghost")[0] == 404


def test_metrics(client: Client) -> None:
    client.call("POST", "/v1/workloads", ONLINE)
    client.call("POST", "/v1/workloads", OFFLINE)
    client.service.tick()
    client.service.tick()
    code, body = client.call("GET", "/metrics")
    text = body.decode()
    assert code == 200
    assert 'cotenant_workload_up{role="online",workload="web"} 1.0' in text
    assert 'cotenant_gpu_online_sm_share_percent{gpu="0"} 70.0' in text
    assert 'cotenant_workload_sm_share_percent{workload="train"} 30.0' in text
    # the two clients' 12000 MiB and their MPS server's
    assert f'cotenant_gpu_memory_used_mib{{gpu="0"}} {12000.0 + MPS_SERVER_MIB}' in text
    assert "cotenant_workload_restarts" in text


def test_p99_reports_reach_the_guard(client: Client) -> None:
    """A p99 over the SLO, POSTed for the online service, pauses its offline co-runner at
    once, not at the next tick; the guard's actions are in the metrics. Bad reports are
    400s."""
    client.call("POST", "/v1/workloads", ONLINE)  # SLO 50 ms
    client.call("POST", "/v1/workloads", OFFLINE)
    client.service.tick()
    client.service.tick()
    assert client.call("POST", "/v1/workloads/web/p99", {"p99_ms": 49.0}, token="bad")[0] == 401
    code, body = client.call("POST", "/v1/workloads/web/p99", {"p99_ms": 49.0})
    assert code == 200
    assert json.loads(body) == {"workload": "web", "gpu": 0, "online_share_pct": 70}
    train = client.service.store.get("train")
    assert train is not None
    assert train.pid is not None
    assert client.node.paused(train.pid)
    client.service.tick()
    text = client.call("GET", "/metrics")[1].decode()
    assert 'cotenant_guard_actions{action="pause"} 1.0' in text
    assert 'cotenant_guard_actions{action="throttle"} 0.0' in text
    assert 'cotenant_workload_paused{workload="train"} 1.0' in text
    assert 'cotenant_workload_paused{workload="web"} 0.0' in text
    assert 'cotenant_gpu_online_sm_share_percent{gpu="0"} 70.0' in text  # no restart
    for path, payload, needle in [
        ("/v1/workloads/train/p99", {"p99_ms": 1.0}, "only a running online workload"),
        ("/v1/workloads/web/p99", {"p99": 1.0}, 'body must be {"p99_ms": <number>}'),
        ("/v1/workloads/web/p99", {"p99_ms": "fast"}, "must be a number"),
        ("/v1/workloads/web/p99", {"p99_ms": 10**400}, "must be a finite number"),
    ]:
        code, body = client.call("POST", path, payload)
        assert code == 400
        assert needle in json.loads(body)["error"]
    code, body = client.call("POST", "/v1/workloads/web/p99", raw=b'{"p99_ms": 1' + b"0" * 5000
                             + b"}")
    assert code == 400  # too many digits for Python's int conversion: still one line
    assert "not valid JSON" in json.loads(body)["error"]
    code, body = client.call("POST", "/v1/workloads/ghost/p99", {"p99_ms": 1.0})
    assert code == 404  # like DELETE of a workload that does not exist
    assert "no workload 'ghost'" in json.loads(body)["error"]
    code, body = client.call("POST", "/v1/workloads/p99", {"p99_ms": 1.0})
    assert code == 405  # not a report for a workload named "p99"


@pytest.mark.parametrize(
    "argv",
    [
        ["sh", "-c", "echo pwned > /tmp/pwned; rm -rf /"],
        ["fake-workload", "; rm -rf / #", "$(reboot)", "`id`", "a && b | c"],
    ],
)
def test_argv_reaches_the_process_backend_exactly_as_a_list(
    client: Client, argv: list[str]
) -> None:
    code, _ = client.call("POST", "/v1/workloads", {**OFFLINE, "name": "x", "argv": argv})
    assert code == 201
    client.service.tick()
    assert client.node.spawned[-1] == tuple(argv)


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({**OFFLINE, "argv": "sh -c 'rm -rf /'"}, "argv"),
        ({**OFFLINE, "argv": [1, 2]}, "argv"),
        ({**OFFLINE, "sm_share": 0}, "outside 1-100"),
        ({**OFFLINE, "gpu": 9}, "no GPU 9"),
        ({**OFFLINE, "mem_limit_mib": 10**7}, "10000000 MiB is more than GPU 0 has"),
        ({**OFFLINE, "shell": True}, "unknown key"),
    ],
)
def test_malformed_specs_get_400_with_one_line(
    client: Client, body: dict[str, object], needle: str
) -> None:
    code, payload = client.call("POST", "/v1/workloads", body)
    assert code == 400
    message = json.loads(payload)["error"]
    assert needle in message
    assert "\n" not in message
    assert client.node.spawned == []


def test_invalid_json_is_400(client: Client) -> None:
    code, payload = client.call("POST", "/v1/workloads", raw=b"{not json")
    assert code == 400
    assert "not valid JSON" in json.loads(payload)["error"]


def _raw(client: Client, request: bytes, *, close_write: bool = True) -> bytes:
    """Send ``request`` as bytes on a new connection; the whole reply."""
    host, port = client.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(request)
        if close_write:
            conn.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_a_body_shorter_than_announced_is_refused_not_acted_on(client: Client) -> None:
    body = json.dumps(OFFLINE).encode()
    reply = _raw(client, b"POST /v1/workloads HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                 + TOKEN.encode() + b"\r\nContent-Length: " + str(len(body) + 500).encode()
                 + b"\r\n\r\n" + body)
    assert reply.startswith(b"HTTP/1.0 400")
    assert b"of the" in reply
    assert client.service.workloads() == []


@pytest.mark.parametrize(
    ("request_head", "status", "needle"),
    [
        (b"PATCH /v1/workloads HTTP/1.1\r\nAuthorization: Bearer " + TOKEN.encode() + b"\r\n",
         b"405", b"PATCH is not a method of /v1/workloads"),
        (b"FROB /v1/workloads HTTP/1.1\r\n", b"501", b"Unsupported method"),
        (b"GET /v1/gpus HTTP/1.1\r\nAuthorization: Bearer " + TOKEN.encode()
         + b"\r\nAuthorization: Bearer x\r\n", b"400", b"more than once"),
        (b"POST /v1/workloads HTTP/1.1\r\nAuthorization: Bearer " + TOKEN.encode()
         + b"\r\nContent-Length: +5\r\n", b"400", b"needs one Content-Length"),
    ],
)
def test_odd_requests_get_one_line_json(
    client: Client, request_head: bytes, status: bytes, needle: bytes
) -> None:
    reply = _raw(client, request_head + b"\r\n")
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.split(b" ")[1] == status
    assert b"application/json" in head
    assert needle in json.loads(body)["error"].encode()


def test_names_and_labels_are_matched_whole(client: Client) -> None:
    code, body = client.call("POST", "/v1/workloads", {**OFFLINE, "name": "web\n"})
    assert code == 400
    assert "must match" in json.loads(body)["error"]
    metric = {"url": "http://127.0.0.1:1/metrics", "histogram": "lat", "labels": {"1bad": "x"}}
    code, body = client.call("POST", "/v1/workloads", {**ONLINE, "latency_metric": metric})
    assert code == 400
    assert "'1bad' is not a Prometheus label name" in json.loads(body)["error"]


def test_an_online_model_the_policy_cannot_judge_is_refused(tmp_path: Path) -> None:
    node = FakeNode.build("A100-40GB", 1, ManualClock(0.0))
    service = AgentService(node, tmp_path, COLOCATION.create("cotenant-pause"),
                           clock=ManualClock(0.0))
    try:
        with pytest.raises(InputError, match="policy 'cotenant-pause' cannot judge 'resnet-50'"):
            service.submit({**ONLINE, "model": "resnet-50"})
        assert service.submit(ONLINE)["status"] == "pending"  # resnet50 it knows
        assert service.submit(OFFLINE)["status"] == "pending"  # offline: no model needed
    finally:
        service.close()


def test_an_agent_runs_at_most_max_active_workloads(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(supervisor, "MAX_ACTIVE", 2)
    for i in range(2):
        assert client.call("POST", "/v1/workloads", {**OFFLINE, "name": f"t{i}"})[0] == 201
    code, body = client.call("POST", "/v1/workloads", {**OFFLINE, "name": "t2"})
    assert code == 400
    assert "already runs 2 workloads, its limit" in json.loads(body)["error"]
    assert client.call("DELETE", "/v1/workloads/t0")[0] == 200
    client.service.tick()
    assert client.call("POST", "/v1/workloads", {**OFFLINE, "name": "t2"})[0] == 201


@pytest.mark.parametrize(
    ("authorization", "status"),
    [
        (b"Bearer " + TOKEN.encode(), b"200"),
        (b"bearer " + TOKEN.encode(), b"200"),  # the scheme is case-insensitive (RFC 9110)
        (b"Basic " + TOKEN.encode(), b"401"),  # the right token under another scheme
        (b"Token " + TOKEN.encode(), b"401"),
        (b"X " + TOKEN.encode(), b"401"),
        (TOKEN.encode(), b"401"),  # no scheme at all
        (b"Bearer", b"401"),
    ],
)
def test_only_the_bearer_scheme_carries_the_token(
    client: Client, authorization: bytes, status: bytes
) -> None:
    reply = _raw(client, b"GET /v1/gpus HTTP/1.1\r\nHost: x\r\nAuthorization: "
                 + authorization + b"\r\n\r\n")
    assert reply.split(b" ")[1] == status


@pytest.mark.parametrize(
    ("request_head", "status", "message"),
    [
        (b"POST /v1/workloads HTTP/1.1\r\nTransfer-Encoding: chunked\r\n", b"400",
         "request: a chunked body is not read; send Content-Length"),
        (b"POST /v1/workloads HTTP/1.1\r\n", b"400",
         "request: needs one Content-Length, a number of bytes"),
        (b"POST /v1/workloads HTTP/1.1\r\nContent-Length: 0\r\n", b"400",
         "request body: must be 1-65536 bytes of JSON"),
        (b"PUT /v1/workloads HTTP/1.1\r\n", b"405", "PUT is not a method of /v1/workloads"),
        (b"POST /v1/workloads/web/other HTTP/1.1\r\n", b"405",
         "POST is not a method of /v1/workloads/web/other"),
        (b"POST /v1/workloads/a/b/p99 HTTP/1.1\r\n", b"405",
         "POST is not a method of /v1/workloads/a/b/p99"),
        (b"POST /v1/workloads/nobody/p99 HTTP/1.1\r\n", b"404", "no workload 'nobody'"),
        (b"GET /" + b"x" * 70_000 + b" HTTP/1.1\r\n", b"414", "Request-URI Too Long"),
    ],
)
def test_request_refusals_are_exact(
    client: Client, request_head: bytes, status: bytes, message: str
) -> None:
    auth = b"Authorization: Bearer " + TOKEN.encode() + b"\r\n"
    reply = _raw(client, request_head + auth + b"\r\n")
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.split(b" ")[1] == status
    assert json.loads(body) == {"error": message}


def test_after_an_error_of_its_own_the_server_closes_the_connection(client: Client) -> None:
    """A malformed request leaves the connection in an unknown state: the server answers and
    closes it at once instead of waiting for another request on it."""
    started = time.monotonic()
    reply = _raw(client, b"FROB / HTTP/1.1\r\nHost: x\r\n\r\n", close_write=False)
    assert reply.split(b" ")[1] == b"501"
    assert time.monotonic() - started < 5.0


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"1", "workload: must be a JSON object"),  # one byte is a body; the spec is wrong
        (b"{}" + b" " * (65536 - 2), "workload.name: is required"),  # the limit: read
        (b"{}" + b" " * (65537 - 2), "request body: must be 1-65536 bytes of JSON"),
        (b"{not json", "request body:1: not valid JSON: Expecting property name enclosed in "
                       "double quotes"),
    ],
)
def test_bodies_at_the_size_limits(client: Client, body: bytes, message: str) -> None:
    code, payload = client.call("POST", "/v1/workloads", raw=body)
    assert code == 400
    assert json.loads(payload)["error"].startswith(message)


def test_a_short_body_names_what_arrived(client: Client) -> None:
    reply = _raw(client, b"POST /v1/workloads HTTP/1.1\r\nAuthorization: Bearer "
                 + TOKEN.encode() + b"\r\nContent-Length: 50\r\n\r\n" + b'{"a": 1}')
    _, _, body = reply.partition(b"\r\n\r\n")
    assert json.loads(body) == {"error": "request body: 8 of the 50 bytes announced"}


def test_routes_answer_with_their_own_figures(client: Client) -> None:
    client.call("POST", "/v1/workloads", ONLINE)
    client.call("POST", "/v1/workloads", OFFLINE)
    client.service.tick()
    code, body = client.call("GET", "/v1/gpus?verbose=1")  # a query string is ignored
    assert code == 200
    assert [g["index"] for g in json.loads(body)] == [0, 1]
    code, body = client.call("GET", "/v1/downtime")
    assert code == 200
    assert json.loads(body) == client.service.downtime()
    assert set(json.loads(body)) == {"busy_pct", "kinds", "lower_bounds"}
    code, body = client.call("DELETE", "/v1/workloads/train")
    assert code == 200
    assert json.loads(body)["name"] == "train"
    client.service.tick()
    states = {w["name"]: w["status"] for w in json.loads(client.call("GET", "/v1/workloads")[1])}
    assert states["web"] == "running"
    assert states["train"] != "running"
    code, body = client.call("GET", "/nope")
    assert (code, json.loads(body)) == (404, {"error": "no route GET /nope"})
    long = "w" * 150
    code, body = client.call("DELETE", f"/v1/workloads/{long}")
    assert (code, json.loads(body)) == (404, {"error": f"no workload {'w' * 100!r}"})


def test_metrics_carry_prometheus_content_type(client: Client) -> None:
    reply = _raw(client, b"GET /metrics HTTP/1.1\r\nAuthorization: Bearer " + TOKEN.encode()
                 + b"\r\n\r\n")
    head = reply.partition(b"\r\n\r\n")[0].decode()
    assert f"Content-Type: {CONTENT_TYPE}" in head.splitlines()


def test_the_token_may_follow_more_than_one_space(client: Client) -> None:
    reply = _raw(client, b"GET /v1/gpus HTTP/1.1\r\nAuthorization: Bearer  " + TOKEN.encode()
                 + b"\r\n\r\n")
    assert reply.split(b" ")[1] == b"200"
    reply = _raw(client, b"GET /v1/gpus HTTP/1.1\r\nAuthorization: Bearer " + TOKEN.encode()
                 + b"\r\nAuthorization: Bearer x\r\n\r\n")
    body = reply.partition(b"\r\n\r\n")[2]
    assert json.loads(body) == {"error": "Authorization header given more than once"}


def test_replies_carry_their_length_type_and_challenge(client: Client) -> None:
    reply = _raw(client, b"GET /v1/gpus HTTP/1.1\r\n\r\n")
    head, _, body = reply.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0].split(" ")[1] == "401"
    assert 'WWW-Authenticate: Bearer realm="cotenant"' in lines
    assert "Content-Type: application/json" in lines
    assert f"Content-Length: {len(body)}" in lines
    reply = _raw(client, b"GET /v1/gpus HTTP/1.1\r\nAuthorization: Bearer " + TOKEN.encode()
                 + b"\r\n\r\n")
    head, _, body = reply.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert f"Content-Length: {len(body)}" in lines
    assert not any(line.startswith("WWW-Authenticate") for line in lines)


def test_a_server_needs_a_token(tmp_path: Path) -> None:
    clock = ManualClock(1000.0)
    service = AgentService(FakeNode.build("A100-40GB", 1, clock), tmp_path, fixed(70),
                           clock=clock)
    try:
        with pytest.raises(InputError) as info:
            AgentServer(("127.0.0.1", 0), service, "")
        assert str(info.value) == "API token: must not be empty"
    finally:
        service.close()
