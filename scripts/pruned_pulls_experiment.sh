#!/usr/bin/env bash
# How a pruned model's pulls cost its retraining (docs/results/compression/):
# the demo DNN (512-512) trained through 2 servers by 2 workers, pruned by
# asgd_shrink, then retrained $ROUNDS times each way, alternated: pulling
# whole weights (asgd_worker --delta_pulls=false) and with delta pulls (the
# default: the worker's exact copy gets the mask with its weights and
# replays the updates under it). 1-bit pushes.
#
#   scripts/pruned_pulls_experiment.sh      # about 5 minutes on 2 cores
#
# Writes $OUT/pruned_pulls.csv (one row per retraining: round, pulls,
# seconds, held-out accuracy, the pruned weights still 0, pull and compute
# seconds of worker 0, and its delta-pull summary) and prints it.
#
# Environment:
#   ROUNDS    retrainings each way (default 3)
#   EPOCHS    epochs per retraining (default 1)
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
EPOCHS=${EPOCHS:-1}
SPARSITY=${SPARSITY:-0.7}
WORKDIR=$(realpath -m "${WORKDIR:-/tmp/asgd-pruned-pulls}")
OUT=$(realpath -m "${OUT:-$WORKDIR}")
[ -z "${CORPUS:-}" ] || CORPUS=$(realpath "$CORPUS")
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS '$ROUNDS' is not a positive number" >&2; exit 2; }
[[ "$EPOCHS" =~ ^[1-9][0-9]*$ ]] || { echo "EPOCHS '$EPOCHS' is not a positive number" >&2; exit 2; }
cd "$(dirname "$0")/.."

source scripts/lib.sh
asgd_build
bazel build --noshow_progress //shrink:asgd_shrink 2>&1 |
  grep -vE '^(INFO|Loading|Analyzing)' || true
mkdir -p "$OUT" "$WORKDIR/logs" "$WORKDIR/models"
if [ -z "${CORPUS:-}" ]; then
  CORPUS="$WORKDIR/corpus"
  asgd_corpus "$CORPUS"
fi

full="$WORKDIR/models/full.mdl" pruned="$WORKDIR/models/pruned.mdl"
echo "== the demo DNN: 3 epochs at 0.05"
asgd_train full 3 0.05 "" --hidden=512,512 >/dev/null
echo "== pruned to $SPARSITY"
"$BIN/shrink/asgd_shrink" --model="$full" --out="$pruned" --prune="$SPARSITY" |
  tee "$WORKDIR/logs/shrink.log"

# The floats of a model file's data section whose value is exactly 0.
zeros_of() {
  python3 - "$1" <<'EOF'
import struct, sys
data, at = open(sys.argv[1], "rb").read(), 0
while True:  # header lines, then "data N" and N little-endian floats
    end = data.index(b"\n", at)
    line, at = data[at:end].decode(), end + 1
    if line.startswith("data "):
        n = int(line.split()[1])
        break
values = struct.unpack(f"<{n}f", data[at:at + 4 * n])
print(",".join(str(i) for i, v in enumerate(values) if v == 0.0))
EOF
}
pruned_zeros=$(zeros_of "$pruned")

echo "round,pulls,seconds,accuracy,pruned_still_zero,pull_s,compute_s,delta_pulls" >"$OUT/pruned_pulls.csv"
for ((round = 1; round <= ROUNDS; round++)); do
  for mode in weights delta; do
    flag=--delta_pulls=$([ "$mode" = delta ] && echo true || echo false)
    name="r$round-$mode"
    secs=$(asgd_train "$name" "$EPOCHS" 0.05 "--push_encoding=onebit $flag" \
      --init_model="$pruned")
    model="$WORKDIR/models/$name.mdl"
    acc=$(asgd_accuracy "$model")
    # Every weight pruned is still 0 (the retrained model has at least those zeros).
    still=$(python3 -c 'import sys; a=set(sys.argv[1].split(",")); b=set(sys.argv[2].split(",")); print("yes" if a <= b else "no")' \
      "$pruned_zeros" "$(zeros_of "$model")")
    log="$WORKDIR/logs/$name/worker-0.log"
    pull=$(sed -n 's/.* pull \([0-9.]*\) s (load.*/\1/p' "$log")
    compute=$(sed -n 's/.*compute \([0-9.]*\) s, push.*/\1/p' "$log")
    summary=$(sed -n 's/.*, delta pulls: \(.*\)$/\1/p' "$log" | tr ',' ';')
    echo "$round,$mode,$secs,$acc,$still,$pull,$compute,${summary:--}" | tee -a "$OUT/pruned_pulls.csv"
  done
done
echo "== $OUT/pruned_pulls.csv"
cat "$OUT/pruned_pulls.csv"
