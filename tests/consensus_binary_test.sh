#!/usr/bin/env bash
# The consensus modes through the real binaries: two servers hold the
# consensus, the workers train their own models toward it.
#  1. easgd, 3 workers; worker 2 is killed (SIGKILL) in the middle: workers 0
#     and 1 train on to the end (no worker waits for another), and the
#     servers' consensus, read by asgd_eval, is well above the initial
#     model's accuracy.
#  2. admm, 2 workers on fresh servers with 2 ADMM slots; worker 1 is
#     killed in the middle and restarted with the same --worker_index: it
#     takes its dual from its slot on the servers (logged), and every
#     worker finishes; the consensus is well above the initial model.
#  3. Refused, with a message naming the flag (before connecting): a bad
#     --elastic_alpha, --admm_rho or --consensus_every, --minibatch_pool with
#     a consensus mode; a synchronous pool refuses the ADD pushes, a pool
#     without ADMM slots an admm worker, and the worker ends with that error.
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

# 2. admm on fresh servers with a slot per worker; worker 1 dies and is
# restarted in its slot.
start_servers admm "${POOL_FLAGS[@]}" --admm_slots=2
before=$(accuracy admm-before)
ADMM_FLAGS=(--mode=admm --epochs=0 --max_steps=1200 --log_every=50
            --consensus_every=2 --admm_rho=0.5)
start_workers admm 2 "${ADMM_FLAGS[@]}"
wait_for "admm worker 1 to train" grep -q "worker 1 step 100 " "$TMP/admm-1.log"
kill -9 "${WORKER_PIDS[1]}"
wait "${WORKER_PIDS[1]}" 2>/dev/null || true
"$WORKER" --servers="$SERVERS" --corpus="$TMP/corpus" --backend=cpu \
  --worker_index=1 --num_workers=2 --batch_size=64 --connect_timeout_s=60 \
  "${ADMM_FLAGS[@]}" >"$TMP/admm-1-restarted.log" 2>&1 &
WORKER_PIDS[1]=$!
PIDS+=($!)
for w in 0 1; do
  wait "${WORKER_PIDS[$w]}" || fail "admm worker $w exited with an error"
done
grep -q "mode admm: " "$TMP/admm-0.log" || fail "admm worker 0's done line"
grep -q "mode admm: " "$TMP/admm-1-restarted.log" ||
  fail "restarted admm worker 1's done line"
# Its slot held its predecessor's last point, away from z.
distance=$(sed -n 's/^worker 1 admm slot 1: |u_slot - z| \([0-9.e+-]*\) (dual.*/\1/p' \
  "$TMP/admm-1-restarted.log")
python3 -c "import sys; sys.exit(0 if float('${distance:-0}') > 0 else 1)" ||
  fail "the restarted admm worker's slot held no point of its predecessor ('$distance')"
after=$(accuracy admm-after)
above admm "$before" "$after"
echo "admm with a restarted worker: it took over its slot, consensus $before% -> $after%"
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
start_servers noslots "${POOL_FLAGS[@]}"
refused noslots "servers started with --admm_slots" --mode=admm
start_servers sync "${POOL_FLAGS[@]}" --sync_workers=2
refused sync "synchronous pool" --mode=easgd --consensus_every=1
echo "refusals: alpha, rho, every, pool, ADMM without slots, a synchronous pool"
passed=$((passed + 1))

echo "$passed passed, 0 failed"
