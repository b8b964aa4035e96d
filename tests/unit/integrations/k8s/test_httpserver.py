"""The extender's HTTP/1.1 server on raw sockets: keep-alive, pipelining, HTTP/1.0, the errors
it answers itself, and a blocking handler that does not hold up other connections."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from cotenant.integrations.k8s.httpserver import LoopServer

SLOW = threading.Event()


def handler(method: str, path: str, body: bytes) -> tuple[int, bytes]:
    if path == "/slow":
        SLOW.wait(5)
    return 200, b'{"method":"%s","path":"%s","bytes":%d}' % (method.encode(), path.encode(),
                                                            len(body))


@pytest.fixture
def server() -> Iterator[LoopServer]:
    srv = LoopServer(handler, "127.0.0.1", 0, max_body=100,
                     blocking=lambda method, path: path == "/slow")
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    SLOW.set()
    srv.shutdown()
    srv.server_close()
    thread.join(5)


def exchange(server: LoopServer, data: bytes, replies: int = 1) -> bytes:
    with socket.create_connection(server.server_address[:2], timeout=5) as sock:
        sock.sendall(data)
        got = b""
        while got.count(b"HTTP/1.1 ") < replies or not got.endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            got += chunk
        return got


def test_keep_alive_and_pipelined_requests_are_answered_in_order(server: LoopServer) -> None:
    one = b"POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"
    two = b"POST /b HTTP/1.1\r\ncontent-length: 0\r\n\r\n"
    got = exchange(server, one + two, replies=2)
    assert got.index(b'"path":"/a","bytes":3') < got.index(b'"path":"/b","bytes":0')
    assert b"Connection: close" not in got


def test_http_1_0_and_connection_close_close_after_the_reply(server: LoopServer) -> None:
    for request in (b"GET /x HTTP/1.0\r\n\r\n", b"GET /x HTTP/1.1\r\nConnection: close\r\n\r\n"):
        assert b"Connection: close\r\n" in exchange(server, request)


@pytest.mark.parametrize(("request_bytes", "status"), [
    (b"nonsense\r\n\r\n", b"400"),
    (b"POST /a HTTP/1.1\r\nContent-Length: lots\r\n\r\n", b"400"),
    (b"POST /a HTTP/1.1\r\nContent-Length: -1\r\n\r\n", b"400"),
    (b"POST /a HTTP/1.1\r\nContent-Length: 101\r\n\r\n", b"413"),
    (b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", b"411"),
])
def test_bad_requests_get_a_status_and_a_json_error(server: LoopServer, request_bytes: bytes,
                                                    status: bytes) -> None:
    got = exchange(server, request_bytes)
    assert got.startswith(b"HTTP/1.1 " + status)
    assert got.endswith(b'"}')
    assert b'{"Error":"' in got


def test_a_blocking_handler_leaves_other_connections_served(server: LoopServer) -> None:
    SLOW.clear()
    slow = socket.create_connection(server.server_address[:2], timeout=5)
    slow.sendall(b"POST /slow HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
    time.sleep(0.1)
    assert b'"path":"/fast"' in exchange(server, b"GET /fast HTTP/1.1\r\n\r\n")
    SLOW.set()
    assert b'"path":"/slow"' in slow.recv(65536)
    slow.close()
