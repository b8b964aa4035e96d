"""Strict parsing of the JSON, YAML and CSV documents people write: specs, plans, parameters,
traces and profile tables.

``json.loads`` and ``yaml.safe_load`` both keep the last of two equal keys and drop the first
without a word, so a spec with ``"sm_share"`` twice runs with whichever came last. Here a
repeated key is an :class:`InputError` naming the document, the line and the key, like every
other malformed document; so is a byte-order mark that is not UTF-8's, and text that is not
JSON or YAML at all. CSV rows come with the line each starts on, and an unclosed quote (which
would swallow every row after it) is an error at that line.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

from cotenant.errors import InputError


def loads_json(text: str | bytes, where: str) -> Any:
    """The JSON document ``text``; an :class:`InputError` at ``where`` (with the line) when it
    is not JSON or repeats a key in one object."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise InputError(where, f"is not UTF-8 (byte {exc.start + 1})") from exc
    text = text.removeprefix("\ufeff")  # a UTF-8 byte-order mark, as some editors write
    try:
        return json.loads(text, object_pairs_hook=_unique_pairs)
    except _RepeatedKeyError as exc:
        raise InputError(where, f"key {exc.key!r} appears twice in one object",
                         hint="keep one") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}:{exc.lineno}", f"not valid JSON: {exc.msg}") from exc
    except ValueError as exc:  # an integer of thousands of digits
        raise InputError(where, "not valid JSON: a number with too many digits") from exc
    except RecursionError as exc:
        raise InputError(where, "not valid JSON: nested too deeply") from exc


def csv_records(lines: Iterable[str], where: str) -> Iterator[tuple[int, list[str]]]:
    """The rows of CSV text (the header first), cells stripped, each with the line it starts
    on; blank lines are skipped. Quoting is strict: a malformed row is an :class:`InputError`
    at ``where:line``."""
    reader = csv.reader(lines, strict=True)
    while True:
        line = reader.line_num + 1  # where the next row starts
        try:
            row = next(reader, None)
        except csv.Error as exc:  # an unclosed quote runs to the end of the file
            what = "header" if line == 1 else "row"
            raise InputError(f"{where}:{line}", f"malformed CSV {what}: {exc}") from exc
        if row is None:
            return
        if row and not (len(row) == 1 and not row[0].strip()):
            yield line, [cell.strip() for cell in row]


def loads_yaml(text: str, where: str) -> Any:
    """The YAML document ``text``; an :class:`InputError` at ``where:line`` when it is not
    YAML or repeats a key in one mapping."""
    try:
        return yaml.load(text.removeprefix("\ufeff"), Loader=_StrictLoader)
    except _RepeatedKeyError as exc:
        raise InputError(f"{where}:{exc.line}", f"key {exc.key!r} appears twice in one "
                         "mapping", hint="keep one") from exc
    except RecursionError as exc:
        raise InputError(where, "not valid YAML: nested too deeply") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None)
        if problem is not None and "nesting depth" in problem:  # libyaml's own limit
            raise InputError(where, "not valid YAML: nested too deeply") from exc
        raise InputError(f"{where}{line}", f"not valid YAML{': ' + problem if problem else ''}"
                         ) from exc


API_VERSION = "cotenant/v1alpha1"


def read_text(path: Path) -> str:
    """The UTF-8 text of ``path``; an :class:`InputError` naming it when it cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(str(path), f"cannot be read: {exc}") from exc


def read_yaml(path: Path) -> Any:
    """The YAML document in ``path`` (see :func:`loads_yaml`)."""
    return loads_yaml(read_text(path), str(path))


def check_header(data: Any, where: str, kind: str, allowed: Iterable[str]) -> dict[str, Any]:
    """``data`` as a versioned document of ``kind``: a mapping with only ``allowed`` keys
    (``apiVersion`` and ``kind`` among them) naming this API version and kind."""
    if not isinstance(data, dict):
        raise InputError(where, "must be a mapping with apiVersion, kind, ...")
    known = set(allowed)
    for key in data:
        if key not in known:
            raise InputError(f"{where}.{key}", "unknown key",
                             hint=f"known: {', '.join(sorted(known))}")
    if data.get("apiVersion") != API_VERSION:
        raise InputError(f"{where}.apiVersion", f"must be {API_VERSION!r}")
    if data.get("kind") != kind:
        raise InputError(f"{where}.kind", f"must be {kind!r}")
    return data


MERGE_TAG = "tag:yaml.org,2002:merge"


class _RepeatedKeyError(ValueError):
    def __init__(self, key: object, line: int = 0) -> None:
        super().__init__(f"repeated key {key!r}")
        self.key = key
        self.line = line


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _RepeatedKeyError(key)
        out[key] = value
    return out


_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's parser where PyYAML was built with it (ten times faster: a spec of 10,000
services loads in 0.2 s, not 2 s), else the pure-Python one; both construct the same
objects."""


class _StrictLoader(_SafeLoader):  # type: ignore[misc,valid-type]
    """``yaml.SafeLoader`` that refuses a key written twice in one mapping. Keys a merge
    (``<<: *anchor``) brings in may still be overridden by the mapping's own."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[object] = set()
        for key_node, _ in node.value:
            if key_node.tag == MERGE_TAG:
                continue
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, list | dict):
                continue  # unhashable: SafeLoader's own error follows
            if key in seen:
                raise _RepeatedKeyError(key, key_node.start_mark.line + 1)
            seen.add(key)
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping
