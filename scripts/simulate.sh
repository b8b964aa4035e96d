#!/usr/bin/env bash
# Set up, then run the main job: `cotenant simulate` on the embedded default workload, with the
# HTML report written to report/. Extra arguments go to `cotenant simulate`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/cotenant simulate --out report "$@"
