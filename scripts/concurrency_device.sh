#!/usr/bin/env bash
# The concurrency recording session, run in the background so that it outlives one device call (at most 10 minutes)
# on a machine held across several; its rows come back in $OUT/results.tgz, to unpack into results/ here:
#   CONVKIT_COMMIT=<the commit, literally> [FRESH=1] [BEFORE=<tree> BEFORE_COMMIT=<its commit> ROUNDS=2 HANG=1|0] \
#     bash scripts/concurrency_device.sh   # carry .whl (pytest-xdist), BEFORE's tree
# First the soak (results/<gpu>/concurrency.csv, resuming; FRESH=1 records it whole again, for a changed op) beside
# the GPU suite and compute-sanitizer (scripts/gpu_suite.sh, its logs in results/<gpu>/logs/). BEFORE names a copy
# of convkit/, kernels/ and pyproject.toml from before a change, with this tree's tests/ (e.g. `mkdir -p t &&
# git archive 510f7cc convkit kernels | tar -x -C t && cp -r tests pyproject.toml t/`); with it the job then runs
# (HANG=1, the default) the two tests of layers that hung on two streams there, under the watchdog, and, on a quiet
# host, the split layers' host cost per call there and here, in turns
# (results/<gpu>/split_host/<before|after><round>/conv2d_overhead_split.csv; every layer's: scripts/host_turns.sh).
# The job's log is $OUT/job.log; $OUT/done says it finished.
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
job=/tmp/concurrency_job
source scripts/device_job.sh
if new_job convkit kernels scripts tests pyproject.toml README.md .whl; then
  [ -n "${BEFORE:-}" ] && cp -r "$BEFORE" "$job/before"
  cp -r "results/$gpu" "$job/results/$gpu"
  mkdir -p "$job/results/$gpu/logs"
  cat > "$job/steps.sh" <<EOF
set -uo pipefail
cd $job
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 CONVKIT_COMMIT=${CONVKIT_COMMIT:?give the commit measured}
dir=results/$gpu
logs=$job/results/$gpu/logs
split_host() {  # the host cost of the layers shipped as channel splits, from the tree in \$1 (commit \$3) into \$2
  (cd \$1 && CONVKIT_COMMIT=\$3 PYTHONPATH=/tmp/site:\$1 python3 -c "
import json, sys
from convkit.core import shipped
from convkit.core.problem import ConvProblem
from convkit.papers.summary.overhead import measure
split = [k for k, c in shipped.shipped('$gpu')['choices'].items()
         if c['variant'].startswith('chang_multi') and json.loads(c['params'] or '{}').get('split', 1) > 1]
measure(sys.argv[1], problems=[ConvProblem.from_key(k) for k in sorted(split)], experiment='conv2d_overhead_split')
" \$2 2>&1 | tail -n 2)
}
[ -n "\${FRESH:-}" ] && rm -f \$dir/concurrency.csv \$dir/concurrency.json
echo "=== the soak, beside the GPU suite and compute-sanitizer"
(OUT=\$logs WORKERS=\${WORKERS:-8} PYTHONPATH= bash scripts/gpu_suite.sh > \$logs/suite.out 2>&1; echo "suite exit \$?" >> \$logs/suite.out) &
suite=\$!
PYTHONPATH=/tmp/site:$job python3 -m convkit.papers.summary.concurrency \$dir 2>&1 | tee \$logs/soak.log | grep -v "^  {" | tail -n 5
wait \$suite
tail -n 30 \$logs/suite.out
if [ -d before ]; then
  if [ "\${HANG:-1}" = 1 ]; then
    echo "=== before the fix: the two layers that hung, under the watchdog"
    (cd before && PYTHONPATH=/tmp/site:$job/before python3 -m pytest -q -rs -p no:cacheprovider -n 2 \
       tests/test_concurrency_gpu.py -k split_layer > \$logs/before_hang_tests.log 2>&1)
    grep -E "passed|failed|hung" \$logs/before_hang_tests.log | tail -n 4
  fi
  echo "=== the split layers' host cost, before and after, in turns"
  for round in \$(seq \${ROUNDS:-2}); do
    split_host $job/before $job/\$dir/split_host/before\$round \${BEFORE_COMMIT:-before}
    split_host $job \$dir/split_host/after\$round \$CONVKIT_COMMIT
  done
fi
touch $job/done
EOF
  start_job "$job"
fi
collect_job "$job" 'concurrency*' 'split_host' 'logs'
tail -n 30 "$job/log"
