#!/usr/bin/env bash
# Smoke test of //bench:dnn_step_bench: runs it on a tiny model with a couple
# of steps and checks the table, the CSV lines, and that a cuda backend is
# either timed or skipped with a reason. Usage: dnn_step_bench_smoke_test.sh BIN
set -euo pipefail
bench="$1"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

out=$("$bench" --backends=cpu,cuda --input_dim=12 --hidden=16,8 \
  --num_classes=5 --batches=4,9 --warmup=1 --iters=2 --blas_threads=1) ||
  fail "bench exited with $?"
echo "$out"

grep -q "minibatches/s" <<<"$out" || fail "no table header"
grep -q "^| cpu | fp32 | 4 | " <<<"$out" || fail "no cpu row for batch 4"
grep -q "^| cpu | fp32 | 9 | " <<<"$out" || fail "no cpu row for batch 9"
grep -q "^csv,cpu,fp32,9,2," <<<"$out" || fail "no csv line for cpu batch 9"
grep -q "6 x batch x weights" <<<"$out" || fail "FLOP formula not stated"
if ! grep -q "^| cuda | tf32 | 4 | " <<<"$out"; then
  grep -qE "^# cuda: skipped \(.*(no CUDA device|built without CUDA support)" <<<"$out" ||
    fail "cuda neither timed nor skipped with a reason"
fi

# A bad flag is an error, not a table.
if "$bench" --backends=tpu --iters=1 >/dev/null 2>&1; then
  fail "--backends=tpu was accepted"
fi
echo "PASS"
