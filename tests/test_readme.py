"""The README's commands work as written.

Every fenced ``bash`` block of README.md is cut into commands (a line ending in ``\\`` goes on
to the next), and each command runs in bash against the installed CLI, from a directory laid
out as the repository's root is: ``examples/`` and ``.venv`` in it, ``../shared`` beside it
where the traces are. A block that starts something in the background (``&``) runs whole, as
one script. The few commands too slow for the suite are skipped by name, each with its reason.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
BIN = Path(sys.executable).parent
AGENT_PORT = 8470  # the agent's default --listen, which the README's agent block uses

SLOW = {
    "./scripts/simulate.sh": "the full default experiment, 70 runs (20-40 s on two cores); "
    "its set-up half runs in every CI job through scripts/test.sh",
    "./scripts/test.sh": "the test command itself",
    "openb_pod_list_default.csv --out": "70 runs on the real trace (30-40 s); "
    "benchmarks/fragmentation.py measures them",
    "--frontier": "every setting of every policy, about 16 s even on 100 GPUs for 2 hours; "
    "tests/unit/cli/test_colocation_cli.py runs a frontier on a small workload",
}
CLUSTER = {
    "build-image.sh": "builds the image for a cluster (minutes, and a registry for its base); "
    "tests/unit/integrations/k8s/test_image.py checks a built image, opt-in",
    "kubectl apply": "needs a Kubernetes cluster; tests/unit/integrations/k8s/test_deploy.py "
    "checks the manifests offline",
}


def readme_blocks(text: str) -> list[list[str]]:
    """The commands of each ```bash block: continuation lines joined, blank lines and
    comment-only lines left out."""
    blocks = []
    for body in re.findall(r"^```bash\n(.*?)^```", text, flags=re.M | re.S):
        commands: list[str] = []
        pending = ""
        for line in body.splitlines():
            pending += line
            if pending.rstrip().endswith("\\"):
                pending = pending.rstrip()[:-1] + " "
                continue
            if pending.strip() and not pending.lstrip().startswith("#"):
                commands.append(pending.strip())
            pending = ""
        blocks.append(commands)
    return blocks


def in_background(command: str) -> bool:
    """Whether ``command`` (comments aside) ends in ``&``."""
    return command.split(" #", maxsplit=1)[0].rstrip().endswith("&")


def cases() -> list[object]:
    params = []
    for n, block in enumerate(readme_blocks((ROOT / "README.md").read_text(encoding="utf-8"))):
        if any(in_background(c) for c in block):
            params.append(pytest.param(block, id=f"block{n}: {block[0][:50]}"))
        else:
            params += [pytest.param([c], id=f"block{n}: {c[:60]}") for c in block]
    return params


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    """A directory laid out as the repository's root, for the commands to run in."""
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copytree(ROOT / "examples", root / "examples")
    (root / ".venv").symlink_to(BIN.parent)
    if SHARED.is_dir():
        (tmp_path / "shared").symlink_to(SHARED)
    return root


def port_in_use(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_readme_has_commands_for_every_capability() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    flat = [c for block in readme_blocks(text) for c in block]
    assert flat[:2] == [
        "./scripts/simulate.sh     # set up .venv, run `cotenant simulate` on the embedded "
        "default, report in report/",
        "./scripts/test.sh         # set up .venv, run ruff, mypy --strict, import-linter, the "
        "docs build and the tests",
    ]
    for command in ("cotenant simulate ", "cotenant simulate colocation", "cotenant plan mig",
                    "cotenant agent run"):
        assert any(c.startswith(command) for c in flat), command
    assert len(text.splitlines()) <= 120


@pytest.mark.parametrize("commands", cases())
def test_readme_command_runs(commands: list[str], repo_copy: Path) -> None:
    for name, reason in SLOW.items():
        if any(name in c for c in commands):
            pytest.skip(f"slow: {reason}")
    for name, reason in CLUSTER.items():
        if any(name in c for c in commands):
            pytest.skip(f"needs a cluster: {reason}")
    if any("../shared/" in c for c in commands) and not SHARED.is_dir():
        pytest.skip("../shared/data is absent")
    if not (BIN / "cotenant").exists():
        pytest.skip(f"no installed cotenant beside {sys.executable}")
    background = any(in_background(c) for c in commands)
    if background and port_in_use(AGENT_PORT):
        pytest.skip(f"port {AGENT_PORT}, which the README's agent uses, is taken here")
    script = "\n".join([
        "set -euo pipefail",
        "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT",  # no agent outlives a failure
        *commands,
        "wait",
    ])
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
           "COLUMNS": "100"}
    result = subprocess.run(["bash", "-c", script], cwd=repo_copy, env=env, capture_output=True,
                            text=True, timeout=300, check=False)
    assert result.returncode == 0, f"{script}\n{result.stdout}\n{result.stderr}"
