#!/usr/bin/env bash
# The toy-CNN chapter's GPU session, resumable: GPU tests of the fused-layer kernels,
# compute-sanitizer on the edge launches, the sweep, then the ncu profile of the lab layer.
# Run from the repository root on a GPU machine:
#   CONVKIT_COMMIT=$(git rev-parse HEAD) SWEEP_SECONDS=400 bash scripts/toy_cnn_device.sh
# The sweep stops after SWEEP_SECONDS (rows are flushed one by one; a later call resumes it).
# Logs and the recorded CSV/JSON files are copied to $OUT (default ./out).
source scripts/device_session.sh tests/test_toy_cnn_gpu.py "toy CNN"
echo "=== sweep (at most ${SWEEP_SECONDS:-400} s)"
timeout "${SWEEP_SECONDS:-400}" python3 -m convkit.cli sweep toy_cnn > "$OUT/sweep.log" 2>&1
echo "sweep exit $? (124: stopped by the time limit, resumable)"; tail -n 2 "$OUT/sweep.log"
if [ "${PROFILE:-1}" = 1 ] && [ ! -f "$gpu_dir/toy_cnn_kernels.csv" ]; then
  echo "=== ncu profile"
  python3 -m convkit.cli profile --chapter toy_cnn > "$OUT/profile.log" 2>&1; echo "profile exit $?"; tail -n 3 "$OUT/profile.log"
fi
cp "$gpu_dir"/toy_cnn*.csv "$gpu_dir"/toy_cnn*.json "$OUT"/ 2>/dev/null
python3 - "$gpu_dir" <<'PY'
import sys, pandas as pd
f = pd.read_csv(f"{sys.argv[1]}/toy_cnn.csv", keep_default_na=False)
print(f.groupby(["label", "status"]).size().to_string())
ok = f[f.status == "ok"].assign(t=lambda d: d.time_ms_median.astype(float))
best = ok.sort_values("t").groupby(["label", "impl", "variant", ok.params.str.contains("steps\":\"conv\"")]).head(1)
print(best[["label", "impl", "variant", "params", "t", "gflops"]].sort_values(["label", "t"]).to_string(max_colwidth=60))
PY
