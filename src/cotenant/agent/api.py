"""The agent's local HTTP API (stdlib ``ThreadingHTTPServer``, JSON).

============================  ==========================================================
``POST /v1/workloads``        submit a workload spec (201; 400 with a one-line message)
``GET /v1/workloads``         every workload with status, pid, restarts, share
``DELETE /v1/workloads/N``    stop workload N (200; 404 if unknown)
``POST /v1/workloads/N/p99``  online workload N's measured p99 for the compute guard
                              (``{"p99_ms": 41.5}``; 400 unless N runs online work)
``GET /v1/gpus``              the inventory, with the online SM share in force
``GET /v1/downtime``          how long offline jobs were down per start and per share
                              change (``agent.downtime``): count, median, p90, max
``GET /v1/health``            the state store (``degraded``: why writes fail, ``errors``),
                              state rows set aside (``quarantined``), unadopted processes
``GET /metrics``              Prometheus text format
============================  ==========================================================

Every request, ``/metrics`` included, needs ``Authorization: Bearer <token>``; a missing or
wrong token gets 401 (compared with :func:`hmac.compare_digest`, in constant time). Requiring
the token on ``/metrics`` is the safer default: Prometheus sends it from a credentials file.
Workload commands are argv lists handed to the process backend as they are; no shell runs them.

Reads are served a few at a time (:data:`READERS`) from bodies serialised once per change;
writes and p99 reports do not queue behind them. A change the agent cannot write down (disk
full, the database locked) gets 503 with ``Retry-After``: nothing was done. Reads never wait
for the reconcile tick. Each request has ``CLIENT_TIMEOUT_S`` in all (a client sending a byte
a second is cut off at the deadline, not per read), and at most ``MAX_CONNECTIONS`` are
served at once; the next gets 503 at once.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import math
import socket
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from cotenant.agent.metrics import CONTENT_TYPE
from cotenant.agent.service import AgentService
from cotenant.errors import CotenantError, InputError, TemporaryError
from cotenant.model.documents import loads_json

MAX_BODY = 64 * 1024
CLIENT_TIMEOUT_S = 10.0
"""The most one request may take, from its first byte to the end of the answer."""
MAX_CONNECTIONS = 64
"""Connections served at once (a thread each); beyond, 503 at once."""
_BUSY_BODY = b'{"error": "too many connections; retry"}\n'
_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
         b"Retry-After: 1\r\nConnection: close\r\nContent-Length: "
         + str(len(_BUSY_BODY)).encode() + b"\r\n\r\n" + _BUSY_BODY)
ROUTES = ("/v1/workloads", "/v1/gpus", "/v1/downtime", "/v1/health", "/metrics")
_READS = ROUTES[:4]
READERS = 4
"""Reads served at once. The others wait on a semaphore, not for the interpreter's lock, so
a pushed p99 report competes with a few threads, not with every client's."""
_PREFIX = "/v1/workloads/"


def _p99_name(path: str) -> str | None:
    """``N`` of ``/v1/workloads/N/p99``; None for any other path."""
    if not path.startswith(_PREFIX):
        return None
    name, sep, tail = path.removeprefix(_PREFIX).rpartition("/")
    return name if sep and name and "/" not in name and tail == "p99" else None


class AgentServer(ThreadingHTTPServer):
    """The HTTP server; ``service`` and ``token`` are read by the handler."""

    daemon_threads = True
    request_queue_size = 128  # a burst of pushed p99 reports must not be refused (default 5)

    def __init__(self, address: tuple[str, int], service: AgentService, token: str) -> None:
        if not token:
            raise InputError("API token", "must not be empty")
        if ":" in address[0]:  # an IPv6 address such as ::1
            self.address_family = socket.AF_INET6
        self.refused = 0
        """Connections refused for :data:`MAX_CONNECTIONS`."""
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.readers = threading.BoundedSemaphore(READERS)
        self._deadlines: dict[socket.socket, float] = {}
        self._deadline_lock = threading.Lock()
        self._closing = threading.Event()
        super().__init__(address, _Handler)
        self.service = service
        self.token = token.encode()
        threading.Thread(target=self._cut_overdue, name="cotenant-api-deadlines",
                         daemon=True).start()

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.refused += 1
            with contextlib.suppress(OSError):
                request.settimeout(1.0)
                request.sendall(_BUSY)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def watch(self, conn: socket.socket) -> None:
        """Cut ``conn`` :data:`CLIENT_TIMEOUT_S` from now unless :meth:`unwatch` ed."""
        with self._deadline_lock:
            self._deadlines[conn] = time.monotonic() + CLIENT_TIMEOUT_S

    def unwatch(self, conn: socket.socket) -> None:
        with self._deadline_lock:
            self._deadlines.pop(conn, None)

    def _cut_overdue(self) -> None:
        while not self._closing.wait(0.25):
            now = time.monotonic()
            with self._deadline_lock:
                overdue = [c for c, t in self._deadlines.items() if now >= t]
                for conn in overdue:
                    del self._deadlines[conn]
            for conn in overdue:  # its blocked read or write returns at once
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)

    def server_close(self) -> None:
        self._closing.set()
        super().server_close()


class _Handler(BaseHTTPRequestHandler):
    server: AgentServer
    timeout = CLIENT_TIMEOUT_S  # a client that stalls mid-request is dropped, its thread freed

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the agent's own event log records what matters."""

    def handle_one_request(self) -> None:
        """One request within :data:`CLIENT_TIMEOUT_S` in all."""
        self.server.watch(self.connection)
        try:
            super().handle_one_request()
        finally:
            self.server.unwatch(self.connection)

    def handle(self) -> None:
        """Serve the connection; a client that went away (or stalled past the timeout) ends
        it quietly rather than with a traceback in the log."""
        try:
            super().handle()
        except (ConnectionError, TimeoutError):
            self.close_connection = True

    def send_error(self, code: int, message: str | None = None, explain: str | None = None
                   ) -> None:
        """The standard library's own errors (a bad request line, an unknown method, headers
        too long), as one-line JSON like every other error."""
        phrase = message or HTTPStatus(code).phrase
        self.close_connection = True
        self._error(code, phrase)

    def _send(self, code: int, body: bytes, content_type: str = "application/json",
              retry_after_s: float | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if code == HTTPStatus.UNAUTHORIZED:
            self.send_header("WWW-Authenticate", 'Bearer realm="cotenant"')
        if retry_after_s is not None:
            self.send_header("Retry-After", str(max(1, math.ceil(retry_after_s))))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, code: int, payload: object) -> None:
        self._send(code, json.dumps(payload).encode() + b"\n")

    def _error(self, code: int, message: str, retry_after_s: float | None = None) -> None:
        body = json.dumps({"error": message.replace("\n", " ")}).encode() + b"\n"
        self._send(code, body, retry_after_s=retry_after_s)

    def _authorised(self) -> bool:
        if len(self.headers.get_all("Authorization", [])) > 1:
            self._error(HTTPStatus.BAD_REQUEST, "Authorization header given more than once")
            return False
        header = self.headers.get("Authorization", "")
        scheme, _, given = header.partition(" ")
        ok = scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode(), self.server.token)
        if not ok:
            self._error(HTTPStatus.UNAUTHORIZED, "missing or wrong bearer token")
        return ok

    def _dispatch(self, method: str) -> None:
        if not self._authorised():
            return
        service, path = self.server.service, self.path.split("?", 1)[0]
        try:
            if method == "GET" and path in _READS:
                with self.server.readers:  # a few at a time: the rest wait off the CPU
                    self._send(HTTPStatus.OK, service.view(path))
            elif method == "GET" and path == "/metrics":
                with self.server.readers:
                    self._send(HTTPStatus.OK, service.metrics_text(), CONTENT_TYPE)
            elif method == "POST" and path == "/v1/workloads":
                self._json(HTTPStatus.CREATED, service.submit(self._body()))
            elif method == "POST" and (reporter := _p99_name(path)) is not None:
                name = unquote(reporter)
                if not service.exists(name):
                    self._error(HTTPStatus.NOT_FOUND, f"no workload {name[:100]!r}")
                else:
                    self._json(HTTPStatus.OK, service.report_p99(name, self._body()))
            elif method == "DELETE" and path.startswith(_PREFIX):
                name = unquote(path.removeprefix(_PREFIX))
                if not service.exists(name):
                    self._error(HTTPStatus.NOT_FOUND, f"no workload {name[:100]!r}")
                else:
                    self._json(HTTPStatus.OK, service.stop(name))
            elif path in ROUTES or path.startswith(_PREFIX):
                self._error(HTTPStatus.METHOD_NOT_ALLOWED, f"{method} is not a method of {path}")
            else:
                self._error(HTTPStatus.NOT_FOUND, f"no route {method} {path[:100]}")
        except InputError as exc:
            self._error(HTTPStatus.BAD_REQUEST, exc.one_line())
        except TemporaryError as exc:  # nothing was done: the client may try again
            self._error(HTTPStatus.SERVICE_UNAVAILABLE, exc.one_line(), exc.delay_s)
        except CotenantError as exc:
            self._error(HTTPStatus.SERVICE_UNAVAILABLE, exc.one_line())
        except (ConnectionError, TimeoutError):
            raise  # the client went away: nothing to answer (handle() ends it quietly)
        except Exception as exc:  # a bug: answer in one line rather than drop the connection
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR,
                        f"internal error ({type(exc).__name__}); see the agent's log")
            raise

    def _body(self) -> object:
        if self.headers.get("Transfer-Encoding") is not None:
            raise InputError("request", "a chunked body is not read; send Content-Length")
        given = self.headers.get_all("Content-Length", [])
        if len(given) != 1 or not (given[0].isascii() and given[0].isdigit()):
            raise InputError("request", "needs one Content-Length, a number of bytes")
        length = int(given[0])
        if not 0 < length <= MAX_BODY:
            raise InputError("request body", f"must be 1-{MAX_BODY} bytes of JSON")
        raw = self.rfile.read(length)
        if len(raw) != length:  # the client stopped sending: do not act on part of a body
            raise InputError("request body", f"{len(raw)} of the {length} bytes announced")
        return loads_json(raw, "request body")

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")
