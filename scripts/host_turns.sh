#!/usr/bin/env bash
# The op's host cost per call (conv2d_overhead's 24 layers, its host_per_call cases only: convkit and PyTorch's
# conv2d, in turns within each layer) from two trees in turns, each run a fresh process, ROUNDS rounds (default 3),
# none started after BUDGET_S seconds (default 420). Rows go to results/<gpu>/host_turns/<before|after><round>/:
#   CONVKIT_COMMIT=<the commit, literally> BEFORE=<tree> BEFORE_COMMIT=<its commit> bash scripts/host_turns.sh
# BEFORE is a copy of convkit/, kernels/ and pyproject.toml from before a change (`git archive REV convkit kernels`).
set -uo pipefail
: "${BEFORE:?name the tree from before the change}" "${CONVKIT_COMMIT:?give the commit measured}"
gpu=$(python3 -c "from convkit.core.gpu import device_name, gpu_slug; print(gpu_slug(device_name()))")
into=$PWD/results/$gpu/host_turns
start=$SECONDS
run() {  # tree $1 at commit $2 into $3
  (cd "$1" && CONVKIT_COMMIT=$2 PYTHONPATH=$1 python3 -c "
import sys
from pathlib import Path
from convkit.papers.summary.overhead import CASES, EXPERIMENT, layers, measure_rows
from convkit.study.sweep import run_sweep
host = [case for case in CASES if case.variant == 'host_per_call']
run_sweep(EXPERIMENT, layers(), lambda p: list(host), measure_rows, directory=Path(sys.argv[1]), progress=None)
" "$3" 2>&1 | tail -n 2)
}
for round in $(seq "${ROUNDS:-3}"); do
  for side in before after; do
    (( SECONDS - start > ${BUDGET_S:-420} )) && { echo "budget spent before $side$round"; break 2; }
    if [ "$side" = before ]; then run "$(realpath "$BEFORE")" "${BEFORE_COMMIT:-before}" "$into/before$round"
    else run "$PWD" "$CONVKIT_COMMIT" "$into/after$round"; fi
    echo "$side$round done at $(( SECONDS - start )) s"
  done
done
