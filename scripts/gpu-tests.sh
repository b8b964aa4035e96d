#!/usr/bin/env bash
# The GPU tier: the tests marked `gpu`, on a host with an NVIDIA GPU, driver and PyTorch.
# PyTorch is not a cotenant dependency: the system's (or the container's) is used, through a
# separate environment, .venv-gpu, made with --system-site-packages. The run fails, rather
# than skips, where there is no GPU or no torch: a GPU tier that skips proves nothing.
#   scripts/gpu-tests.sh            read-only cases, MPS daemons and processes on GPU 0
#   scripts/gpu-tests.sh --write    also the contract cases that change GPU 0 (MIG instances
#                                   on an empty MIG GPU, a faulting MPS client)
#   scripts/gpu-tests.sh --system   no .venv-gpu: the system's Python as it is, with
#                                   PYTHONPATH=src (a machine without network; it needs
#                                   pytest and cotenant's runtime dependencies installed), on
#                                   the GPU test files only
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
SYSTEM=0
while [ "${1:-}" = "--write" ] || [ "${1:-}" = "--system" ]; do
    [ "$1" = "--write" ] && export COTENANT_GPU_WRITE=1
    [ "$1" = "--system" ] && SYSTEM=1
    shift
done
PYTHON="${PYTHON:-python3}"
if [ "$SYSTEM" = 1 ]; then
    export PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}"
    RUN="$PYTHON"
    set -- tests/unit/agent/test_gpu.py tests/unit/agent/test_contract.py \
        tests/unit/agent/test_contract_changes.py tests/unit/runtime/test_torch_hook.py "$@"
else
    if [ ! -x .venv-gpu/bin/python ]; then
        "$PYTHON" -m venv --system-site-packages .venv-gpu
        .venv-gpu/bin/python -m pip install --quiet -e '.[dev]'
    fi
    RUN=.venv-gpu/bin/python
fi
"$RUN" - <<'PY'
import sys
try:
    import torch
except ImportError:
    sys.exit("gpu-tests: no PyTorch in the system's Python; install it (pip install torch)")
if not torch.cuda.is_available():
    sys.exit("gpu-tests: PyTorch sees no CUDA GPU")
print(f"gpu-tests: torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
PY
log=$(mktemp)
"$RUN" -m pytest -m "gpu or torch" -rs "$@" | tee "$log"
if grep -E "SKIPPED.*(no NVIDIA GPU|torch is not installed)" "$log"; then
    echo "gpu-tests: GPU tests skipped for want of a GPU or torch" >&2
    exit 1
fi
