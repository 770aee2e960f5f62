# Shell helpers shared by the tests that drive real troupe clusters and runs (sourced, not run).
#
#   source tests/lib/cluster_test_lib.sh   # from the runfiles root, where sh_test starts
#   newest_step "$run/ckpt"            # 4 if step_00000004 is the newest checkpoint there
#   dump_cluster_logs "$state" >&2     # the head log's and each driver log's tail

# newest_step DIR: the number of the newest step_N checkpoint in DIR (0 if none).
newest_step() {
  local newest=0 d n
  for d in "$1"/step_*; do
    [[ -d "$d" ]] || continue
    n=${d##*step_}
    n=$((10#${n:-0}))
    ((n > newest)) && newest=$n
  done
  echo "$newest"
}

# dump_cluster_logs STATE_DIR: what a failing test shows of the cluster in STATE_DIR: the tail of
# the head's log and of every job's driver log.
dump_cluster_logs() {
  local state=$1 f
  [[ -n "$state" && -d "$state" ]] || return 0
  echo "--- head log (tail)"
  tail -20 "$state/logs/head.log" 2>/dev/null || true
  for f in "$state"/jobs/*/driver.log; do
    [[ -s "$f" ]] || continue
    echo "--- $f (tail)"
    tail -8 "$f"
  done
}
