# What the shell tests of the real binaries share (sourced, not run):
#   source "$(dirname "$0")/binary_test_lib.sh" NAME
# makes TMP (a fresh directory under $TEST_TMPDIR or /tmp named after NAME),
# PIDS (append every process started; all are killed and reaped on exit),
# and:
#   fail MESSAGE...        prints it and the tail of every $TMP/*.log, exits 1
#   wait_for WHAT CMD...   polls CMD every 0.1 s, up to 60 s, else fail
#   start_servers NAME FLAGS...  a pool of two $SERVER processes on free
#                          ports (logs $TMP/NAME-server-S.log), FLAGS added
#                          to each; waits until both listen; sets SERVERS
TMP=$(mktemp -d "${TEST_TMPDIR:-/tmp}/$1.XXXXXX")
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$TMP"/*.log; do echo "--- $f" >&2; tail -n 15 "$f" >&2; done
  exit 1
}
wait_for() {
  local what=$1 i
  shift
  for ((i = 0; i < 600; i++)); do
    "$@" && return 0
    sleep 0.1
  done
  fail "timed out waiting for $what"
}
start_servers() {
  local name=$1 s
  shift
  for s in 0 1; do
    "$SERVER" --host=127.0.0.1 --port=0 --port_file="$TMP/$name.port.$s" \
      --server_index=$s --num_servers=2 "$@" >"$TMP/$name-server-$s.log" 2>&1 &
    PIDS+=($!)
  done
  for s in 0 1; do wait_for "server $s" test -s "$TMP/$name.port.$s"; done
  SERVERS="127.0.0.1:$(cat "$TMP/$name.port.0"),127.0.0.1:$(cat "$TMP/$name.port.1")"
}
