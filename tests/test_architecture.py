"""Architecture rules checked as tests: import-linter's layer contracts (pyproject.toml), and
the pure core importing no infrastructure even indirectly at import time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_linter_contracts_hold() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint)], cwd=ROOT, capture_output=True, text=True, check=False, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_pure_core_loads_no_infrastructure() -> None:
    code = (
        "import sys, cotenant.model.cluster, cotenant.policies.placement; "
        "bad = [m for m in ('typer', 'click', 'rich', 'matplotlib', 'pynvml', 'kubernetes') "
        "if m in sys.modules]; print(','.join(bad))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == ""
