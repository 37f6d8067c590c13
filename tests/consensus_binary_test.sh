#!/usr/bin/env bash
# The consensus modes through the real binaries: two servers hold the
# consensus, the workers train their own models toward it.
#  1. easgd, 3 workers; worker 2 is killed (SIGKILL) in the middle: workers 0
#     and 1 train on to the end (no worker waits for another), and the
#     servers' consensus, read by asgd_eval, is well above the initial
#     model's accuracy.
#  2. admm, 2 workers on fresh servers: the same.
#  3. Refused, with a message naming the flag (before connecting): a bad
#     --elastic_alpha, --admm_rho or --consensus_every, --minibatch_pool with
#     a consensus mode; a synchronous pool refuses the ADD pushes and the
#     worker ends with that error.
# Usage: consensus_binary_test.sh SERVER WORKER EVAL MAKE_CORPUS
set -euo pipefail
SERVER=$1 WORKER=$2 EVAL=$3 MAKE_CORPUS=$4
source "$(dirname "$0")/binary_test_lib.sh" consensus

"$MAKE_CORPUS" --out="$TMP/corpus" --num_train=40 --num_heldout=8 --jobs=2 \
  --noprogress >"$TMP/corpus.log" 2>&1 || fail "make_corpus"

# The pool of every case: start_servers NAME [more flags].
POOL_FLAGS=(--num_shards=1 --hidden=64 --learning_rate=0.1 --log_every_s=0)

# accuracy NAME: the servers' model's held-out accuracy (asgd_eval).
accuracy() {
  "$EVAL" --servers="$SERVERS" --corpus="$TMP/corpus" >"$TMP/eval-$1.log" 2>&1 ||
    fail "asgd_eval $1"
  sed -n 's/^held-out frame accuracy: \([0-9.]*\)%$/\1/p' "$TMP/eval-$1.log"
}

# start_workers NAME N FLAGS...: starts N workers; sets WORKER_PIDS.
start_workers() {
  local name=$1 n=$2 w
  shift 2
  WORKER_PIDS=()
  for ((w = 0; w < n; w++)); do
    "$WORKER" --servers="$SERVERS" --corpus="$TMP/corpus" --backend=cpu \
      --worker_index=$w --num_workers="$n" --batch_size=64 \
      --connect_timeout_s=60 "$@" >"$TMP/$name-$w.log" 2>&1 &
    WORKER_PIDS+=($!)
    PIDS+=($!)
  done
}

# above NAME BEFORE AFTER: fails unless AFTER is 10 points above BEFORE.
above() {
  python3 -c "import sys; sys.exit(0 if float('$3') > float('$2') + 10 else 1)" ||
    fail "$1: the consensus went from $2% to $3%"
}

passed=0
# 1. easgd with a worker that dies.
start_servers easgd "${POOL_FLAGS[@]}"
before=$(accuracy easgd-before)
start_workers easgd 3 --mode=easgd --epochs=0 --max_steps=1500 \
  --log_every=50 --consensus_every=4
wait_for "worker 2 to train" grep -q "worker 2 step 100 " "$TMP/easgd-2.log"
kill -9 "${WORKER_PIDS[2]}"
for w in 0 1; do
  wait "${WORKER_PIDS[$w]}" || fail "easgd worker $w exited with an error"
  grep -Eq "worker $w done: 1500 steps, 375 pushes, .*, mode easgd: 375 communications, 0 server parts not applied, last consensus distance [0-9.e+-]+$" \
    "$TMP/easgd-$w.log" || fail "easgd worker $w's done line"
done
grep -q "consensus-distance" "$TMP/easgd-0.log" ||
  fail "no consensus distance in the progress lines"
after=$(accuracy easgd-after)
above easgd "$before" "$after"
echo "easgd with a dead worker: both survivors finished, consensus $before% -> $after%"
passed=$((passed + 1))

# 2. admm on fresh servers.
start_servers admm "${POOL_FLAGS[@]}"
before=$(accuracy admm-before)
start_workers admm 2 --mode=admm --epochs=2 --log_every=1000 \
  --consensus_every=2 --admm_rho=0.5
for w in 0 1; do
  wait "${WORKER_PIDS[$w]}" || fail "admm worker $w exited with an error"
  grep -q "mode admm: " "$TMP/admm-$w.log" || fail "admm worker $w's done line"
done
after=$(accuracy admm-after)
above admm "$before" "$after"
echo "admm: consensus $before% -> $after%"
passed=$((passed + 1))

# 3. Refusals.
refused() {
  local name=$1 want=$2
  shift 2
  if "$WORKER" --servers="$SERVERS" --corpus="$TMP/corpus" --backend=cpu \
       --connect_timeout_s=10 --max_steps=5 "$@" >"$TMP/$name.log" 2>&1; then
    fail "$name: the worker did not refuse"
  fi
  grep -q -- "$want" "$TMP/$name.log" || fail "$name: no '$want' in the error"
}
refused alpha "--elastic_alpha must be in (0, 1]" --mode=easgd --elastic_alpha=2
refused rho "--admm_rho must be > 0" --mode=admm --admm_rho=0
refused every "--consensus_every must be >= 1" --mode=admm --consensus_every=0
echo 0123456789abcdef0123 >"$TMP/run_id"
refused pool "--mode=easgd takes no --minibatch_pool" --mode=easgd \
  --minibatch_pool --pool_run_id_file="$TMP/run_id"
start_servers sync "${POOL_FLAGS[@]}" --sync_workers=2
refused sync "synchronous pool" --mode=easgd --consensus_every=1
echo "refusals: alpha, rho, every, pool, a synchronous pool"
passed=$((passed + 1))

echo "$passed passed, 0 failed"
