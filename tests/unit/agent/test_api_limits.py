"""The API under slow and many clients and storage faults, and what a token holder may make
the agent reach: a whole-request deadline, a connection cap, reads that do not wait for the
tick, 503 with Retry-After when a change cannot be written, latency hosts allow-listed."""

from __future__ import annotations

import ipaddress
import json
import socket
import sqlite3
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from cotenant.agent import api
from cotenant.agent.api import AgentServer
from cotenant.agent.backends import FakeNode, ManualClock
from cotenant.agent.scrapehosts import ScrapeHosts
from cotenant.agent.service import AgentService
from cotenant.errors import InputError

from .harness import OFFLINE, ONLINE, fixed

TOKEN = "t0ken"


class Running:
    def __init__(self, service: AgentService, server: AgentServer) -> None:
        self.service, self.server = service, server
        self.port = server.server_address[1]

    def call(self, method: str, path: str, body: object = None) -> tuple[int, dict[str, str],
                                                                        bytes]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data,
                                         method=method,
                                         headers={"Authorization": f"Bearer {TOKEN}"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, dict(response.headers), response.read()
        except urllib.error.HTTPError as exc:
            with exc:
                return exc.code, dict(exc.headers), exc.read()


@pytest.fixture
def running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Running]:
    monkeypatch.setattr(api, "CLIENT_TIMEOUT_S", 1.0)
    monkeypatch.setattr(api, "MAX_CONNECTIONS", 4)
    clock = ManualClock(1000.0)
    node = FakeNode.build("A100-40GB", 1, clock)
    service = AgentService(node, tmp_path, fixed(50), clock=clock)
    server = AgentServer(("127.0.0.1", 0), service, TOKEN)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield Running(service, server)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
        service.close()


def test_a_client_sending_a_byte_a_second_is_cut_at_the_request_deadline(
        running: Running) -> None:
    conn = socket.create_connection(("127.0.0.1", running.port))
    start = time.monotonic()
    closed_after = None
    try:
        for byte in b"GET /v1/workloads HTTP/1.1\r\nHost: x\r\n":  # each read well in time
            try:
                conn.sendall(bytes([byte]))
            except OSError:
                closed_after = time.monotonic() - start
                break
            conn.settimeout(0.3)
            try:
                if conn.recv(1) == b"":
                    closed_after = time.monotonic() - start
                    break
            except TimeoutError:
                pass
    finally:
        conn.close()
    assert closed_after is not None
    assert closed_after < 3.0


def test_connections_past_the_cap_get_503_at_once(running: Running) -> None:
    idle = [socket.create_connection(("127.0.0.1", running.port)) for _ in range(4)]
    try:
        time.sleep(0.2)
        extra = socket.create_connection(("127.0.0.1", running.port))
        extra.settimeout(2.0)
        reply = extra.recv(4096)
        extra.close()
        assert reply.startswith(b"HTTP/1.1 503")
        assert b"Retry-After: 1" in reply
        assert running.server.refused == 1
    finally:
        for conn in idle:
            conn.close()
    time.sleep(0.3)
    assert running.call("GET", "/v1/workloads")[0] == 200  # the slots came back


def test_reads_do_not_wait_for_the_tick(running: Running) -> None:
    running.service.submit(ONLINE)
    running.service.tick()
    with running.service._lock:  # a tick in progress holds it
        start = time.monotonic()
        for path in ("/v1/workloads", "/v1/gpus", "/v1/downtime", "/v1/health", "/metrics"):
            assert running.call("GET", path)[0] == 200, path
        assert time.monotonic() - start < 2.0


def test_a_change_that_cannot_be_written_is_503_with_retry_after(running: Running) -> None:
    running.service.store.points.arm(
        "store.write", lambda: sqlite3.OperationalError("database or disk is full"), times=-1)
    code, headers, body = running.call("POST", "/v1/workloads", OFFLINE)
    assert code == 503
    assert int(headers["Retry-After"]) >= 1
    assert "disk is full" in json.loads(body)["error"]
    assert running.call("GET", "/v1/workloads")[2] == b"[]\n"  # not done
    running.service.tick()  # the tick's own writes fail too; the agent carries on
    health = json.loads(running.call("GET", "/v1/health")[2])
    assert health["storage"]["degraded"]
    assert health["storage"]["errors"] >= 1
    metrics = running.call("GET", "/metrics")[2].decode()
    assert "cotenant_agent_storage_degraded 1.0" in metrics
    running.service.store.points.disarm("store.write")
    assert running.call("POST", "/v1/workloads", OFFLINE)[0] == 201


def test_degraded_clears_on_an_idle_agent_once_storage_recovers(
        running: Running) -> None:
    """A failed submit (503) leaves nothing to retry; the next tick's probe write clears
    ``degraded`` in health and the metric without waiting for other work."""
    running.service.store.points.arm(
        "store.write", lambda: sqlite3.OperationalError("database or disk is full"), times=-1)
    assert running.call("POST", "/v1/workloads", OFFLINE)[0] == 503
    running.service.store.points.disarm("store.write")
    for _ in range(4):  # past the store's retry wait
        running.service.clock.advance(0.5)  # type: ignore[attr-defined]
        running.service.tick()
    health = json.loads(running.call("GET", "/v1/health")[2])
    assert health["storage"]["degraded"] == ""
    assert "cotenant_agent_storage_degraded 0.0" in running.call("GET", "/metrics")[2].decode()


def test_latency_hosts_are_loopback_and_this_node_unless_allowed(tmp_path: Path) -> None:
    hosts = ScrapeHosts(own={ipaddress.ip_address("192.0.2.7")})
    hosts.check("http://127.0.0.1:9/metrics")
    hosts.check("http://[::1]:9/metrics")
    hosts.check("http://localhost:9/metrics")
    hosts.check("http://192.0.2.7:9/metrics")  # this node's own address
    for url in ("http://169.254.169.254/latest/meta-data", "http://10.1.2.3:9/metrics"):
        with pytest.raises(InputError, match="scrape-hosts"):
            hosts.check(url)
    wider = ScrapeHosts(["10.0.0.0/8", "metrics.internal"], own=set())
    wider.check("http://10.1.2.3:9/metrics")
    wider.check("http://metrics.internal:9/metrics")
    with pytest.raises(InputError, match="--scrape-hosts"):
        ScrapeHosts(["not a host!"])
    clock = ManualClock(1000.0)
    service = AgentService(FakeNode.build("A100-40GB", 1, clock), tmp_path, fixed(50),
                           clock=clock, scrape_hosts=hosts)
    try:
        with pytest.raises(InputError, match=r"latency_metric\.url"):
            service.submit({**ONLINE, "latency_metric": {
                "url": "http://169.254.169.254/metrics", "histogram": "h"}})
        assert service.workloads() == []
    finally:
        service.close()
