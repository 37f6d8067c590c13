#!/usr/bin/env bash
# Smoke test of //bench:replay_bench: a tiny DNN, short rounds; checks that
# every replay path left the host replay's bits ("# check ... yes"), that it
# prints a numeric CSV line per (encoding, path), and that bad flags are
# errors. It never looks at a time or a ratio.
# Usage: replay_bench_smoke_test.sh BIN
set -euo pipefail
bench="$1"
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
tiny=(--hidden=64 --num_classes=10 --chunk_elements=1000 --group=64
  --threads=1,3 --min_seconds=0 --rounds=1)
out=$("$bench" "${tiny[@]}") || fail "bench exited with $?"
echo "$out"
[[ $(grep -c "^# check (.*): the host pass leaves the host replay's bits: yes$" <<<"$out") == 2 ]] ||
  fail "expected a passing check per encoding"
# parse, host x1, host x1 pruned, host x3, plan, host pass; for onebit and
# topk.
[[ $(grep -c "^csv,replay," <<<"$out") == 12 ]] || fail "expected 12 csv lines"
grep -q "^| onebit | host x1 pruned | " <<<"$out" || fail "no row for a pruned model"
[[ $("$bench" "${tiny[@]}" --pruned=0 | grep -c "^csv,replay,") == 10 ]] ||
  fail "--pruned=0 still printed the pruned rows"
grep "^csv,replay," <<<"$out" |
  awk -F, '{ if ($5 !~ /^[0-9]+(\.[0-9]+)?$/) exit 1 }' ||
  fail "non-numeric csv field"
grep -q "^| onebit | host x3 | " <<<"$out" || fail "no row for 3 threads"
for bad in --servers=0 --group=0 --chunk_elements=0 --top_k=0 --top_k=2 \
  --rounds=0 --encodings=fp16 --hidden=0 --backend=nope --pruned=1 \
  --pruned=-0.5; do
  if "$bench" "${tiny[@]}" "$bad" >/dev/null 2>&1; then fail "$bad was accepted"; fi
done
echo PASS
