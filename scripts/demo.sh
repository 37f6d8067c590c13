#!/usr/bin/env bash
# asgd demo: trains an acoustic model (a DNN by default; MODEL=cnn, lstm or
# blstm) with asynchronous SGD through a parameter-server pool, all on
# 127.0.0.1:
#   1. installs missing Debian packages and builds asgd,
#   2. generates the default speech corpus (cached in $ASGD_DEMO_DIR),
#   3. starts 2 server processes (2 shards each) and 2 workers,
#   4. prints the held-out frame accuracy of the trained model.
# Every process it started is stopped on exit, also on Ctrl-C.
#
# Settings (environment variables):
#   ASGD_DEMO_DIR  work directory (default /tmp/asgd-demo)
#   EPOCHS         passes of each worker over its half of the data (default 3)
#   NUM_WORKERS    workers (default 2)
#   NUM_SERVERS    server processes (default 2)
#   MODEL          dnn, cnn, lstm or blstm (default dnn)
#   HIDDEN         dense layer sizes (default: the model's, 512,512 for dnn)
#   MODEL_FLAGS    asgd_server model flags (default: sized for this corpus on
#                  a CPU: cnn "--conv_filters=8"; lstm "--lstm_layers=1
#                  --lstm_cells=128 --context=2"; blstm "--lstm_layers=1
#                  --lstm_cells=128"; see docs/results/models)
#   LEARNING_RATE  server learning rate (default 0.05; lstm 0.3, blstm 0.3)
#   WIRE_DTYPE     fp32 or bf16: encoding of gradients and weights on the wire
#                  (default fp32)
#   DATA           corpus (default) or kaldi: write the corpus as Kaldi data
#                  directories (compressed features, CMVN, pdf alignments) in
#                  $ASGD_DEMO_DIR/kaldi and train from those, then write the
#                  priors and the held-out log-likelihoods (asgd_forward)
#   PUSH_ENCODING  encoding of pushed gradients: fp32, bf16, onebit or topk
#                  (default: as WIRE_DTYPE); TOP_K_FRACTION for topk (0.01)
#   MINIBATCH_POOL 1: the workers take minibatches from the shared pool on
#                  server 0 (every worker holds all the data; EPOCHS passes
#                  over it in all) instead of each its own part (default 0).
#                  Each run draws a new secret run id for the pool
#                  ($ASGD_DEMO_DIR/pool_run_id, --pool_run_id_file).
set -euo pipefail
cd "$(dirname "$0")/.."

WORKDIR=${ASGD_DEMO_DIR:-/tmp/asgd-demo}
EPOCHS=${EPOCHS:-3}
NUM_WORKERS=${NUM_WORKERS:-2}
NUM_SERVERS=${NUM_SERVERS:-2}
MODEL=${MODEL:-dnn}
HIDDEN=${HIDDEN:-auto}
case "$MODEL" in
  cnn) default_flags="--conv_filters=8" default_lr=0.05 ;;
  lstm) default_flags="--lstm_layers=1 --lstm_cells=128 --context=2" default_lr=0.3 ;;
  blstm) default_flags="--lstm_layers=1 --lstm_cells=128" default_lr=0.3 ;;
  *) default_flags="" default_lr=0.05 ;;
esac
MODEL_FLAGS=${MODEL_FLAGS-$default_flags}
LEARNING_RATE=${LEARNING_RATE:-$default_lr}
WIRE_DTYPE=${WIRE_DTYPE:-fp32}
DATA=${DATA:-corpus}
case "$DATA" in
  corpus | kaldi) ;;
  *) echo "demo: DATA must be corpus or kaldi, not '$DATA'" >&2; exit 2 ;;
esac
PUSH_ENCODING=${PUSH_ENCODING:-$WIRE_DTYPE}
TOP_K_FRACTION=${TOP_K_FRACTION:-0.01}
MINIBATCH_POOL=${MINIBATCH_POOL:-0}
case "$MINIBATCH_POOL" in
  0 | 1) ;;
  *) echo "demo: MINIBATCH_POOL must be 0 or 1, not '$MINIBATCH_POOL'" >&2; exit 2 ;;
esac

source scripts/lib.sh
say() { echo "== $*"; }
started=$(date +%s)

say "installing missing packages (if any) and building asgd"
asgd_build
mkdir -p "$WORKDIR/logs"
CORPUS="$WORKDIR/corpus"
asgd_corpus "$CORPUS"
# What the workers and the evaluation read.
DATA_FLAGS=(--corpus="$CORPUS")
EVAL_FLAGS=(--corpus="$CORPUS")
if [ "$DATA" = kaldi ]; then
  KALDI="$WORKDIR/kaldi"
  if [ -f "$KALDI/heldout/feats.scp" ] && [ "$KALDI/heldout/feats.scp" -nt "$CORPUS/corpus.txt" ]; then
    say "using the Kaldi data directories in $KALDI"
  else
    say "writing the corpus as Kaldi data directories in $KALDI"
    "$BIN/kaldi/corpus_to_kaldi" --corpus="$CORPUS" --out="$KALDI"
  fi
  # Per-speaker means (cmvn.scp), then the training set's global statistics,
  # which worker 0 writes and the evaluation and asgd_forward read.
  rm -f "$KALDI/global_cmvn.mat"
  DATA_FLAGS=(--kaldi_data="$KALDI/train" --kaldi_alignments="$KALDI/train/pdf.ark"
              --kaldi_heldout_data="$KALDI/heldout"
              --kaldi_heldout_alignments="$KALDI/heldout/pdf.ark"
              --kaldi_global_cmvn="$KALDI/global_cmvn.mat")
  EVAL_FLAGS=(--kaldi_data="$KALDI/heldout" --kaldi_alignments="$KALDI/heldout/pdf.ark"
              --kaldi_global_cmvn="$KALDI/global_cmvn.mat")
fi

say "starting $NUM_SERVERS servers (2 shards each), model $MODEL; logs in $WORKDIR/logs"
# shellcheck disable=SC2086  # MODEL_FLAGS is a list of flags
asgd_start_servers "$NUM_SERVERS" "$WORKDIR/logs" --num_shards=2 \
  --model="$MODEL" --hidden="$HIDDEN" --learning_rate="$LEARNING_RATE" \
  $MODEL_FLAGS
for ((s = 0; s < NUM_SERVERS; s++)); do head -1 "$WORKDIR/logs/server-$s.log"; done

# The shared pool's run id: a new secret for this run, read by its workers
# only (the pool keeps one dataset per run id; see --pool_run_id_file).
POOL_FLAGS=(--pool_run_id_file="$WORKDIR/pool_run_id")
(umask 077; head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$WORKDIR/pool_run_id")
if [ "$MINIBATCH_POOL" = 1 ]; then
  POOL_FLAGS+=(--minibatch_pool)
  say "training: $NUM_WORKERS workers, $EPOCHS epochs in all from the shared minibatch pool, $PUSH_ENCODING pushes"
else
  say "training: $NUM_WORKERS workers, $EPOCHS epochs each over their part of the data, $PUSH_ENCODING pushes"
fi
worker_pids=()
for ((w = 0; w < NUM_WORKERS; w++)); do
  "$BIN/worker/asgd_worker" --servers="$SERVERS" "${DATA_FLAGS[@]}" "${POOL_FLAGS[@]}" \
    --worker_index=$w --num_workers="$NUM_WORKERS" --epochs="$EPOCHS" \
    --wire_dtype="$WIRE_DTYPE" --push_encoding="$PUSH_ENCODING" \
    --top_k_fraction="$TOP_K_FRACTION" --log_every=250 > >(tee "$WORKDIR/logs/worker-$w.log") 2>&1 &
  worker_pids+=($!)
  ASGD_PIDS+=($!)
done
failed=0
for pid in "${worker_pids[@]}"; do wait "$pid" || failed=1; done
[ $failed -eq 0 ] || { echo "demo: a worker failed (see $WORKDIR/logs)" >&2; exit 1; }

say "evaluating the model on the servers ($(( $(date +%s) - started )) s so far)"
"$BIN/worker/asgd_eval" --servers="$SERVERS" "${EVAL_FLAGS[@]}"

if [ "$DATA" = kaldi ]; then
  say "priors and held-out log-likelihoods for latgen-faster-mapped in $WORKDIR/decode"
  mkdir -p "$WORKDIR/decode"
  "$BIN/kaldi/compute_priors" --alignments="$KALDI/train/pdf.ark" \
    --counts_out="$WORKDIR/decode/pdf.counts" --priors_out="$WORKDIR/decode/prior.vec"
  "$BIN/worker/asgd_forward" --servers="$SERVERS" --kaldi_data="$KALDI/heldout" \
    --kaldi_global_cmvn="$KALDI/global_cmvn.mat" \
    --priors="$WORKDIR/decode/prior.vec" --out="$WORKDIR/decode/loglikes.ark" \
    --out_scp="$WORKDIR/decode/loglikes.scp"
fi
