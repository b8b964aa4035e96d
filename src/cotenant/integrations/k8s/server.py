"""The extender's HTTP server: ``POST /filter``, ``/prioritize``, ``/preempt``, ``/bind``;
``GET /healthz``.

kube-scheduler posts JSON (:mod:`.wire`) and expects HTTP 200 with the result; any other status
fails the scheduling cycle. So a body that cannot be read (not JSON, no Pod) gets a 400 with
an ``Error`` naming the problem, and a pod cotenant cannot schedule (an unknown resource) a
200 whose ``Error`` names it and whose node list is empty: both fail the pod, never a node.
"""

from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cotenant.errors import CotenantError
from cotenant.integrations.k8s import wire
from cotenant.integrations.k8s.extender import Extender
from cotenant.integrations.k8s.resources import pod_request

log = logging.getLogger(__name__)
MAX_BODY = 64 << 20  # a NodeList of 5,000 nodes is a few MiB


class ExtenderServer(ThreadingHTTPServer):
    """Serves ``extender`` on ``(host, port)``; ``port=0`` picks a free one."""

    daemon_threads = True

    def __init__(self, extender: Extender, host: str = "127.0.0.1", port: int = 8888) -> None:
        super().__init__((host, port), _Handler)
        self.extender = extender

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="extender", daemon=True)
        thread.start()
        return thread


class _Handler(BaseHTTPRequestHandler):
    server: ExtenderServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        log.debug(format, *args)

    def _send(self, status: int, payload: object) -> None:
        """The status line, headers and body in one write (two writes meet Nagle's algorithm
        and the client's delayed ACK: tens of milliseconds per reply)."""
        data = payload if isinstance(payload, bytes) else wire.encode(payload)
        head = (f"{self.protocol_version} {status} {self.responses[status][0]}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n")
        self.wfile.write(head.encode() + data)

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/healthz":
            self._send(200, {"ok": True})
        else:
            self._send(404, {"Error": f"no such path {self.path}"})

    def do_POST(self) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            self._send(400, {"Error": "Content-Length must be a number of bytes >= 0"})
            return
        if length > MAX_BODY:
            self._send(413, {"Error": f"body of {length} bytes is over {MAX_BODY}"})
            return
        body = self.rfile.read(length)
        verb = self.path.strip("/").rsplit("/", 1)[-1]
        self._send(*respond(self.server.extender, verb, body))


def respond(extender: Extender, verb: str, body: bytes) -> tuple[int, bytes]:
    """The HTTP status and JSON reply to ``body`` posted to ``/<verb>``."""
    handler = {"filter": _filter, "prioritize": _prioritize, "bind": _bind,
               "preempt": _preempt}.get(verb)
    if handler is None:
        return 404, wire.encode({"Error": f"no such verb /{verb}; use filter, prioritize, "
                                          "preempt, bind"})
    try:
        return 200, handler(extender, body)
    except CotenantError as exc:
        return 400, wire.encode({"Error": exc.one_line()})


def _filter(extender: Extender, body: bytes) -> bytes:
    args = wire.extender_args(body)
    try:
        request = pod_request(args.pod)
    except CotenantError as exc:
        return wire.encode(wire.filter_result(args, None, exc.one_line()))
    return wire.filter_reply(args, extender.filter(request, args.names))


def _prioritize(extender: Extender, body: bytes) -> bytes:
    args = wire.extender_args(body)
    request = pod_request(args.pod)  # a 400 naming the problem: a list has no Error field
    return wire.priorities_reply(extender.prioritize(request, args.names))


def _preempt(extender: Extender, body: bytes) -> bytes:
    args = wire.preemption_args(body)
    request = pod_request(args.pod)  # a 400 naming the problem: the result has no Error
    return wire.encode(wire.preemption_result(extender.preempt(request, args.victims)))


def _bind(extender: Extender, body: bytes) -> bytes:
    args = wire.binding_args(body)
    try:
        extender.bind(args.uid, args.namespace, args.pod_name, args.node)
    except CotenantError as exc:
        return wire.encode({"Error": exc.one_line()})
    return wire.encode({"Error": ""})
