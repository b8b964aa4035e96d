"""The throw-away cluster the opt-in ``k8s`` tests write to, or a clean skip where none is
named or it does not answer."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TypeVar

import pytest

T = TypeVar("T")


def kubeconfig() -> Path:
    """The kubeconfig ``COTENANT_K8S_KUBECONFIG`` names; a skip where it names no file."""
    named = os.environ.get("COTENANT_K8S_KUBECONFIG", "")
    if not named or not Path(named).is_file():
        pytest.skip("set COTENANT_K8S_KUBECONFIG to a throw-away cluster's kubeconfig")
    return Path(named)


def answering(client: T) -> T:
    """``client`` (with a ``core`` CoreV1Api) once its API server has answered; a skip
    otherwise."""
    core: Any = client.core
    try:
        core.list_node(_request_timeout=5)
    except Exception as exc:  # any failure to reach it means: no cluster here
        pytest.skip(f"the API server does not answer: {exc}")
    return client
