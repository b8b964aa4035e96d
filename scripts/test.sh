#!/usr/bin/env bash
# Set up, then run every check: ruff, mypy --strict on src/ and benchmarks/, import-linter's
# layer contracts, the documentation site (mkdocs build --strict into site/: every link and
# anchor must resolve), and the test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/ruff check src tests benchmarks
.venv/bin/mypy
.venv/bin/lint-imports
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict  # not --quiet: it hides broken anchors
.venv/bin/pytest "$@"
