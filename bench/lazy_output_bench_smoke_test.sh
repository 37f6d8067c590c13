#!/usr/bin/env bash
# Smoke test of //bench:lazy_output_bench: tiny layers, short rounds; checks
# that it prints a table row and a numeric CSV line per (layer, fraction),
# and that bad flags are errors. It never looks at a time or a ratio.
# Usage: lazy_output_bench_smoke_test.sh BIN
set -euo pipefail
bench="$1"
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
tiny=(--layers=16x5,8x40 --fractions=0.2,1 --batch=4 --frames=3 --min_seconds=0 --rounds=1)
out=$("$bench" "${tiny[@]}") || fail "bench exited with $?"
echo "$out"
[[ $(grep -c "^csv,lazy_output," <<<"$out") == 4 ]] || fail "expected 4 csv lines"
grep "^csv,lazy_output," <<<"$out" |
  awk -F, '{ for (i = 3; i <= NF; ++i) if ($i !~ /^[0-9]+(\.[0-9]+)?$/) exit 1 }' ||
  fail "non-numeric csv field"
grep -q "^| 8x40 | 20% |" <<<"$out" || fail "no table row for 8x40 at 20%"
for bad in --layers=16 --layers=0x5 --fractions=0 --fractions=1.5 --batch=0 --frames=0 --rounds=0 --min_seconds=-1 --min_seconds=nan; do
  if "$bench" "${tiny[@]}" "$bad" >/dev/null 2>&1; then fail "$bad was accepted"; fi
done
echo PASS
