#!/usr/bin/env bash
# The Chang 2022 chapter's GPU session, resumable: GPU tests of the single- and multi-channel kernels,
# compute-sanitizer on the edge launches, the sweep.
# Run from the repository root on a GPU machine:
#   CONVKIT_COMMIT=$(git rev-parse HEAD) SWEEP_SECONDS=400 bash scripts/chang2022_device.sh
# The sweep stops after SWEEP_SECONDS (rows are flushed one by one; a later call resumes it).
# Logs and the recorded CSV/JSON files are copied to $OUT (default ./out).
source scripts/device_session.sh tests/test_chang2022_gpu.py "Chang 2022"
echo "=== sweep (at most ${SWEEP_SECONDS:-400} s)"
timeout "${SWEEP_SECONDS:-400}" python3 -m convkit.cli sweep chang2022 > "$OUT/sweep.log" 2>&1
echo "sweep exit $? (124: stopped by the time limit, resumable)"; tail -n 2 "$OUT/sweep.log"
cp "$gpu_dir"/chang2022*.csv "$gpu_dir"/chang2022*.json "$OUT"/ 2>/dev/null
python3 -m convkit.chang2022_results "$gpu_dir"
