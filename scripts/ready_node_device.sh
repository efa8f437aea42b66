#!/usr/bin/env bash
# "Ready on the first call" and "no host tax", recorded whole on a node of GPUs in one background job (kind
# nvidia-h100-x4 or -x2; a single GPU runs the chains one after another), each device call collecting what is done:
#   chain "record" : the networks' layers no shipped choice holds (resuming), the shipped table written from them
#                    (atomically: the other chains read it as they run), torch.compile's cache filled, the networks in
#                    every mode recorded whole (FRESH), the host-cost layers still missing, the repeated sample;
#   chain "suite"  : the GPU suite and compute-sanitizer (scripts/gpu_suite.sh);
#   chain "soak"   : the concurrency soak recorded whole;
#   chain "first"  : once the table is written, the first forwards after prebuild (FRESH), then with no shipped table
#                    (simulated in a copy of the tree of its own, scripts/ship_as_other_gpu.py).
# Four GPUs: a chain each. Two: "record" on the first, the rest in turn on the second. Rows of different chains go
# to different files of one results folder, each chain on its own GPU (CUDA_VISIBLE_DEVICES).
#   CONVKIT_COMMIT=$(git rev-parse HEAD) bash scripts/ready_node_device.sh   # carry .whl; call again to collect
# Unpack $OUT/results.tgz here from the repository root; logs in results/<gpu>/logs/.
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
job=/tmp/ready_node_job
source scripts/device_job.sh
if new_job convkit kernels scripts tests pyproject.toml README.md .whl; then
  cp -r "results/$gpu" "$job/results/$gpu"
  mkdir -p "$job/results/$gpu/logs"
  gpus=$(nvidia-smi -L | wc -l)
  case $gpus in
    1) order=("0:record suite soak first") ;;
    2|3) order=("0:record" "1:suite soak first") ;;
    *) order=("0:record" "1:suite" "2:soak" "3:first") ;;
  esac
  cat > "$job/chains.sh" <<EOF
set -uo pipefail
cd $job
export PYTHONPATH=/tmp/site:$job PYTHONUNBUFFERED=1 CONVKIT_COMMIT=${CONVKIT_COMMIT:?give the commit measured}
dir=results/$gpu
logs=$job/results/$gpu/logs
summary=convkit.papers.summary
record() {
  echo "=== network layers (\$SECONDS s)"
  python3 -m \$summary.network_layers 2>&1 | grep -E "layers of the networks|Error" | tail -n 3
  python3 -m convkit explain --write-table && cp convkit/data/dispatch-$gpu.json \$dir/shipped-table.json
  touch $job/table.done
  echo "=== torch.compile's cache (\$SECONDS s)"
  rm -f \$dir/networks.csv \$dir/networks.json \$dir/networks_repeat.*
  bash scripts/warm_compile_cache.sh \$dir > /dev/null
  echo "=== networks in every mode (\$SECONDS s)"
  python3 -m \$summary.inference 2>&1 | grep -v "^  "
  echo "=== host cost, the layers missing (\$SECONDS s)"
  python3 -m \$summary.overhead \$dir 2>&1 | tail -n 2
  echo "=== the repeated sample (\$SECONDS s)"
  python3 -m \$summary.chapter repeat \$dir 2>&1 | grep -v "^  "
}
suite() {
  OUT=\$logs WORKERS=8 PYTHONPATH= bash scripts/gpu_suite.sh
}
soak() {
  rm -f \$dir/concurrency.csv \$dir/concurrency.json
  python3 -m \$summary.concurrency \$dir 2>&1 | grep -v "^  {" | tail -n 5
}
first() {
  while [ ! -f $job/table.done ]; do sleep 5; done
  echo "=== first forwards after prebuild (\$SECONDS s)"
  FRESH=1 bash scripts/first_forward_device.sh 2>&1 | grep -v "^convkit: tuned" | tail -n 25
  echo "=== with no shipped table, simulated in a copy of the tree (\$SECONDS s)"
  rm -rf /tmp/no_table && mkdir -p /tmp/no_table && cp -r convkit kernels scripts pyproject.toml /tmp/no_table/
  ln -s $job/results /tmp/no_table/results
  (cd /tmp/no_table && PYTHONPATH=/tmp/site:/tmp/no_table python3 scripts/ship_as_other_gpu.py $gpu \
     && PYTHONPATH=/tmp/site:/tmp/no_table bash scripts/first_forward_device.sh 2>&1 | grep -v "^convkit: tuned" | tail -n 25)
}
EOF
  {
    echo "cd $job"
    for entry in "${order[@]}"; do
      device=${entry%%:*}
      echo "(source $job/chains.sh; for chain in ${entry#*:}; do echo \"=== chain \$chain on GPU $device\"; \
CUDA_VISIBLE_DEVICES=$device \$chain; done) > $job/results/$gpu/logs/gpu$device.log 2>&1 &"
    done
    echo "wait"
    echo "touch $job/done"
  } > "$job/steps.sh"
  start_job "$job"
fi
collect_job "$job" 'network_layers*' 'networks*' 'conv2d_overhead*' 'concurrency*' 'shipped-table.json' 'logs'
for log in "$job/results/$gpu"/logs/gpu*.log; do echo "--- $log"; grep -E "^===|passed|failed|exit|wrong|hung|s \(|ERROR" "$log" | tail -n 12; done
