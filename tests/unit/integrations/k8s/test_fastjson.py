"""Reading ExtenderArgs with remembered node-name lists gives what the full decoder gives."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from cotenant.integrations.k8s.fastjson import loads_args

NAMES = [f"node-{i}" for i in range(50)]
POD = {"metadata": {"name": "p", "annotations": {"x": '"NodeNames":["evil"]', "y": "]"}},
       "spec": {"NodeNames": ["nested"]}}


@pytest.mark.parametrize("body", [
    json.dumps({"Pod": POD, "Nodes": None, "NodeNames": NAMES}),
    json.dumps({"NodeNames": NAMES, "Pod": POD, "Nodes": None}, indent=2),
    json.dumps({"pod": POD, "nodenames": NAMES}, separators=(",", ":")),
    json.dumps({"Pod": POD, "NodeNames": ['we"ird]', "\u00e9", *NAMES]}),
    json.dumps({"Pod": POD, "NodeNames": None, "Nodes": {"items": []}}),
    json.dumps({"Pod": POD, "NodeNames": [], "NodeNames ": NAMES}),
    json.dumps({"Pod": POD, "NodeNames": NAMES[:3], "nodeNames": NAMES}),
    "{}", "  { } ",
])
def test_the_same_document_as_the_full_decoder_twice_over(body: str) -> None:
    for _ in range(2):  # the second time from the memo
        assert loads_args(body.encode()) == json.loads(body)


@pytest.mark.parametrize("body", [
    b"", b"[]", b"null", b'{"Pod": {}', b'{"Pod": {}} x', b'{"NodeNames": ["a",]}',
    b'{"NodeNames": ["a"] "Pod": 1}', b"\xff\xfe", b'{Pod: 1}', b'{"a" 1}',
])
def test_anything_unexpected_goes_to_the_full_decoder(body: bytes) -> None:
    assert loads_args(body) is None


def test_a_remembered_list_is_not_taken_for_a_different_one() -> None:
    first = json.dumps({"NodeNames": ["a", "b"]}).encode()
    assert loads_args(first) == {"NodeNames": ["a", "b"]}
    assert loads_args(json.dumps({"NodeNames": ["a", "c"]}).encode()) == {"NodeNames": ["a", "c"]}


def test_threads_sharing_the_memo_get_their_own_lists() -> None:
    bodies = [json.dumps({"NodeNames": [f"n{k}-{i}" for i in range(20)]}).encode()
              for k in range(40)]  # more lists than the memo holds: entries come and go

    def read(k: int) -> bool:
        return all(loads_args(bodies[(k + j) % 40]) == json.loads(bodies[(k + j) % 40])
                   for j in range(200))

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(read, range(8)))
