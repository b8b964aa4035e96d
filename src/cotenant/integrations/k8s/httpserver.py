"""A small HTTP/1.1 server on one asyncio loop: keep-alive, ``Content-Length`` bodies, one
request at a time per connection, the reply in one write with ``TCP_NODELAY``.

kube-scheduler's extender client (Go's ``net/http``) posts JSON with a ``Content-Length`` and
reuses its connections, which is all this serves. The standard library's threaded server spent
about a fifth of a call's CPU on the thread and header machinery; here a call costs the
parsing of a request line and a few headers. Handlers are plain functions ``(method, path,
body) -> (status, reply bytes)``; a blocking one (the bind verb writes to the API server)
runs on a worker thread, so the loop keeps serving the others.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from http import HTTPStatus

Handler = Callable[[str, str, bytes], tuple[int, bytes]]
MAX_HEAD = 64 << 10


def _reply(status: int, body: bytes, close: bool) -> bytes:
    head = (f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\nContent-Type: application/json"
            f"\r\nContent-Length: {len(body)}\r\n")
    if close:
        head += "Connection: close\r\n"
    return (head + "\r\n").encode() + body


class _Connection(asyncio.Protocol):
    def __init__(self, server: LoopServer) -> None:
        self.server = server
        self.buffer = bytearray()
        self.busy = False  # a request is being handled; later bytes wait in the buffer
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.server.connections.add(self)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if not self.busy:
            self._next()

    def _send(self, status: int, body: bytes, close: bool) -> None:
        assert self.transport is not None
        self.transport.write(_reply(status, body, close))
        if close:
            self.transport.close()

    def _next(self) -> None:
        """Handle every complete request in the buffer, in order."""
        while self.transport is not None and not self.transport.is_closing():
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buffer) > MAX_HEAD:
                    self._send(431, b'{"Error":"request headers too large"}', True)
                return
            lines = bytes(self.buffer[:end]).decode("latin-1").split("\r\n")
            parts = lines[0].split()
            if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
                self._send(400, b'{"Error":"not an HTTP/1.x request line"}', True)
                return
            method, path, version = parts
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            close = (headers.get("connection", "").lower() == "close"
                     or (version == "HTTP/1.0"
                         and headers.get("connection", "").lower() != "keep-alive"))
            if "chunked" in headers.get("transfer-encoding", "").lower():
                self._send(411, b'{"Error":"send the body with a Content-Length"}', True)
                return
            try:
                length = int(headers.get("content-length") or 0)
            except ValueError:
                length = -1
            if length < 0:
                self._send(400, b'{"Error":"Content-Length must be a number of bytes >= 0"}',
                           True)
                return
            if length > self.server.max_body:
                self._send(413, b'{"Error":"body of %d bytes is over %d"}' % (
                    length, self.server.max_body), True)
                return
            if len(self.buffer) < end + 4 + length:
                return
            body = bytes(self.buffer[end + 4:end + 4 + length])
            del self.buffer[:end + 4 + length]
            if self.server.blocking(method, path):
                self.busy = True
                task = self.server.loop.run_in_executor(
                    self.server.pool, self.server.handler, method, path, body)
                task.add_done_callback(partial(self._done, close=close))
                return
            self._send(*self.server.handler(method, path, body), close)

    def _done(self, future: asyncio.Future[tuple[int, bytes]], *, close: bool) -> None:
        self.busy = False
        self._send(*future.result(), close)
        self._next()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.server.connections.discard(self)


def _never(_method: str, _path: str) -> bool:
    return False


class LoopServer:
    """Serves ``handler`` on ``(host, port)`` (``port=0``: a free one, bound at once)."""

    def __init__(self, handler: Handler, host: str, port: int, *, max_body: int,
                 blocking: Callable[[str, str], bool] | None = None) -> None:
        self.handler = handler
        self.blocking = blocking or _never
        self.max_body = max_body
        self.socket = socket.create_server((host, port), reuse_port=False)
        self.server_address = self.socket.getsockname()
        self.loop = asyncio.new_event_loop()
        self.pool = ThreadPoolExecutor(4, thread_name_prefix="extender-bind")
        self.connections: set[_Connection] = set()
        self._stopping = asyncio.Event()  # bound to the loop that first waits on it
        self._started = False
        self._stopped = threading.Event()

    def serve_forever(self) -> None:
        """Serve until :meth:`shutdown` (from another thread)."""
        self._started = True
        try:
            self.loop.run_until_complete(self._serve())
        finally:
            self.loop.close()
            self._stopped.set()

    async def _serve(self) -> None:
        server = await self.loop.create_server(self._connect, sock=self.socket)
        try:
            await self._stopping.wait()
        finally:
            server.close()
            for connection in list(self.connections):
                if connection.transport is not None:
                    connection.transport.close()
            await asyncio.sleep(0)  # let the transports finish closing

    def _connect(self) -> _Connection:
        return _Connection(self)

    def shutdown(self) -> None:
        """Stop serving and wait for the loop to end."""
        if self._started and not self._stopped.is_set():
            self.loop.call_soon_threadsafe(self._stopping.set)
            self._stopped.wait(10)

    def server_close(self) -> None:
        self.pool.shutdown(wait=False)
        self.socket.close()
        if not self._started:
            self.loop.close()
