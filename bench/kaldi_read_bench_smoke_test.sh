#!/usr/bin/env bash
# Smoke test of //bench:kaldi_read_bench on tiny sizes: prints both tables and
# their CSV lines, and the streaming pass over a 96 MiB archive stays within a
# 40 MiB RSS budget (the bench's own check, its exit code). Never looks at a
# time or a ratio. Usage: kaldi_read_bench_smoke_test.sh BIN
set -euo pipefail
bench="$1"
dir="${TEST_TMPDIR:-$(mktemp -d)}/kaldi_read_bench"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

out=$("$bench" --dir="$dir" --throughput_mb=4 --repeats=1 --stream_mb=96 \
  --budget_mb=40) || fail "bench exited with $?: $out"
echo "$out"
grep -q "^| fm | sequential | warm | " <<<"$out" || fail "no FM sequential row"
grep -q "^| cm | source | cold | " <<<"$out" || fail "no CM source row"
grep -q "^csv,kaldi_read,throughput,cm,sequential,warm," <<<"$out" || fail "no csv"
grep -q "^csv,kaldi_read,stream," <<<"$out" || fail "no stream csv"
grep -q "peak RSS .* within the 40 MiB budget" <<<"$out" || fail "no budget line"
[ ! -e "$dir" ] || fail "generated files left behind in $dir"
echo "PASS"
