#!/usr/bin/env bash
# The Chang 2022 chapter's GPU session, resumable: GPU tests of the single- and multi-channel kernels,
# compute-sanitizer on the edge launches, the sweep.
# Run from the repository root on a GPU machine:
#   CONVKIT_COMMIT=$(git rev-parse HEAD) SWEEP_SECONDS=400 bash scripts/chang2022_device.sh
# The sweep stops after SWEEP_SECONDS (rows are flushed one by one; a later call resumes it).
# Logs and the recorded CSV/JSON files are copied to $OUT (default ./out).
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
gpu_dir=results/$(python3 -c "from convkit.gpu import device_name, gpu_slug; print(gpu_slug(device_name()))")
if [ "${TESTS:-1}" = 1 ]; then
  echo "=== GPU tests (Chang 2022)"
  python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_chang2022_gpu.py 2>&1 | tail -n 4
  echo "=== compute-sanitizer"
  bash scripts/sanitize.sh 2>&1 | grep -E "^==|exit|ERROR SUMMARY"
fi
echo "=== sweep (at most ${SWEEP_SECONDS:-400} s)"
timeout "${SWEEP_SECONDS:-400}" python3 -m convkit.cli sweep chang2022 > "$OUT/sweep.log" 2>&1
echo "sweep exit $? (124: stopped by the time limit, resumable)"; tail -n 2 "$OUT/sweep.log"
cp "$gpu_dir"/chang2022*.csv "$gpu_dir"/chang2022*.json "$OUT"/ 2>/dev/null
python3 - "$gpu_dir" <<'PY'
import sys, pandas as pd
f = pd.read_csv(f"{sys.argv[1]}/chang2022.csv", keep_default_na=False)
print(f.groupby(["impl", "status"]).size().to_string())
ok = f[f.status == "ok"].assign(t=lambda d: d.time_ms_median.astype(float) * 1e3)
conv = ok[ok.impl == "convkit"].sort_values("t").groupby(["label", "variant"]).head(1)
lib = ok[ok.impl != "convkit"].sort_values("t").groupby("label").head(1).set_index("label")
conv = conv.assign(best_lib_us=conv.label.map(lib.t), speedup=lambda d: d.label.map(lib.t) / d.t)
print(conv.pivot(index="label", columns="variant", values="speedup").round(2).to_string())
print(conv.groupby("variant").speedup.describe().to_string())
PY
