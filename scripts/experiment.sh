#!/usr/bin/env bash
# The asgd experiment: trains the same model on the same corpus in several
# modes and worker counts, and writes the results to $OUT:
#   results.csv     held-out accuracy against wall time and frames, per run
#   runs.csv        one line per run: wall time, final accuracy, pushes
#   table.md        time to accuracy targets with scaling efficiency, final
#                   accuracy per mode, and the straggler runs
#   accuracy_vs_time.png, accuracy_vs_frames.png, straggler.png
# Grid: sgd (1 worker, local SGD), asgd and sync for each worker count, plus
# asgd with one worker $SLOWDOWN x slower, with a static partition and with
# the shared minibatch pool.
#
# Settings (environment variables):
#   OUT        results directory (default docs/results/cpu-$(nproc)core)
#   WORKDIR    corpus, logs (default /tmp/asgd-experiment)
#   WORKERS    worker counts (default "1 2 4")
#   EPOCHS     passes over the training data per run (default 2)
#   TARGETS    accuracy targets in % (default "60 70 75")
#   SLOWDOWN   straggler factor (default 3)
#   HIDDEN, LEARNING_RATE, BATCH  model and optimizer (512,512 / 0.05 / 256)
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-docs/results/cpu-$(nproc)core}
WORKDIR=${WORKDIR:-/tmp/asgd-experiment}
WORKERS=${WORKERS:-"1 2 4"}
EPOCHS=${EPOCHS:-2}
TARGETS=${TARGETS:-"60 70 75"}
SLOWDOWN=${SLOWDOWN:-3}
HIDDEN=${HIDDEN:-512,512}
LEARNING_RATE=${LEARNING_RATE:-0.05}
BATCH=${BATCH:-256}
NUM_SERVERS=2
EVAL_FLAGS="--eval_every_s=3 --eval_frames=5000"

source scripts/lib.sh
asgd_build gnuplot-nox
CORPUS="$WORKDIR/corpus"
asgd_corpus "$CORPUS"
rm -rf "$WORKDIR/runs"
mkdir -p "$WORKDIR/runs" "$OUT"

# run NAME MODE WORKERS SLOW POOL: one training run; logs in runs/NAME.
run() {
  local name=$1 mode=$2 n=$3 slow=$4 pool=$5
  local dir="$WORKDIR/runs/$name" lr=$LEARNING_RATE server_flags=()
  if [ "$mode" = sync ]; then
    # Synchronous steps average n gradients: scale the rate with n.
    lr=$(python3 -c "print($LEARNING_RATE * $n)")
    server_flags+=(--sync_workers="$n")
  fi
  echo "== run $name: mode $mode, $n workers, straggler $slow, pool $pool"
  asgd_start_servers $NUM_SERVERS "$dir" --num_shards=1 --hidden="$HIDDEN" \
    --learning_rate="$lr" --log_every_s=0 "${server_flags[@]}"
  local start pids=() w
  start=$(date +%s.%N)
  for ((w = 0; w < n; w++)); do
    local flags=(--servers="$SERVERS" --corpus="$CORPUS" --mode="$mode"
                 --worker_index=$w --num_workers="$n" --epochs="$EPOCHS"
                 --batch_size="$BATCH" --log_every=500)
    [ $w -eq 0 ] && flags+=($EVAL_FLAGS)
    [ "$slow" = 1 ] && [ $w -eq $((n - 1)) ] && flags+=(--slowdown="$SLOWDOWN")
    [ "$pool" = 1 ] && flags+=(--minibatch_pool)
    "$BIN/worker/asgd_worker" "${flags[@]}" >"$dir/worker-$w.log" 2>&1 &
    pids+=($!)
    ASGD_PIDS+=($!)
  done
  for w in "${pids[@]}"; do
    wait "$w" || { echo "a worker of $name failed:" >&2; tail -5 "$dir"/worker-*.log >&2; exit 1; }
  done
  local wall
  wall=$(python3 -c "import time; print(round(time.time() - $start, 2))")
  "$BIN/worker/asgd_eval" --servers="$SERVERS" --corpus="$CORPUS" >"$dir/eval.log"
  asgd_cleanup
  echo "$name,$mode,$n,$slow,$pool,$wall" >>"$WORKDIR/runs/index.csv"
  echo "   $(tail -1 "$dir/eval.log") in $wall s"
}

echo "name,mode,workers,straggler,pool,wall_seconds" >"$WORKDIR/runs/index.csv"
run sgd-1 sgd 1 0 0
for n in $WORKERS; do
  run "asgd-$n" asgd "$n" 0 0
  [ "$n" -gt 1 ] && run "sync-$n" sync "$n" 0 0
done
straggler_n=2
run "asgd-$straggler_n-straggler" asgd $straggler_n 1 0
run "asgd-$straggler_n-straggler-pool" asgd $straggler_n 1 1

cores=$(nproc)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
python3 scripts/experiment_report.py --runs "$WORKDIR/runs" --out "$OUT" \
  --targets "$TARGETS" --machine "$cores cores, $cpu, no GPU" \
  --command "EPOCHS=$EPOCHS WORKERS=\"$WORKERS\" scripts/experiment.sh" \
  --settings "model 440-$(echo "$HIDDEN" | tr , -)-40, batch $BATCH, lr $LEARNING_RATE (sync: lr x workers), $NUM_SERVERS servers x 1 shard, $EPOCHS epochs"
echo "== results in $OUT"
