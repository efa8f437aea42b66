#!/usr/bin/env bash
# The summary chapter's recording session (networks in three modes, host cost, the repeated sample), run in the
# background so that it outlives one device call (at most 10 minutes) on a machine held across several; every
# step resumes where an earlier machine stopped: its rows come back in $OUT/results.tgz, to unpack into results/.
#   CONVKIT_COMMIT=<the commit, literally> FRESH=1 bash scripts/networks_device.sh   # carry .whl
# FRESH=1 (the first call of a recording only) sets aside what an older run recorded of these experiments.
# Steps: the cold first forward (nothing built), each label in a process of its own; torch.compile's cache filled
# by parallel processes (nothing timed); the host cost; the networks in every mode; the repeated sample in a
# fresh process. The job's log is $OUT/job.log; a file $OUT/done says it finished. WAIT: seconds a call waits.
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
job=/tmp/networks_job
source scripts/device_job.sh
if new_job convkit kernels scripts pyproject.toml; then
  cp -r "results/$gpu" "$job/results/$gpu"
  if [ "${FRESH:-0}" = 1 ]; then
    rm -f "$job/results/$gpu"/networks*.csv "$job/results/$gpu"/networks*.json "$job/results/$gpu"/conv2d_overhead*
  fi
  cat > "$job/steps.sh" <<EOF
set -uo pipefail
cd $job
export PYTHONPATH=/tmp/site:$job PYTHONUNBUFFERED=1 CONVKIT_COMMIT=${CONVKIT_COMMIT:?give the commit measured}
dir=results/$gpu
summary=convkit.papers.summary
echo "=== cold first forward"
for label in ResNet-50-1 ResNet-50-16 DenseNet-121-1 DenseNet-121-16; do
  XDG_CACHE_HOME=\$(mktemp -d) python3 -m \$summary.first_forward --cold \$label 2>&1 | tail -n 2
done
echo "=== torch.compile's cache, filled in parallel"
labels=\$(bash scripts/warm_compile_cache.sh \$dir)
echo "=== host cost"
python3 -m \$summary.overhead \$dir 2>&1 | tail -n 3
echo "=== networks in every mode"
[ -n "\$labels" ] && python3 -m \$summary.inference \$labels 2>&1 | grep -v "^  "
echo "=== the repeated sample"
python3 -m \$summary.chapter repeat \$dir 2>&1 | grep -v "^  "
echo "=== the study's networks eagerly"
python3 -m \$summary.inference 2>&1 | grep -v "^  "
touch $job/done
EOF
  start_job "$job"
fi
collect_job "$job" 'networks*' 'conv2d_overhead*'
grep -v "^  " "$job/log" | tail -n 30
