#!/usr/bin/env bash
# Runs the parameter-server benchmarks of docs/results/BENCHMARKS.md with the
# settings used there and keeps every output in one directory:
#
#   bench/run_ps_benchmarks.sh [OUT_DIR]      # default /tmp/asgd-bench
#
# A few minutes on 2 cores. The machine is shared: the script prints the load
# average before each benchmark (each benchmark prints it too); measure when
# nothing else is busy (`cat /proc/loadavg`, `ps -eo pcpu,comm --sort=-pcpu`).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/asgd-bench}"
mkdir -p "$out"

bazel build //bench:transport_bench //bench:apply_bench \
  //bench:server_capacity_bench //bench:optimizer_apply_gbench \
  //bench:codec_bench
bin=bazel-bin/bench

run() {
  local name="$1"
  shift
  echo "== $name: $* (load: $(cat /proc/loadavg))"
  "$@" | tee "$out/$name.txt"
}

{
  echo "nproc: $(nproc)"
  grep -m1 'model name' /proc/cpuinfo
  echo "GPU: none"
  echo "load average: $(cat /proc/loadavg)"
} | tee "$out/machine.txt"

# 1. push+pull: gRPC (float32 and bfloat16 on the wire) vs raw TCP,
#    64K..256M, 1..8 streams.
run transport "$bin/transport_bench" --payloads=64K,1M,16M,256M \
  --streams=1,2,4,8 --min_time_s=0.5 --rounds=2 --wire_dtypes=fp32,bf16
# 1b. chunk-size sensitivity (floats per TensorChunk: 256 KiB, 1 MiB, 3 MiB).
run transport_chunks "$bin/transport_bench" --payloads=1M,16M --streams=1,4 \
  --chunk_elements=65536,262144,786432 --min_time_s=0.5 --rounds=2
# 2. apply rate vs memcpy, 1..cores threads, directly and through ParamStore.
run apply "$bin/apply_bench" --params=67108864 --reps=4 --store_pushes=8 \
  --rounds=2
# 2b. the same with glibc's memcpy using non-temporal stores for the per-thread
#     slices too (by default only copies above ~181 MiB do; a 2-thread memcpy
#     of 2 x 128 MiB otherwise pays write-allocate traffic and barely scales).
run apply_nt env GLIBC_TUNABLES=glibc.cpu.x86_non_temporal_threshold=0x1000000 \
  "$bin/apply_bench" --params=67108864 --reps=4 --store_pushes=8 --rounds=2
run optimizer_apply_gbench "$bin/optimizer_apply_gbench" \
  --benchmark_min_time=0.2
# 3. the server's capacity for the seed's DNN per push encoding: pushes
#    alone, and with a pull after every push or overlapped pulls; then with
#    bf16 pulls.
run capacity "$bin/server_capacity_bench" --workers=1,2 --duration_s=4 \
  --pulls=every_push,overlapped,none
run capacity_bf16_pulls "$bin/server_capacity_bench" --workers=2 \
  --duration_s=4 --pulls=overlapped --wire_dtype=bf16
# 4. gradient encodings of the seed's DNN: wire bytes, the worker's encode
#    cost, fused decode+apply vs memcpy (also with non-temporal memcpy, and on
#    256 MiB buffers), the server's time per push.
run codec "$bin/codec_bench" --reps=4 --rounds=3
run codec_nt env GLIBC_TUNABLES=glibc.cpu.x86_non_temporal_threshold=0x1000000 \
  "$bin/codec_bench" --reps=4 --rounds=3 --encodings=fp32,onebit,topk:0.01
run codec_64m "$bin/codec_bench" --params=67108864 --reps=2 --rounds=3 \
  --encodings=fp32,onebit,topk:0.01
echo "== done; outputs in $out (load: $(cat /proc/loadavg))"
