#!/usr/bin/env bash
# Each chapter's full run timed on the GPU, from nothing recorded: for the rerun page's "full run" column.
# Runs in the background (it outlives one device call) in a copy of the checkout whose results/<gpu>/ holds only
# notebook_runs.* (so every notebook measures everything, as on a reader's machine); the cheaper chapters first.
# Each call waits up to WAIT seconds and brings back notebook_runs.* in $OUT/results.tgz, to unpack into results/.
#   CONVKIT_COMMIT=<the commit, literally> bash scripts/notebook_times_device.sh      # carry .whl
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
job=/tmp/notebook_times_job
source scripts/device_job.sh
if new_job convkit kernels notebooks book scripts pyproject.toml; then
  mkdir -p "$job/results/$gpu"
  cp results/"$gpu"/notebook_runs.* "$job/results/$gpu/"
  cat > "$job/steps.sh" <<EOF
cd $job
export PYTHONPATH=/tmp/site:$job PYTHONUNBUFFERED=1 CONVKIT_COMMIT=${CONVKIT_COMMIT:?give the commit measured}
for nb in ${NOTEBOOKS:-00 01 04 05 02 07 06 03 08}; do
  python3 -m convkit reproduce --only \$nb --device gpu --record-times 2>&1 | grep -v "Executing:" | tail -n 3
done
touch $job/done
EOF
  start_job "$job"
fi
collect_job "$job" 'notebook_runs.*'
gpu=$(cat "$job/gpu")
tail -n 20 "$job/log"; cat "$job/results/$gpu/notebook_runs.csv"
