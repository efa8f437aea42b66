#!/usr/bin/env bash
# The cuConv chapter's GPU session, resumable: GPU tests of the cuConv kernels, compute-sanitizer,
# then tuning + sweep for the given batch sizes (default: all), then the ncu profile of the named
# configurations. Run from the repository root on a GPU machine:
#   CONVKIT_COMMIT=$(git rev-parse HEAD) BATCHES=1,8 SWEEP_SECONDS=400 bash scripts/cuconv_device.sh
# The sweep stops after SWEEP_SECONDS (rows are flushed one by one; a later call resumes it).
# Logs and the recorded CSV/JSON files are copied to $OUT (default ./out).
source scripts/device_session.sh tests/test_cuconv_gpu.py "cuConv"
echo "=== sweep (batches ${BATCHES:-all}, at most ${SWEEP_SECONDS:-400} s)"
timeout "${SWEEP_SECONDS:-400}" python3 -m convkit.cli sweep cuconv ${BATCHES:+--batches "$BATCHES"} > "$OUT/sweep.log" 2>&1
echo "sweep exit $? (124: stopped by the time limit, resumable)"; tail -n 2 "$OUT/sweep.log"
if [ "${PROFILE:-1}" = 1 ] && [ ! -f "$gpu_dir/cuconv_kernels.csv" ]; then
  echo "=== ncu profile"
  python3 -m convkit.cli profile > "$OUT/profile.log" 2>&1; echo "profile exit $?"; tail -n 3 "$OUT/profile.log"
fi
cp "$gpu_dir"/cuconv*.csv "$gpu_dir"/cuconv*.json "$OUT"/ 2>/dev/null
python3 -m convkit.cuconv_results "$gpu_dir" 2>&1 | tail -n 40
