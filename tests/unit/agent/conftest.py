"""Fixtures for the agent tests: a fake node on a manual clock, and NVML detection."""

from __future__ import annotations

from pathlib import Path

import pytest

from cotenant.agent.backends import FakeNode, ManualClock


def nvml_gpu_count() -> int:
    """How many GPUs NVML sees here (0 where there is no driver or no nvidia-ml-py)."""
    try:
        import pynvml  # noqa: PLC0415 - optional SDK, only probed
    except ImportError:
        return 0
    try:
        pynvml.nvmlInit()
        count = int(pynvml.nvmlDeviceGetCount())
        pynvml.nvmlShutdown()
    except pynvml.NVMLError:
        return 0
    return count


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1000.0)


@pytest.fixture
def node(clock: ManualClock) -> FakeNode:
    return FakeNode.build("A100-40GB", count=2, clock=clock, per_client_util=True)


@pytest.fixture
def needs_gpu() -> None:
    if nvml_gpu_count() == 0:
        pytest.skip("no NVIDIA GPU/NVML here")


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"
