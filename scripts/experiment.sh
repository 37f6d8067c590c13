#!/usr/bin/env bash
# The asgd experiment: trains models on the built-in corpus in several modes
# and worker counts, and writes the results to $OUT:
#   results.csv     held-out accuracy against wall time and frames, per run
#   runs.csv        one line per run: wall time, final accuracy, pushes
#   table.md        time to accuracy targets with scaling efficiency, final
#                   accuracy per mode, and the straggler runs
#   accuracy_vs_time.png, accuracy_vs_frames.png, straggler.png
#   decentralized.png, decentralized_straggler.png (with DECENTRALIZED=1)
# Grids ($GRID, any of):
# scaling: sgd (1 worker, local SGD), asgd and sync for each worker count, plus
# asgd with one worker $SLOWDOWN x slower, with a static partition and with
# the shared minibatch pool.
# decentralized: at $DECENTRALIZED_WORKERS workers: asgd through the servers,
# AD-PSGD on a fixed ring, on a random ring and with delay-by-one, and ring
# allreduce, each also with its last worker $SLOWDOWN x slower. The
# decentralized runs pull their initial model from the servers and worker 0
# hands its final model back, so every run is evaluated the same way
# (asgd_eval on the servers).
# consensus: at each of $CONSENSUS_WORKERS workers: asgd through the servers,
# EASGD and ADMM (each worker its own model, pulled toward the servers'
# consensus every --consensus_every minibatches), and at the last count the
# same with its last worker $SLOWDOWN x slower, and EASGD and ADMM with their
# last worker killed (SIGKILL) halfway through its epochs and restarted in
# its place for the other half (straggler column 2: "restarted").
# pipeline: the model's layers split into each of $PIPELINE_STAGES stages (one
# process each, balanced by training work; pipelined back-propagation with
# full depth), and at the largest count the same without pipelining (depth
# 1) and with its last stage $SLOWDOWN x slower; two pipelines of two
# stages with their weights on the servers (data-parallel through them);
# against local SGD and ASGD with 2 workers. Stage 0 evaluates through the
# pipeline; local stages hand their layers to the servers at the end.
# methods: every way asgd parallelizes training on one page, the same model
# and data: local SGD and ASGD with 1 worker; at each of $METHOD_WORKERS
# workers ASGD through the servers, AD-PSGD on a fixed ring, ring allreduce,
# EASGD and ADMM, each also with its last worker $SLOWDOWN x slower; the
# pipeline at each of $METHOD_STAGES stages, and at more than one stage also
# with stage $METHOD_SLOW_STAGE $SLOWDOWN x slower.
# models: each model of $MODELS trained by 2 ASGD workers through 2 servers
# for the same wall-clock budget of $BUDGET_S seconds, side by side.
# pushes: ASGD at $PUSH_WORKERS workers once per push encoding of
# $PUSH_ENCODINGS (float32 against compressed gradients, same seeds).
# The first three grids train $MODEL (the model is a dimension: run them once
# per model, e.g. MODEL=lstm GRID=decentralized).
#
# Settings (environment variables):
#   OUT        results directory (default docs/results/cpu-$(nproc)core)
#   WORKDIR    corpus, logs (default /tmp/asgd-experiment)
#   WORKERS    worker counts (default "1 2 4")
#   EPOCHS     passes over the training data per run (default 2)
#   TARGETS    accuracy targets in % (default "60 70 75")
#   SLOWDOWN   straggler factor (default 3)
#   GRID       grids to run (default "scaling decentralized"; also consensus,
#              pipeline, methods, models, pushes)
#   MODEL      dnn, cnn, lstm or blstm for the scaling and decentralized grids
#              (default dnn); MODEL_FLAGS: more asgd_server model flags
#   MODELS     the models grid's models (default "dnn cnn lstm blstm"); each
#              model m takes its server flags from MODEL_FLAGS_m if set
#              (e.g. MODEL_FLAGS_lstm="--model=lstm --lstm_cells=128
#              --learning_rate=0.5"), else
#              --model=m, and its worker flags from WORKER_FLAGS_m;
#              BUDGET_S its wall-clock budget (default 240)
#   WORKER_FLAGS  more asgd_worker flags for every run
#   HIDDEN, LEARNING_RATE, BATCH  model and optimizer (auto / 0.05 / 256)
#   DECENTRALIZED          0: skip the decentralized grid (default 1)
#   DECENTRALIZED_WORKERS  its worker count (default 4)
#   DELAY_TOPOLOGY         ring of the delay-by-one runs (default fixed_ring)
#   CONSENSUS_WORKERS  the consensus grid's worker counts (default "2 4");
#                      CONSENSUS_FLAGS: more asgd_worker flags of its easgd
#                      and admm runs (e.g. "--consensus_every=8")
#   PIPELINE_STAGES  the pipeline grid's stage counts (default "1 2 3")
#   METHOD_WORKERS   the methods grid's worker counts (default "2 4")
#   METHOD_STAGES    its pipeline stage counts (default "1 2 3")
#   METHOD_SLOW_STAGE  its slowed pipeline stage (default 1: the busiest of
#                    the demo DNN's balanced cuts at 2 and 3 stages)
#   PUSH_WORKERS    the pushes grid's worker count (default 4)
#   PUSH_ENCODINGS  its push encodings, any of fp32 bf16 onebit topk (default
#                   "fp32 onebit"); TOP_K_FRACTION for topk (default 0.01)
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-docs/results/cpu-$(nproc)core}
WORKDIR=${WORKDIR:-/tmp/asgd-experiment}
WORKERS=${WORKERS:-"1 2 4"}
EPOCHS=${EPOCHS:-2}
TARGETS=${TARGETS:-"60 70 75"}
SLOWDOWN=${SLOWDOWN:-3}
HIDDEN=${HIDDEN:-auto}
GRID=${GRID:-"scaling decentralized"}
MODEL=${MODEL:-dnn}
MODEL_FLAGS=${MODEL_FLAGS:-}
MODELS=${MODELS:-"dnn cnn lstm blstm"}
BUDGET_S=${BUDGET_S:-240}
WORKER_FLAGS=${WORKER_FLAGS:-}
LEARNING_RATE=${LEARNING_RATE:-0.05}
BATCH=${BATCH:-256}
DECENTRALIZED=${DECENTRALIZED:-1}
DECENTRALIZED_WORKERS=${DECENTRALIZED_WORKERS:-4}
DELAY_TOPOLOGY=${DELAY_TOPOLOGY:-fixed_ring}
CONSENSUS_WORKERS=${CONSENSUS_WORKERS:-"2 4"}
PIPELINE_STAGES=${PIPELINE_STAGES:-"1 2 3"}
METHOD_WORKERS=${METHOD_WORKERS:-"2 4"}
METHOD_STAGES=${METHOD_STAGES:-"1 2 3"}
METHOD_SLOW_STAGE=${METHOD_SLOW_STAGE:-1}
CONSENSUS_FLAGS=${CONSENSUS_FLAGS:-}
PUSH_WORKERS=${PUSH_WORKERS:-4}
PUSH_ENCODINGS=${PUSH_ENCODINGS:-"fp32 onebit"}
TOP_K_FRACTION=${TOP_K_FRACTION:-0.01}
NUM_SERVERS=2
EVAL_FLAGS="--eval_every_s=3 --eval_frames=5000"

source scripts/lib.sh
asgd_build gnuplot-nox
CORPUS="$WORKDIR/corpus"
asgd_corpus "$CORPUS"
rm -rf "$WORKDIR/runs"
mkdir -p "$WORKDIR/runs" "$OUT"
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

# The servers' model flags of the next runs (the models grid changes them).
RUN_MODEL=$MODEL
read -r -a RUN_MODEL_FLAGS <<<"--model=$MODEL --hidden=$HIDDEN $MODEL_FLAGS"
read -r -a EXTRA_WORKER_FLAGS <<<"$WORKER_FLAGS"

# run NAME MODE WORKERS SLOW POOL [WORKER FLAGS...]: one training run; logs
# in runs/NAME. SLOW 1: the last worker $SLOWDOWN x slower; 2: the last
# worker killed once its progress line says it did half its epochs, and
# started again with the same index for the other half (worker-N.log, then
# worker-N-restarted.log). The decentralized modes (adpsgd, allreduce) take their
# learning rate from the servers' learning_rate attribute and find each
# other through peer port files: each worker writes its free port to
# runs/NAME/peer.W, and once all exist the script writes runs/NAME/peers,
# which every worker waits for.
run() {
  local name=$1 mode=$2 n=$3 slow=$4 pool=$5
  shift 5
  local extra=("$@")
  local dir="$WORKDIR/runs/$name" lr=$LEARNING_RATE server_flags=()
  local peers=0
  case "$mode" in adpsgd | allreduce) peers=1 ;; esac
  if [ "$mode" != asgd ] && [ "$mode" != sgd ]; then
    # Synchronous steps average n gradients: scale the rate with n. So do the
    # AD-PSGD, EASGD and ADMM steps: averaging, the mean model moves by lr x
    # the mean of the n workers' gradients per round, which lr x n makes one
    # full step each (as much as ASGD's n pushes). (easgd and admm take the
    # servers' rate as their local one; the servers apply their pushes
    # without it.)
    lr=$(python3 -c "print($LEARNING_RATE * $n)")
  fi
  [ "$mode" = sync ] && server_flags+=(--sync_workers="$n")
  [ "$mode" = admm ] && server_flags+=(--admm_slots="$n")
  echo "== run $name: mode $mode, $n workers, straggler $slow, pool $pool"
  # The model's flags last: they may override the learning rate.
  asgd_start_servers $NUM_SERVERS "$dir" --num_shards=1 \
    --learning_rate="$lr" --log_every_s=0 "${server_flags[@]}" \
    "${RUN_MODEL_FLAGS[@]}"
  local start pids=() w
  if [ "$pool" = 1 ]; then
    # The pool's run id: a new secret for each run, shared by its workers.
    (umask 077; head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/pool_run_id")
  fi
  start=$(date +%s.%N)
  local restart_flags=()
  for ((w = 0; w < n; w++)); do
    local flags=(--servers="$SERVERS" --corpus="$CORPUS" --mode="$mode"
                 --worker_index=$w --num_workers="$n" --epochs="$EPOCHS"
                 --batch_size="$BATCH" --log_every=500)
    if [ "$slow" = 2 ] && [ $w -eq $((n - 1)) ]; then
      flags+=(--log_every=10)  # the last of a repeated flag wins
      restart_flags=("${flags[@]}" "${EXTRA_WORKER_FLAGS[@]}" "${extra[@]}")
    fi
    [ $w -eq 0 ] && flags+=($EVAL_FLAGS)
    [ "$slow" = 1 ] && [ $w -eq $((n - 1)) ] && flags+=(--slowdown="$SLOWDOWN")
    [ "$pool" = 1 ] && flags+=(--minibatch_pool --pool_run_id_file="$dir/pool_run_id")
    [ "$peers" = 1 ] && flags+=(--peer_host=127.0.0.1 --peer_port=0
                                --peer_port_file="$dir/peer.$w"
                                --peers_file="$dir/peers")
    "$BIN/worker/asgd_worker" "${flags[@]}" "${EXTRA_WORKER_FLAGS[@]}" \
      "${extra[@]}" >"$dir/worker-$w.log" 2>&1 &
    pids+=($!)
    ASGD_PIDS+=($!)
  done
  [ "$peers" = 1 ] && write_peers_file "$dir" "$n" "${pids[@]}"
  [ "$slow" = 2 ] && restart_last_worker "$dir" "$n"
  for w in "${pids[@]}"; do
    wait "$w" || { echo "a worker of $name failed:" >&2; tail -5 "$dir"/worker-*.log >&2; exit 1; }
  done
  finish_run "$name" "$mode" "$n" "$slow" "$pool" "$start"
}

# restart_last_worker DIR N: (run's, with SLOW 2) waits until worker N-1's
# progress line reaches half of $EPOCHS epochs, kills it (SIGKILL) and starts
# it again from restart_flags for the other half; updates pids.
restart_last_worker() {
  local dir=$1 last=$(($2 - 1)) half i
  half=$(python3 -c "print($EPOCHS / 2)")
  for ((i = 0; i < 6000; i++)); do
    python3 - "$dir/worker-$last.log" "$half" <<'PY' && break
import re, sys
epochs = [float(m) for m in re.findall(r"epoch ([0-9.]+)", open(sys.argv[1]).read())]
sys.exit(0 if epochs and max(epochs) >= float(sys.argv[2]) else 1)
PY
    kill -0 "${pids[$last]}" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "${pids[$last]}" 2>/dev/null || true
  wait "${pids[$last]}" 2>/dev/null || true
  echo "   worker $last killed at $(grep -o 'step [0-9]* epoch [0-9.]*' "$dir/worker-$last.log" | tail -1); restarted for $half epochs"
  "$BIN/worker/asgd_worker" "${restart_flags[@]}" --epochs="$half" \
    >"$dir/worker-$last-restarted.log" 2>&1 &
  pids[$last]=$!
  ASGD_PIDS+=($!)
}

# finish_run NAME MODE WORKERS SLOW POOL START: after a run's workers ended,
# its wall time since START, the servers' model evaluated (runs/NAME/
# eval.log), the servers stopped, the run's line in the index.
finish_run() {
  local dir="$WORKDIR/runs/$1" wall
  wall=$(python3 -c "import time; print(round(time.time() - $6, 2))")
  "$BIN/worker/asgd_eval" --servers="$SERVERS" --corpus="$CORPUS" >"$dir/eval.log"
  asgd_cleanup
  echo "$1,$2,$3,$4,$5,$wall,$RUN_MODEL" >>"$WORKDIR/runs/index.csv"
  echo "   $(tail -1 "$dir/eval.log") in $wall s"
}

# write_peers_file DIR N PIDS...: waits for the N workers' peer port files
# (up to 60 s each, failing if a worker exits) and writes DIR/peers
# atomically: every worker's peer address in worker-index order.
write_peers_file() {
  local dir=$1 n=$2 w i addresses=()
  shift 2
  local worker_pids=("$@")
  for ((w = 0; w < n; w++)); do
    for ((i = 0; i < 600; i++)); do
      [ -s "$dir/peer.$w" ] && break
      kill -0 "${worker_pids[$w]}" 2>/dev/null ||
        { echo "worker $w of $dir exited:" >&2; tail -5 "$dir/worker-$w.log" >&2; exit 1; }
      sleep 0.1
    done
    [ -s "$dir/peer.$w" ] || { echo "worker $w of $dir has no peer port" >&2; exit 1; }
    addresses+=("127.0.0.1:$(cat "$dir/peer.$w")")
  done
  (IFS=,; echo "${addresses[*]}") >"$dir/peers.tmp"
  mv "$dir/peers.tmp" "$dir/peers"
}

# run_pipeline NAME STAGES DEPTH SLOW [REPLICAS WEIGHTS SLOW_STAGE]: one
# pipeline run (index mode pipeline, workers: the pipelines), REPLICAS
# pipelines (default 1) with --pipeline_weights=WEIGHTS (default local); with
# SLOW 1, stage SLOW_STAGE (default the last) $SLOWDOWN x slower. Pipeline
# r's stage 0 logs to runs/NAME/worker-r.log, its stage s > 0 to stage-s.log
# (r = 0) or stage-r-s.log. The stages start last to first, each told the
# port its successor logged.
run_pipeline() {
  local name=$1 stages=$2 depth=$3 slow=$4 replicas=${5:-1} weights=${6:-local}
  local slow_stage=${7:-$(($2 - 1))}
  local dir="$WORKDIR/runs/$name" s r i next=() pids=() log port start
  echo "== run $name: $replicas pipeline(s) of $stages stages, depth $depth, weights $weights, straggler $slow (stage $slow_stage)"
  asgd_start_servers $NUM_SERVERS "$dir" --num_shards=1 \
    --learning_rate="$LEARNING_RATE" --log_every_s=0 "${RUN_MODEL_FLAGS[@]}"
  start=$(date +%s.%N)
  for ((r = 0; r < replicas; r++)); do
    next=()
    for ((s = stages - 1; s >= 0; s--)); do
      log="$dir/stage-$s.log"
      [ "$r" -gt 0 ] && log="$dir/stage-$r-$s.log"
      [ "$s" = 0 ] && log="$dir/worker-$r.log"
      local flags=(--servers="$SERVERS" --corpus="$CORPUS" --mode=pipeline
                   --stages="$stages" --stage=$s --pipeline_depth="$depth"
                   --epochs="$EPOCHS" --batch_size="$BATCH" --log_every=500
                   --backend=cpu --pipeline_weights="$weights"
                   --worker_index=$r --num_workers="$replicas")
      [ "$s" = 0 ] && [ "$r" = 0 ] && flags+=($EVAL_FLAGS)
      [ "$slow" = 1 ] && [ "$s" = "$slow_stage" ] && flags+=(--slowdown="$SLOWDOWN")
      "$BIN/worker/asgd_worker" "${flags[@]}" "${next[@]}" \
        "${EXTRA_WORKER_FLAGS[@]}" >"$log" 2>&1 &
      pids+=($!)
      ASGD_PIDS+=($!)
      if [ "$s" -gt 0 ]; then
        for ((i = 0; i < 600; i++)); do
          grep -qs " on port [0-9]" "$log" && break
          kill -0 "${pids[-1]}" 2>/dev/null || { echo "stage $s of $name exited:" >&2; tail -5 "$log" >&2; exit 1; }
          sleep 0.1
        done
        port=$(sed -n 's/.* on port \([0-9]*\)$/\1/p' "$log")
        [ -n "$port" ] || { echo "stage $s of $name logged no port" >&2; exit 1; }
        next=(--next_stage="127.0.0.1:$port")
      fi
    done
  done
  for s in "${pids[@]}"; do
    wait "$s" || { echo "a stage of $name failed:" >&2; tail -5 "$dir"/stage-*.log "$dir"/worker-*.log >&2; exit 1; }
  done
  finish_run "$name" pipeline "$replicas" "$slow" 0 "$start"
}

has_grid() { case " $GRID " in *" $1 "*) return 0 ;; esac; return 1; }
# ran NAME: whether a run of that name is done (grids share baselines).
ran() { grep -q "^$1," "$WORKDIR/runs/index.csv"; }

echo "name,mode,workers,straggler,pool,wall_seconds,model" >"$WORKDIR/runs/index.csv"
if has_grid scaling; then
  run sgd-1 sgd 1 0 0
  for n in $WORKERS; do
    run "asgd-$n" asgd "$n" 0 0
    [ "$n" -gt 1 ] && run "sync-$n" sync "$n" 0 0
  done
  straggler_n=2
  run "asgd-$straggler_n-straggler" asgd $straggler_n 1 0
  run "asgd-$straggler_n-straggler-pool" asgd $straggler_n 1 1
fi

if has_grid decentralized && [ "$DECENTRALIZED" = 1 ]; then
  # ASGD through the servers against the decentralized modes, at one worker
  # count, without and with a straggler (the last worker).
  d=$DECENTRALIZED_WORKERS
  for slow in 0 1; do
    suffix=""
    [ "$slow" = 1 ] && suffix="-straggler"
    if has_grid scaling && [[ " $WORKERS " == *" $d "* ]]; then
      [ "$slow" = 1 ] && run "asgd-$d$suffix" asgd "$d" 1 0
    else
      run "asgd-$d$suffix" asgd "$d" "$slow" 0
    fi
    run "adpsgd-fixed-$d$suffix" adpsgd "$d" "$slow" 0 --topology=fixed_ring
    run "adpsgd-random-$d$suffix" adpsgd "$d" "$slow" 0 --topology=random_ring
    run "adpsgd-delay-$d$suffix" adpsgd "$d" "$slow" 0 \
      --topology="$DELAY_TOPOLOGY" --delay_by_one
    run "allreduce-$d$suffix" allreduce "$d" "$slow" 0
  done
fi

if has_grid consensus; then
  # Consensus training against ASGD at each worker count.
  read -r -a consensus_flags <<<"$CONSENSUS_FLAGS"
  for n in $CONSENSUS_WORKERS; do
    ran "asgd-$n" || run "asgd-$n" asgd "$n" 0 0
    run "easgd-$n" easgd "$n" 0 0 "${consensus_flags[@]}"
    run "admm-$n" admm "$n" 0 0 "${consensus_flags[@]}"
    last=$n
  done
  ran "asgd-$last-straggler" || run "asgd-$last-straggler" asgd "$last" 1 0
  run "easgd-$last-straggler" easgd "$last" 1 0 "${consensus_flags[@]}"
  run "admm-$last-straggler" admm "$last" 1 0 "${consensus_flags[@]}"
  run "easgd-$last-restart" easgd "$last" 2 0 "${consensus_flags[@]}"
  run "admm-$last-restart" admm "$last" 2 0 "${consensus_flags[@]}"
fi

if has_grid pipeline; then
  ran sgd-1 || run sgd-1 sgd 1 0 0
  ran asgd-2 || run asgd-2 asgd 2 0 0
  for s in $PIPELINE_STAGES; do
    run_pipeline "pipeline-$s" "$s" "$s" 0
    last=$s
  done
  run_pipeline "pipeline-$last-depth1" "$last" 1 0
  run_pipeline "pipeline-$last-straggler" "$last" "$last" 1
  # The hybrid: two pipelines of two stages, their weights on the servers.
  run_pipeline "pipeline-2x2-servers" 2 2 0 2 servers
fi

if has_grid methods; then
  ran sgd-1 || run sgd-1 sgd 1 0 0
  ran asgd-1 || run asgd-1 asgd 1 0 0
  for n in $METHOD_WORKERS; do
    for slow in 0 1; do
      suffix=""
      [ "$slow" = 1 ] && suffix="-straggler"
      ran "asgd-$n$suffix" || run "asgd-$n$suffix" asgd "$n" "$slow" 0
      ran "adpsgd-fixed-$n$suffix" ||
        run "adpsgd-fixed-$n$suffix" adpsgd "$n" "$slow" 0 --topology=fixed_ring
      ran "allreduce-$n$suffix" || run "allreduce-$n$suffix" allreduce "$n" "$slow" 0
      ran "easgd-$n$suffix" || run "easgd-$n$suffix" easgd "$n" "$slow" 0
      ran "admm-$n$suffix" || run "admm-$n$suffix" admm "$n" "$slow" 0
    done
  done
  for s in $METHOD_STAGES; do
    ran "pipeline-$s" || run_pipeline "pipeline-$s" "$s" "$s" 0
    if [ "$s" -gt "$METHOD_SLOW_STAGE" ]; then
      run_pipeline "pipeline-$s-stage$METHOD_SLOW_STAGE-slow" "$s" "$s" 1 1 \
        local "$METHOD_SLOW_STAGE"
    fi
  done
fi

if has_grid models; then
  for m in $MODELS; do
    flags_var="MODEL_FLAGS_$m" worker_var="WORKER_FLAGS_$m"
    RUN_MODEL=$m
    read -r -a RUN_MODEL_FLAGS <<<"${!flags_var:---model=$m}"
    read -r -a model_worker_flags <<<"${!worker_var:-}"
    # Evaluations about 12 times per run, whatever the budget.
    run "$m" asgd 2 0 0 --epochs=0 --time_budget_s="$BUDGET_S" \
      --eval_every_s=$((BUDGET_S / 12)) "${model_worker_flags[@]}"
  done
fi

if has_grid pushes; then
  for e in $PUSH_ENCODINGS; do
    run "asgd-$PUSH_WORKERS-$e" asgd "$PUSH_WORKERS" 0 0 --push_encoding="$e" \
      --top_k_fraction="$TOP_K_FRACTION"
  done
fi

cores=$(nproc)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
# The command that repeats these runs: the settings each grid reads.
command="GRID=\"$GRID\""
settings="batch $BATCH, $NUM_SERVERS servers x 1 shard"
if has_grid scaling || has_grid decentralized || has_grid pushes ||
   has_grid consensus || has_grid pipeline || has_grid methods; then
  command+=" MODEL=$MODEL MODEL_FLAGS=\"$MODEL_FLAGS\" EPOCHS=$EPOCHS LEARNING_RATE=$LEARNING_RATE"
  has_grid scaling && command+=" WORKERS=\"$WORKERS\""
  settings+="; model $MODEL ($MODEL_FLAGS; see each run's server log), lr $LEARNING_RATE (sync, allreduce, adpsgd, easgd, admm: lr x workers), $EPOCHS epochs, straggler ${SLOWDOWN}x slower"
  has_grid decentralized && settings+=", delay-by-one on $DELAY_TOPOLOGY"
fi
if has_grid consensus; then
  command+=" CONSENSUS_WORKERS=\"$CONSENSUS_WORKERS\""
  [ -z "$CONSENSUS_FLAGS" ] || command+=" CONSENSUS_FLAGS=\"$CONSENSUS_FLAGS\""
  settings+="; consensus grid: easgd and admm at $CONSENSUS_WORKERS workers (${CONSENSUS_FLAGS:-default flags}; admm: servers with --admm_slots=workers), at the last count also with the last worker ${SLOWDOWN}x slower, and killed halfway through its epochs and restarted for the rest (restarted: its steps count that second life only)"
fi
if has_grid pipeline; then
  command+=" PIPELINE_STAGES=\"$PIPELINE_STAGES\""
  settings+="; pipeline grid: $PIPELINE_STAGES stages (balanced), full depth; depth 1 and a ${SLOWDOWN}x slower last stage at the largest"
fi
if has_grid methods; then
  command+=" METHOD_WORKERS=\"$METHOD_WORKERS\" METHOD_STAGES=\"$METHOD_STAGES\" METHOD_SLOW_STAGE=$METHOD_SLOW_STAGE"
  settings+="; methods grid: sgd and asgd at 1 worker; asgd, adpsgd (fixed ring), allreduce, easgd, admm at $METHOD_WORKERS workers, with and without a ${SLOWDOWN}x slower last worker; pipeline at $METHOD_STAGES stages (balanced, full depth), with and without stage $METHOD_SLOW_STAGE ${SLOWDOWN}x slower"
fi
if has_grid pushes; then
  command+=" PUSH_WORKERS=$PUSH_WORKERS PUSH_ENCODINGS=\"$PUSH_ENCODINGS\" TOP_K_FRACTION=$TOP_K_FRACTION"
  settings+="; pushes grid: ASGD, $PUSH_WORKERS workers, push encodings $PUSH_ENCODINGS (top-k fraction $TOP_K_FRACTION)"
fi
if has_grid models; then
  command+=" MODELS=\"$MODELS\" BUDGET_S=$BUDGET_S"
  settings+="; models grid: $BUDGET_S s each, 2 ASGD workers"
  for m in $MODELS; do
    flags_var="MODEL_FLAGS_$m" worker_var="WORKER_FLAGS_$m"
    [ -z "${!flags_var:-}" ] || command+=" $flags_var=\"${!flags_var}\""
    [ -z "${!worker_var:-}" ] || command+=" $worker_var=\"${!worker_var}\""
  done
fi
[ -z "$WORKER_FLAGS" ] || command+=" WORKER_FLAGS=\"$WORKER_FLAGS\""
python3 scripts/experiment_report.py --runs "$WORKDIR/runs" --out "$OUT" \
  --targets "$TARGETS" --grids "$GRID" --slowdown "$SLOWDOWN" \
  --machine "$cores cores, $cpu, no GPU; load average $load_start at the start, $load_end at the end" \
  --command "$command scripts/experiment.sh" --settings "$settings"
echo "== results in $OUT"
