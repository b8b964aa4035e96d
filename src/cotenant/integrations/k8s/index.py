"""The cache's node index: node names to rows of the placement state, and their JSON, built
once per node set so that a request costs array operations, not a Python step per node.

kube-scheduler sends every candidate node's name in each call (5,000 names in a 5,000-node
cluster with ``percentageOfNodesToScore: 100``), and successive calls mostly send the same
list. So :meth:`NodeIndex.rows` remembers the last few lists it resolved (a list compares
equal to a remembered one in tens of microseconds) and the replies are joined from JSON
fragments made here once per node (:meth:`quoted`, :meth:`host_prefix`).
"""

from __future__ import annotations

import json
from collections import deque

import numpy as np

from cotenant.model.cluster import IntArray

MEMO = 16
"""Node-name lists remembered: the filter list and, per pod shape, the prioritize list."""


class NodeIndex:
    """Rows of ``names`` (sorted node names) and their JSON fragments."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.row = {n: i for i, n in enumerate(names)}
        quoted = [json.dumps(n).encode() for n in names]
        self._quoted: np.ndarray = np.array([*quoted, b""], dtype=object)
        self._prefix: np.ndarray = np.array(
            [b'{"Host":' + q + b',"Score":' for q in quoted] + [b""], dtype=object)
        self._memo: deque[tuple[list[str], IntArray, bool]] = deque(maxlen=MEMO)

    def _resolve(self, names: list[str]) -> tuple[IntArray, bool]:
        for seen, rows, distinct in self._memo:
            if seen == names:
                return rows, distinct
        get = self.row.get
        rows = np.fromiter((get(n, -1) for n in names), np.int64, len(names))
        rows.flags.writeable = False
        distinct = len(set(names)) == len(names)
        self._memo.append((names, rows, distinct))
        return rows, distinct

    def rows(self, names: list[str]) -> IntArray:
        """The row of each name, -1 for a name not in the index (read-only array)."""
        return self._resolve(names)[0]

    def distinct(self, names: list[str]) -> bool:
        """Whether no name is given twice."""
        return self._resolve(names)[1]

    def quoted(self, names: list[str], rows: IntArray) -> np.ndarray:
        """Each name as a JSON string (from the index where known), as bytes objects."""
        out: np.ndarray = self._quoted[rows]
        for k in np.flatnonzero(rows < 0).tolist():
            out[k] = json.dumps(names[k]).encode()
        return out

    def host_prefix(self, names: list[str], rows: IntArray) -> np.ndarray:
        """Each name as the start of a ``HostPriority`` object, up to its score (objects)."""
        out: np.ndarray = self._prefix[rows]
        for k in np.flatnonzero(rows < 0).tolist():
            out[k] = b'{"Host":' + json.dumps(names[k]).encode() + b',"Score":'
        return out
