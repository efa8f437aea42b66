#!/usr/bin/env bash
# The 3xTF32 chapter's GPU session, resumable, until the chapter joins the registry (then chapter_device.sh):
# its GPU tests (the family, CUTLASS, the op's precision contract), the TF32 ceilings the ceilings store lacks,
# the accuracy experiment, then the tuning and sweep for at most SWEEP_SECONDS. Run from the repository root on
# a GPU machine with .whl from `shared/tools/device-wheels.sh pytest-xdist execnet nvidia-cutlass` (the CUTLASS
# rows need its headers):
#   CONVKIT_COMMIT=$(git rev-parse HEAD) SWEEP_SECONDS=400 bash scripts/tf32x3_device.sh
# TESTS=0 skips the tests. The recorded CSV/JSON files are copied to $OUT (default ./out).
set -uo pipefail
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
TESTS=0 source scripts/device_session.sh tf32x3
if [ "${TESTS:-1}" = 1 ]; then
  echo "=== GPU tests"
  python3 -m pytest -q -m gpu -p no:cacheprovider -n 8 tests/test_tf32x3_gpu.py tests/test_cutlass_gpu.py \
    tests/test_op_gpu.py 2>&1 | tail -n 8
fi
echo "=== TF32 ceilings"
python3 -c "
from convkit.papers.ceilings import measure
from convkit.study import provenance
measure.run(measure.open_store('$gpu_dir', provenance.collect()), progress=print)"
echo "=== accuracy (at most ${ACCURACY_SECONDS:-300} s)"
timeout "${ACCURACY_SECONDS:-300}" python3 -c "from convkit.papers.tf32x3 import accuracy; accuracy.measure('$gpu_dir')" \
  > "$OUT/accuracy.log" 2>&1; echo "accuracy exit $? (124: stopped by the time limit, resumable)"
echo "=== sweep (at most ${SWEEP_SECONDS:-400} s)"
timeout "${SWEEP_SECONDS:-400}" python3 -c "from convkit.papers import tf32x3; tf32x3.measure('$gpu_dir')" \
  > "$OUT/sweep.log" 2>&1; echo "sweep exit $? (124: stopped by the time limit, resumable)"; tail -n 2 "$OUT/sweep.log"
cp "$gpu_dir"/tf32x3*.csv "$gpu_dir"/tf32x3*.json "$gpu_dir"/ceilings.* "$OUT"/ 2>/dev/null
