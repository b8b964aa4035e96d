"""The nvml backend is optional: nothing but choosing it loads pynvml; its error mapping."""

from __future__ import annotations

import subprocess
import sys

from cotenant.agent.backends.nvml import catalog_name, map_nvml_error
from cotenant.errors import PermanentError, TemporaryError


def test_agent_and_fake_backend_do_not_load_pynvml() -> None:
    code = (
        "import sys, cotenant.agent.service, cotenant.agent.api, cotenant.cli.main; "
        "from cotenant.agent.backends import open_backend; open_backend('fake'); "
        "print('pynvml' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == "False"


def test_nvml_errors_map_to_temporary_or_permanent_with_hints() -> None:
    timeout = map_nvml_error(10, "nvmlDeviceGetUtilizationRates")
    assert isinstance(timeout, TemporaryError)
    assert timeout.delay_s > 0
    denied = map_nvml_error(4, "nvmlDeviceCreateGpuInstance")
    assert isinstance(denied, PermanentError)
    assert "root" in denied.one_line()
    assert isinstance(map_nvml_error(12, "nvmlInit"), PermanentError)
    assert isinstance(map_nvml_error(999, "x"), PermanentError)


def test_nvml_names_map_to_the_catalog() -> None:
    assert catalog_name("NVIDIA A100-SXM4-40GB", 40960) == "A100-40GB"
    assert catalog_name("NVIDIA A100-SXM4-80GB", 81920) == "A100-80GB"
    assert catalog_name("NVIDIA H100 80GB HBM3", 81559) == "H100-80GB"
    assert catalog_name("Tesla T4", 15360) == "T4"
    assert catalog_name("NVIDIA L4", 23034) == "NVIDIA L4"  # not in the catalog: kept as is
