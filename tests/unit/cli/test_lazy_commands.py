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
from cotenant.cli.simulate import SUBCOMMANDS
from tests.unit.cli.test_cli import run

HEAVY = ("numpy", "pandas", "matplotlib", "scipy", "cotenant.sim", "cotenant.traces",
         "cotenant.agent", "cotenant.cli.simulate")


def loaded_after(argv: list[str], modules: tuple[str, ...]) -> list[str]:
    """Which of ``modules`` are imported once ``cotenant argv`` has run (in a fresh process)."""
    code = (
        "import sys\n"
        "from cotenant.cli.main import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print('loaded:' + ','.join(m for m in {modules!r} if m in sys.modules), "
        "file=sys.stderr)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, timeout=120)
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("loaded:"), result.stderr
    return [m for m in line.removeprefix("loaded:").split(",") if m]


@pytest.mark.parametrize("argv", [["--help"], ["version"], []])
def test_help_and_version_import_nothing_heavy(argv: list[str]) -> None:
    assert loaded_after(argv, HEAVY) == []


COLOCATION = ("cotenant.sim.colocation", "cotenant.cli.colocation", "cotenant.traces.genai")


@pytest.mark.parametrize("argv", [
    ["simulate", "--help"],
    ["simulate", "replay", "--synthetic-pods", "40", "--synthetic-nodes", "4", "-p", "fgd",
     "--json"],
])
def test_the_placement_simulators_do_not_load_the_colocation_one(argv: list[str]) -> None:
    assert loaded_after(argv, COLOCATION) == []


@pytest.mark.parametrize(("name", "entry"), [*COMMANDS.items(), *SUBCOMMANDS.items()])
def test_each_listed_line_is_the_command_s_own_help(name: str, entry: tuple[str, str]) -> None:
    """``--help`` lists a command by the line in its table; it must say what the command
    (or group) says of itself."""
    module, line = entry
    sub = importlib.import_module(module).app
    own = sub.info.help or next(c.callback.__doc__ for c in sub.registered_commands
                                if c.callback is not None)
    first = (own or "").strip().split("\n\n")[0]  # the first paragraph, as --help shows it
    assert line == " ".join(first.split())


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for name, (_, line) in COMMANDS.items():
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
