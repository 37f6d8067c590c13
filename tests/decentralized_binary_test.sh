#!/usr/bin/env bash
# The decentralized modes through the real binaries, started the way
# scripts/experiment.sh starts them: every worker picks a free peer port
# (--peer_port=0) and writes it to --peer_port_file; once all port files
# exist the launcher writes the --peers_file every worker waits for.
#  1. adpsgd, 3 workers, fixed ring; worker 2 is killed (SIGKILL) in the
#     middle: workers 0 and 1 train on to the end, worker 1 logs the failed
#     averages, worker 0 hands its model to the servers and asgd_eval reads it.
#  2. allreduce, 2 workers: lockstep, identical final models.
# Usage: decentralized_binary_test.sh SERVER WORKER EVAL MAKE_CORPUS
set -euo pipefail
SERVER=$1 WORKER=$2 EVAL=$3 MAKE_CORPUS=$4
source "$(dirname "$0")/binary_test_lib.sh" decentralized

"$MAKE_CORPUS" --out="$TMP/corpus" --num_train=40 --num_heldout=8 --jobs=2 \
  --noprogress >"$TMP/corpus.log" 2>&1 || fail "make_corpus"

start_servers pool --num_shards=1 --hidden=64 --log_every_s=0

# start_workers NAME N FLAGS...: starts N workers; sets WORKER_PIDS.
start_workers() {
  local name=$1 n=$2 w
  shift 2
  WORKER_PIDS=()
  for ((w = 0; w < n; w++)); do
    "$WORKER" --servers="$SERVERS" --corpus="$TMP/corpus" --backend=cpu \
      --worker_index=$w --num_workers="$n" --batch_size=64 \
      --peer_host=127.0.0.1 --peer_port=0 \
      --peer_port_file="$TMP/$name.peer.$w" --peers_file="$TMP/$name.peers" \
      --connect_timeout_s=60 "$@" >"$TMP/$name-$w.log" 2>&1 &
    WORKER_PIDS+=($!)
    PIDS+=($!)
  done
  local addresses=()
  for ((w = 0; w < n; w++)); do
    wait_for "$name worker $w's peer port" test -s "$TMP/$name.peer.$w"
    addresses+=("127.0.0.1:$(cat "$TMP/$name.peer.$w")")
  done
  (IFS=,; echo "${addresses[*]}") >"$TMP/$name.peers.tmp"
  mv "$TMP/$name.peers.tmp" "$TMP/$name.peers"
}

passed=0
# 1. adpsgd with a worker that dies.
start_workers adpsgd 3 --mode=adpsgd --topology=fixed_ring --epochs=0 \
  --max_steps=3000 --log_every=50 --peer_timeout_s=1
wait_for "worker 2 to train" grep -q "worker 2 step 100 " "$TMP/adpsgd-2.log"
kill -9 "${WORKER_PIDS[2]}"
wait "${WORKER_PIDS[0]}" || fail "worker 0 exited with an error"
wait "${WORKER_PIDS[1]}" || fail "worker 1 exited with an error"
grep -q "worker 0 done: 3000 steps, 0 pushes" "$TMP/adpsgd-0.log" ||
  fail "worker 0 did not finish its steps"
grep -q "worker 1 done: 3000 steps, 0 pushes" "$TMP/adpsgd-1.log" ||
  fail "worker 1 did not finish its steps"
grep -q "averaging with worker 2 failed" "$TMP/adpsgd-1.log" ||
  fail "worker 1 did not notice worker 2's death"
grep -Eq "worker 1 peers: 3000 averages started \([1-9][0-9]* failed" \
  "$TMP/adpsgd-1.log" || fail "worker 1's peers line does not count failures"
grep -q "final model handed to the servers" "$TMP/adpsgd-0.log" ||
  fail "worker 0 did not hand its model over"
"$EVAL" --servers="$SERVERS" --corpus="$TMP/corpus" >"$TMP/eval-adpsgd.log" 2>&1 ||
  fail "asgd_eval"
acc=$(sed -n 's/^held-out frame accuracy: \([0-9.]*\)%$/\1/p' "$TMP/eval-adpsgd.log")
python3 -c "import sys; sys.exit(0 if float('$acc') > 20 else 1)" ||
  fail "adpsgd model accuracy $acc% is not clearly above chance (2.5%)"
echo "adpsgd with a dead worker: both survivors finished, servers' model $acc%"
passed=$((passed + 1))

# 2. allreduce: the same steps on both workers, the same model.
start_workers allreduce 2 --mode=allreduce --epochs=1 --log_every=1000 \
  --local_learning_rate=0.1
wait "${WORKER_PIDS[0]}" || fail "allreduce worker 0 exited with an error"
wait "${WORKER_PIDS[1]}" || fail "allreduce worker 1 exited with an error"
steps0=$(sed -n 's/^worker 0 done: \([0-9]*\) steps.*/\1/p' "$TMP/allreduce-0.log")
steps1=$(sed -n 's/^worker 1 done: \([0-9]*\) steps.*/\1/p' "$TMP/allreduce-1.log")
[ -n "$steps0" ] && [ "$steps0" = "$steps1" ] ||
  fail "allreduce workers ran $steps0 and $steps1 steps"
a0=$(sed -n 's/^worker 0 held-out frame accuracy: //p' "$TMP/allreduce-0.log")
a1=$(sed -n 's/^worker 1 held-out frame accuracy: //p' "$TMP/allreduce-1.log")
[ -n "$a0" ] && [ "$a0" = "$a1" ] ||
  fail "allreduce workers end with different models ($a0 vs $a1)"
echo "allreduce: $steps0 steps on both workers, both at $a0"
passed=$((passed + 1))

echo "$passed passed, 0 failed"
