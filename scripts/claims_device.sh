#!/usr/bin/env bash
# What the claims are checked against, on the GPU, in one background job (it outlives one device call):
#   1. each chapter without a recorded run-to-run sample measures it in a fresh process (`convkit repeat`), into
#      this checkout's results/<gpu>/<experiment>_repeat.csv;
#   2. a fresh copy of the checkout reruns every notebook's quick subset on this GPU (`convkit reproduce --quick`),
#      its results/<gpu>/*_quick.* brought back for `convkit verify --quick`;
#   3. the Colab T4's code paths: each notebook alone (quick) in a fresh copy of its own, every kernel built as
#      compute_75 PTX (no TF32 tensor cores, the T4's shared-memory limits), the GPU's own results folder empty;
#      the notebooks run side by side (they are checked for crashes here, not timed).
# Each call waits up to WAIT seconds and brings back what was recorded so far ($OUT/results.tgz, job.log):
#   CONVKIT_COMMIT=$(git rev-parse HEAD) bash scripts/claims_device.sh      # carry .whl
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
job=/tmp/claims_job
source scripts/device_job.sh
if [ ! -d "$job" ]; then
  install_wheels || exit 1
  gpu=$(this_gpu)
  mkdir -p "$job/results"
  ln -s "$PWD/results/$gpu" "$job/results/$gpu"
  echo "$gpu" > "$job/gpu"
  cat > "$job/steps.sh" <<STEPS
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CONVKIT_COMMIT=${CONVKIT_COMMIT:?give the commit measured}
cd $PWD
for paper in ${REPEATS:-ceilings baseline toy_cnn chang2022 cuconv}; do
  start=\$(date +%s); python3 -m convkit repeat \$paper > $job/repeat_\$paper.log 2>&1
  echo "repeat \$paper: exit \$? in \$(( \$(date +%s) - start )) s"; tail -n 2 $job/repeat_\$paper.log
done
fresh() { rm -rf "\$1"; mkdir -p "\$1"; cp -r convkit kernels notebooks book scripts results pyproject.toml Makefile "\$1/"; }
fresh /tmp/fresh_h100
( cd /tmp/fresh_h100 && export PYTHONPATH=/tmp/site:/tmp/fresh_h100 && start=\$(date +%s) \
  && python3 -m convkit reproduce --device gpu --quick 2>&1 | grep -v "Executing" | tail -n 25 \
  && echo "quick rerun: \$(( \$(date +%s) - start )) s" )
mkdir -p $job/results/$gpu-rerun && cp /tmp/fresh_h100/results/$gpu/*_quick.* $job/results/$gpu-rerun/
for nb in 00 01 02 03 04 05 06 07 08; do
  fresh /tmp/t4_\$nb
  ( cd /tmp/t4_\$nb && export PYTHONPATH=/tmp/site:/tmp/t4_\$nb CONVKIT_PTX_ARCH=compute_75 && start=\$(date +%s) \
    && python3 -m convkit reproduce --only \$nb --device gpu --quick > log 2>&1; \
    echo "t4 \$nb: exit \$? in \$(( \$(date +%s) - start )) s" >> $job/t4.txt ) &
done
wait
for nb in 00 01 02 03 04 05 06 07 08; do
  mkdir -p $job/results/t4/\$nb && cp /tmp/t4_\$nb/log $job/results/t4/\$nb/ && tail -n 5 /tmp/t4_\$nb/log
done
cat $job/t4.txt
touch $job/done
STEPS
  start_job "$job"
fi
collect_job "$job" '*_repeat.*'
( cd "$job/results" && tar czf "$OUT/more.tgz" "$(cat "$job/gpu")-rerun" t4 2>/dev/null )
tail -n 30 "$job/log"
