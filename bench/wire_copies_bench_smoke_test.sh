#!/usr/bin/env bash
# Smoke test of //bench:wire_copies_bench: one short round; checks that the
# decoded pushes and the pulled model equal what was sent ("# check ...
# yes"), that it prints a numeric CSV line per row, and that bad flags are
# errors. It never looks at a time or a ratio.
# Usage: wire_copies_bench_smoke_test.sh BIN
set -euo pipefail
bench="$1"
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
out=$("$bench" --rounds=1 --min_seconds=0.001) || fail "bench exited with $?"
echo "$out"
grep -q "^# check: the decoded pushes and the pulled model equal the values sent: yes$" \
  <<<"$out" || fail "no passing check"
# 4 worker push rows, 2 server push rows, server and worker pull, 2 1-bit rows.
[[ $(grep -c "^csv,wire_copies," <<<"$out") == 10 ]] || fail "expected 10 csv lines"
grep "^csv,wire_copies," <<<"$out" |
  awk -F, '{ for (i = NF - 2; i <= NF; ++i) if ($i !~ /^[0-9]+(\.[0-9]+)?$/) exit 1 }' ||
  fail "non-numeric csv field"
for bad in --rounds=0 --min_seconds=0; do
  if "$bench" "$bad" >/dev/null 2>&1; then fail "$bad was accepted"; fi
done
echo PASS
