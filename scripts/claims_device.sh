#!/usr/bin/env bash
# What the claims are checked against, on the GPU, in one background job (it outlives one device call):
#   1. each chapter without a recorded run-to-run sample measures it in a fresh process (`convkit repeat`), into
#      the job's copy of results/<gpu>/ (<experiment>_repeat.csv);
#   2. a fresh copy of the checkout reruns every notebook's quick subset on this GPU (`convkit reproduce --quick`),
#      its results/<gpu>/*_quick.* brought back for `convkit verify --quick`;
#   3. the Colab T4's code paths, each notebook alone (scripts/t4_notebooks_alone.sh).
# Each call waits up to WAIT seconds and brings back what was recorded so far ($OUT/results.tgz, job.log):
#   CONVKIT_COMMIT=<the commit, literally> bash scripts/claims_device.sh      # carry .whl
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
job=/tmp/claims_job
source scripts/device_job.sh
if new_job convkit kernels notebooks book scripts results pyproject.toml Makefile; then
  cat > "$job/steps.sh" <<STEPS
cd $job
export PYTHONPATH=/tmp/site:$job PYTHONUNBUFFERED=1 CONVKIT_COMMIT=${CONVKIT_COMMIT:?give the commit measured}
for paper in ${REPEATS:-ceilings baseline toy_cnn chang2022 cuconv}; do
  start=\$(date +%s); python3 -m convkit repeat \$paper > $job/repeat_\$paper.log 2>&1
  echo "repeat \$paper: exit \$? in \$(( \$(date +%s) - start )) s"; tail -n 2 $job/repeat_\$paper.log
done
rm -rf /tmp/fresh && mkdir -p /tmp/fresh && cp -r convkit kernels notebooks book scripts results pyproject.toml Makefile /tmp/fresh/
( cd /tmp/fresh && export PYTHONPATH=/tmp/site:/tmp/fresh && start=\$(date +%s) \
  && python3 -m convkit reproduce --device gpu --quick 2>&1 | grep -v "Executing" | tail -n 25 \
  && echo "quick rerun: \$(( \$(date +%s) - start )) s" )
mkdir -p $job/results/$gpu-rerun && cp /tmp/fresh/results/$gpu/*_quick.* $job/results/$gpu-rerun/
OUT=$job/results/t4 bash scripts/t4_notebooks_alone.sh
touch $job/done
STEPS
  start_job "$job"
fi
collect_job "$job" '*_repeat.*'
( cd "$job/results" && tar czf "$OUT/more.tgz" "$(cat "$job/gpu")-rerun" t4 2>/dev/null )
tail -n 30 "$job/log"
