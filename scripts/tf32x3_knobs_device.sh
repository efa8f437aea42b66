#!/usr/bin/env bash
# The 3xTF32 kernel's new launches checked and timed in one device call (one GPU, foreground, each step under its
# own limit so the call ends inside its 10 minutes; nothing recorded, the probe prints):
#   1. the GPU tests of the 3xTF32 family (every candidate, the new knobs and Winograd's included, against float64),
#      FP32 Winograd's and the PyTorch operators' (the import-order test);
#   2. compute-sanitizer's four tools over the 3xTF32 edge launches (CUTLASS's warps, weights split ahead, two
#      slices a flush, Winograd on the 3xTF32 GEMM with its filters split or not);
#   3. scripts/tf32x3_probe.py: every candidate on six network layers beside cuDNN, PyTorch, cuBLAS and CUTLASS's
#      tiles (carry the nvidia-cutlass wheel), then the error as K grows.
#   STEPS=check bash scripts/tf32x3_knobs_device.sh; STEPS=probe bash ...   # carry .whl (pytest-xdist, execnet) and
#   .whl_cutlass (nvidia-cutlass, treelib, pydot: kept apart so that other jobs' GPU suites do not build CUTLASS);
#   two calls on the warm machine: racecheck over every edge launch takes minutes
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  .whl_cutlass/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
steps=${STEPS:-check probe}
if [[ $steps == *check* ]]; then
echo "=== GPU tests ($SECONDS s)"
timeout 200 python3 -m pytest -q -rs -p no:cacheprovider -n 8 -m gpu tests/test_tf32x3_gpu.py tests/test_fp32_gpu.py \
  tests/test_torch_ops_gpu.py > "$OUT/tests.log" 2>&1
tail -n 4 "$OUT/tests.log"
echo "=== compute-sanitizer over the 3xTF32 edge launches ($SECONDS s)"
timeout 400 bash scripts/sanitize.sh tf32x3
fi
if [[ $steps == *probe* ]]; then
  echo "=== probe ($SECONDS s)"
  timeout $(( 560 - SECONDS )) python3 scripts/tf32x3_probe.py 2>&1 | tee "$OUT/probe.log" | tail -n 60
fi
