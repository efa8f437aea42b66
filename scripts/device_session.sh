# The start every chapter's device script shares, sourced with the paper's registered name:
#   source scripts/device_session.sh <paper>
# Sets OUT (default ./out, created), the Python environment and gpu_dir (results/<this GPU>); unless
# TESTS=0, runs the paper's GPU tests (the generic one over its variants, and tests/test_<paper>_gpu.py
# where it exists) and every kernel under compute-sanitizer (scripts/sanitize.sh).
# Results record CONVKIT_COMMIT, else the tree's git HEAD: where the tree arrives as a copy whose .git may
# lag behind it (a lent GPU machine), give the commit measured literally, taken where it was committed.
set -uo pipefail
source scripts/device_job.sh
check_commit || exit 4
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
gpu_dir=results/$(python3 -c "from convkit.core.gpu import device_name, gpu_slug; print(gpu_slug(device_name()))")
echo "=== recording as convkit commit $(python3 -c "from convkit.study.provenance import convkit_commit; print(convkit_commit())")"
if [ "${TESTS:-1}" = 1 ]; then
  echo "=== GPU tests ($1)"
  tests=(tests/test_variants_gpu.py)
  [ -f "tests/test_${1}_gpu.py" ] && tests+=("tests/test_${1}_gpu.py")
  python3 -m pytest -q -m gpu -p no:cacheprovider -k "$1 or not test_variant_matches_float64" "${tests[@]}" 2>&1 | tail -n 8
  echo "=== compute-sanitizer"
  bash scripts/sanitize.sh 2>&1 | grep -E "^==|exit|ERROR SUMMARY"
fi
