#!/usr/bin/env bash
# Whether kernels/wgmma_tf32x3.cu builds the same PTX as at git revision REV in the configurations the op runs: the
# check that a change under a knob off in every build the op runs (an experiment, a probe's stamps) leaves the op's
# kernels, and so the recorded results, as they were. Needs nvcc alone (no GPU). Run from the repository root:
#   bash scripts/same_ptx.sh REV [configuration ...]   # a configuration: the -D options of one build, quoted
# With none given, nine: the gathering kernel at 16 and 32 filters over clusters (one with the producer in halves),
# at 128 over a cluster of 8, persistent at 16 and at 32 in halves, 32 a block a tile, 64 with ping-pong; a 3x3
# persistent, and at 64 filters. Each build is the whole file (the split kernels and the split-ahead kernel too), at
# each revision with that revision's headers. Exit 1 where any differs.
set -uo pipefail
rev=${1:?give the git revision to compare with}
shift
configurations=("$@")
if [ ${#configurations[@]} -eq 0 ]; then
  one="-DCONVKIT_R=1 -DCONVKIT_S=1"
  configurations=(
    "$one -DCONVKIT_WS_IN_FLIGHT=2 -DCONVKIT_WS_FILTERS=16 -DCONVKIT_WS_CLUSTER=8"
    "$one -DCONVKIT_WS_IN_FLIGHT=2 -DCONVKIT_WS_FILTERS=32 -DCONVKIT_WS_CLUSTER=2 -DCONVKIT_WS_PRODUCER_HALVES=1"
    "$one -DCONVKIT_WS_FILTERS=128 -DCONVKIT_WS_CLUSTER=8"
    "$one -DCONVKIT_WS_FILTERS=16 -DCONVKIT_WS_PERSISTENT=1"
    "$one -DCONVKIT_WS_FILTERS=32 -DCONVKIT_WS_PERSISTENT=1 -DCONVKIT_WS_PRODUCER_HALVES=1"
    "$one -DCONVKIT_WS_FILTERS=32"
    "$one -DCONVKIT_WS_FILTERS=64 -DCONVKIT_WS_PERSISTENT=1 -DCONVKIT_WS_PINGPONG=1"
    "-DCONVKIT_R=3 -DCONVKIT_S=3 -DCONVKIT_WS_IN_FLIGHT=2 -DCONVKIT_WS_PERSISTENT=1"
    "-DCONVKIT_R=3 -DCONVKIT_S=3 -DCONVKIT_WS_FILTERS=64 -DCONVKIT_WS_PERSISTENT=1"
  )
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/then"
git archive "$rev" kernels | tar -x -C "$work/then" || exit 2
status=0
for i in "${!configurations[@]}"; do
  # shellcheck disable=SC2086  # (each configuration is its options, split at spaces)
  for side in now then; do
    root=$([ $side = now ] && echo . || echo "$work/then")
    nvcc -arch=sm_90a -std=c++17 -I"$root/kernels" ${configurations[$i]} -ptx "$root/kernels/wgmma_tf32x3.cu" \
      -o "$work/$side.$i.ptx" || exit 2
  done
  if cmp -s "$work/now.$i.ptx" "$work/then.$i.ptx"; then
    echo "same PTX: ${configurations[$i]}"
  else
    echo "DIFFERENT PTX: ${configurations[$i]}"
    status=1
  fi
done
exit $status
