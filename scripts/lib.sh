# Shell helpers shared by the scripts in scripts/: build, start a server
# pool on 127.0.0.1, train through it, and stop everything started, also on
# Ctrl-C. Source it from a script that runs with `set -euo pipefail`.

ASGD_PIDS=()

asgd_cleanup() {
  local pid
  for pid in "${ASGD_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${ASGD_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  ASGD_PIDS=()
}
trap asgd_cleanup EXIT
trap 'echo "interrupted" >&2; exit 130' INT TERM

# asgd_build: installs missing packages, builds the binaries, sets $BIN.
asgd_build() {
  scripts/install_deps.sh "$@"
  bazel build --noshow_progress //server:asgd_server //worker:asgd_worker \
    //worker:asgd_eval //corpus:make_corpus //worker:asgd_forward \
    //kaldi:corpus_to_kaldi //kaldi:compute_priors 2>&1 |
    grep -vE '^(INFO|Loading|Analyzing)' || true
  BIN=$(bazel info bazel-bin 2>/dev/null)
  local b
  for b in server/asgd_server worker/asgd_worker worker/asgd_eval corpus/make_corpus \
           worker/asgd_forward kaldi/corpus_to_kaldi kaldi/compute_priors; do
    [ -x "$BIN/$b" ] || { echo "build failed ($b missing)" >&2; exit 1; }
  done
}

# asgd_experiment_setup [TARGET...]: asgd_build and the bazel TARGETs, then
# makes $OUT, $WORKDIR/logs and $WORKDIR/models, and sets $CORPUS, unless
# set, to the default corpus in $WORKDIR/corpus (made unless it is there).
asgd_experiment_setup() {
  asgd_build
  if [ $# -gt 0 ]; then
    bazel build --noshow_progress "$@" 2>&1 |
      grep -vE '^(INFO|Loading|Analyzing)' || true
  fi
  mkdir -p "$OUT" "$WORKDIR/logs" "$WORKDIR/models"
  if [ -z "${CORPUS:-}" ]; then
    CORPUS="$WORKDIR/corpus"
    asgd_corpus "$CORPUS"
  fi
}

# asgd_corpus DIR: generates the default corpus into DIR unless it is there.
asgd_corpus() {
  if [ -f "$1/corpus.txt" ]; then
    echo "== using the corpus in $1"
  else
    echo "== generating the default corpus in $1"
    "$BIN/corpus/make_corpus" --out="$1"
  fi
}

# asgd_kaldi_corpus DIR: the default corpus in DIR/corpus and its Kaldi
# export (corpus_to_kaldi) in DIR/kaldi, each made unless it is there.
asgd_kaldi_corpus() {
  asgd_corpus "$1/corpus"
  [ -f "$1/kaldi/heldout/feats.scp" ] ||
    "$BIN/kaldi/corpus_to_kaldi" --corpus="$1/corpus" --out="$1/kaldi"
}

# asgd_start_servers NUM LOGDIR [server flags...]: starts NUM servers on
# 127.0.0.1 with free ports and sets $SERVERS to their addresses.
asgd_start_servers() {
  local num=$1 logdir=$2 s i
  shift 2
  mkdir -p "$logdir"
  local first=${#ASGD_PIDS[@]}
  local addresses=()
  for ((s = 0; s < num; s++)); do
    rm -f "$logdir/port.$s"
    "$BIN/server/asgd_server" --host=127.0.0.1 --port=0 \
      --port_file="$logdir/port.$s" --server_index=$s --num_servers="$num" \
      "$@" >"$logdir/server-$s.log" 2>&1 &
    ASGD_PIDS+=($!)
  done
  for ((s = 0; s < num; s++)); do
    local pid=${ASGD_PIDS[$((first + s))]}
    for ((i = 0; i < 300; i++)); do   # up to 30 s
      [ -f "$logdir/port.$s" ] && break
      kill -0 "$pid" 2>/dev/null || { cat "$logdir/server-$s.log" >&2; exit 1; }
      sleep 0.1
    done
    [ -f "$logdir/port.$s" ] || { echo "server $s did not start" >&2; exit 1; }
    addresses+=("127.0.0.1:$(cat "$logdir/port.$s")")
  done
  SERVERS=$(IFS=,; echo "${addresses[*]}")
}

# asgd_train NAME EPOCHS LR "WORKER FLAGS" [server flags...]: trains through
# 2 servers (2 shards each, learning rate LR) with 2 workers on $CORPUS for
# EPOCHS epochs; prints the wall time in seconds and leaves the final model
# of the worker that finished last (it pulled the model after every push) in
# $WORKDIR/models/NAME.mdl, the logs in $WORKDIR/logs/NAME.
asgd_train() {
  local name=$1 epochs=$2 lr=$3 worker_flags=$4 w pids=() start
  shift 4
  # Called as $(asgd_train ...) it runs in a subshell, which does not
  # inherit the EXIT trap: stop its servers also when it fails.
  trap asgd_cleanup EXIT
  mkdir -p "$WORKDIR/models"
  asgd_start_servers 2 "$WORKDIR/logs/$name" --num_shards=2 \
    --learning_rate="$lr" --log_every_s=0 "$@"
  start=$(date +%s.%N)
  for w in 0 1; do
    "$BIN/worker/asgd_worker" --servers="$SERVERS" --corpus="$CORPUS" \
      --worker_index=$w --num_workers=2 --epochs="$epochs" --log_every=0 \
      --save_model="$WORKDIR/models/$name.w$w.mdl" $worker_flags \
      >"$WORKDIR/logs/$name/worker-$w.log" 2>&1 &
    pids+=($!)
  done
  for w in 0 1; do
    wait "${pids[$w]}" || { cat "$WORKDIR/logs/$name/worker-$w.log" >&2; exit 1; }
  done
  asgd_calc "$(date +%s.%N) - $start"
  asgd_cleanup
  cp "$(ls -t "$WORKDIR/models/$name".w*.mdl | head -1)" "$WORKDIR/models/$name.mdl"
}

# asgd_accuracy_of: the held-out accuracy in % that asgd_eval printed (its
# output on stdin); asgd_accuracy MODEL: MODEL's held-out accuracy on
# $CORPUS in %.
asgd_accuracy_of() { sed -n 's/^held-out frame accuracy: \([0-9.]*\)%$/\1/p'; }
asgd_accuracy() {
  "$BIN/worker/asgd_eval" --model="$1" --corpus="$CORPUS" | asgd_accuracy_of
}

# asgd_calc EXPR: a number to two decimals.
asgd_calc() { awk "BEGIN { printf \"%.2f\", $1 }"; }
