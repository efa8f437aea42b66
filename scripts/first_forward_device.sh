#!/usr/bin/env bash
# Ready on the first call, recorded (results/<gpu>/networks_cold.csv): `convkit prebuild` timed into an empty CuPy
# kernel cache, then each network's first forward after it (every network at batch 1 and 16 by default), each in a fresh process with convkit's user cache empty.
#   CONVKIT_COMMIT=<the commit, literally> [FRESH=1] [LABELS="ResNet-50-1 ResNet-50-16 ..."] \
#     bash scripts/first_forward_device.sh
# `import convkit` is timed in fresh processes too; PYTORCH=1 times each unpatched network's first forward the same
# way after them (PyTorch's own one-time costs, beside convkit's). FRESH=1 drops the recorded prebuild, prebuilt and import rows
# first (the shipped table or the kernels changed).
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 CONVKIT_COMMIT=${CONVKIT_COMMIT:?give the commit measured}
export CUPY_CACHE_DIR=$(mktemp -d)
module=convkit.papers.summary.first_forward
[ -n "${FRESH:-}" ] && python3 -m $module --forget
start=$SECONDS
XDG_CACHE_HOME=$(mktemp -d) python3 -m $module --prebuild 2>&1 | tail -n 3
echo "prebuild step: $(( SECONDS - start )) s (process start included)"
python3 -m $module --import
every=$(python3 -c "from convkit.papers.summary.inference import NETWORKS
print(' '.join(f'{n}-{b}' for b in (1, 16) for n in NETWORKS))")
for label in ${LABELS:-$every}; do
  XDG_CACHE_HOME=$(mktemp -d) python3 -m $module "$label" 2>&1 | tail -n 3
done
if [ -n "${PYTORCH:-}" ]; then
  for label in ${LABELS:-$every}; do
    XDG_CACHE_HOME=$(mktemp -d) python3 -m $module --pytorch "$label" 2>&1 | tail -n 3
  done
fi
gpu=$(python3 -c "from convkit.core.gpu import device_name, gpu_slug; print(gpu_slug(device_name()))")
grep -E "prebuild|prebuilt|pytorch|import" "results/$gpu/networks_cold.csv"
