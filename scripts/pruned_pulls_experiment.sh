#!/usr/bin/env bash
# How a pruned model's pulls cost its retraining (docs/results/compression/):
# a DNN (default the demo's, 512-512) trained through 2 servers by 2
# workers and pruned by asgd_shrink; then, $ROUNDS times, the dense model
# and the pruned one each retrained both ways, in turn: pulling whole
# weights (asgd_worker --delta_pulls=false) and with delta pulls (the
# default; on the pruned model the worker's exact copy gets the mask with
# its weights and replays the updates under it). 1-bit pushes.
#
#   scripts/pruned_pulls_experiment.sh      # about 8 minutes on 2 cores
#   HIDDEN=2048,2048,2048,2048,2048 FULL_STEPS=20 STEPS=100 \
#     scripts/pruned_pulls_experiment.sh    # the seed-size DNN, timing only
#
# Writes $OUT/pruned_pulls.csv (one row per retraining: round, model, pulls,
# seconds, held-out accuracy, the pruned weights still 0, worker 0's
# frames/s, pull and compute seconds and delta-pull summary) and prints it.
#
# Environment:
#   ROUNDS    rounds of the four retrainings (default 3)
#   HIDDEN    the DNN's hidden layers (default 512,512)
#   FULL_STEPS  steps per worker for the model to prune (default 0: 3
#             epochs at 0.05; a few steps make a model to time, not to judge)
#   EPOCHS    epochs per retraining (default 1)
#   STEPS     steps per worker per retraining instead (default 0: EPOCHS)
#   SPARSITY  asgd_shrink --prune (default 0.7)
#   CORPUS    the corpus (default: the built-in one, made in $WORKDIR/corpus)
#   WORKDIR   logs and models (default /tmp/asgd-pruned-pulls)
#   OUT       where the CSV goes (default $WORKDIR)
set -euo pipefail

if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
ROUNDS=${ROUNDS:-3}
HIDDEN=${HIDDEN:-512,512}
FULL_STEPS=${FULL_STEPS:-0}
EPOCHS=${EPOCHS:-1}
STEPS=${STEPS:-0}
SPARSITY=${SPARSITY:-0.7}
WORKDIR=$(realpath -m "${WORKDIR:-/tmp/asgd-pruned-pulls}")
OUT=$(realpath -m "${OUT:-$WORKDIR}")
[ -z "${CORPUS:-}" ] || CORPUS=$(realpath "$CORPUS")
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS '$ROUNDS' is not a positive number" >&2; exit 2; }
[[ "$EPOCHS" =~ ^[1-9][0-9]*$ ]] || { echo "EPOCHS '$EPOCHS' is not a positive number" >&2; exit 2; }
[[ "$HIDDEN" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || { echo "HIDDEN '$HIDDEN' is not comma-separated layer sizes" >&2; exit 2; }
[[ "$FULL_STEPS$STEPS" =~ ^[0-9]+$ ]] || { echo "FULL_STEPS and STEPS are step counts (0: whole epochs)" >&2; exit 2; }
cd "$(dirname "$0")/.."

source scripts/lib.sh
asgd_experiment_setup //shrink:asgd_shrink

full="$WORKDIR/models/full.mdl" pruned="$WORKDIR/models/pruned.mdl"
echo "== the DNN $HIDDEN: 3 epochs at 0.05$([ "$FULL_STEPS" = 0 ] || echo ", at most $FULL_STEPS steps a worker")"
asgd_train full 3 0.05 "--max_steps=$FULL_STEPS" --hidden="$HIDDEN" >/dev/null
echo "== pruned to $SPARSITY"
"$BIN/shrink/asgd_shrink" --model="$full" --out="$pruned" --prune="$SPARSITY" |
  tee "$WORKDIR/logs/shrink.log"

# still_zero FULL PRUNED MODEL: "yes" when every weight that pruning made 0
# (non-zero in FULL, 0 in PRUNED) is still exactly 0 in MODEL (model files:
# header lines, "data N", N floats).
still_zero() {
  python3 - "$1" "$2" "$3" <<'EOF'
import struct, sys
def values(path):
    data, at = open(path, "rb").read(), 0
    while True:
        end = data.index(b"\n", at)
        line, at = data[at:end].decode(), end + 1
        if line.startswith("data "):
            n = int(line.split()[1])
            return struct.unpack(f"<{n}f", data[at:at + 4 * n])
full, pruned, model = (values(path) for path in sys.argv[1:4])
ok = len(full) == len(pruned) == len(model) and all(
    m == 0.0 for f, p, m in zip(full, pruned, model) if p == 0.0 and f != 0.0)
print("yes" if ok else "no")
EOF
}

echo "round,model,pulls,seconds,accuracy,pruned_still_zero,frames_per_s,pull_s,compute_s,delta_pulls" >"$OUT/pruned_pulls.csv"
for ((round = 1; round <= ROUNDS; round++)); do
  for start in dense pruned; do
    for mode in weights delta; do
      flag=--delta_pulls=$([ "$mode" = delta ] && echo true || echo false)
      name="r$round-$start-$mode"
      init=$([ "$start" = pruned ] && echo "$pruned" || echo "$full")
      secs=$(asgd_train "$name" "$EPOCHS" 0.05 \
        "--push_encoding=onebit --max_steps=$STEPS $flag" --init_model="$init")
      model="$WORKDIR/models/$name.mdl"
      acc=$(asgd_accuracy "$model")
      still=-
      [ "$start" = dense ] || still=$(still_zero "$full" "$pruned" "$model")
      log="$WORKDIR/logs/$name/worker-0.log"
      fps=$(sed -n 's/^worker 0 done: .* (\([0-9]*\) frames\/s).*/\1/p' "$log")
      pull=$(sed -n 's/.* pull \([0-9.]*\) s (load.*/\1/p' "$log")
      compute=$(sed -n 's/.*compute \([0-9.]*\) s, push.*/\1/p' "$log")
      summary=$(sed -n 's/.*, delta pulls: \(.*\)$/\1/p' "$log" | tr ',' ';')
      echo "$round,$start,$mode,$secs,$acc,$still,$fps,$pull,$compute,${summary:--}" |
        tee -a "$OUT/pruned_pulls.csv"
    done
  done
done
echo "== $OUT/pruned_pulls.csv"
cat "$OUT/pruned_pulls.csv"
