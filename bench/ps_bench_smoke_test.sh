#!/usr/bin/env bash
# Smoke test of the parameter-server benchmarks: runs one of them for a moment
# on tiny sizes and checks that it reports numbers (its table and its CSV
# lines, every numeric field a finite number, one line per configuration
# asked for), and that a bad flag is an error. It never looks at the value of
# a time, a rate or a ratio: the machine is shared and noisy.
#
# Usage: ps_bench_smoke_test.sh transport|apply|capacity|gbench|codec BINARY
set -euo pipefail
which="$1"
bench="$2"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# check_csv PREFIX EXPECTED_LINES FIRST_NUMERIC_FIELD: the CSV lines starting
# with PREFIX number EXPECTED_LINES and fields FIRST_NUMERIC_FIELD.. are all
# finite numbers.
check_csv() {
  local prefix="$1" expected="$2" first="$3"
  local lines
  lines=$(grep "^${prefix}," <<<"$out" || true)
  local count
  count=$(grep -c . <<<"$lines" || true)
  [[ "$count" == "$expected" ]] ||
    fail "expected $expected '$prefix' lines, got $count"
  awk -F, -v first="$first" '
    {
      for (i = first; i <= NF; ++i) {
        if ($i !~ /^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$/) {
          printf("field %d of line %d is not a number: \"%s\"\n", i, NR, $i)
          bad = 1
        }
      }
    }
    END { exit bad }' <<<"$lines" || fail "non-numeric fields in '$prefix' lines"
}

case "$which" in
  transport)
    out=$("$bench" --payloads=64K,1M --streams=1,2 --min_time_s=0 \
      --min_iters=1 --shards=1 --warmup_max=1M --wire_dtypes=fp32,bf16) ||
      fail "bench exited with $?"
    echo "$out"
    grep -q "| wire | gRPC transport | raw TCP GB/s | gRPC push+pull GB/s | gRPC / TCP |" <<<"$out" ||
      fail "no table header"
    grep -q "^| 64K | 1 | 262144 | fp32 | stream | " <<<"$out" || fail "no row for 64K x 1"
    # The per-call transport is retired (protocol 2): streams only.
    if grep -q "| calls | " <<<"$out"; then fail "a per-call row"; fi
    grep -q "^| 1M | 2 | 262144 | fp32 | stream | " <<<"$out" || fail "no row for 1M x 2"
    grep -q "^| 1M | 2 | 262144 | bf16 | stream | " <<<"$out" ||
      fail "no bf16 row for 1M x 2"
    # payload, streams, chunk, then the measured fields (wire bytes per
    # parameter, 4 or 2; persistent streams, 1 or 0; microseconds).
    check_csv "csv,transport" 8 3
    grep -q ",2,1,[0-9.]*$" <<<"$(grep '^csv,transport,' <<<"$out")" ||
      fail "no bf16 CSV line"
    grep -q "^# machine\|^# transport_bench: machine: " <<<"$out" ||
      fail "no machine line"
    grep -q "load average at start" <<<"$out" || fail "no load average"
    bad=(--wire_dtypes=fp16)
    ;;
  apply)
    out=$("$bench" --params=262144 --threads=1,2 --reps=1 --store_pushes=2 \
      --gradients=2 --rounds=1) || fail "bench exited with $?"
    echo "$out"
    grep -q "| apply / memcpy |" <<<"$out" || fail "no table header"
    for opt in sgd momentum; do
      for path in direct untracked store; do
        for t in 1 2; do
          grep -q "^csv,apply,$opt,$path,$t," <<<"$out" ||
            fail "no csv line for $opt $path $t"
        done
      done
    done
    check_csv "csv,apply" 12 5
    check_csv "csv,tracking" 4 4
    grep -q "12 B/param" <<<"$out" || fail "byte convention not stated"
    bad=(--optimizers=adam)
    ;;
  capacity)
    out=$("$bench" --input_dim=20 --hidden=32,32 --num_classes=10 \
      --workers=1,2 --duration_s=0.1 --shards=2) || fail "bench exited with $?"
    echo "$out"
    grep -q "| pulls | workers | encoding | pushes/s | × fp32 |" <<<"$out" ||
      fail "no table header"
    # 2 pull patterns x 2 worker counts x 4 encodings.
    check_csv "csv,capacity" 16 3
    for pulls in every_push overlapped; do
      for enc in fp32 bf16 onebit topk; do
        grep -q "^| $pulls | 2 | $enc | " <<<"$out" ||
          fail "no row for $pulls pulls, 2 workers, $enc"
        grep -q "^# saturation ($pulls pulls, $enc pushes): " <<<"$out" ||
          fail "no saturation line for $pulls, $enc"
      done
    done
    # Compressed pushes write fewer bytes than float32 ones (a count, not a
    # time): the wire bytes per push field of each line (field 12), by
    # encoding (field 5: 0 fp32, 2 onebit).
    awk -F, '$1 == "csv" && $2 == "capacity" { b[$5] = $12 }
      END { exit !(b[0] > 0 && b[2] > 0 && b[2] * 4 < b[0]) }' <<<"$out" ||
      fail "1-bit pushes are not at least 4x smaller than fp32 ones"
    # Pushes alone: no pull after the first one (field 8, pulls, is 0).
    none=$("$bench" --input_dim=20 --hidden=32,32 --num_classes=10 \
      --workers=1 --duration_s=0.1 --shards=2 --pulls=none \
      --push_encodings=onebit) || fail "bench --pulls=none exited with $?"
    echo "$none"
    awk -F, '$1 == "csv" && $2 == "capacity" { n++; if ($3 == 2 && $7 > 0 && $8 == 0) ok++ }
      END { exit !(n == 1 && ok == 1) }' <<<"$none" ||
      fail "--pulls=none: not one line with pushes and no pulls"
    bad=(--workers=0 --push_encodings=fp64 --pulls=sometimes)
    ;;
  codec)
    out=$("$bench" --params=65536 --threads=1,2 --reps=1 --rounds=1 \
      --encodings=fp32,onebit,topk:0.01) || fail "bench exited with $?"
    echo "$out"
    grep -q "| encoding | wire bytes per push | bits per parameter |" <<<"$out" ||
      fail "no wire table header"
    grep -q "| optimizer | encoding | path | threads | ms per push |" <<<"$out" ||
      fail "no apply table header"
    for opt in sgd momentum; do
      for t in 1 2; do
        for row in fp32,apply fp32,decode+apply onebit,fused topk:0.01,fused; do
          grep -q "^csv,codec_apply,$opt,$row,$t," <<<"$out" ||
            fail "no csv line for $opt $row $t"
        done
      done
    done
    check_csv "csv,codec_wire" 3 4
    check_csv "csv,codec_apply" 16 6
    check_csv "csv,codec_server" 6 5
    grep -q "12 B/param" <<<"$out" || fail "byte convention not stated"
    bad=(--encodings=fp16)
    ;;
  gbench)
    out=$("$bench" --benchmark_filter='/65536/' --benchmark_min_time=0.01 \
      --benchmark_format=csv 2>/dev/null) || fail "bench exited with $?"
    echo "$out"
    for name in BM_ApplySgd BM_ApplyMomentum BM_Memcpy; do
      grep -q "^\"$name/65536/real_time\"," <<<"$out" || fail "no line for $name"
    done
    # name,iterations,real_time,cpu_time,time_unit,bytes_per_second,...
    lines=$(grep '^"BM_' <<<"$out")
    awk -F, '{
      if ($2 !~ /^[0-9]+$/ || $6 !~ /^[0-9.e+]+$/ || $7 !~ /^[0-9.e+]+$/) {
        print "bad line: " $0; bad = 1
      }
    } END { exit bad }' <<<"$lines" || fail "no bytes/items per second"
    echo "PASS"
    exit 0
    ;;
  *)
    fail "unknown benchmark '$which'"
    ;;
esac

# A bad flag is an error, not a table (each of them, one at a time).
for flag in "${bad[@]}"; do
  if "$bench" "$flag" >/dev/null 2>&1; then
    fail "$flag was accepted"
  fi
done
echo "PASS"
