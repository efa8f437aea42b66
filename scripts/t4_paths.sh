#!/usr/bin/env bash
# The Colab T4's code paths on this GPU: every kernel built by NVRTC as compute_75 PTX and JIT-compiled here
# (so the code under __CUDA_ARCH__ == 750 runs: synchronous copies where cp.async is missing), with the
# T4's 64 KiB shared-memory limits enforced by the launchers; then the GPU tests and compute-sanitizer that
# way. Each call records its part in results/<this GPU>/t4_paths.json (provenance, the pytest and sanitizer
# counts); parts already recorded are kept, so the run can be split:
#   bash scripts/t4_paths.sh tests/test_variants_gpu.py tests/test_cuconv_gpu.py   # some GPU test files
#   bash scripts/t4_paths.sh --sanitizer                                            # compute-sanitizer
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" CONVKIT_PTX_ARCH=compute_75
if [ "${1:-}" = "--sanitizer" ]; then
  bash scripts/sanitize.sh > "$OUT/t4_sanitize.log" 2>&1
  echo "sanitizer exit $?"; grep -E "^==|exit|SUMMARY" "$OUT/t4_sanitize.log"
  python3 scripts/record_t4_paths.py --sanitizer "$OUT/t4_sanitize.log"
else
  part=$(basename "${1:-all}" .py)
  python3 -m pytest -q -m gpu -p no:cacheprovider --junitxml="$OUT/t4_$part.xml" "${@:-tests}" 2>&1 | tail -n 6
  python3 scripts/record_t4_paths.py --pytest "$OUT/t4_$part.xml" "$@"
fi
