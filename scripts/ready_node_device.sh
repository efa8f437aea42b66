#!/usr/bin/env bash
# "Ready on the first call" and "no host tax", recorded whole on a node of GPUs in one background job (kind
# nvidia-h100-x4; two GPUs or one run the same chains in fewer, longer lines), each device call collecting what is
# done. The chains, each on its own GPU (CUDA_VISIBLE_DEVICES), writing files no other chain writes:
#   record : table, then warm:
#   table  : the networks' layers no shipped choice holds (resuming), the host cost of each path a call takes, the
#            shipped table written from them (atomically: the other chains read it as they run);
#   warm   : torch.compile's cache filled for every network;
#   netK   : the K-th third of the networks in every mode, into results/<gpu>/parts/K (after the cache is filled);
#   probe  : scripts/host_probe.py, where the host time of a call goes (into the log);
#   suite  : the GPU suite and compute-sanitizer (scripts/gpu_suite.sh);
#   wgmma_tests : the GPU tests of the 3xTF32 kernels, the FP32 ones and the op (logs/wgmma_tests/), no sanitizer;
#   soak   : the concurrency soak, recorded whole;
#   first  : once the table is written, the first forwards after prebuild (FRESH), then with no shipped table
#            (simulated in a copy of the tree of its own, scripts/ship_as_other_gpu.py);
#   first_probe : scripts/first_call_probe.py, the first forward split layer by layer (into logs/first_call.log);
#   overhead, repeat : the host cost of every layer, whole again; the repeated sample (networks and host cost) again;
#   wgmma : scripts/wgmma_probe.py, the first wgmma kernel under compute-sanitizer's four tools, then timed;
#   wgmma_sanitize : the wgmma kernels' small shapes under the four sanitizers (logs/wgmma_<tool>.log), not timed;
#   wgmma_narrow : the split-ahead kernel at 64 filters a block, checked, timed, raced and memchecked;
#   wgmma_tuned : the split-ahead kernel's two tuning candidates and its inputs split as staged, timed on the
#            chapter's large layers;
#   wgmma_ones, wgmma_ones_rest : the family's candidates, the inputs split as staged, the gathering kernel persistent
#            and the mma.sync kernel on the chapter's 1x1 layers beside cuBLAS SGEMM, the first half and the second
#            (logs/wgmma_ones*.log);
#   winograd_wgmma, winograd_rest, winograd_last, winograd_sanitize : Winograd with its products on the split-ahead
#            kernel, checked and timed on a third of the chapter's large layers, on the second, on the last, under the
#            four sanitizers;
#   winograd_apart : Winograd on wgmma checked on small problems and its launches timed apart (logs/winograd_apart.log);
#   winograd_diag : Winograd on wgmma's products launch timed in parts (logs/winograd_parts.log), then Nsight Compute's
#            every section on one of each of its three launches (logs/winograd_ncu.log, SASS with stall samples beside);
#   fp32_sanitize : the FP32 family's edge launches under the four sanitizers (logs/fp32_sanitize.log);
#   ceilings_sanitize : the ceilings' own kernels under the four sanitizers (logs/ceilings_sanitize.log);
#   wgmma_floor : Nsight Compute on the split-ahead kernel whole, its barriers alone, descriptors moved, the ceiling;
#   wgmma_parts : the products' ceiling with nothing staged (logs/wgmma_ceiling.log), the wgmma kernel's products
#               and staging timed apart (logs/wgmma_parts.log);
#   ncu_nhwc : Nsight Compute's every section on one launch of the split-ahead kernel (logs/wgmma_ncu_nhwc.log);
#   wgmma_why : wgmma_parts, then Nsight Compute on one launch of each
#               setting and of the mma.sync kernel (logs/wgmma_parts.log, logs/wgmma_ncu.log);
#   knobs : scripts/tf32x3_probe.py, the 3xTF32 kernel's candidates beside CUTLASS's tiles (into logs/knobs.log;
#           carry .whl_cutlass too, installed for this chain alone so that the suite does not build CUTLASS).
# When every chain is done the parts replace networks.csv (`inference --absorb`; a job cut short: run that here on
# the parts that came back).
#   CONVKIT_COMMIT=<the commit, literally> EXPECT_GPU=nvidia-h100-80gb-hbm3 bash scripts/ready_node_device.sh
# (carry .whl; the call waits for the job up to WAIT seconds, default 520, then collects: give the device call a
# timeout above it and no wait loop of its own; call again to collect; EXPECT_GPU: start nothing on a node of other
# GPUs; CHAINS="0:record first overhead;..." runs those chains alone, e.g. on one GPU when a node does not come, or CHAINS="0:wgmma" or "0:knobs"
# for the 3xTF32 kernels' checks and timings alone)
# Unpack $OUT/results.tgz here from the repository root; logs in results/<gpu>/logs/.
# A machine is given back 30 s after a call ends, which a reply can take longer than to come back: then the next call
# starts the job afresh. Carry results/<gpu>/parts too (git-ignored, unpacked here from the last call) and the
# networks' parts resume where the lost machine left them (each network-batch pair is recorded whole or not at all).
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
job=/tmp/ready_node_job
source scripts/device_job.sh
if new_job convkit kernels scripts tests pyproject.toml README.md .whl $(ls -d .whl_cutlass 2>/dev/null); then
  if [ -n "${EXPECT_GPU:-}" ] && [ "$gpu" != "$EXPECT_GPU" ]; then  # a node of other GPUs came: record nothing
    echo "this node's GPUs are $gpu, not $EXPECT_GPU: nothing started"; rm -rf "$job"; exit 3
  fi
  cp -r results/. "$job/results/"  # every GPU's folder: the suite's CPU tests read the recorded H100 results
  mkdir -p "$job/results/$gpu/logs"
  gpus=$(nvidia-smi -L | wc -l)
  if [ -n "${CHAINS:-}" ]; then  # "GPU:chain chain ...;GPU:..." by hand: a subset where the time is short
    IFS=';' read -r -a order <<< "$CHAINS"
    # without record, the committed table is the one to use and torch.compile's cache fills as the networks run
    if [[ $CHAINS != *record* && $CHAINS != *table* ]]; then touch "$job/table.done"; fi
    if [[ $CHAINS != *record* && $CHAINS != *warm* ]]; then touch "$job/warm.done"; fi
  else
  case $gpus in
    1) order=("0:wgmma record net0 net1 net2 suite first overhead repeat soak") ;;
    2|3) order=("0:record net0 net2 repeat" "1:wgmma suite soak net1 first overhead") ;;
    *) order=("0:record net0" "1:wgmma suite net1" "2:knobs soak net2" "3:first overhead repeat") ;;
  esac
  fi
  cat > "$job/chains.sh" <<EOF
set -uo pipefail
cd $job
export PYTHONPATH=/tmp/site:$job PYTHONUNBUFFERED=1 CONVKIT_COMMIT=${CONVKIT_COMMIT:?give the commit measured}
dir=results/$gpu
logs=$job/results/$gpu/logs
summary=convkit.papers.summary
record() { table; warm; }
table() {
  echo "=== network layers (\$SECONDS s)"
  python3 -m \$summary.network_layers 2>&1 | grep -E "layers of the networks|Error" | tail -n 3
  python3 -m \$summary.overhead --paths \$dir 2>&1 | tail -n 1  # the host cost of each path: the table weighs by it
  python3 -m convkit explain --write-table && cp convkit/data/dispatch-$gpu.json \$dir/shipped-table.json
  touch $job/table.done
}
warm() {
  echo "=== torch.compile's cache (\$SECONDS s)"
  rm -rf /tmp/no_modes && mkdir -p /tmp/no_modes  # an empty folder: every network lacks every mode there
  bash scripts/warm_compile_cache.sh /tmp/no_modes > /dev/null
  touch $job/warm.done
}
net() {  # the \$1-th third of the networks
  while [ ! -f $job/warm.done ]; do sleep 5; done
  echo "=== networks, part \$1 of 3 (\$SECONDS s)"
  python3 -m \$summary.inference --part \$1 3 \$dir/parts/\$1 2>&1 | grep -v "^  "
}
net0() { net 0; }
net1() { net 1; }
net2() { net 2; }
overhead() {  # whole again: the host path changed since the recorded rows (one run, one commit)
  while [ ! -f $job/table.done ]; do sleep 5; done  # the choices it measures are the table's
  echo "=== host cost, every layer (\$SECONDS s)"
  rm -f \$dir/conv2d_overhead.csv \$dir/conv2d_overhead.json
  python3 -m \$summary.overhead \$dir 2>&1 | tail -n 2
}
repeat() {
  echo "=== the repeated sample, networks whole again (\$SECONDS s)"
  while [ ! -f $job/table.done ]; do sleep 5; done
  rm -f \$dir/networks_repeat.* \$dir/conv2d_overhead_repeat.*
  python3 -m \$summary.chapter repeat \$dir 2>&1 | grep -v "^  "
}
probe() {  # where the host time of a call goes, part by part (printed into the log; nothing recorded)
  echo "=== host probe (\$SECONDS s)"
  timeout 240 python3 scripts/host_probe.py 2>&1 | tail -n 80
}
knobs() {  # printed into its own log; nothing recorded
  [ -d .whl_cutlass ] || { echo "no .whl_cutlass carried: no CUTLASS peers"; }
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site_cutlass .whl_cutlass/*.whl 2>/dev/null
  echo "=== 3xTF32 candidates beside CUTLASS (\$SECONDS s)"
  PYTHONPATH=/tmp/site_cutlass:\$PYTHONPATH timeout 480 python3 scripts/tf32x3_probe.py > \$logs/knobs.log 2>&1
  tail -n 3 \$logs/knobs.log
}
wgmma_sanitize() {  # the wgmma kernels' small shapes under compute-sanitizer's four tools (logs/wgmma_<tool>.log)
  for tool in memcheck racecheck initcheck synccheck; do
    timeout 240 compute-sanitizer --tool \$tool --error-exitcode 9 python3 scripts/wgmma_probe.py --check --small \
      > \$logs/wgmma_\$tool.log 2>&1; echo "\$tool exit \$?"
  done
}
wgmma() {  # the first wgmma kernel checked, under compute-sanitizer's four tools, then timed (into logs/wgmma.log)
  echo "=== the wgmma 3xTF32 kernel (\$SECONDS s)"
  wgmma_sanitize
  timeout 300 python3 scripts/wgmma_probe.py > \$logs/wgmma.log 2>&1
  tail -n 16 \$logs/wgmma.log
}
wgmma_why() {  # what sets the wgmma kernel's pace: wgmma_parts, then Nsight Compute on one launch of each setting
  # and of the mma.sync kernel (logs/wgmma_ncu.log)
  wgmma_parts
  ncu_wgmma
}
wgmma_parts() {  # the products' ceiling (logs/wgmma_ceiling.log), the main loop's halves timed apart (wgmma_parts.log)
  echo "=== the products' ceiling, nothing staged (\$SECONDS s)"
  timeout 120 python3 scripts/wgmma_probe.py --ceiling > \$logs/wgmma_ceiling.log 2>&1; tail -n 12 \$logs/wgmma_ceiling.log
  echo "=== the wgmma kernel's products and staging timed apart (\$SECONDS s)"
  timeout 240 python3 scripts/wgmma_probe.py --parts > \$logs/wgmma_parts.log 2>&1; tail -n 16 \$logs/wgmma_parts.log
}
wgmma_layers() {  # the warp-specialised kernels on the 3xTF32 chapter's layers of at least 20 GFLOP (logs/wgmma_layers.log)
  echo "=== the 3xTF32 chapter's large layers (\$SECONDS s)"
  timeout 500 python3 scripts/wgmma_probe.py --layers > \$logs/wgmma_layers.log 2>&1; tail -n 3 \$logs/wgmma_layers.log
}
wgmma_tuned() {  # the split-ahead kernel's two candidates (128 or 64 filters a block) and its inputs split as staged
  # on the chapter's large layers (logs/wgmma_tuned.log; wgmma_narrow sanitizes the 64-filter one)
  echo "=== the split-ahead candidates on the chapter's large layers (\$SECONDS s)"
  timeout 480 python3 scripts/wgmma_probe.py --layers --tuned > \$logs/wgmma_tuned.log 2>&1; tail -n 1 \$logs/wgmma_tuned.log
}
wgmma_ones() {  # the chapter's 1x1 layers, the first half: our candidates beside cuBLAS SGEMM (logs/wgmma_ones.log)
  echo "=== the 1x1 layers beside cuBLAS SGEMM, first half (\$SECONDS s)"
  timeout 480 python3 scripts/wgmma_probe.py --ones --part=1/2 > \$logs/wgmma_ones.log 2>&1; tail -n 2 \$logs/wgmma_ones.log
}
wgmma_ones_rest() {  # the second half (logs/wgmma_ones_rest.log)
  echo "=== the 1x1 layers beside cuBLAS SGEMM, second half (\$SECONDS s)"
  timeout 480 python3 scripts/wgmma_probe.py --ones --part=2/2 > \$logs/wgmma_ones_rest.log 2>&1
  tail -n 2 \$logs/wgmma_ones_rest.log
}
winograd_wgmma() {  # Winograd's products on wgmma: checked, its launches timed apart, every launch on a third of the
  # chapter's stride-1 3x3 and 5x5 large layers beside the direct kernel and cuDNN (logs/winograd_wgmma.log)
  echo "=== Winograd on wgmma (\$SECONDS s)"
  timeout 500 python3 scripts/wgmma_probe.py --winograd --part=1/3 > \$logs/winograd_wgmma.log 2>&1
  tail -n 2 \$logs/winograd_wgmma.log
}
winograd_apart() {  # Winograd on wgmma checked on the small problems, its launches timed apart on two layers
  # (logs/winograd_apart.log): a kernel change's first look
  echo "=== Winograd on wgmma's launches apart (\$SECONDS s)"
  timeout 200 python3 scripts/wgmma_probe.py --winograd --small --apart > \$logs/winograd_apart.log 2>&1
  tail -n 16 \$logs/winograd_apart.log
}
winograd_rest() {  # the second third of those layers (logs/winograd_wgmma_rest.log)
  echo "=== Winograd on wgmma, the second third of the layers (\$SECONDS s)"
  timeout 500 python3 scripts/wgmma_probe.py --winograd --timed --part=2/3 > \$logs/winograd_wgmma_rest.log 2>&1
  tail -n 2 \$logs/winograd_wgmma_rest.log
}
winograd_last() {  # the last third (logs/winograd_wgmma_last.log)
  echo "=== Winograd on wgmma, the last third of the layers (\$SECONDS s)"
  timeout 500 python3 scripts/wgmma_probe.py --winograd --timed --part=3/3 > \$logs/winograd_wgmma_last.log 2>&1
  tail -n 2 \$logs/winograd_wgmma_last.log
}
winograd_sanitize() {  # Winograd on wgmma's small shapes under the four sanitizers (logs/winograd_wgmma_<tool>.log)
  for tool in memcheck racecheck initcheck synccheck; do
    timeout 45 compute-sanitizer --tool \$tool --error-exitcode 9 python3 scripts/wgmma_probe.py --winograd --check \
      --small > \$logs/winograd_wgmma_\$tool.log 2>&1; echo "\$tool exit \$?"
  done
}
winograd_diag() {  # what sets the pace of Winograd's products on wgmma: its parts, then Nsight Compute on one launch
  # of each of its three kernels, the inputs split ahead and then as staged (the report's first three, then three)
  echo "=== Winograd's products in parts (\$SECONDS s)"
  timeout 200 python3 scripts/wgmma_probe.py --winograd-parts > \$logs/winograd_parts.log 2>&1
  tail -n 12 \$logs/winograd_parts.log
  echo "=== Winograd's three launches profiled (\$SECONDS s)"
  timeout 200 ncu --kernel-name regex:'^winograd_(products_wgmma_tf32x3|transforms|output)\$' --launch-count 6 --set full \
    --import-source no -f -o \$logs/winograd_ncu python3 scripts/wgmma_probe.py --winograd-profile \
    > \$logs/winograd_ncu_run.log 2>&1
  echo "ncu exit \$?"
  ncu -i \$logs/winograd_ncu.ncu-rep --print-details all > \$logs/winograd_ncu.log 2>&1
  ncu -i \$logs/winograd_ncu.ncu-rep --page source --csv --print-source sass > \$logs/winograd_ncu_sass.csv 2>&1
}
wgmma_narrow() {  # the split-ahead kernel at 64 filters a block: checked and timed (logs/wgmma_narrow.log), then
  # racecheck and memcheck on the small shapes
  echo "=== 64 filters a block (\$SECONDS s)"
  timeout 140 python3 scripts/wgmma_probe.py --narrow > \$logs/wgmma_narrow.log 2>&1; tail -n 4 \$logs/wgmma_narrow.log
  for tool in racecheck memcheck; do
    timeout 55 compute-sanitizer --tool \$tool --error-exitcode 9 python3 scripts/wgmma_probe.py --narrow --check \
      > \$logs/wgmma_narrow_\$tool.log 2>&1; echo "\$tool exit \$?"
  done
}
ncu_nhwc() {  # every section of Nsight Compute on one launch of the split-ahead kernel (logs/wgmma_ncu_nhwc.log)
  echo "=== the split-ahead kernel profiled whole (\$SECONDS s)"
  timeout 300 ncu --kernel-name regex:'^implicit_gemm_wgmma_ws_nhwc_tf32x3\$' --launch-count 1 --set full \
    --print-details all python3 scripts/wgmma_probe.py --profile > \$logs/wgmma_ncu_nhwc.log 2>&1
  echo "ncu exit \$?"
}
wgmma_floor() {  # Nsight Compute's every section and its per-instruction stall samples on the split-ahead kernel
  # whole, its barriers alone and its descriptors moved on, and on the products' ceiling (logs/wgmma_floor*)
  echo "=== the split-ahead kernel's floor profiled (\$SECONDS s)"
  timeout 300 ncu --clock-control none --kernel-name regex:'^(implicit_gemm_wgmma_ws_nhwc_tf32x3|wgmma_products_ceiling)\$' \
    --set full --import-source no -f -o \$logs/wgmma_floor python3 scripts/wgmma_probe.py --profile-floor \
    > \$logs/wgmma_floor_run.log 2>&1
  echo "ncu exit \$?"
  ncu -i \$logs/wgmma_floor.ncu-rep --print-details all > \$logs/wgmma_floor.log 2>&1
  ncu -i \$logs/wgmma_floor.ncu-rep --page source --csv --print-source sass > \$logs/wgmma_floor_sass.csv 2>&1
  grep -E "wgmma|Duration|Throughput|Pipe|Shared|Issue Slots|Stall|Bank" \$logs/wgmma_floor.log | head -n 80
}
ncu_wgmma() {
  echo "=== the 3xTF32 kernels profiled (\$SECONDS s)"
  timeout 400 ncu --kernel-name regex:'^implicit_gemm_(wgmma_(ws_(nhwc_)?)?)?tf32x3\$' --section SpeedOfLight \
    --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats \
    --section InstructionStats --section LaunchStats --section Occupancy \
    python3 scripts/wgmma_probe.py --profile > \$logs/wgmma_ncu.log 2>&1
  echo "ncu exit \$?"
  grep -E "implicit_gemm|Duration|Compute \(SM\) Throughput|Issue Slots Busy|Registers Per|Warp Cycles Per Issued" \
    \$logs/wgmma_ncu.log | head -n 60
}
first_probe() {  # where the first forward goes, layer by layer, patched and not (logs/first_call.log)
  while [ ! -f $job/table.done ]; do sleep 5; done
  echo "=== the first forward layer by layer (\$SECONDS s)"
  python3 -m convkit prebuild > /dev/null 2>&1
  timeout 300 python3 scripts/first_call_probe.py > \$logs/first_call.log 2>&1; tail -n 64 \$logs/first_call.log
}
suite() {
  OUT=\$logs WORKERS=8 PYTHONPATH= bash scripts/gpu_suite.sh
}
wgmma_tests() {  # the GPU tests of the 3xTF32 kernels, of the FP32 ones whose Winograd transforms they share, of
  # the op that tunes and runs them, and of the ceilings (the tensor cores' four rates among them), no sanitizer
  OUT=\$logs/wgmma_tests WORKERS=8 SANITIZE=0 PYTHONPATH= TESTS="tests/test_wgmma_tf32x3_gpu.py tests/test_tf32x3_gpu.py \
    tests/test_fp32_gpu.py tests/test_op_gpu.py tests/test_concurrency_gpu.py tests/test_variants_gpu.py \
    tests/test_timing_gpu.py" bash scripts/gpu_suite.sh
}
ceilings_sanitize() {  # the ceilings' own kernels (the INT8 and wgmma rates among them) under the four sanitizers
  SANITIZE_TIMEOUT=120 bash scripts/sanitize.sh ceilings > \$logs/ceilings_sanitize.log 2>&1; echo "ceilings sanitizers exit \$?"
  grep -E "^==|exit|ERROR SUMMARY" \$logs/ceilings_sanitize.log
}
fp32_sanitize() {  # the FP32 family's edge launches (Winograd's transforms among them) under the four sanitizers
  SANITIZE_TIMEOUT=200 bash scripts/sanitize.sh fp32 > \$logs/fp32_sanitize.log 2>&1; echo "fp32 sanitizers exit \$?"
  grep -E "^==|exit|ERROR SUMMARY" \$logs/fp32_sanitize.log
}
soak() {
  while [ ! -f $job/table.done ]; do sleep 5; done  # it runs every implementation the table names
  rm -f \$dir/concurrency.csv \$dir/concurrency.json
  python3 -m \$summary.concurrency \$dir 2>&1 | grep -v "^  {" | tail -n 5
}
first() {
  while [ ! -f $job/table.done ]; do sleep 5; done
  echo "=== first forwards after prebuild (\$SECONDS s)"
  FRESH=1 PYTORCH=1 bash scripts/first_forward_device.sh 2>&1 | grep -v "^convkit: tuned" | tail -n 25
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
    # the parts replace networks.csv only where all three were measured (CHAINS may leave them out)
    echo "if [ -f results/$gpu/parts/0/networks.csv ] && [ -f results/$gpu/parts/1/networks.csv ] && \
[ -f results/$gpu/parts/2/networks.csv ]; then"
    echo "rm -f results/$gpu/networks.csv results/$gpu/networks.json"
    echo "PYTHONPATH=/tmp/site:$job python3 -m convkit.papers.summary.inference --absorb results/$gpu results/$gpu/parts/0 \
results/$gpu/parts/1 results/$gpu/parts/2 > results/$gpu/logs/absorb.log 2>&1"
    echo "fi"
    echo "touch $job/done"
  } > "$job/steps.sh"
  start_job "$job"
fi
gpu=$(cat "$job/gpu")  # a later call finds the job running: its GPU from the job
collect_job "$job" 'network_layers*' 'networks*' 'conv2d_overhead*' 'conv2d_host_paths*' 'concurrency*' 'shipped-table.json' 'logs' 'parts'
for log in "$job/results/$gpu"/logs/gpu*.log; do echo "--- $log"; grep -E "^===|passed|failed|exit|wrong|hung|s \(|ERROR" "$log" | tail -n 12; done
