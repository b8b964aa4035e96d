"""The extender's HTTP server: ``POST /filter``, ``/prioritize``, ``/preempt``, ``/bind``;
``GET /healthz``.

kube-scheduler posts JSON (:mod:`.wire`) and expects HTTP 200 with the result; any other status
fails the scheduling cycle. So a body that cannot be read (not JSON, no Pod) gets a 400 with
an ``Error`` naming the problem, and a pod cotenant cannot schedule (an unknown resource) a
200 whose ``Error`` names it and whose node list is empty: both fail the pod, never a node.
"""

from __future__ import annotations

import threading

from cotenant.errors import CotenantError
from cotenant.integrations.k8s import wire
from cotenant.integrations.k8s.extender import Extender
from cotenant.integrations.k8s.httpserver import LoopServer
from cotenant.integrations.k8s.resources import pod_request

MAX_BODY = 64 << 20  # a NodeList of 5,000 nodes is a few MiB


class ExtenderServer(LoopServer):
    """Serves ``extender`` on ``(host, port)``; ``port=0`` picks a free one."""

    def __init__(self, extender: Extender, host: str = "127.0.0.1", port: int = 8888) -> None:
        self.extender = extender
        super().__init__(self._handle, host, port, max_body=MAX_BODY, blocking=_writes)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="extender", daemon=True)
        thread.start()
        return thread

    def _handle(self, method: str, path: str, body: bytes) -> tuple[int, bytes]:
        if method == "GET":
            if path.rstrip("/") == "/healthz":
                return 200, b'{"ok":true}'
            return 404, wire.encode({"Error": f"no such path {path}"})
        if method != "POST":
            return 405, wire.encode({"Error": f"{method} is not served; POST a verb"})
        return respond(self.extender, _verb(path), body)


def _verb(path: str) -> str:
    return path.split("?", 1)[0].strip("/").rsplit("/", 1)[-1]


def _writes(method: str, path: str) -> bool:
    """bind writes to the API server: it runs off the loop."""
    return method == "POST" and _verb(path) == "bind"


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
