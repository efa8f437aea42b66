#!/usr/bin/env bash
# Colab's case on the T4's code paths: each notebook alone (quick), in a fresh copy of the checkout of its own, every
# kernel built as compute_75 PTX (no TF32 tensor cores, the T4's shared-memory limits), the GPU's own results
# folder empty. The notebooks run side by side: they are checked for crashes here, not timed. Run from the
# repository root on a GPU machine (carry .whl); each notebook's log and exit status come back in $OUT/t4/.
#   NOTEBOOKS="03 04" LIMIT=540 bash scripts/t4_notebooks_alone.sh
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT/t4"
source scripts/device_job.sh
install_wheels
for nb in ${NOTEBOOKS:-00 01 02 03 04 05 06 07 08}; do
  copy=/tmp/t4_alone_$nb
  rm -rf "$copy" && mkdir -p "$copy" && cp -r convkit kernels notebooks book scripts results pyproject.toml "$copy/"
  ( cd "$copy" && export PYTHONPATH=/tmp/site:$copy CONVKIT_PTX_ARCH=compute_75 PYTHONUNBUFFERED=1 \
    && start=$(date +%s) && timeout "${LIMIT:-540}" python3 -m convkit reproduce --only "$nb" --device gpu --quick \
       > "$OUT/t4/$nb.log" 2>&1; echo "$nb: exit $? in $(( $(date +%s) - start )) s" >> "$OUT/t4/status.txt" ) &
done
wait
sort "$OUT/t4/status.txt"
grep -h "failed in cell" "$OUT"/t4/*.log
