#!/usr/bin/env bash
# Smoke test of //bench:layer_bench: runs it on tiny layers for one step and
# checks that it prints the FLOP formula, a table row and a CSV line (with
# numeric fields) for every layer, and that bad flags are errors. It never
# looks at a time or a ratio. Usage: layer_bench_smoke_test.sh BIN
set -euo pipefail
bench="$1"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

tiny=(--lstm_cells=8 --lstm_inputs=5,9 --lstm_projection=3 --sequences=2
  --steps=3 --cnn_feature_dim=12 --cnn_context=2 --cnn_filters=3,4
  --cnn_kernels=2x3,2x2 --cnn_pools=1x2,1x1 --cnn_rows=5 --warmup=1
  --iters=1 --repeats=2)
out=$("$bench" "${tiny[@]}") || fail "bench exited with $?"
echo "$out"

grep -q "FLOPs = 2 x GEMM multiply-adds" <<<"$out" || fail "FLOP formula not stated"
grep -q "| layer GFLOP/s | sgemm ms | sgemm GFLOP/s | ratio |" <<<"$out" ||
  fail "no table header"
for key in lstm_in5 lstmp_in5 blstm_in5 lstm_in9 lstmp_in9 blstm_in9 conv1 conv2 cnn; do
  line=$(grep "^csv,${key}," <<<"$out") || fail "no csv line for $key"
  awk -F, '{ for (i = 3; i <= NF; ++i) if ($i !~ /^-?[0-9]+(\.[0-9]+)?$/) exit 1 }' \
    <<<"$line" || fail "non-numeric field in: $line"
done
# Input gradients: the small LSTM input is a first layer, the larger one not.
grep -q "^csv,lstm_in5,6,0," <<<"$out" || fail "lstm_in5 should have no input gradient"
grep -q "^csv,lstm_in9,6,1," <<<"$out" || fail "lstm_in9 should have an input gradient"
[[ $(grep -c "^| [a-z]" <<<"$out") == 10 ]] || fail "expected a header and 9 table rows"

# --only picks rows; the thread clock is accepted.
only=$("$bench" "${tiny[@]}" --only=conv2,blstm_in9 --clock=thread) ||
  fail "--only run exited with $?"
[[ $(grep -c "^csv,[a-z]" <<<"$only") == 3 ]] || fail "--only did not pick 2 rows"
grep -q "^csv,conv2," <<<"$only" || fail "--only lost conv2"

# Bad flags are errors, not tables.
for bad in --clock=sundial --cnn_kernels=3 --lstm_inputs=0 --iters=0; do
  if "$bench" "${tiny[@]}" "$bad" >/dev/null 2>&1; then
    fail "$bad was accepted"
  fi
done
echo "PASS"
