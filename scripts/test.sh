#!/usr/bin/env bash
# Set up, then run every check: ruff, mypy --strict on src/ and benchmarks/, import-linter's
# layer contracts, and the test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/ruff check src tests benchmarks
.venv/bin/mypy
.venv/bin/lint-imports
.venv/bin/pytest "$@"
