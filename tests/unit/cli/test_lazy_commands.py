"""``cotenant --help`` and ``cotenant version`` load no command group: the groups, and the
libraries they need (numpy, pandas, matplotlib, the simulator), are imported when one runs.
How long that takes is a benchmark (benchmarks/cli_startup.py); that nothing heavy is
imported is checked here."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest
import typer.main

from cotenant.cli.main import COMMANDS, app
from tests.unit.cli.test_cli import run

HEAVY = ("numpy", "pandas", "matplotlib", "scipy", "cotenant.sim", "cotenant.traces",
         "cotenant.agent", "cotenant.cli.simulate")


@pytest.mark.parametrize("argv", [["--help"], ["version"], []])
def test_help_and_version_import_nothing_heavy(argv: list[str]) -> None:
    code = (
        "import sys\n"
        "from cotenant.cli.main import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, timeout=60)
    assert result.stderr.strip().splitlines()[-1:] in ([], [""]), result.stderr


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_listed_line_is_the_group_s_own_help(name: str) -> None:
    """``--help`` lists a group by the line in COMMANDS; it must say what the group says."""
    module = importlib.import_module(f"cotenant.cli.{name}")
    assert COMMANDS[name] == (module.app.info.help or "").strip().splitlines()[0]


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for name, line in COMMANDS.items():
        assert name in out
        assert line in " ".join(out.split())
    assert "version" in out


def test_a_group_loads_when_it_runs(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "policies")
    assert code == 0
    assert "fgd" in out.split()
    root = typer.main.get_command(app)
    ctx = root.context_class(root, info_name="cotenant")
    assert root.get_command(ctx, "simulate").name == "simulate"
    plan = root.get_command(ctx, "plan")  # one command, still a group: cotenant plan mig
    assert plan.list_commands(ctx) == ["mig"]
    assert not hasattr(root.get_command(ctx, "policies"), "list_commands")
