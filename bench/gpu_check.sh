#!/usr/bin/env bash
# Check and time exported cuda artifacts on a GPU machine (Python 3.12, numpy, CuPy, JAX, a CUDA
# driver; no MLIR needed). Make the artifacts first, where MLIR is installed:
#   .venv/bin/python bench/export_gpu_artifacts.py /tmp/relax-mlir-gpu-artifacts
# then, on the GPU machine:
#   bench/gpu_check.sh /tmp/relax-mlir-gpu-artifacts [JSON_OUT]
# With this workplace's device tool: export into build/gpu-artifacts (git ignores build/; all 14
# models are about 13 MB), then run with carry ["build/gpu-artifacts"] and the command
#   PYTHON=python3 bash bench/gpu_check.sh build/gpu-artifacts $OUT/gpu_check.json
# (one call, well inside 10 minutes). Here, `--target vulkan` artifacts run the same check on
# lavapipe.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:?usage: bench/gpu_check.sh ARTIFACT_DIR [JSON_OUT]}
json=${2:-$dir/gpu_check.json}
py=${PYTHON:-python3}
export PYTHONPATH="$here/../python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export XLA_PYTHON_CLIENT_PREALLOCATE=false  # leave GPU memory to CuPy too
command -v nvidia-smi >/dev/null && nvidia-smi -L || true
"$py" -c "import numpy, jax; print('numpy', numpy.__version__, 'jax', jax.__version__)"
"$py" -c "import cupy; print('cupy', cupy.__version__)" || echo "cupy: not importable (a cuda artifact cannot run)"
# The whole check stays well inside 10 minutes (a few seconds of PTX JIT, then timings).
timeout 540 "$py" "$here/gpu_check.py" "$dir" --json "$json"
