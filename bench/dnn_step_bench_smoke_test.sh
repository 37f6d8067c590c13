#!/usr/bin/env bash
# Smoke test of //bench:dnn_step_bench: runs it on a tiny model of each kind
# (dnn, cnn, lstm, blstm) with a couple of steps and checks the table, the CSV
# lines (numeric fields), and that a cuda backend is either timed or skipped
# with a reason for each model. It never looks at a time.
# Usage: dnn_step_bench_smoke_test.sh BIN
set -euo pipefail
bench="$1"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

tiny=(--models=dnn,cnn,lstm,blstm --backends=cpu,cuda --input_dim=12
  --hidden=16,8 --num_classes=5 --batches=4,9 --feature_dim=20 --context=2
  --conv_filters=2 --preset_hidden=7 --lstm_cells=6 --lstm_layers=1
  --lstm_projection=3 --cell_clip=1 --sequences=2,3 --steps=3 --warmup=1
  --iters=2 --blas_threads=1 --cuda_profile)
out=$("$bench" "${tiny[@]}") || fail "bench exited with $?"
echo "$out"

grep -q "minibatches/s" <<<"$out" || fail "no table header"
grep -q "FLOPs per step = 2 x TrainingMacsPerRow x rows" <<<"$out" ||
  fail "FLOP formula not stated"
for model in dnn cnn; do
  grep -q "^| $model | cpu | fp32 | 4 x 1 | 4 | " <<<"$out" ||
    fail "no cpu row for $model batch 4"
  grep -q "^| $model | cpu | fp32 | 9 x 1 | 9 | " <<<"$out" ||
    fail "no cpu row for $model batch 9"
done
for model in lstm blstm; do
  grep -q "^| $model | cpu | fp32 | 2 x 3 | 6 | " <<<"$out" ||
    fail "no cpu row for $model 2 x 3"
  grep -q "^| $model | cpu | fp32 | 3 x 3 | 9 | " <<<"$out" ||
    fail "no cpu row for $model 3 x 3"
done
grep -q "^# cnn: conv(2,3x8,pool 1x3,relu) conv(4,3x4,pool 1x1,relu) dense(7,relu)" <<<"$out" ||
  fail "cnn is not the preset"
grep -q "^# blstm: blstm(6,proj 3,clip 1) dense(7,relu)" <<<"$out" ||
  fail "blstm is not the preset"
for key in dnn,cpu,fp32,9,1,9 cnn,cpu,fp32,4,1,4 lstm,cpu,fp32,3,3,9 blstm,cpu,fp32,2,3,6; do
  line=$(grep "^csv,$key,2," <<<"$out") || fail "no csv line for $key"
  awk -F, '{ for (i = 5; i <= NF; ++i) if ($i !~ /^[0-9]+(\.[0-9]+)?$/) exit 1 }' \
    <<<"$line" || fail "non-numeric field in: $line"
  # A step that does work has a positive rate.
  awk -F, '{ exit !($NF > 0) }' <<<"$line" || fail "no FLOP rate in: $line"
done
for model in dnn cnn lstm blstm; do
  if ! grep -q "^| $model | cuda | tf32 | " <<<"$out"; then
    grep -qE "^# $model cuda: skipped \(.*(no CUDA device|built without CUDA support)" <<<"$out" ||
      fail "cuda neither timed nor skipped with a reason for $model"
  else
    # --cuda_profile: every layer's passes, step by step.
    grep -q "^## $model on cuda (tf32), " <<<"$out" ||
      fail "no device profile for $model"
    grep -qE "^\| output \| backward \| gemm " <<<"$out" ||
      fail "no output layer GEMM in the profile"
  fi
done

# The worker step on a resident model, 1-bit, top-k, bfloat16 and float32
# pushes.
for enc in onebit topk bf16 float32; do
  wout=$("$bench" --backends=cpu --models=dnn,lstm --worker_step --push_every=2 \
    --push_encoding=$enc --hidden=16,16 --num_classes=7 --lstm_cells=8 \
    --lstm_layers=1 --lstm_projection=0 --batches=8 --sequences=2 --steps=3 \
    --warmup=1 --iters=4 2>&1) || fail "--worker_step --push_encoding=$enc failed: $wout"
  for model in dnn lstm; do
    grep -q "^| $model | cpu+worker | fp32 | " <<<"$wout" ||
      fail "no worker-step row for $model ($enc): $wout"
  done
done
# Without the next minibatch announced: its own backend label.
wout=$("$bench" --backends=cpu --models=dnn --worker_step --stage_batches=false \
  --hidden=16,16 --num_classes=7 --batches=8 --warmup=1 --iters=2 2>&1) ||
  fail "--worker_step --stage_batches=false failed: $wout"
grep -q "^| dnn | cpu+worker-unstaged | fp32 | " <<<"$wout" ||
  fail "no unstaged worker-step row: $wout"

if "$bench" --backends=cpu --worker_step --push_encoding=gzip --iters=1 \
    --hidden=16 >/dev/null 2>&1; then
  fail "--push_encoding=gzip was accepted"
fi
if "$bench" --backends=cpu --worker_step --push_encoding=topk --iters=1 \
    --top_k_fraction=0.5 --hidden=16 >/dev/null 2>&1; then
  fail "--top_k_fraction=0.5 was accepted"
fi

# Bad flags are errors, not tables.
if "$bench" --backends=tpu --iters=1 >/dev/null 2>&1; then
  fail "--backends=tpu was accepted"
fi
if "$bench" --models=rnn --iters=1 >/dev/null 2>&1; then
  fail "--models=rnn was accepted"
fi
if "$bench" --backends=cpu --cuda_conv_dw_slice_rows=-1 --iters=1 \
    --hidden=16 >/dev/null 2>&1; then
  fail "--cuda_conv_dw_slice_rows=-1 was accepted"
fi
echo "PASS"
