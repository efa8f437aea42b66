#!/usr/bin/env bash
# The Lu 2020 chapter's GPU session, resumable: GPU tests of every kernel, compute-sanitizer on the edge
# launches, the ncu load counters (once per GPU), the sweep.
# Run from the repository root on a GPU machine:
#   CONVKIT_COMMIT=$(git rev-parse HEAD) SWEEP_SECONDS=400 bash scripts/lu2020_device.sh
# PROFILE=0 skips ncu; the sweep stops after SWEEP_SECONDS (rows are flushed one by one; a later call
# resumes it). Logs and the recorded CSV/JSON files are copied to $OUT (default ./out).
source scripts/device_session.sh tests/test_lu2020_gpu.py "Lu 2020"
if [ "${PROFILE:-1}" = 1 ] && [ ! -f "$gpu_dir/lu2020_kernels.csv" ]; then
  echo "=== ncu load counters"
  python3 -m convkit.cli profile --chapter lu2020 > "$OUT/profile.log" 2>&1; echo "profile exit $?"
  tail -n 3 "$OUT/profile.log"
fi
echo "=== sweep (at most ${SWEEP_SECONDS:-400} s)"
timeout "${SWEEP_SECONDS:-400}" python3 -m convkit.cli sweep lu2020 > "$OUT/sweep.log" 2>&1
echo "sweep exit $? (124: stopped by the time limit, resumable)"; tail -n 2 "$OUT/sweep.log"
cp "$gpu_dir"/lu2020*.csv "$gpu_dir"/lu2020*.json "$OUT"/ 2>/dev/null
python3 -m convkit.lu2020_results "$gpu_dir" 2>&1 | tail -n 40
