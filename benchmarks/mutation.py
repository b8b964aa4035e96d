"""Mutation testing of the core with mutmut, in parts that each run in minutes on two cores.

Each part mutates a few modules and runs only the tests that exercise them: a scratch copy of
``src/``, ``tests/``, ``examples/`` and ``pyproject.toml`` is made under ``.mutation/<part>/``
with the part's ``[tool.mutmut]`` settings appended, so the working tree and its configuration
stay untouched and parts can be rerun one at a time. mutmut runs each test that covers a
mutated function against each of its mutants; a mutant no test fails on *survived*.

The score is killed / (killed + survived + no tests), after leaving out the mutants listed in
``NOT_COUNTED`` with their reason (equivalent mutants, and functions that run only while the
package is imported: mutmut switches a mutant on after import, so it cannot test those).
The partition planner's solves and bounds run in forked child processes
(:mod:`cotenant.policies.partition.child`), and mutmut records which tests reach a function
only in the process that runs them: the child's record is lost and its mutants would show
*no tests*. The parts that mutate that code (``Part.in_process``) load the
:data:`IN_PROCESS` plugin, which runs the work in the test's own process, as ``child`` does
where ``fork`` is unavailable; they deselect the tests of the fork itself (a child killed
at its deadline, an answer that cannot be pickled), which the normal suite runs, and
``child.py`` is a part of its own with forks on.

    .venv/bin/pip install -e '.[mutation]'
    nice -n 10 .venv/bin/python benchmarks/mutation.py [PART ...] [--jobs 2] [--list]

Without a part name every part runs, the pure core first. Results go to
``.mutation/<part>/summary.json``; ``--report`` prints the table of every part run so far;
``--recheck PART`` tests the part's survivors again after tests were added.
"""

from __future__ import annotations

import argparse
import filecmp
import fnmatch
import json
import math
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from mutation_not_counted import NOT_COUNTED

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".mutation"
NOT_TESTED = ("not checked", "skipped", "check was interrupted by user")
"""mutmut statuses of mutants that were never run against their tests: left out of the score
(the "not tested" column); every other status but killed and timeout counts as a survivor."""


@dataclass(frozen=True)
class Part:
    name: str
    mutate: tuple[str, ...]
    """Globs of the files to mutate (mutmut's ``only_mutate``)."""
    tests: tuple[str, ...]
    """The tests that exercise them; mutmut picks, per mutant, those that reach its function."""
    in_process: bool = False
    """Run the solvers' forked work in the test's process (:data:`IN_PROCESS`)."""


SUPERVISOR_TESTS = (*(f"tests/unit/agent/test_{name}.py" for name in (
    "supervisor", "supervisor_requests", "recovery", "reconcile", "exit_handling", "faults",
    "mig_jobs", "guard", "guard_pause", "guard_watch", "downtime", "crash_consistency",
    "chaos")), "-k", "not real")
"""The agent's supervisor and exit handling on the fake node (the chaos cases with real
processes repeat the fake node's, at seconds each: left out by ``-k``)."""

PARTITION_IN_PROCESS_TESTS = (
    "tests/unit/policies/test_partition_scale.py", "tests/unit/policies/test_partition_limits.py",
    *(f"--deselect=tests/unit/policies/test_partition_limits.py::{name}" for name in (
        "test_a_child_that_overruns_is_killed_on_time",
        "test_a_child_error_comes_back_as_itself_or_as_one_line")))
"""The planner's tests at scale and at its limits, less the two of the fork itself (a child
killed at its deadline, an answer that cannot be pickled), which fail by design where the
forked work runs in the test's process (:data:`IN_PROCESS`)."""

PARTS = (
    Part("model", ("src/cotenant/model/*",),
         ("tests/unit/model", "tests/unit/policies/test_placement.py",
          "tests/unit/policies/test_placement_values.py", "tests/unit/policies/test_partition.py",
          "tests/unit/policies/test_partition_edges.py", "tests/unit/cli/test_plan.py",
          "tests/unit/sim/test_fragmentation.py", "tests/unit/sim/test_mig_training.py",
          "tests/unit/traces/test_openb.py")),
    Part("policies-placement", tuple(f"src/cotenant/policies/placement/{name}.py" for name in (
        "base", "fit", "fgd", "frag", "packing", "pack", "prices", "random_", "arcflow")),
         ("tests/unit/policies/test_placement.py", "tests/unit/policies/test_placement_values.py",
          "tests/unit/policies/test_pack.py", "tests/unit/policies/test_pack_values.py",
          "tests/unit/policies/test_packing_values.py", "tests/unit/policies/test_prices.py",
          "tests/unit/policies/test_optimum.py", "tests/unit/sim/test_fragmentation.py")),
    Part("policies-placement-optimum", ("src/cotenant/policies/placement/optimum/*",),
         ("tests/unit/policies/test_optimum.py", "tests/unit/policies/test_optimum_values.py",
          "tests/unit/sim/test_bound.py")),
    Part("policies-partition-plan", tuple(f"src/cotenant/policies/partition/{name}.py"
                                          for name in ("__init__", "problem", "planner",
                                                       "export", "greedy", "packing",
                                                       "baseline", "bounds", "formulation",
                                                       "registry")),
         ("tests/unit/policies/test_partition.py", "tests/unit/policies/test_partition_edges.py",
          "tests/unit/policies/test_partition_values.py",
          "tests/unit/policies/test_partition_planner.py",
          "tests/unit/policies/test_partition_patterns.py",
          "tests/unit/policies/test_partition_bounds.py",
          "tests/unit/policies/test_partition_greedy.py", "tests/unit/cli/test_plan.py",
          *PARTITION_IN_PROCESS_TESTS),
         in_process=True),
    Part("policies-partition-solvers", tuple(f"src/cotenant/policies/partition/{name}.py"
                                             for name in ("milp", "highs", "genetic", "mcts",
                                                          "search", "auto")),
         ("tests/unit/policies/test_partition.py", "tests/unit/policies/test_partition_edges.py",
          "tests/unit/policies/test_partition_rounding.py",
          "tests/unit/policies/test_partition_mcts.py",
          "tests/unit/policies/test_partition_milp_wiring.py",
          "tests/unit/policies/test_partition_highs_wiring.py",
          "tests/unit/policies/test_partition_search_steps.py",
          "tests/unit/policies/test_partition_search_loops.py", *PARTITION_IN_PROCESS_TESTS),
         in_process=True),
    Part("policies-partition-child", ("src/cotenant/policies/partition/child.py",),
         ("tests/unit/policies/test_partition_limits.py",
          "tests/unit/policies/test_partition_child.py")),
    Part("policies-partition-reconfig", ("src/cotenant/policies/partition/reconfig/*",),
         ("tests/unit/policies/test_reconfig.py", "tests/unit/policies/test_reconfig_values.py",
          "tests/unit/policies/test_reconfig_stages.py",
          "tests/unit/policies/test_reconfig_rules.py",
          "tests/unit/policies/test_reconfig_search.py",
          "tests/unit/policies/test_partition_edges.py")),
    Part("policies-colocation", ("src/cotenant/policies/colocation/*",),
         ("tests/unit/policies/colocation",)),
    Part("policies-flexmig", ("src/cotenant/policies/flexmig/*",),
         ("tests/unit/policies/test_flexmig.py", "tests/unit/policies/test_flexmig_values.py")),
    Part("policies-priority", ("src/cotenant/policies/priority/*",),
         ("tests/unit/policies/test_priority_schedulers.py",
          "tests/unit/policies/test_priority_values.py",
          "tests/unit/policies/test_priority_table.py", "tests/unit/sim/test_priority.py")),
    Part("perf", ("src/cotenant/perf/*",), ("tests/unit/perf",)),
    Part("sim-metrics", ("src/cotenant/sim/fragmentation.py", "src/cotenant/sim/bound.py",
                         "src/cotenant/sim/colocation/records.py",
                         "src/cotenant/sim/colocation/frontier.py"),
         ("tests/unit/sim",)),
    Part("agent-api-auth", ("src/cotenant/agent/api.py",), ("tests/unit/agent/test_api.py",)),
    Part("agent-supervisor", ("src/cotenant/agent/supervisor.py",), SUPERVISOR_TESTS),
    Part("agent-faults", ("src/cotenant/agent/faults.py",), SUPERVISOR_TESTS),
    Part("report-tables", ("src/cotenant/report/tables.py", "src/cotenant/report/colocation.py"),
         ("tests/unit/report",)),
)



def prepare(part: Part) -> Path:
    """A fresh scratch copy for ``part`` with its mutmut settings."""
    where = WORK / part.name
    if where.exists():
        shutil.rmtree(where)
    where.mkdir(parents=True)
    for name in ("src", "tests", "examples"):
        shutil.copytree(ROOT / name, where / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    write_settings(where, part, part.tests)
    return where


REAPER = '''"""Reap the solver children the tests killed before the session ends.

cotenant's partition solvers reap a killed child lazily, at their next kill, so a test
session leaves the last few as zombies. mutmut runs some tests in its own process and then
waits for any child with os.wait(): it would take such a zombie for one of its workers and
stop with a KeyError."""

import gc
import os


def pytest_sessionfinish(session: object, exitstatus: int) -> None:
    try:
        from cotenant.policies.partition import child
    except ImportError:
        return
    gc.collect()  # a Pending never asked for its answer kills its child when collected
    for pid in list(child._killed):
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        child._killed.remove(pid)
'''
"""A pytest plugin put in each scratch copy's ``src/`` and loaded by its tests."""

IN_PROCESS = '''"""Run the partition solvers' forked work in the test's own process.

mutmut records which tests reach a function only in the process that runs them, so work
done in a forked child would show no tests; cotenant.policies.partition.child runs it in
process where fork is unavailable, and this makes it so."""


def pytest_configure(config: object) -> None:
    from cotenant.policies.partition import child

    child.CAN_FORK = False
'''
"""The plugin of the parts with ``in_process`` set, put beside :data:`REAPER`."""


IN_PROCESS_TIMEOUT = 3.0
"""mutmut's ``timeout_multiplier`` for the parts with ``in_process`` set. A mutant's CPU
limit is 2 x multiplier x (its tests' time in the traced statistics run + 1 s), and that run
is slow where the searches run in process: 97 s for a test that takes 2 s untraced, so the
default multiplier (15) let a mutant that loops for ever burn an hour of CPU before it
counted as a timeout. 0.5 was too tight: HiGHS's threads spend CPU faster than wall time,
and mutants whose tests pass were stopped as timeouts (counted as kills)."""


def write_settings(where: Path, part: Part, tests: Sequence[str]) -> None:
    """The project's pyproject.toml with the part's mutmut settings, selecting ``tests``, and
    the :data:`REAPER` plugin they load."""
    for src in (where / "src", where / "mutants" / "src"):
        if src.is_dir():
            (src / "mutation_reaper.py").write_text(REAPER)
            (src / "mutation_in_process.py").write_text(IN_PROCESS)
    settings: dict[str, object] = {
        "source_paths": ["src/"],
        "only_mutate": list(part.mutate),
        "pytest_add_cli_args_test_selection": list(tests),
        "pytest_add_cli_args": ["-p", "no:cacheprovider", "-p", "mutation_reaper",
                                *(("-p", "mutation_in_process") if part.in_process else ()),
                                "-q"],
        "also_copy": ["tests/", "examples/"],
    }
    if part.in_process:
        settings["timeout_multiplier"] = IN_PROCESS_TIMEOUT
    lines = [f"{k} = {json.dumps(v)}" for k, v in settings.items()]
    text = (ROOT / "pyproject.toml").read_text()
    (where / "pyproject.toml").write_text(text + "\n[tool.mutmut]\n" + "\n".join(lines) + "\n")


def mutmut(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "mutmut"
    if not exe.exists():
        sys.exit(f"no {exe}: pip install -e '.[mutation]' first")
    return subprocess.run([str(exe), *args], cwd=where, capture_output=True, text=True,
                          check=False)


def statuses(where: Path) -> dict[str, str]:
    """Each mutant's name and its status as mutmut reports it."""
    out = mutmut(where, "results", "--all", "true").stdout
    found = {}
    for line in out.splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep and name.startswith("cotenant."):
            found[name] = status
    return found


def excluded(name: str) -> str | None:
    for key, why in NOT_COUNTED.items():
        if name == key or (not key[-1].isdigit() and name.startswith(key)):
            return why
    return None


def summarise(part: Part, found: dict[str, str], seconds: float) -> dict[str, object]:
    counted = {n: s for n, s in found.items() if excluded(n) is None}
    tally: dict[str, int] = {}
    for status in counted.values():
        tally[status] = tally.get(status, 0) + 1
    killed = tally.get("killed", 0) + tally.get("timeout", 0)
    # every mutant that was tested counts: a suspicious or segfaulting one is not a kill
    judged = sum(n for status, n in tally.items() if status not in NOT_TESTED)
    return {
        "part": part.name, "mutate": list(part.mutate), "tests": list(part.tests),
        "mutants": len(found), "not_counted": len(found) - len(counted), "statuses": tally,
        "score_percent": round(100.0 * killed / judged, 1) if judged else None,
        "survivors": sorted(n for n, s in counted.items()
                            if s not in NOT_TESTED and s not in ("killed", "timeout")),
        "seconds": round(seconds, 1), "machine": platform.node(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def run_part(part: Part, jobs: int) -> dict[str, object]:
    where = prepare(part)
    start = time.perf_counter()
    run = mutmut(where, "run", "--max-children", str(jobs))
    if run.returncode != 0:
        tail = (run.stderr or run.stdout).strip().splitlines()[-5:]
        sys.exit(f"mutmut failed on part {part.name}:\n" + "\n".join(tail))
    summary = summarise(part, statuses(where), time.perf_counter() - start)
    (where / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def recheck_part(part: Part, jobs: int, tests: Sequence[str]) -> dict[str, object]:
    """Test the survivors of an earlier run of ``part`` again against the current tests and
    the current code (:func:`refresh_source`): the tests are copied in afresh and mutmut
    collects which tests reach what once more; or only against ``tests`` where given (a
    survivor they do not kill still counts as one). Where a mutated file changed, mutmut
    makes that file's mutants again and tests every mutant of each function whose code
    changed (it keeps the results of the others, by a hash of each function). The summary
    then counts every mutant with its latest status."""
    where = WORK / part.name
    before = json.loads((where / "summary.json").read_text())
    changed = refresh_source(part, where)
    for target in (where / "tests", where / "mutants" / "tests"):
        shutil.rmtree(target)
        shutil.copytree(ROOT / "tests", target, ignore=shutil.ignore_patterns("__pycache__"))
    write_settings(where, part, tests or part.tests)
    (where / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)
    start = time.perf_counter()
    if changed:  # the changed functions' mutants, made again and not yet tested
        _run(part, where, jobs)
    now = statuses(where)
    _run(part, where, jobs, *(n for n in before["survivors"] if now.get(n) not in NOT_TESTED
                              and now.get(n) not in (None, "killed", "timeout")))
    summary = summarise(part, statuses(where), before["seconds"] + time.perf_counter() - start)
    summary["rechecked"] = {"survivors": len(before["survivors"]),
                            "tests": list(tests or part.tests), "changed": changed}
    (where / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def _run(part: Part, where: Path, jobs: int, *names: str) -> None:
    run = mutmut(where, "run", "--max-children", str(jobs), *names)
    if run.returncode != 0:
        tail = (run.stderr or run.stdout).strip().splitlines()[-5:]
        sys.exit(f"mutmut failed on part {part.name}:\n" + "\n".join(tail))


def refresh_source(part: Part, where: Path) -> list[str]:
    """Bring the scratch copy's code up to the working tree's: the files ``part`` does not
    mutate into both copies, and a mutated file that changed into the source mutmut mutates,
    newer than its mutants, so that mutmut makes them again. Returns the changed mutated
    files."""
    changed = []
    for path in sorted((ROOT / "src").rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts or ".egg-info" in str(path):
            continue
        rel = path.relative_to(ROOT).as_posix()
        if any(fnmatch.fnmatch(rel, glob) for glob in part.mutate):
            if not filecmp.cmp(path, where / rel, shallow=False):
                shutil.copyfile(path, where / rel)  # a new mtime: mutmut sees the change
                changed.append(rel)
            continue
        for base in (where, where / "mutants"):
            (base / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, base / rel)
    return changed


def collect(part: Part) -> dict[str, object]:
    """The part's summary written again from mutmut's results (a run stopped before its
    summary was written, or ``NOT_COUNTED`` changed since), keeping an earlier summary's
    time and recheck record where there is one."""
    path = WORK / part.name / "summary.json"
    before = json.loads(path.read_text()) if path.exists() else {}
    summary = summarise(part, statuses(WORK / part.name), before.get("seconds", math.nan))
    if "rechecked" in before:
        summary["rechecked"] = before["rechecked"]
    path.write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def report() -> None:
    """The parts as a Markdown table (the docs' results page), a part not run said so."""
    print("| part | files mutated | mutants | not counted | killed | survived | no test | "
          "not tested | score |")
    print("|---|---|---|---|---|---|---|---|---|")
    for part in PARTS:
        files = ", ".join(f"`{m.removeprefix('src/cotenant/')}`" for m in part.mutate)
        path = WORK / part.name / "summary.json"
        if not path.exists():
            print(f"| {part.name} | {files} | not run | | | | | | |")
            continue
        s = json.loads(path.read_text())
        st = s["statuses"]
        killed = st.get("killed", 0) + st.get("timeout", 0)
        untested = sum(st.get(status, 0) for status in NOT_TESTED)
        survived = sum(n for status, n in st.items() if status not in NOT_TESTED
                       and status not in ("killed", "timeout", "no tests"))
        print(f"| {part.name} | {files} | {s['mutants']} | {s['not_counted']} | {killed} | "
              f"{survived} | {st.get('no tests', 0)} | {untested} | "
              f"**{s['score_percent']}%** |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("parts", nargs="*", help="parts to run (default: all)")
    parser.add_argument("--jobs", type=int, default=2, help="mutants tested at once")
    parser.add_argument("--list", action="store_true", help="list the parts and exit")
    parser.add_argument("--report", action="store_true", help="print the table and exit")
    parser.add_argument("--collect", action="store_true",
                        help="write the summary of a part's finished run again (a run "
                             "stopped before its summary was written, or NOT_COUNTED changed)")
    parser.add_argument("--recheck", action="store_true",
                        help="test only the survivors of the last run again, with the current "
                             "tests")
    parser.add_argument("--tests", nargs="+", default=[],
                        help="with --recheck: only these tests (default: the part's)")
    args = parser.parse_args()
    names = {p.name: p for p in PARTS}
    if args.list:
        for p in PARTS:
            print(f"{p.name}: {' '.join(p.mutate)}")
        return
    if args.report:
        report()
        return
    unknown = [n for n in args.parts if n not in names]
    if unknown:
        sys.exit(f"unknown part(s) {', '.join(unknown)}; valid: {', '.join(names)}")
    for part in [names[n] for n in args.parts] or list(PARTS):
        if args.collect:
            s = collect(part)
        else:
            s = (recheck_part(part, args.jobs, args.tests) if args.recheck
                 else run_part(part, args.jobs))
        print(f"{part.name}: score {s['score_percent']}% of {s['mutants']} mutants "
              f"({s['not_counted']} not counted) in {s['seconds']} s", flush=True)
    report()


if __name__ == "__main__":
    main()
