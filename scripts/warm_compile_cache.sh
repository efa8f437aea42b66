#!/usr/bin/env bash
# torch.compile's on-disk cache filled for every network label that results folder $1 lacks in every mode, by
# PROCS processes at once (default 6; nothing timed or recorded), so that the recording reads compiled graphs instead of
# compiling for a minute a label. Prints the labels, one line, for the recording to measure.
#   bash scripts/warm_compile_cache.sh results/<gpu>      # PYTHONPATH set to the tree measured
set -uo pipefail
summary=convkit.papers.summary
labels=$(python3 -m $summary.inference --unrecorded "$1")
lists=$(mktemp -d)
i=0; for label in $labels; do echo "$label" >> "$lists/$((i % ${PROCS:-6}))"; i=$((i + 1)); done
for list in "$lists"/*; do
  [ -f "$list" ] || continue
  XDG_CACHE_HOME=$(mktemp -d) python3 -m $summary.inference --warm $(cat "$list") > "$list.log" 2>&1 &
done
wait
tail -q -n 1 "$lists"/*.log >&2
echo $labels
