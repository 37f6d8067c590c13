#!/usr/bin/env bash
# Smaller and faster models on the built-in corpus
# (docs/results/compression), in phases ($PHASES, in this order):
#   shrink    trains the full model through 2 servers, then for each setting
#             of $SETTINGS makes a smaller model with asgd_shrink, evaluates
#             it, retrains it through the servers (asgd_server --init_model)
#             and evaluates it again; the full model gets the same
#             retraining, so every row has had the same training;
#   students  a small model ($STUDENT_HIDDEN) trained alone and against the
#             full model as teacher, once per $TEACHER_SETTINGS, for $EPOCHS
#             epochs each;
#   speed     forward frames/s of every model on one core
#             (OPENBLAS_NUM_THREADS=1, asgd_eval), each model in turn, the
#             best of $SPEED_ROUNDS rounds;
#   decode    frame skipping ($SKIPS) on the retrained full model and the
#             fastest retrained model within 1 point of it;
#   multi     multi-frame models (asgd_server --output_frames=k, for k in
#             $MULTI_FRAMES) trained from scratch through the servers for
#             $EPOCHS + $RETRAIN_EPOCHS epochs (the retrained full model's
#             training), and made from the full model (asgd_shrink
#             --output_frames=k) and retrained for $RETRAIN_EPOCHS epochs,
#             and likewise factored multi-frame models ($MULTI_COMBOS);
#             all scored by their heads next to the retrained
#             full model with --frame_skip=k (the same forward passes per
#             frame): accuracy and one core's frames/s, the best of
#             $SPEED_ROUNDS rounds;
#   onnx      every model exported (asgd_export_onnx) and timed in
#             onnxruntime on one core (bench/onnx_decode_bench.js) next to
#             asgd_eval's forward pass, alternately, the best of
#             $SPEED_ROUNDS rounds each (needs node; tests/onnx/install.sh
#             installs onnxruntime-node).
# A later phase reuses what an earlier run left in $WORKDIR and $OUT.
#
# Writes $OUT/shrink.csv, runs.csv (with the speeds), students.csv,
# decode.csv, multi.csv, onnx.csv and table.md; logs and models in $WORKDIR.
#
# Settings (environment variables):
#   OUT              results directory (default docs/results/compression)
#   WORKDIR          corpus, logs and models (default /tmp/asgd-shrink)
#   PHASES           default "shrink students speed decode multi onnx"
#   HIDDEN           the full model's dense layers (default 512,512)
#   EPOCHS           epochs of the full model's training (default 3)
#   RETRAIN_EPOCHS   epochs of every retraining (default 2)
#   LEARNING_RATE    server learning rate (default 0.05; RETRAIN_LR for the
#                    retraining, default the same)
#   STUDENT_HIDDEN   the student's dense layers (default 128,128)
#   TEACHER_SETTINGS the students' teacher flags, separated by ';' (default
#                    weight 0.5 at temperature 2, 0.5 at 1, 0.2 at 1)
#   SPEED_ROUNDS     rounds of the speed measurement (default 5)
#   SKIPS            frame skips of the decode phase (default "1 2 3")
#   MULTI_FRAMES     output frames of the multi phase (default "2 3")
#   MULTI_COMBOS     asgd_shrink flag sets with --output_frames, separated
#                    by ';' (default: rank 128 with 2 and 3 frames, kept
#                    energy 0.8 with 2 frames)
#   SETTINGS         asgd_shrink flag sets, separated by ';' (default: all
#                    layers at kept energy 0.9, 0.8 and 0.6; all at rank 128,
#                    64 and 32; the output layer at rank 16; pruning 50, 70,
#                    80 and 90% globally, 70% per tensor; rank 128 then 50%
#                    pruned)
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-docs/results/compression}
WORKDIR=${WORKDIR:-/tmp/asgd-shrink}
HIDDEN=${HIDDEN:-512,512}
EPOCHS=${EPOCHS:-3}
PHASES=${PHASES:-shrink students speed decode multi onnx}
RETRAIN_EPOCHS=${RETRAIN_EPOCHS:-2}
LEARNING_RATE=${LEARNING_RATE:-0.05}
RETRAIN_LR=${RETRAIN_LR:-$LEARNING_RATE}
STUDENT_HIDDEN=${STUDENT_HIDDEN:-128,128}
TEACHER_SETTINGS=${TEACHER_SETTINGS:-"--teacher_weight=0.5 --teacher_temperature=2;--teacher_weight=0.5 --teacher_temperature=1;--teacher_weight=0.2 --teacher_temperature=1"}
SPEED_ROUNDS=${SPEED_ROUNDS:-5}
SKIPS=${SKIPS:-1 2 3}
MULTI_FRAMES=${MULTI_FRAMES:-2 3}
MULTI_COMBOS=${MULTI_COMBOS:-"--factor=all --rank=128 --output_frames=2;--factor=all --rank=128 --output_frames=3;--factor=all --energy=0.8 --output_frames=2"}
SETTINGS=${SETTINGS:-"--factor=all --energy=0.9;--factor=all --energy=0.8;--factor=all --energy=0.6;--factor=all --rank=128;--factor=all --rank=64;--factor=all --rank=32;--factor=output --rank=16;--prune=0.5;--prune=0.7;--prune=0.8;--prune=0.9;--prune=0.7 --prune_scope=tensor;--factor=all --rank=128 --prune=0.5"}

source scripts/lib.sh
asgd_build
bazel build --noshow_progress //shrink:asgd_shrink //worker:asgd_export_onnx 2>&1 |
  grep -vE '^(INFO|Loading|Analyzing)' || true
mkdir -p "$OUT" "$WORKDIR/logs" "$WORKDIR/models"
CORPUS="$WORKDIR/corpus"
asgd_corpus "$CORPUS"

# fps_of: the forward frames/s that asgd_eval printed (its output on stdin).
fps_of() { sed -n 's/^forward passes: [0-9.]* s, \([0-9]*\) frames\/s.*/\1/p'; }

# speed MODEL: its forward frames/s on one core (one run).
speed() {
  OPENBLAS_NUM_THREADS=1 "$BIN/worker/asgd_eval" --model="$1" --corpus="$CORPUS" | fps_of
}

# params MODEL: its number of parameters (the file's "data N" line).
params() { grep -a -m1 '^data ' "$1" | cut -d' ' -f2; }

# phase NAME: whether NAME is in $PHASES.
phase() { [[ " $PHASES " == *" $1 "* ]]; }
FULL="$WORKDIR/models/full.mdl"

if phase shrink; then
  echo "== training the full model ($HIDDEN, $EPOCHS epochs)"
  asgd_train full "$EPOCHS" "$LEARNING_RATE" "" --hidden="$HIDDEN" >/dev/null
  full_params=$(params "$FULL")
  acc=$(asgd_accuracy "$FULL")
  echo "== full model: $full_params parameters, $acc%; retraining it too"
  secs=$(asgd_train full-retrained "$RETRAIN_EPOCHS" "$RETRAIN_LR" "" --init_model="$FULL")
  echo "setting,params,params_pct,nonzero_pct,acc_before,acc_after,retrain_s" >"$OUT/shrink.csv"
  echo "full model,$full_params,100.00,100.00,$acc,$(asgd_accuracy "$WORKDIR/models/full-retrained.mdl"),$secs" >>"$OUT/shrink.csv"
  IFS=';' read -ra sets <<<"$SETTINGS"
  i=0
  for setting in "${sets[@]}"; do
    i=$((i + 1))
    small="$WORKDIR/models/small$i.mdl"
    # shellcheck disable=SC2086  # a setting is a list of flags
    "$BIN/shrink/asgd_shrink" --model="$FULL" --out="$small" $setting | tee "$WORKDIR/logs/shrink$i.log"
    p=$(params "$small")
    nz=$(sed -n 's/.*: \([0-9]*\) non-zero (.*/\1/p' "$WORKDIR/logs/shrink$i.log")
    acc=$(asgd_accuracy "$small")
    secs=$(asgd_train "retrained$i" "$RETRAIN_EPOCHS" "$RETRAIN_LR" "" --init_model="$small")
    acc2=$(asgd_accuracy "$WORKDIR/models/retrained$i.mdl")
    echo "== $setting: $p parameters ($nz non-zero), $acc% -> $acc2% after retraining ($secs s)"
    echo "$setting,$p,$(asgd_calc "100 * $p / $full_params"),$(asgd_calc "100 * $nz / $full_params"),$acc,$acc2,$secs" >>"$OUT/shrink.csv"
  done
fi
full_params=$(params "$FULL")

if phase students; then
  echo "== teacher-student: $STUDENT_HIDDEN alone and taught by the full model ($EPOCHS epochs)"
  echo "student,params,params_pct,accuracy,train_s" >"$OUT/students.csv"
  secs=$(asgd_train student-alone "$EPOCHS" "$LEARNING_RATE" "" --hidden="$STUDENT_HIDDEN")
  sp=$(params "$WORKDIR/models/student-alone.mdl")
  echo "alone,$sp,$(asgd_calc "100 * $sp / $full_params"),$(asgd_accuracy "$WORKDIR/models/student-alone.mdl"),$secs" >>"$OUT/students.csv"
  IFS=';' read -ra teachers <<<"$TEACHER_SETTINGS"
  for t in "${teachers[@]}"; do
    secs=$(asgd_train student-taught "$EPOCHS" "$LEARNING_RATE" "--teacher_model=$FULL $t" \
      --hidden="$STUDENT_HIDDEN")
    echo "taught ($t),$sp,$(asgd_calc "100 * $sp / $full_params"),$(asgd_accuracy "$WORKDIR/models/student-taught.mdl"),$secs" >>"$OUT/students.csv"
  done
  echo "teacher (the full model),$full_params,100.00,$(asgd_accuracy "$FULL"),-" >>"$OUT/students.csv"
  cat "$OUT/students.csv"
fi

if phase speed; then
  n=$(($(wc -l <"$OUT/shrink.csv") - 2))
  models=("$FULL")
  for ((i = 1; i <= n; i++)); do models+=("$WORKDIR/models/small$i.mdl"); done
  echo "== forward speed, one core: $SPEED_ROUNDS rounds over ${#models[@]} models"
  best=()
  for m in "${models[@]}"; do best+=(0); done
  for ((round = 0; round < SPEED_ROUNDS; round++)); do
    for ((j = 0; j < ${#models[@]}; j++)); do
      f=$(speed "${models[$j]}")
      [ "$f" -gt "${best[$j]}" ] && best[$j]=$f
    done
  done
  echo "$(head -1 "$OUT/shrink.csv"),frames_per_s,speedup" >"$OUT/runs.csv"
  j=0
  tail -n +2 "$OUT/shrink.csv" | while IFS= read -r row; do
    echo "$row,${best[$j]},$(asgd_calc "${best[$j]} / ${best[0]}")"
    j=$((j + 1))
  done >>"$OUT/runs.csv"
fi

if phase decode; then
  # The fastest retrained model within 1 point of the retrained full model.
  best_row=$(awk -F, 'NR == 2 { full = $6 } NR > 2 && $6 >= full - 1 && $8 > best { best = $8; row = NR - 2 } END { print row + 0 }' "$OUT/runs.csv")
  decode_models=("$WORKDIR/models/full-retrained.mdl")
  decode_names=("full model")
  if [ "$best_row" -gt 0 ]; then
    decode_models+=("$WORKDIR/models/retrained$best_row.mdl")
    decode_names+=("$(sed -n "$((best_row + 2))p" "$OUT/runs.csv" | cut -d, -f1)")
  fi
  echo "== frame skipping ($SKIPS) on: ${decode_names[*]}"
  echo "model,frame_skip,accuracy,frames_per_s" >"$OUT/decode.csv"
  for ((j = 0; j < ${#decode_models[@]}; j++)); do
    for k in $SKIPS; do
      best=0
      for ((round = 0; round < SPEED_ROUNDS; round++)); do
        log=$(OPENBLAS_NUM_THREADS=1 "$BIN/worker/asgd_eval" --model="${decode_models[$j]}" \
          --corpus="$CORPUS" --frame_skip="$k")
        f=$(fps_of <<<"$log")
        [ "$f" -gt "$best" ] && best=$f
      done
      a=$(asgd_accuracy_of <<<"$log")
      echo "${decode_names[$j]},$k,$a,$best" >>"$OUT/decode.csv"
    done
  done
fi

if phase multi; then
  epochs=$((EPOCHS + RETRAIN_EPOCHS))
  echo "== multi-frame models ($MULTI_FRAMES frames) against frame skipping, $epochs epochs"
  full="$WORKDIR/models/full-retrained.mdl"
  names=("full model") models=("$full") flags=("") ks=(1) secs=("-")
  for k in $MULTI_FRAMES; do
    names+=("full model --frame_skip=$k" "multi-frame $k")
    models+=("$full" "$WORKDIR/models/multi$k.mdl")
    flags+=("--frame_skip=$k" "")
    ks+=("$k" "$k")
    secs+=("-" "$(asgd_train "multi$k" "$epochs" "$LEARNING_RATE" "" --hidden="$HIDDEN" \
      --output_frames="$k")")
    # Warm-started: the full model's output layer copied to k heads
    # (asgd_shrink), retrained like the smaller models.
    "$BIN/shrink/asgd_shrink" --model="$FULL" --out="$WORKDIR/models/multiwarm$k-start.mdl" \
      --output_frames="$k" >/dev/null
    names+=("multi-frame $k from the full model")
    models+=("$WORKDIR/models/multiwarm$k.mdl")
    flags+=("")
    ks+=("$k")
    secs+=("$(asgd_train "multiwarm$k" "$RETRAIN_EPOCHS" "$RETRAIN_LR" "" \
      --init_model="$WORKDIR/models/multiwarm$k-start.mdl")")
  done
  # Smaller and multi-frame at once: from the full model, retrained alike.
  IFS=';' read -ra combos <<<"$MULTI_COMBOS"
  for ((c = 0; c < ${#combos[@]}; c++)); do
    "$BIN/shrink/asgd_shrink" --model="$FULL" --out="$WORKDIR/models/combo$c-start.mdl" \
      ${combos[$c]} >/dev/null
    names+=("${combos[$c]}")
    models+=("$WORKDIR/models/combo$c.mdl")
    flags+=("")
    ks+=("$(sed -n 's/.*--output_frames=\([0-9]*\).*/\1/p' <<<"${combos[$c]}")")
    secs+=("$(asgd_train "combo$c" "$RETRAIN_EPOCHS" "$RETRAIN_LR" "" \
      --init_model="$WORKDIR/models/combo$c-start.mdl")")
  done
  # One core, the models in turn, the best of $SPEED_ROUNDS rounds.
  best=() acc=()
  for ((j = 0; j < ${#models[@]}; j++)); do best+=(0) acc+=(0); done
  for ((round = 0; round < SPEED_ROUNDS; round++)); do
    for ((j = 0; j < ${#models[@]}; j++)); do
      log=$(OPENBLAS_NUM_THREADS=1 "$BIN/worker/asgd_eval" --model="${models[$j]}" \
        --corpus="$CORPUS" ${flags[$j]})
      f=$(fps_of <<<"$log")
      [ "$f" -gt "${best[$j]}" ] && best[$j]=$f
      acc[$j]=$(asgd_accuracy_of <<<"$log")
    done
  done
  echo "model,frames_per_row,params,accuracy,frames_per_s,train_s" >"$OUT/multi.csv"
  for ((j = 0; j < ${#models[@]}; j++)); do
    echo "${names[$j]},${ks[$j]},$(params "${models[$j]}"),${acc[$j]},${best[$j]},${secs[$j]}"
  done >>"$OUT/multi.csv"
  cat "$OUT/multi.csv"
fi

if phase onnx; then
  tests/onnx/install.sh
  n=$(($(wc -l <"$OUT/shrink.csv") - 2))
  models=("$FULL") names=("full model")
  for ((i = 1; i <= n; i++)); do
    models+=("$WORKDIR/models/small$i.mdl")
    names+=("$(sed -n "$((i + 2))p" "$OUT/shrink.csv" | cut -d, -f1)")
  done
  echo "== onnxruntime against asgd, one core: $SPEED_ROUNDS rounds over ${#models[@]} models"
  asgd_best=() onnx_best=()
  for ((j = 0; j < ${#models[@]}; j++)); do
    "$BIN/worker/asgd_export_onnx" --model="${models[$j]}" --out="$WORKDIR/models/m$j.onnx" >/dev/null
    asgd_best+=(0) onnx_best+=(0)
  done
  for ((round = 0; round < SPEED_ROUNDS; round++)); do
    for ((j = 0; j < ${#models[@]}; j++)); do
      f=$(speed "${models[$j]}")
      [ "$f" -gt "${asgd_best[$j]}" ] && asgd_best[$j]=$f
      f=$(NODE_PATH=tests/onnx/node_modules node bench/onnx_decode_bench.js --rounds=1 \
        "$WORKDIR/models/m$j.onnx" | awk '{ print $3 }')
      [ "$f" -gt "${onnx_best[$j]}" ] && onnx_best[$j]=$f
    done
  done
  echo "model,asgd_frames_per_s,onnx_frames_per_s,onnx_vs_asgd,onnx_vs_full_onnx" >"$OUT/onnx.csv"
  for ((j = 0; j < ${#models[@]}; j++)); do
    echo "${names[$j]},${asgd_best[$j]},${onnx_best[$j]},$(asgd_calc "${onnx_best[$j]} / ${asgd_best[$j]}"),$(asgd_calc "${onnx_best[$j]} / ${onnx_best[0]}")"
  done >>"$OUT/onnx.csv"
  cat "$OUT/onnx.csv"
fi

{
  if [ -f "$OUT/runs.csv" ]; then
    echo "| model | parameters | % of full | non-zero, % of full | held-out before retraining | after | retraining (s) | forward frames/s, 1 core | × full |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    tail -n +2 "$OUT/runs.csv" | while IFS=, read -r s p pct nz a b t f x; do
      printf '| `%s` | %s | %s | %s | %s%% | %s%% | %.1f | %s | %s |\n' "$s" "$p" "$pct" "$nz" "$a" "$b" "$t" "$f" "$x"
    done
  fi
  if [ -f "$OUT/students.csv" ]; then
    echo
    echo "| student | parameters | % of the teacher | held-out | training (s) |"
    echo "|---|---:|---:|---:|---:|"
    tail -n +2 "$OUT/students.csv" | while IFS=, read -r s p pct a t; do
      printf '| %s | %s | %s | %s%% | %s |\n' "$s" "$p" "$pct" "$a" "$t"
    done
  fi
  if [ -f "$OUT/decode.csv" ]; then
    echo
    echo "| model (retrained) | frame skip | held-out | forward frames/s, 1 core |"
    echo "|---|---:|---:|---:|"
    tail -n +2 "$OUT/decode.csv" | while IFS=, read -r m k a f; do
      printf '| `%s` | %s | %s%% | %s |\n' "$m" "$k" "$a" "$f"
    done
  fi
  if [ -f "$OUT/multi.csv" ]; then
    echo
    echo "| model | frames per computed row | parameters | held-out | forward frames/s, 1 core | training (s) |"
    echo "|---|---:|---:|---:|---:|---:|"
    tail -n +2 "$OUT/multi.csv" | while IFS=, read -r m k p a f t; do
      printf '| `%s` | %s | %s | %s%% | %s | %s |\n' "$m" "$k" "$p" "$a" "$f" "$t"
    done
  fi
  if [ -f "$OUT/onnx.csv" ]; then
    echo
    echo "| model | asgd forward frames/s, 1 core | onnxruntime frames/s, 1 core | onnxruntime ÷ asgd | onnxruntime × full |"
    echo "|---|---:|---:|---:|---:|"
    tail -n +2 "$OUT/onnx.csv" | while IFS=, read -r m a o r x; do
      printf '| `%s` | %s | %s | %s | %s |\n' "$m" "$a" "$o" "$r" "$x"
    done
  fi
} >"$OUT/table.md"
cat "$OUT/table.md"
