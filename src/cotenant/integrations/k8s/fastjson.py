"""Reading ``ExtenderArgs`` without decoding the same node-name list again and again.

kube-scheduler sends every candidate node's name in each call, mostly the same list call after
call: decoding it is a third of a call's cost. :func:`loads_args` reads the top-level object
with the standard library's own JSON scanner, value by value, and where the value of the
``NodeNames`` key (any case) is an array whose text it has decoded before, it reuses that list
(the same text decodes to the same list). Anything it does not expect (not an object, a syntax
error, trailing text) returns None, and the caller decodes the body in full, which also gives
the error message.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

MEMO = 16
"""Name-list texts remembered (the filter list and, per pod shape, the prioritize list)."""
# the standard library's scanner (C where built), public but not in the type stubs
_SCAN: Callable[[str, int], tuple[Any, int]] = getattr(json.JSONDecoder(), "scan_once")  # noqa: B009
scanstring: Callable[[str, int], tuple[str, int]] = getattr(json.decoder, "scanstring")  # noqa: B009
_SPACE = " \t\n\r"
_seen: OrderedDict[str, list[Any]] = OrderedDict()
_lock = threading.Lock()  # the HTTP server's threads share the memo


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _SPACE:
        i += 1
    return i


def _names(text: str, i: int) -> tuple[Any, int]:
    """The array at ``text[i]``, from the memo when its text was decoded before."""
    close = text.find("]", i)
    raw = text[i:close + 1] if close > 0 else ""
    with _lock:
        cached = _seen.get(raw)
        if cached is not None:
            _seen.move_to_end(raw)
            return cached, close + 1
    value, end = _SCAN(text, i)
    if end == close + 1 and isinstance(value, list):
        with _lock:
            _seen[raw] = value
            if len(_seen) > MEMO:
                _seen.popitem(last=False)
    return value, end


def loads_args(body: bytes) -> dict[str, Any] | None:
    """``body`` as a JSON object, or None where the full decoder should read it instead."""
    try:
        text = body.decode("utf-8")
        i = _skip(text, 0)
        if text[i:i + 1] != "{":
            return None
        out: dict[str, Any] = {}
        i = _skip(text, i + 1)
        if text[i:i + 1] == "}":
            return out if not text[i + 1:].strip(_SPACE) else None
        while True:
            if text[i:i + 1] != '"':
                return None
            key, i = scanstring(text, i + 1)
            i = _skip(text, i)
            if text[i:i + 1] != ":":
                return None
            i = _skip(text, i + 1)
            if key.casefold() == "nodenames" and text[i:i + 1] == "[":
                out[key], i = _names(text, i)
            else:
                out[key], i = _SCAN(text, i)
            i = _skip(text, i)
            mark, i = text[i:i + 1], i + 1
            if mark == "}":
                break
            if mark != ",":
                return None
            i = _skip(text, i)
    except (ValueError, StopIteration):
        return None
    return out if not text[i:].strip(_SPACE) else None
