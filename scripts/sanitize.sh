#!/usr/bin/env bash
# Every convkit kernel under compute-sanitizer (memcheck, racecheck, initcheck, synccheck) on edge
# shapes. Run on a GPU machine from the repository root: bash scripts/sanitize.sh [family or chapter ...]
# (the names scripts/edge_launch.py takes; none: every one)
set -uo pipefail
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # scripts/edge_launch.py imports convkit from this checkout
status=0
for tool in memcheck racecheck initcheck synccheck; do
  echo "== compute-sanitizer --tool $tool"
  # a kernel that hangs (an mbarrier wait) fails its tool after SANITIZE_TIMEOUT seconds instead of stalling the rest
  timeout "${SANITIZE_TIMEOUT:-900}" compute-sanitizer --tool "$tool" --error-exitcode 97 python3 scripts/edge_launch.py \
    "$@" 2>&1 | tail -n 12
  rc=${PIPESTATUS[0]}
  echo "   exit $rc"
  [ "$rc" -eq 0 ] || status=1
done
exit $status
