#!/usr/bin/env bash
# Smoke test of //bench:sparse_layer_bench: tiny layers, short rounds; checks
# that it prints a table row and a numeric CSV line per (layer, density),
# and that bad flags are errors. It never looks at a time or a ratio.
# Usage: sparse_layer_bench_smoke_test.sh BIN
set -euo pipefail
bench="$1"
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
tiny=(--layers=5x16,40x8 --densities=0.3,1 --batch=40 --frames=3 --min_seconds=0 --rounds=1)
out=$("$bench" "${tiny[@]}") || fail "bench exited with $?"
echo "$out"
[[ $(grep -c "^csv,sparse_layer," <<<"$out") == 4 ]] || fail "expected 4 csv lines"
grep "^csv,sparse_layer," <<<"$out" |
  awk -F, '{ for (i = 3; i <= NF; ++i) if ($i !~ /^[0-9]+(\.[0-9]+)?$/) exit 1 }' ||
  fail "non-numeric csv field"
grep -q "^| 40x8 | 100% | " <<<"$out" || fail "no table row for 40x8 at density 1"
for bad in --layers=16 --layers=0x5 --densities=0 --densities=2 --batch=0 --frames=0 --rounds=0 --min_seconds=-1 --min_seconds=nan; do
  if "$bench" "${tiny[@]}" "$bad" >/dev/null 2>&1; then fail "$bad was accepted"; fi
done
echo PASS
