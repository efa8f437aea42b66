# Sourced by the recording scripts (*_device.sh): a job that runs in the background on the GPU machine, so that
# it outlives one device call (at most 10 minutes) on a machine held across several. A job is a folder $job with
# steps.sh (which touches $job/done at its end), gpu (the results folder's name) and results/<gpu>/.

# The carried wheels (.whl), into /tmp/site.
install_wheels() {
  [ -d .whl ] || return 0
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>/dev/null
}

# This GPU's results folder name.
this_gpu() {
  PYTHONPATH=/tmp/site:$PWD python3 -c "from convkit.core.gpu import device_name, gpu_slug; print(gpu_slug(device_name()))"
}

# Start $1/steps.sh in the background, its log in $1/log.
start_job() {
  setsid nohup bash "$1/steps.sh" > "$1/log" 2>&1 < /dev/null &
  echo "started the job on $(cat "$1/gpu")"
}

# Wait up to WAIT seconds (default 520: a call's 600 less the job's start and the copy back; the wait is this, so a
# device command needs no loop of its own) for job $1 to finish, then copy what it recorded so far to $OUT: the files
# of results/<gpu>/ matching the patterns after $1, as one archive (a device call brings back only so many files),
# results.tgz, its log as job.log, and a file done once it finished.
collect_job() {
  local job=$1
  shift
  for _ in $(seq $(( ${WAIT:-520} / 10 ))); do
    [ -f "$job/done" ] && break
    sleep 10
  done
  local gpu
  gpu=$(cat "$job/gpu")
  (
    cd "$job/results" || exit 1
    shopt -s nullglob
    files=()
    for pattern in "$@"; do
      for file in "$gpu"/$pattern; do [ -e "$file" ] && files+=("$file"); done  # a name not written yet: left out
    done
    tar czf "$OUT/results.tgz" "${files[@]}"
  )
  cp "$job/log" "$OUT/job.log"
  if [ -f "$job/done" ]; then touch "$OUT/done"; fi
}

# Stop where CONVKIT_COMMIT is not the tree that runs: a lent machine's copy of .git can lag behind the working tree
# it gets, so `CONVKIT_COMMIT=$(git rev-parse HEAD)` typed into a device command names an older commit there, and
# every result would record it. A commit this .git knows whose tracked sources differ from the tree is refused; one it
# does not know (a newer commit, given literally) passes.
check_commit() {
  local commit=${CONVKIT_COMMIT:-}
  [ -n "$commit" ] && git cat-file -e "$commit^{commit}" 2>/dev/null || return 0
  if ! git diff --quiet "$commit" -- convkit kernels scripts tests 2>/dev/null; then
    echo "CONVKIT_COMMIT=$commit is not the tree that runs here (this machine's .git lags behind it):" \
      "give the commit measured literally, as git rev-parse HEAD prints it where it was committed"
    return 1
  fi
}

# Open job $job on this machine, once (where it is open already, a call that asked for another commit or chains is
# told so: it collects the open job): the carried wheels installed, the checkout paths given copied into it (a
# later device call's fresh copy of the working tree replaces the checkout, never what the job writes), $job/results
# made, and this GPU's results folder name in $gpu and $job/gpu. Fails (status 1) where the job is already open.
new_job() {
  local asked="CONVKIT_COMMIT=${CONVKIT_COMMIT:-} CHAINS=${CHAINS:-}"
  if [ -d "$job" ]; then  # a warm machine keeps its job: say so where this call asked for another
    if [ "$(cat "$job/asked" 2>/dev/null)" != "$asked" ]; then
      echo "this machine holds a job asked as '$(cat "$job/asked" 2>/dev/null)' ($([ -f "$job/done" ] && echo done ||
        echo running)), not '$asked': collecting that one; begin the command with rm -rf $job to start afresh"
    fi
    return 1
  fi
  check_commit || exit 4
  install_wheels || exit 1
  gpu=$(this_gpu)
  mkdir -p "$job/results"
  cp -r "$@" "$job/"
  echo "$gpu" > "$job/gpu"
  echo "$asked" > "$job/asked"
}
