#!/usr/bin/env bash
# The study on a node of GPUs (kind nvidia-h100-x4): the sharded GPU tests (a short sweep on two GPUs, a worker
# killed there), the quick run's measuring (the fixed workload) timed on each count of GPUs in SIZES, each into a
# scratch folder, its times into results/<gpu>/notebook_runs.csv; `convkit verify --quick` on the sharded run;
# each chapter's run-to-run sample on every GPU (results/<gpu>/across/). Runs in the background (it outlives one
# device call); each call waits up to WAIT seconds and brings back what it recorded in $OUT/results.tgz.
#   ../shared/tools/device-wheels.sh dask distributed dask-cuda cloudpickle toolz partd locket fsspec msgpack \
#       sortedcontainers tblib zict jinja2 markupsafe nvidia-ml-py cuda-core urllib3 importlib-metadata
#   CONVKIT_COMMIT=<the commit, literally> SIZES="1 2 4" bash scripts/node_device.sh      # carry .whl
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
job=/tmp/node_job
source scripts/device_job.sh
if new_job convkit kernels notebooks book scripts tests pyproject.toml; then
  cp -r results "$job/"
  cat > "$job/steps.sh" <<EOF
cd $job
export PYTHONPATH=/tmp/site:$job PYTHONUNBUFFERED=1 CONVKIT_COMMIT=${CONVKIT_COMMIT:?give the commit measured}
nvidia-smi -L
python3 -m pytest -q -p no:cacheprovider tests/test_shards_gpu.py tests/test_shards.py -rs 2>&1 | tail -n 8
for n in ${SIZES:-1 2 4}; do
  python3 -m convkit reproduce --quick --gpus \$n --directory /tmp/scratch\$n --record-times 2>&1 | grep -v "chunk"
done
largest=\$(echo ${SIZES:-1 2 4} | tr ' ' '\n' | tail -n 1)
python3 -m convkit verify /tmp/scratch\$largest --quick 2>&1 | tail -n 45
python3 -m convkit across --gpus \$largest --directory results/$gpu 2>&1 | tail -n 30
touch $job/done
EOF
  start_job "$job"
fi
collect_job "$job" 'notebook_runs.*' 'across'
tail -n 120 "$job/log"
