#!/usr/bin/env bash
# The GPU session, in one call: GPU tests, compute-sanitizer, `convkit bench` on cuConv's max case,
# and notebooks 00 and 01 executed in GPU mode (their results land in results/<gpu>/).
# Run from the repository root on a GPU machine. Offline machines: build .whl first with
# shared/tools/device-wheels.sh and bring it along; it is installed to /tmp/site here.
# Logs and a tarball of results/ and the executed notebooks go to $OUT (default ./out).
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
fi
export PYTHONUNBUFFERED=1
status=0
step() { echo; echo "=== $1"; shift; "$@" 2>&1 | tee -a "$OUT/device_check.log"; [ "${PIPESTATUS[0]}" -eq 0 ] || status=1; }
step "info" python3 -m convkit.cli info
step "GPU tests" python3 -m pytest -m gpu -q -rs -p no:cacheprovider
step "compute-sanitizer" bash scripts/sanitize.sh
step "bench 7-1-1-32-832" python3 -m convkit.cli bench 7-1-1-32-832
for nb in ${NOTEBOOKS:-00 01}; do
  step "reproduce $nb" python3 -m convkit.cli reproduce --only "$nb" --device gpu ${QUICK:+--quick}
done
tar czf "$OUT/results.tgz" results book/notebooks 2>/dev/null
echo; echo "device_check: $([ $status -eq 0 ] && echo all steps passed || echo SOME STEPS FAILED)"
exit $status
