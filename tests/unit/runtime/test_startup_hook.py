"""The startup hook in a real interpreter, without torch: the environment the agent gives a
workload turns the runtime on (HP takes no lease before it works, BE waits for torch), the
application's own ``sitecustomize`` still runs, and a bad setting is one line on stderr while
the application runs on."""

from __future__ import annotations

import io
import subprocess
import sys
import time
from contextlib import redirect_stderr
from pathlib import Path

from cotenant.runtime import Board, GateSettings, runtime_env
from cotenant.runtime.hook import Runtime
from cotenant.runtime.lease import SLOTS

PROBE = """
import sys
rt = sys.modules.get("_cotenant_runtime.hook")
print("runtime" if rt is not None else "none")
print("torch" if "torch" in sys.modules else "no-torch")
watchers = [type(f).__name__ for f in sys.meta_path if type(f).__name__ == "_TorchWatcher"]
print(",".join(watchers) or "-")
print("app-site" if "app_site_ran" in sys.modules else "no-app-site")
"""


def run(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                          text=True, timeout=60, cwd=tmp_path, check=False)


def test_the_agents_environment_turns_the_runtime_on_lazily(tmp_path: Path) -> None:
    app = tmp_path / "app"
    app.mkdir()  # the application's own sitecustomize, on its own PYTHONPATH
    (app / "sitecustomize.py").write_text("import sys\nsys.modules['app_site_ran'] = sys\n")
    env = runtime_env("be", tmp_path / "gpu0.board", GateSettings(), str(app))
    out = run(env, tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["runtime", "no-torch", "_TorchWatcher", "app-site"]
    assert out.stderr == ""
    assert (tmp_path / "gpu0.board").exists()


def test_without_a_role_the_hook_does_nothing_but_chain(tmp_path: Path) -> None:
    env = runtime_env("hp", tmp_path / "gpu0.board", GateSettings())
    del env["COTENANT_PRIORITY_ROLE"]
    out = run(env, tmp_path)
    assert out.stdout.split()[:3] == ["none", "no-torch", "-"]
    assert not (tmp_path / "gpu0.board").exists()


def test_a_bad_setting_is_one_line_and_the_application_runs_ungated(tmp_path: Path) -> None:
    env = runtime_env("be", tmp_path / "gpu0.board", GateSettings())
    env["COTENANT_PRIORITY_MAX_HOLD_S"] = "soon"
    out = run(env, tmp_path)
    assert out.returncode == 0
    assert out.stdout.split()[2] == "-"
    assert out.stderr == ("cotenant runtime: COTENANT_PRIORITY_MAX_HOLD_S='soon' is not a "
                          "number; this process runs ungated\n")


def test_a_board_that_cannot_be_made_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    env = runtime_env("hp", tmp_path / "file" / "gpu0.board", GateSettings())
    out = run(env, tmp_path)
    assert out.returncode == 0
    assert out.stderr.startswith("cotenant runtime: ")
    assert out.stderr.endswith("this process runs ungated\n")
    assert out.stderr.count("\n") == 1


def test_an_hp_process_that_finds_no_free_slot_says_so_once_and_runs_on(
        tmp_path: Path) -> None:
    board = Board(tmp_path / "gpu0.board")
    for i in range(SLOTS):  # every slot leased by a live-looking holder
        now = time.monotonic_ns()
        board.renew(board.claim(10**7 + i, now), now + 50 * 10**9)
    runtime = Runtime("hp", board, GateSettings())
    err = io.StringIO()
    with redirect_stderr(err):
        runtime.touch()
        runtime.touch()
    assert err.getvalue() == (f"cotenant runtime: {board.path}: all 32 HP slots are leased; "
                              "this process holds no best-effort work (it runs ungated)\n")


def test_an_hp_board_removed_before_the_first_touch_never_raises_into_the_app(
        tmp_path: Path) -> None:
    board = Board(tmp_path / "gpu0.board")
    runtime = Runtime("hp", board, GateSettings())
    board.path.unlink()  # e.g. removed between the hook's start and a forked worker's first call
    err = io.StringIO()
    with redirect_stderr(err):
        runtime.touch()
        runtime.touch()
    assert err.getvalue().count("\n") == 1
    assert err.getvalue().startswith("cotenant runtime: [Errno 2]")
    assert err.getvalue().endswith("this process holds no best-effort work (it runs ungated)\n")


def test_an_hp_board_replaced_by_another_file_is_refused_not_half_used(tmp_path: Path) -> None:
    board = Board(tmp_path / "gpu0.board")
    runtime = Runtime("hp", board, GateSettings())
    board.path.unlink()
    Board(board.path).close()  # a new agent made a new board at the same path
    err = io.StringIO()
    with redirect_stderr(err):
        runtime.touch()
    assert err.getvalue() == (f"cotenant runtime: {board.path}: the board was replaced since "
                              "this process mapped it (a new agent's board is not the one its "
                              "BE side reads); this process holds no best-effort work (it "
                              "runs ungated)\n")


APP_PROBE = """
import sys
import sitecustomize
print(getattr(sitecustomize, "MARK", "hook"))
print("runtime" if sys.modules.get("_cotenant_runtime.hook") is not None else "none")
"""


def app_site(tmp_path: Path, body: str) -> dict[str, str]:
    app = tmp_path / "app"
    app.mkdir()
    (app / "sitecustomize.py").write_text(body)
    return runtime_env("hp", tmp_path / "gpu0.board", GateSettings(), str(app))


def test_import_sitecustomize_in_the_app_finds_the_apps_module(tmp_path: Path) -> None:
    env = app_site(tmp_path, "MARK = 'app'\n")
    out = subprocess.run([sys.executable, "-c", APP_PROBE], env=env, capture_output=True,
                         text=True, timeout=60, cwd=tmp_path, check=False)
    assert (out.returncode, out.stderr) == (0, "")
    assert out.stdout.split() == ["app", "runtime"]


def test_an_apps_failing_sitecustomize_is_said_without_claiming_the_runtime_is_off(
        tmp_path: Path) -> None:
    env = app_site(tmp_path, "MARK = 'app'\nraise RuntimeError('boom')\n")
    out = subprocess.run([sys.executable, "-c", APP_PROBE], env=env, capture_output=True,
                         text=True, timeout=60, cwd=tmp_path, check=False)
    assert out.returncode == 0
    assert out.stdout.split() == ["hook", "runtime"]  # the runtime is on
    assert out.stderr == ("cotenant runtime: the sitecustomize this hook runs after it failed "
                          "(RuntimeError: boom); the runtime is not affected\n")
