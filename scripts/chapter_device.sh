#!/usr/bin/env bash
# A chapter's GPU session, resumable: its GPU tests (the generic one over its variants and its own file),
# every kernel under compute-sanitizer, its ncu profile (once per GPU, where it declares one), then its
# tuning and sweep. Run from the repository root on a GPU machine:
#   CONVKIT_COMMIT=<the commit, literally> SWEEP_SECONDS=400 bash scripts/chapter_device.sh <paper> [sweep options]
# e.g. `bash scripts/chapter_device.sh cuconv --batches 1,8`. The sweep stops after SWEEP_SECONDS (rows are
# flushed one by one; a later call resumes it). TESTS=0 skips the tests and the sanitizer, PROFILE=0 the profile.
# Logs and the chapter's recorded CSV/JSON files are copied to $OUT (default ./out).
paper=${1:?usage: chapter_device.sh <paper> [sweep options]}
shift
source scripts/device_session.sh "$paper"
profiled=$(python3 -c "from convkit.papers import paper; p = paper('$paper').profile; print(p.experiment if p else '')")
if [ "${PROFILE:-1}" = 1 ] && [ -n "$profiled" ] && [ ! -f "$gpu_dir/$profiled.csv" ]; then
  echo "=== ncu profile"
  python3 -m convkit.cli profile "$paper" > "$OUT/profile.log" 2>&1; echo "profile exit $?"; tail -n 3 "$OUT/profile.log"
fi
echo "=== sweep (at most ${SWEEP_SECONDS:-400} s)"
timeout "${SWEEP_SECONDS:-400}" python3 -m convkit.cli sweep "$paper" "$@" > "$OUT/sweep.log" 2>&1
echo "sweep exit $? (124: stopped by the time limit, resumable)"; tail -n 2 "$OUT/sweep.log"
cp "$gpu_dir/$paper"*.csv "$gpu_dir/$paper"*.json "$OUT"/ 2>/dev/null
if python3 -c "import convkit.papers.$paper.results as r; assert hasattr(r, 'main')" 2>/dev/null; then
  python3 -m "convkit.papers.$paper.results" "$gpu_dir" 2>&1 | tail -n 40
fi
