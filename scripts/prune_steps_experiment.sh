#!/usr/bin/env bash
# Pruning a trained model in steps, retrained through the servers
# (docs/results/compression-seed-gradual/). From $MODEL, each step of $STEPS
# prunes the previous step's model further (asgd_shrink --prune: a pruned
# model keeps its zeros, the smallest of the rest are pruned), evaluates it,
# retrains it through 2 servers (2 shards each) and 2 workers on $CORPUS
# (asgd_server --init_model; the servers keep every pruned weight at 0) and
# evaluates it again.
#
#   MODEL=full.mdl STEPS="0.5:1:0.05 0.7:1:0.05 -:4:0.025" \
#     scripts/prune_steps_experiment.sh      # about 3 minutes per epoch of
#                                            # a 5 x 2,048 DNN on 2 cores
#   HIDDEN=2048,2048,2048,2048,2048 STEPS="-:8:0.05 -:2:0.05" \
#     scripts/prune_steps_experiment.sh      # the dense model to prune
#
# Writes $OUT/steps.csv (one row per step: sparsity, epochs, learning rate,
# held-out accuracy pruned and retrained, non-zero parameters, seconds); the
# models are $WORKDIR/models/stepN.mdl (the retrained model of step N) and
# stepN-pruned.mdl (its input).
#
# Environment:
#   MODEL         the trained model to start from; without it, HIDDEN
#   HIDDEN        the dense layers of a new model (e.g. 2048,2048), which
#                 step 1 (a "-" step) trains from the servers' random start:
#                 the dense model itself, in steps that can be resumed
#                 (MODEL=$WORKDIR/models/stepN.mdl continues from step N;
#                 give the continuation another WORKDIR: each run writes
#                 its own steps.csv and step1.mdl, step2.mdl, ...)
#   STEPS         SPARSITY:EPOCHS:LR per step, separated by spaces; a
#                 sparsity of "-" retrains without pruning (default
#                 "0.5:1:0.05 0.7:1:0.05 -:4:0.025")
#   CORPUS        the corpus (default: the built-in one, made in
#                 $WORKDIR/corpus unless it is there)
#   OUT           where steps.csv goes (default $WORKDIR)
#   WORKDIR       logs and models (default /tmp/asgd-prune-steps)
#   SERVER_FLAGS  more asgd_server flags for every step, e.g. a learning
#                 rate schedule "--lr_schedule=exponential --lr_gamma=0.5
#                 --lr_step_size=1130"
#   WORKER_FLAGS  more asgd_worker flags for every step, e.g. a teacher
#                 "--teacher_model=full.mdl --teacher_temperature=2"
#   PRUNE_FLAGS   more asgd_shrink flags for every pruning, e.g.
#                 "--prune_scope=tensor"
set -euo pipefail

if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
HIDDEN=${HIDDEN:-}
if [ -n "${MODEL:-}" ]; then
  [ -z "$HIDDEN" ] || { echo "MODEL and HIDDEN: give one (a model to start from, or the layers of a new one)" >&2; exit 2; }
  [ -f "$MODEL" ] || { echo "MODEL $MODEL: no such file" >&2; exit 2; }
  # Paths as the caller gave them, before the cd to the repository.
  MODEL=$(realpath "$MODEL")
else
  [ -n "$HIDDEN" ] || { echo "MODEL (the trained model to prune) or HIDDEN (the layers of a new one) is required; --help says more" >&2; exit 2; }
  [[ "$HIDDEN" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || { echo "HIDDEN '$HIDDEN' is not comma-separated layer sizes" >&2; exit 2; }
  [[ "${STEPS:-}" == -:* ]] || { echo "a new model (HIDDEN) is trained before it is pruned: STEPS must start with a '-' step" >&2; exit 2; }
fi
WORKDIR=$(realpath -m "${WORKDIR:-/tmp/asgd-prune-steps}")
OUT=$(realpath -m "${OUT:-$WORKDIR}")
[ -z "${CORPUS:-}" ] || CORPUS=$(realpath "$CORPUS")
STEPS=${STEPS:-"0.5:1:0.05 0.7:1:0.05 -:4:0.025"}
SERVER_FLAGS=${SERVER_FLAGS:-}
WORKER_FLAGS=${WORKER_FLAGS:-}
PRUNE_FLAGS=${PRUNE_FLAGS:-}
cd "$(dirname "$0")/.."
for step in $STEPS; do
  [[ "$step" =~ ^(-|0?\.[0-9]+):[1-9][0-9]*:[0-9.eE+-]+$ ]] ||
    { echo "step '$step' is not SPARSITY:EPOCHS:LR (sparsity in [0,1) or -)" >&2; exit 2; }
done

source scripts/lib.sh
asgd_experiment_setup //shrink:asgd_shrink

# nonzero MODEL: its non-zero parameters (model/model_file.h: header lines,
# "data N", then N little-endian float32 values).
nonzero() {
  python3 - "$1" <<'PY'
import array, sys
raw = open(sys.argv[1], "rb").read()
at = raw.index(b"\ndata ") + 1
end = raw.index(b"\n", at)
n = int(raw[at + 5:end])
values = array.array("f", raw[end + 1:end + 1 + 4 * n])
if sys.byteorder != "little":
    values.byteswap()
print(sum(1 for v in values if v != 0))
PY
}

echo "step,sparsity,epochs,learning_rate,accuracy_pruned,accuracy_retrained,nonzero_params,seconds" >"$OUT/steps.csv"
prev=${MODEL:-}
if [ -n "$prev" ]; then
  echo "== $(basename "$prev"): $(asgd_accuracy "$prev")% held-out"
else
  echo "== a new model of dense layers $HIDDEN"
fi
i=0
for step in $STEPS; do
  i=$((i + 1))
  IFS=: read -r sparsity epochs lr <<<"$step"
  input=$prev
  pruned_acc=
  if [ "$sparsity" != "-" ]; then
    input="$WORKDIR/models/step$i-pruned.mdl"
    "$BIN/shrink/asgd_shrink" --model="$prev" --out="$input" \
      --prune="$sparsity" $PRUNE_FLAGS >"$WORKDIR/logs/shrink$i.txt"
    pruned_acc=$(asgd_accuracy "$input")
  fi
  echo "== step $i: sparsity ${sparsity/-/unchanged}${pruned_acc:+ ($pruned_acc% held-out)}, $epochs epochs at $lr"
  if [ -n "$input" ]; then start=(--init_model="$input"); else start=(--hidden="$HIDDEN"); fi
  secs=$(asgd_train "step$i" "$epochs" "$lr" "$WORKER_FLAGS" \
           "${start[@]}" $SERVER_FLAGS)
  prev="$WORKDIR/models/step$i.mdl"
  acc=$(asgd_accuracy "$prev")
  nz=$(nonzero "$prev")
  echo "   retrained: $acc% held-out, $nz non-zero parameters, $secs s"
  echo "$i,$sparsity,$epochs,$lr,$pruned_acc,$acc,$nz,$secs" >>"$OUT/steps.csv"
done
echo "== $OUT/steps.csv; the last model: $prev"
