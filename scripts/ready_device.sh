#!/usr/bin/env bash
# "Ready on the first call", recorded in one background job on a machine held across several device calls (each
# at most 10 minutes; call again to collect): the networks' layers no shipped choice holds (resuming), the shipped
# table written from them, every network's first forward after `convkit prebuild` at batch 1 and 16 (FRESH: the
# earlier such rows dropped), then the same on a GPU with no shipped table, simulated by shipping this GPU's table
# under another GPU's name in the job's copy (prebuild builds what the first-use tuner times; every layer tunes).
#   CONVKIT_COMMIT=$(git rev-parse HEAD) bash scripts/ready_device.sh   # carry .whl; results come back as results.tgz
# The table written on the GPU comes back as results/<gpu>/shipped-table.json, to compare with one written here.
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
job=/tmp/ready_job
source scripts/device_job.sh
if new_job convkit kernels scripts tests pyproject.toml README.md .whl; then
  cp -r "results/$gpu" "$job/results/$gpu"
  cat > "$job/steps.sh" <<STEPS
set -uo pipefail
cd $job
export PYTHONPATH=/tmp/site:$job PYTHONUNBUFFERED=1 CONVKIT_COMMIT=${CONVKIT_COMMIT:?give the commit measured}
echo "=== the networks' layers no shipped choice holds"
python3 -m convkit.papers.summary.network_layers 2>&1 | grep -E "layers of the networks|Error" | tail -n 3
python3 -m convkit explain --write-table && cp convkit/data/dispatch-$gpu.json results/$gpu/shipped-table.json
echo "=== first forwards with the shipped table"
FRESH=1 bash scripts/first_forward_device.sh 2>&1 | grep -v "^convkit: tuned" | tail -n 25
echo "=== first forwards with no shipped table (simulated)"
python3 scripts/ship_as_other_gpu.py $gpu
bash scripts/first_forward_device.sh 2>&1 | grep -v "^convkit: tuned" | tail -n 25
touch $job/done
STEPS
  start_job "$job"
fi
collect_job "$job" 'network_layers*' 'networks_cold*' 'shipped-table.json'
tail -n 40 "$job/log"
