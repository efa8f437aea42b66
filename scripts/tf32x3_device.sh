#!/usr/bin/env bash
# The 3xTF32 chapter's recording session, run in the background so that it outlives one device call (at most 10
# minutes) on a machine held across several: the TF32 ceilings the ceilings store lacks, the tuning and sweep (first:
# the longest, about 30 device minutes on one H100, and what the chapter's verdicts read), the accuracy experiment's
# missing cases, the repeated sample, then the ncu profile. Every step resumes where an earlier machine stopped: its
# rows come back in $OUT/results.tgz, to unpack into results/ here.
# Each call waits up to WAIT seconds (default 520) and copies what is recorded so far to $OUT:
#   CONVKIT_COMMIT=<the commit, literally> [GPUS=4] bash scripts/tf32x3_device.sh   # carry .whl and .whl_cutlass
#   (the nvidia-cutlass wheel, for CUTLASS's peers: kept apart so that other device scripts' GPU suites do not build
#   CUTLASS); with GPUS > 1, a node's kind, the Dask wheels too: scripts/node_device.sh lists them
# The first call on a machine copies the checkout and results/<gpu>/ to /tmp (a later call's fresh copy of the
# working tree cannot overwrite what the job writes) and starts the job; a later call on the same machine only
# waits. The job's log is $OUT/job.log; a file $OUT/done says it finished. FRESH_TUNING=1 (on the call that starts the
# job) drops the GPU's recorded tuning table first: its rows resume by their knobs, so rows timed on an older build of
# a kernel would choose the launches still (the H100's, of 2026-11-26, predate most of the mma.sync kernel's changes).
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
job=/tmp/tf32x3_job
source scripts/device_job.sh
if new_job convkit kernels scripts pyproject.toml; then
  [ -d .whl_cutlass ] && python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl_cutlass/*.whl
  cp -r "results/$gpu" "$job/results/$gpu"
  [ "${FRESH_TUNING:-0}" = 1 ] && rm -f "$job/results/$gpu"/tf32x3_tuning.csv "$job/results/$gpu"/tf32x3_tuning.json
  cat > "$job/steps.sh" <<EOF
set -uo pipefail
cd $job
export PYTHONPATH=/tmp/site:$job PYTHONUNBUFFERED=1 CONVKIT_COMMIT=${CONVKIT_COMMIT:?give the commit measured}
dir=results/$gpu
echo "=== TF32 ceilings"
python3 -c "
from convkit.papers.ceilings import measure
from convkit.study import provenance
measure.run(measure.open_store('\$dir', provenance.collect()), progress=print)"
echo "=== sweep (on ${GPUS:-1} GPU(s))"
python3 -m convkit sweep tf32x3 --directory \$dir --gpus ${GPUS:-1} --build-workers 12 2>&1 | grep -v "^  "
echo "sweep exit \${PIPESTATUS[0]}"
echo "=== accuracy"
timeout ${ACCURACY_SECONDS:-300} python3 -c "from convkit.papers.tf32x3 import accuracy; accuracy.measure('\$dir')"
echo "accuracy exit \$?"
echo "=== repeat"
python3 -c "from convkit.papers import tf32x3; tf32x3.measure_repeat('\$dir')" | tail -n 3
echo "=== profile"
# (profiled again whole once the sweep was measured again: the kernels a profile took may have changed since; a
# profile cut short resumes)
if [ ! -f \$dir/tf32x3_kernels.json ] || [ \$dir/tf32x3.json -nt \$dir/tf32x3_kernels.json ]; then
  rm -f \$dir/tf32x3_kernels.csv \$dir/tf32x3_kernels.json
fi
python3 -m convkit.cli profile tf32x3 --directory \$dir 2>&1 | tail -n 3
touch $job/done
EOF
  start_job "$job"
fi
collect_job "$job" 'tf32x3*' 'ceilings.*'
grep -v "^  " "$job/log" | tail -n 25
