#!/usr/bin/env bash
# The pipeline mode through the real binaries: two servers hold the model,
# three asgd_worker processes are the stages of one pipeline (each started
# with --stage_port=0; the port it logs is the previous stage's
# --next_stage).
#  1. Three stages, full depth, two epochs: every stage ends with its done
#     line and the configured delays (2, 1 and 0 updates), stage 0 logs
#     held-out evaluations run through the pipeline, and the model the
#     stages handed to the servers, read by asgd_eval, is well above the
#     initial model's accuracy; stage 0's --save_model file is that model.
#  2. The last stage is killed (SIGKILL) mid-run: stages 0 and 1 end within
#     seconds with an error naming the stage that went away, and the servers
#     keep their model (nothing half-trained is handed off).
#  3. Two pipelines (--num_workers=2) of two stages each, their weights on
#     the servers (--pipeline_weights=servers): every stage's updates reach
#     the servers, and the servers' model is well above the initial one.
#  4. Refused, with a message naming what is wrong: a stage outside the
#     plan, a depth past the stages, a bad plan, the last stage with a
#     --next_stage, stage 0 without one, --num_workers with local weights,
#     an unknown --pipeline_weights, --backend=cuda on a machine without a
#     GPU (or a build without CUDA: the reason is given), and
#     a stage whose plan differs from its neighbour's (refused by the
#     neighbour when the stream opens).
# Usage: pipeline_binary_test.sh SERVER WORKER EVAL MAKE_CORPUS
set -euo pipefail
SERVER=$1 WORKER=$2 EVAL=$3 MAKE_CORPUS=$4
source "$(dirname "$0")/binary_test_lib.sh" pipeline

"$MAKE_CORPUS" --out="$TMP/corpus" --num_train=40 --num_heldout=8 --jobs=2 \
  --noprogress >"$TMP/corpus.log" 2>&1 || fail "make_corpus"

POOL_FLAGS=(--num_shards=1 --hidden=64,64 --learning_rate=0.1 --log_every_s=0)

# accuracy NAME: the servers' model's held-out accuracy (asgd_eval).
accuracy() {
  "$EVAL" --servers="$SERVERS" --corpus="$TMP/corpus" >"$TMP/eval-$1.log" 2>&1 ||
    fail "asgd_eval $1"
  sed -n 's/^held-out frame accuracy: \([0-9.]*\)%$/\1/p' "$TMP/eval-$1.log"
}

# start_stages NAME FLAGS...: stages 2, 1, 0 of a 3-stage pipeline (each
# waits for the port of the next; STAGES=n for another count); sets
# STAGE_PIDS (by stage).
start_stages() {
  local name=$1 s next=() port last=$((${STAGES:-3} - 1))
  shift
  STAGE_PIDS=()
  for ((s = last; s >= 0; s--)); do
    "$WORKER" --servers="$SERVERS" --corpus="$TMP/corpus" --backend=cpu \
      --mode=pipeline --stages="${STAGES:-3}" --stage=$s --batch_size=64 \
      --connect_timeout_s=60 "${next[@]}" "$@" >"$TMP/$name-$s.log" 2>&1 &
    STAGE_PIDS[$s]=$!
    PIDS+=($!)
    if [ "$s" -gt 0 ]; then
      wait_for "stage $s to listen" grep -qs "on port [0-9]" "$TMP/$name-$s.log"
      port=$(sed -n 's/.* on port \([0-9]*\)$/\1/p' "$TMP/$name-$s.log")
      next=(--next_stage="127.0.0.1:$port")
    fi
  done
}

passed=0
# 1. Three stages train.
start_servers train "${POOL_FLAGS[@]}"
before=$(accuracy train-before)
start_stages train --epochs=2 --log_every=100 --eval_every=150 \
  --save_model="$TMP/pipeline.model"
for s in 0 1 2; do
  wait "${STAGE_PIDS[$s]}" || fail "stage $s exited with an error"
done
# (An evaluation in flight takes a training minibatch's place: a few updates
# come sooner, never later.)
grep -Eq "^stage 0 done: 464 minibatches .*delays \{2: [0-9]+, 1: [0-9]+, 0: [0-9]+\}, at most 3 in flight" \
  "$TMP/train-0.log" || fail "stage 0's done line"
grep -q "^worker 0 done: 464 steps, 0 pushes, .*, a pipeline of 3 stages" \
  "$TMP/train-0.log" || fail "stage 0's summary"
[ "$(grep -c "^worker 0 eval t=.* held-out frame accuracy: " "$TMP/train-0.log")" = 3 ] ||
  fail "stage 0 did not evaluate at steps 150, 300 and 450"
grep -Eq "^stage 1 done: 464 minibatches .*delays \{1: [0-9]+, 0: [0-9]+\}, at most 2 in flight" \
  "$TMP/train-1.log" || fail "stage 1's done line"
grep -q "^stage 2 done: 464 minibatches .*delays {0: 464}, at most 1 in flight" \
  "$TMP/train-2.log" || fail "stage 2's done line"
grep -q "^worker 0 step 400 epoch" "$TMP/train-0.log" ||
  fail "no progress lines on stage 0"
grep -q "^stage 1 minibatch 400 busy" "$TMP/train-1.log" ||
  fail "no progress lines on stage 1"
after=$(accuracy train-after)
python3 -c "import sys; sys.exit(0 if $after > $before + 10 else 1)" ||
  fail "the pipeline's model went from $before% to $after%"
# Stage 0 saved the servers' model: the same accuracy from the file.
grep -q "^worker 0: saved model to $TMP/pipeline.model" "$TMP/train-0.log" ||
  fail "stage 0 did not save the model"
"$EVAL" --model="$TMP/pipeline.model" --corpus="$TMP/corpus" \
  >"$TMP/eval-saved.log" 2>&1 || fail "asgd_eval of the saved model"
grep -q "^held-out frame accuracy: $after%" "$TMP/eval-saved.log" ||
  fail "the saved model is not the servers' ($after%)"
echo "three stages: delays 2/1/0 as configured, model $before% -> $after%"
passed=$((passed + 1))

# 2. The last stage dies.
start_servers kill "${POOL_FLAGS[@]}"
before=$(accuracy kill-before)
start_stages kill --epochs=0 --max_steps=1000000 --log_every=50
wait_for "stage 2 to train" grep -q "^stage 2 minibatch 100 " "$TMP/kill-2.log"
kill -9 "${STAGE_PIDS[2]}"
for s in 0 1; do
  rc=0
  wait "${STAGE_PIDS[$s]}" || rc=$?
  [ "$rc" -ne 0 ] || fail "stage $s ended well after stage 2 died"
done
grep -q "UNAVAILABLE: stage 2 at 127.0.0.1:[0-9]*" "$TMP/kill-1.log" ||
  fail "stage 1's error does not name stage 2"
grep -q "stage 1 at 127.0.0.1:[0-9]* .*stage 1 failed" "$TMP/kill-0.log" ||
  fail "stage 0's error does not name stage 1's failure"
if grep -q "handed to the servers" "$TMP"/kill-*.log; then
  fail "a stage handed off after the pipeline broke"
fi
after=$(accuracy kill-after)
[ "$after" = "$before" ] || fail "the servers' model changed: $before% -> $after%"
echo "a dead stage: the others ended with its error, the servers kept their model"
passed=$((passed + 1))

# 3. Two pipelines of two stages train the servers' model together.
start_servers replicas "${POOL_FLAGS[@]}"
before=$(accuracy replicas-before)
all=()
for r in 0 1; do
  STAGES=2 start_stages "replicas$r" --epochs=2 --log_every=100 \
    --pipeline_weights=servers --num_workers=2 --worker_index=$r
  all+=("${STAGE_PIDS[@]}")
done
for pid in "${all[@]}"; do wait "$pid" || fail "a replica's stage exited with an error"; done
for r in 0 1; do
  for s in 0 1; do
    grep -Eq "^stage $s done: [0-9]+ minibatches .*; [0-9]+ updates applied by the servers, 0 dropped or refused, [0-9]+ pulls" \
      "$TMP/replicas$r-$s.log" || fail "replica $r stage $s's done line"
  done
  grep -q "^worker $r done: .*, a pipeline of 2 stages" "$TMP/replicas$r-0.log" ||
    fail "replica $r's summary"
done
after=$(accuracy replicas-after)
python3 -c "import sys; sys.exit(0 if $after > $before + 10 else 1)" ||
  fail "two replicas took the servers' model from $before% to $after%"
echo "two pipelines on the servers' weights: model $before% -> $after%"
passed=$((passed + 1))

# 4. Refusals.
refused() {
  local name=$1 want=$2
  shift 2
  if "$WORKER" --servers="$SERVERS" --corpus="$TMP/corpus" --backend=cpu \
       --mode=pipeline --connect_timeout_s=5 --max_steps=5 "$@" \
       >"$TMP/$name.log" 2>&1; then
    fail "$name: the worker did not refuse"
  fi
  grep -q -- "$want" "$TMP/$name.log" || fail "$name: no '$want' in the error"
}
refused stage "--stage=3 must be in \[0, 3)" --stages=3 --stage=3
refused depth "--pipeline_depth=4 must be in \[1, 3\]" --stages=3 --stage=2 \
  --pipeline_depth=4
refused plan "stage_plan\|layer" --stage_plan=0,2 --stage=1
refused last "the last stage takes no --next_stage" --stages=3 --stage=2 \
  --next_stage=127.0.0.1:1
refused first "stage 0 needs --next_stage" --stages=3 --stage=0
refused workers "give each stage --stage, not --num_workers" --stages=2 \
  --num_workers=2
refused weights "--pipeline_weights=shared: want local or servers" --stages=2 \
  --pipeline_weights=shared
if ! nvidia-smi -L >/dev/null 2>&1; then  # no GPU here: cuda says why
  refused cuda "cannot use the cuda backend\|built without CUDA support" \
    --stages=2 --stage=1 --backend=cuda
fi
# Stage 1 of a 2-stage plan listens; a stage 0 with another plan calls it.
"$WORKER" --servers="$SERVERS" --corpus="$TMP/corpus" --backend=cpu \
  --mode=pipeline --stage_plan=0-1,2 --stage=1 --connect_timeout_s=20 \
  >"$TMP/other-1.log" 2>&1 &
other=$!
PIDS+=($other)
wait_for "stage 1 to listen" grep -q "on port [0-9]" "$TMP/other-1.log"
port=$(sed -n 's/.* on port \([0-9]*\)$/\1/p' "$TMP/other-1.log")
refused mismatch "FAILED_PRECONDITION: .*stage plan" --stage_plan=0,1-2 \
  --stage=0 --next_stage="127.0.0.1:$port"
rc=0
wait "$other" || rc=$?
[ "$rc" -ne 0 ] || fail "the listening stage ended well without its pipeline"
echo "refusals: stage, depth, plan, last, first, workers, weights, cuda, a mismatched plan"
passed=$((passed + 1))

echo "$passed passed, 0 failed"
