#!/usr/bin/env bash
# asgd demo: trains a DNN acoustic model with asynchronous SGD through a
# parameter-server pool, all on 127.0.0.1:
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
#   HIDDEN         hidden layer sizes (default 512,512)
#   LEARNING_RATE  server learning rate (default 0.05)
set -euo pipefail
cd "$(dirname "$0")/.."

WORKDIR=${ASGD_DEMO_DIR:-/tmp/asgd-demo}
EPOCHS=${EPOCHS:-3}
NUM_WORKERS=${NUM_WORKERS:-2}
NUM_SERVERS=${NUM_SERVERS:-2}
HIDDEN=${HIDDEN:-512,512}
LEARNING_RATE=${LEARNING_RATE:-0.05}

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'echo "demo: interrupted" >&2; exit 130' INT TERM

say() { echo "== $*"; }
started=$(date +%s)

say "installing missing packages (if any)"
scripts/install_deps.sh
say "building asgd"
bazel build --noshow_progress //server:asgd_server //worker:asgd_worker \
  //worker:asgd_eval //corpus:make_corpus 2>&1 | grep -vE '^(INFO|Loading|Analyzing)' || true
BIN=$(bazel info bazel-bin 2>/dev/null)
for b in server/asgd_server worker/asgd_worker worker/asgd_eval corpus/make_corpus; do
  [ -x "$BIN/$b" ] || { echo "demo: build failed ($b missing)" >&2; exit 1; }
done

mkdir -p "$WORKDIR/logs"
CORPUS="$WORKDIR/corpus"
if [ -f "$CORPUS/corpus.txt" ]; then
  say "using the corpus in $CORPUS"
else
  say "generating the default corpus in $CORPUS"
  "$BIN/corpus/make_corpus" --out="$CORPUS"
fi

say "starting $NUM_SERVERS servers (2 shards each); logs in $WORKDIR/logs"
addresses=()
for ((s = 0; s < NUM_SERVERS; s++)); do
  rm -f "$WORKDIR/port.$s"
  "$BIN/server/asgd_server" --host=127.0.0.1 --port=0 --port_file="$WORKDIR/port.$s" \
    --server_index=$s --num_servers="$NUM_SERVERS" --num_shards=2 \
    --hidden="$HIDDEN" --learning_rate="$LEARNING_RATE" \
    >"$WORKDIR/logs/server-$s.log" 2>&1 &
  pids+=($!)
done
for ((s = 0; s < NUM_SERVERS; s++)); do
  for ((i = 0; i < 300; i++)); do   # up to 30 s
    [ -f "$WORKDIR/port.$s" ] && break
    kill -0 "${pids[$s]}" 2>/dev/null || { cat "$WORKDIR/logs/server-$s.log"; exit 1; }
    sleep 0.1
  done
  [ -f "$WORKDIR/port.$s" ] || { echo "demo: server $s did not start" >&2; exit 1; }
  addresses+=("127.0.0.1:$(cat "$WORKDIR/port.$s")")
  head -1 "$WORKDIR/logs/server-$s.log"
done
SERVERS=$(IFS=,; echo "${addresses[*]}")

say "training: $NUM_WORKERS workers, $EPOCHS epochs each over their part of the data"
worker_pids=()
for ((w = 0; w < NUM_WORKERS; w++)); do
  "$BIN/worker/asgd_worker" --servers="$SERVERS" --corpus="$CORPUS" \
    --worker_index=$w --num_workers="$NUM_WORKERS" --epochs="$EPOCHS" \
    --log_every=250 2>&1 | tee "$WORKDIR/logs/worker-$w.log" &
  worker_pids+=($!)
  pids+=($!)
done
failed=0
for pid in "${worker_pids[@]}"; do wait "$pid" || failed=1; done
[ $failed -eq 0 ] || { echo "demo: a worker failed (see $WORKDIR/logs)" >&2; exit 1; }

say "evaluating the model on the servers ($(( $(date +%s) - started )) s so far)"
"$BIN/worker/asgd_eval" --servers="$SERVERS" --corpus="$CORPUS"
