#!/usr/bin/env bash
# "No host tax" and "ready on the first call", recorded in one device call (foreground, each step under its own
# limit so that the call ends inside its 10 minutes; every step resumes or is whole on its own):
#   1. the op's GPU tests (PyTorch operators, concurrency, the op, OpInfo);
#   2. the host cost per call (conv2d_overhead.csv, its parts included) recorded whole again, and its repeated sample
#      in a fresh process (conv2d_overhead_repeat.csv);
#   3. the networks' layers no shipped choice holds (resuming) and the shipped table written from them;
#   4. the first forwards after `convkit prebuild` (FRESH), as many labels as the time left allows.
#   CONVKIT_COMMIT=<the commit, literally> bash scripts/host_tax_device.sh   # carry .whl (expecttest, pytest-xdist)
# Results come back in $OUT/results.tgz (unpack here from the repository root), the table as $OUT/dispatch-*.json.
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CONVKIT_COMMIT=${CONVKIT_COMMIT:?give the commit measured}
gpu=$(python3 -c "from convkit.core.gpu import device_name, gpu_slug; print(gpu_slug(device_name()))")
dir=results/$gpu
left() { echo $(( ${DEADLINE_S:-570} - SECONDS )); }
save() {  # what is recorded so far, into $OUT (a call cut short still brings it back)
  (shopt -s nullglob; tar czf "$OUT/results.tgz" "$dir"/conv2d_overhead* "$dir"/network_layers* "$dir"/networks_cold*)
}
echo "=== the op's GPU tests"
timeout 110 python3 -m pytest -q -rs -p no:cacheprovider -n 8 -m gpu tests/test_torch_ops_gpu.py \
  tests/test_opinfo_gpu.py tests/test_concurrency_gpu.py tests/test_op_gpu.py > "$OUT/tests.log" 2>&1
tail -n 3 "$OUT/tests.log"
echo "=== the host cost per call, whole again, and its repeated sample ($(left) s left)"
rm -f "$dir"/conv2d_overhead.* "$dir"/conv2d_overhead_repeat.*
timeout 200 python3 -m convkit.papers.summary.overhead "$dir" 2>&1 | tail -n 1
timeout 60 python3 -c "
import sys
from pathlib import Path
from convkit.papers.summary import chapter, overhead
overhead.measure(Path(sys.argv[1]), problems=overhead.layers()[::chapter.REPEAT_STEP],
                 experiment=overhead.EXPERIMENT + chapter.REPEAT)" "$dir" 2>&1 | tail -n 1
save
echo "=== the networks' layers no shipped choice holds ($(left) s left)"
timeout 80 python3 -m convkit.papers.summary.network_layers 2>&1 | grep -E "layers of the networks|Error" | tail -n 2
python3 -m convkit explain --write-table | tail -n 1
cp "convkit/data/dispatch-$gpu.json" "$OUT/"
save
echo "=== first forwards after prebuild ($(left) s left)"
timeout $(( $(left) - 15 )) env FRESH=1 bash scripts/first_forward_device.sh 2>&1 | grep -v "^convkit: tuned" | tail -n 25
save
