#!/usr/bin/env bash
# The whole GPU suite and compute-sanitizer in one device call: the GPU tests spread over CPU workers
# (pytest-xdist: most of their time is NVRTC builds) while the sanitizer's four tools run beside them.
# Run from the repository root on a GPU machine with .whl (shared/tools/device-wheels.sh pytest-xdist
# execnet hatchling trove-classifiers pathspec pluggy packaging); logs go to $OUT (default ./out).
# -v: each test named as it ends, so a log cut short (a device call that ends first) still says which failed.
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
python3 -m pytest -m gpu -v -rfs -p no:cacheprovider -n "${WORKERS:-12}" ${TESTS:-tests} > "$OUT/gpu_tests.log" 2>&1 &
tests=$!
sanitizer=0
if [ "${SANITIZE:-1}" = 1 ]; then  # SANITIZE=0: the tests alone (TESTS, a part of the suite)
  bash scripts/sanitize.sh > "$OUT/sanitize.log" 2>&1
  sanitizer=$?
fi
wait $tests
pytest_status=$?
tail -n 25 "$OUT/gpu_tests.log"
[ -f "$OUT/sanitize.log" ] && grep -E "^==|exit|ERROR SUMMARY" "$OUT/sanitize.log"
echo "gpu tests exit $pytest_status, sanitizer exit $sanitizer"
[ $pytest_status -eq 0 ] && [ $sanitizer -eq 0 ]
