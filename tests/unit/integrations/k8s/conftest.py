"""Fixtures the Kubernetes tests share."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def sockets() -> Iterator[Path]:
    """A short-lived directory for unix sockets, under /tmp: a socket path is at most 107
    bytes, which pytest's own tmp_path can exceed."""
    path = Path(tempfile.mkdtemp(prefix="dp-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
