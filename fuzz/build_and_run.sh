#!/usr/bin/env bash
# Builds the libFuzzer targets of asgd with Debian's clang (outside Bazel's
# gcc toolchain) and runs each for a bounded time over the committed seed
# corpus. Exits non-zero when a target crashes (sanitizer report, FUZZ_CHECK,
# timeout, leak) or cannot be built.
#
#   fuzz/build_and_run.sh                  # every target, 30 s each
#   fuzz/build_and_run.sh --seconds=600 --target=push
#   FUZZ_SECONDS=3600 fuzz/build_and_run.sh --workdir=/tmp/asgd-fuzz
#   fuzz/build_and_run.sh --write-seeds     # regenerate fuzz/corpus/
#   fuzz/build_and_run.sh -- -runs=1000     # extra libFuzzer flags
#
# Options:
#   --seconds=N        fuzzing time per target (default $FUZZ_SECONDS or 30)
#   --target=T         push, chunk, codec, kaldi, stage, a comma-separated list of
#                      them, or all (default): only what they need is built
#   --workdir=DIR      build and generated corpus here (default: a temp dir,
#                      removed at exit unless a target crashed). Objects are
#                      reused while the sources and flags are unchanged.
#   --artifacts=DIR    where crash inputs go (default $TEST_UNDECLARED_OUTPUTS_DIR
#                      or WORKDIR/artifacts)
#   --override=REL=PATH  compile PATH instead of the repository file REL (e.g.
#                      a copy of common/chunking.cc with a planted bug)
#   --write-seeds      only rebuild fuzz/corpus/ with make_seeds and exit
#
# Targets:
#   push   push_fuzzer.cc: PushChunk streams -> PushAssembler -> ParamStore
#   chunk  chunk_fuzzer.cc: layouts and chunk sequences -> ChunkAssembler
#   codec  codec_fuzzer.cc: compressed gradient chunks -> decoders, fused apply
#   kaldi  kaldi_fuzzer.cc: bytes -> the Kaldi archive, scp and object readers
#   stage  stage_fuzzer.cc: pipeline stage streams -> RelayReceiver, answers
#
# Needs: clang++ (Debian packages clang and libclang-rt-14-dev, which holds
# libFuzzer and the sanitizer runtimes), protoc (protobuf-compiler),
# libprotobuf-dev, libabsl-dev, zlib1g-dev. The source lists below follow the
# Bazel deps of //server:push_assembler and //kaldi:archive_reader (with
# //kaldi:archive_writer); keep them in step (and fuzz/BUILD's filegroup).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECONDS_PER_TARGET="${FUZZ_SECONDS:-30}"
TARGET=all
WORKDIR=""
ARTIFACTS="${TEST_UNDECLARED_OUTPUTS_DIR:-}"
WRITE_SEEDS=0
declare -A OVERRIDE=()
EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds=*) SECONDS_PER_TARGET="${1#*=}" ;;
    --target=*) TARGET="${1#*=}" ;;
    --workdir=*) WORKDIR="${1#*=}" ;;
    --artifacts=*) ARTIFACTS="${1#*=}" ;;
    --override=*) kv="${1#*=}"; OVERRIDE["${kv%%=*}"]="$(realpath "${kv#*=}")" ;;
    --write-seeds) WRITE_SEEDS=1 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "build_and_run: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
TARGETS=()
[ "$TARGET" = all ] && TARGET=push,chunk,codec,kaldi,stage
IFS=, read -r -a requested <<<"$TARGET"
for t in "${requested[@]}"; do
  case "$t" in push|chunk|codec|kaldi|stage) TARGETS+=("$t") ;;
    *) echo "build_and_run: --target takes push, chunk, codec, kaldi, stage (comma-separated) or all" >&2
       exit 2 ;; esac
done
[ "${#TARGETS[@]}" -gt 0 ] || { echo "build_and_run: no --target" >&2; exit 2; }
# Two build groups: the parameter-server sources (push, chunk, codec and the
# seed generator) and the Kaldi readers (kaldi).
BUILD_PS=0
BUILD_KALDI=0
for t in "${TARGETS[@]}"; do
  case "$t" in push|chunk|codec|stage) BUILD_PS=1 ;; kaldi) BUILD_KALDI=1 ;; esac
done
[ "$WRITE_SEEDS" = 1 ] && BUILD_PS=1
[[ "$SECONDS_PER_TARGET" =~ ^[0-9]+$ ]] || { echo "build_and_run: bad --seconds" >&2; exit 2; }

CXX=""
for c in "${CXX_FUZZ:-}" clang++-14 clang++; do
  if [ -n "$c" ] && command -v "$c" >/dev/null 2>&1; then CXX="$c"; break; fi
done
if [ -z "$CXX" ]; then
  echo "build_and_run: clang++ not found; install the Debian packages clang libclang-rt-14-dev" >&2
  exit 1
fi
command -v protoc >/dev/null 2>&1 || {
  echo "build_and_run: protoc not found; install protobuf-compiler" >&2; exit 1; }

KEEP_WORKDIR=0
if [ -z "$WORKDIR" ]; then
  WORKDIR="$(mktemp -d "${TEST_TMPDIR:-/tmp}/asgd-fuzz.XXXXXX")"
  trap '[ "$KEEP_WORKDIR" = 1 ] || rm -rf "$WORKDIR"' EXIT
fi
mkdir -p "$WORKDIR"
WORKDIR="$(cd "$WORKDIR" && pwd)"
BUILD="$WORKDIR/build"
ARTIFACTS="${ARTIFACTS:-$WORKDIR/artifacts}"
mkdir -p "$BUILD/gen" "$BUILD/obj" "$ARTIFACTS"

# The file to compile for repository path $1 (an --override wins).
src() { if [ -n "${OVERRIDE[$1]:-}" ]; then echo "${OVERRIDE[$1]}"; else echo "$ROOT/$1"; fi; }

LIB_SRCS=(common/chunking.cc common/model_layout.cc common/wire_codec.cc
          common/tensor_messages.cc common/refusal.cc common/text_quote.cc
          server/push_assembler.cc server/param_store.cc
          server/param_store_submit.cc server/shard.cc
          step/optimizer.cc server/staging_pool.cc compression/grad_codec.cc
          compression/grad_codec_one_bit.cc compression/grad_codec_top_k.cc
          step/compressed_apply.cc step/add_apply.cc step/admm_apply.cc
          server/update_log.cc
          worker/pipeline/stage_wire.cc)
HDRS=(common/bf16_bits.h common/chunking.h common/model_layout.h
      common/status_macros.h common/wire_codec.h common/tensor_messages.h
      common/refusal.h common/text_quote.h server/push_assembler.h
      server/param_store.h
      server/shard.h step/optimizer.h server/staging_pool.h
      fuzz/fuzz_common.h compression/grad_codec.h
      compression/grad_codec_internal.h step/compressed_apply.h
      server/update_log.h step/add_apply.h step/admm_apply.h
      worker/pipeline/stage_wire.h
      worker/pipeline/stage_link.h)
KALDI_SRCS=(kaldi/bad_data.cc kaldi/input_stream.cc kaldi/compressed_matrix.cc
            kaldi/object_reader.cc kaldi/posterior_object.cc kaldi/scp.cc
            kaldi/archive_reader.cc
            kaldi/archive_writer.cc)
KALDI_HDRS=(kaldi/bad_data.h kaldi/input_stream.h kaldi/compressed_matrix.h
            kaldi/matrix.h kaldi/object_parser.h kaldi/object_reader.h kaldi/scp.h
            kaldi/archive_reader.h kaldi/archive_writer.h kaldi/test_archive.h)
PS_FUZZ_SRCS=(fuzz/push_fuzzer.cc fuzz/chunk_fuzzer.cc fuzz/codec_fuzzer.cc
              fuzz/stage_fuzzer.cc fuzz/make_seeds.cc)

# As in third_party/BUILD (Debian's Abseil 20220623).
ABSL_LIBS=(-labsl_flags_parse -labsl_raw_hash_set -labsl_hash -labsl_city
  -labsl_low_level_hash -labsl_statusor -labsl_status -labsl_cord
  -labsl_cordz_info -labsl_cordz_handle -labsl_cordz_functions
  -labsl_cord_internal -labsl_exponential_biased -labsl_synchronization
  -labsl_graphcycles_internal -labsl_stacktrace -labsl_symbolize
  -labsl_debugging_internal -labsl_demangle_internal -labsl_malloc_internal
  -labsl_time -labsl_civil_time -labsl_time_zone -labsl_str_format_internal
  -labsl_strings -labsl_strings_internal -labsl_int128
  -labsl_bad_optional_access -labsl_bad_variant_access -labsl_throw_delegate
  -labsl_strerror -labsl_base -labsl_spinlock_wait -labsl_raw_logging_internal
  -labsl_log_severity)
SAN=(-fsanitize=address,undefined -fno-sanitize-recover=all)
CXXFLAGS=(-std=c++17 -O1 -g -fno-omit-frame-pointer -Wall -Wno-sign-compare
          "${SAN[@]}" -fsanitize=fuzzer-no-link -I"$ROOT" -I"$BUILD/gen")

LIBS=(-lprotobuf "${ABSL_LIBS[@]}" -lpthread)
O="$BUILD/obj"

# Compiles the given repository files (proto/*.pb.cc: the generated ones),
# one compiler per core; each object is named after its file.
compile() {
  local jobs_max pids=() f obj in p
  jobs_max="$(nproc 2>/dev/null || echo 2)"
  for f in "$@"; do
    obj="$O/$(basename "${f%.cc}").o"
    case "$f" in
      proto/*.pb.cc) in="$BUILD/gen/$f" ;;
      *) in="$(src "$f")" ;;
    esac
    "$CXX" "${CXXFLAGS[@]}" -c "$in" -o "$obj" &
    pids+=($!)
    if [ "${#pids[@]}" -ge "$jobs_max" ]; then
      wait "${pids[0]}" || { echo "build_and_run: compiling failed" >&2; exit 1; }
      pids=("${pids[@]:1}")
    fi
  done
  for p in "${pids[@]}"; do
    wait "$p" || { echo "build_and_run: compiling failed" >&2; exit 1; }
  done
}

# The stamp of a build group: its files, the flags and the compiler. A group is
# rebuilt only when its stamp changed.
stamp_of() {
  { for f in "$@"; do echo "$f"; cat "$(src "$f")"; done
    echo "${CXXFLAGS[*]}"; "$CXX" --version; } | sha256sum | cut -c1-16
}

if [ "$BUILD_PS" = 1 ]; then
  stamp="$(stamp_of "${LIB_SRCS[@]}" "${HDRS[@]}" "${PS_FUZZ_SRCS[@]}" \
                    kaldi/test_archive.h proto/asgd.proto proto/model.proto \
                    proto/pipeline.proto)"
  if [ "$(cat "$BUILD/stamp-ps" 2>/dev/null)" != "$stamp" ]; then
    start=$(date +%s)
    rm -f "$BUILD/stamp-ps"
    protoc --proto_path="$ROOT" --cpp_out="$BUILD/gen" "$ROOT/proto/asgd.proto" \
      "$ROOT/proto/model.proto" "$ROOT/proto/pipeline.proto"
    compile proto/asgd.pb.cc proto/model.pb.cc proto/pipeline.pb.cc \
      "${LIB_SRCS[@]}" "${PS_FUZZ_SRCS[@]}"
    "$CXX" "${SAN[@]}" -fsanitize=fuzzer -o "$BUILD/push_fuzzer" "$O/push_fuzzer.o" \
      "$O/push_assembler.o" "$O/param_store.o" "$O/param_store_submit.o" \
      "$O/shard.o" "$O/optimizer.o" "$O/add_apply.o" "$O/admm_apply.o" \
      "$O/staging_pool.o" "$O/tensor_messages.o" "$O/chunking.o" \
      "$O/text_quote.o" "$O/refusal.o" "$O/wire_codec.o" "$O/model_layout.o" \
      "$O/compressed_apply.o" "$O/grad_codec.o" "$O/grad_codec_one_bit.o" \
      "$O/grad_codec_top_k.o" "$O/update_log.o" \
      "$O/asgd.pb.o" "$O/model.pb.o" "${LIBS[@]}"
    "$CXX" "${SAN[@]}" -fsanitize=fuzzer -o "$BUILD/chunk_fuzzer" "$O/chunk_fuzzer.o" \
      "$O/chunking.o" "$O/text_quote.o" "$O/wire_codec.o" "$O/model_layout.o" \
      "${LIBS[@]}"
    "$CXX" "${SAN[@]}" -fsanitize=fuzzer -o "$BUILD/codec_fuzzer" "$O/codec_fuzzer.o" \
      "$O/compressed_apply.o" "$O/grad_codec.o" "$O/grad_codec_one_bit.o" \
      "$O/grad_codec_top_k.o" "$O/optimizer.o" "${LIBS[@]}"
    "$CXX" "${SAN[@]}" -fsanitize=fuzzer -o "$BUILD/stage_fuzzer" "$O/stage_fuzzer.o" \
      "$O/stage_wire.o" "$O/pipeline.pb.o" "${LIBS[@]}"
    "$CXX" "${SAN[@]}" -o "$BUILD/make_seeds" "$O/make_seeds.o" "$O/grad_codec.o" \
      "$O/grad_codec_one_bit.o" "$O/grad_codec_top_k.o" \
      "$O/chunking.o" "$O/text_quote.o" "$O/wire_codec.o" "$O/model_layout.o" \
      "$O/asgd.pb.o" "$O/model.pb.o" "$O/pipeline.pb.o" "${LIBS[@]}" -lz
    echo "$stamp" > "$BUILD/stamp-ps"
    echo "build_and_run: built push, chunk, codec, stage, make_seeds with $("$CXX" --version | head -1) in $(( $(date +%s) - start )) s"
  fi
fi
if [ "$BUILD_KALDI" = 1 ]; then
  # (kaldi_fuzzer.cc includes fuzz_common.h and with it the server headers.)
  stamp="$(stamp_of "${KALDI_SRCS[@]}" "${KALDI_HDRS[@]}" "${HDRS[@]}" \
                    fuzz/kaldi_fuzzer.cc)"
  if [ "$(cat "$BUILD/stamp-kaldi" 2>/dev/null)" != "$stamp" ]; then
    start=$(date +%s)
    rm -f "$BUILD/stamp-kaldi"
    compile "${KALDI_SRCS[@]}" fuzz/kaldi_fuzzer.cc
    KALDI_OBJS=()
    for f in "${KALDI_SRCS[@]}"; do KALDI_OBJS+=("$O/$(basename "${f%.cc}").o"); done
    "$CXX" "${SAN[@]}" -fsanitize=fuzzer -o "$BUILD/kaldi_fuzzer" "$O/kaldi_fuzzer.o" \
      "${KALDI_OBJS[@]}" "${LIBS[@]}" -lz
    echo "$stamp" > "$BUILD/stamp-kaldi"
    echo "build_and_run: built kaldi with $("$CXX" --version | head -1) in $(( $(date +%s) - start )) s"
  fi
fi

if [ "$WRITE_SEEDS" = 1 ]; then
  for t in push chunk codec kaldi stage; do
    rm -rf "$ROOT/fuzz/corpus/$t"
    mkdir -p "$ROOT/fuzz/corpus/$t"
  done
  "$BUILD/make_seeds" "$ROOT/fuzz/corpus"
  exit 0
fi

export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:symbolize=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
failed=()
for t in "${TARGETS[@]}"; do
  corpus="$WORKDIR/corpus-$t"  # new inputs go here, never into the seeds
  mkdir -p "$corpus"
  dict=()
  [ -f "$ROOT/fuzz/$t.dict" ] && dict=(-dict="$ROOT/fuzz/$t.dict")
  log="$WORKDIR/$t.log"
  echo "== ${t}_fuzzer: ${SECONDS_PER_TARGET} s over $(ls "$ROOT/fuzz/corpus/$t" | wc -l) seeds"
  rc=0
  "$BUILD/${t}_fuzzer" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$ARTIFACTS/$t-" \
      "${dict[@]}" "${EXTRA[@]}" "$corpus" "$ROOT/fuzz/corpus/$t" >"$log" 2>&1 || rc=$?
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
  eps="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)"
  cov="$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -1 || true)"
  if [ "$rc" -ne 0 ]; then
    failed+=("$t")
    KEEP_WORKDIR=1
    # The sanitizer or FUZZ_CHECK report, and the saved input.
    grep -v -E '^#[0-9]+\s+(NEW|REDUCE|pulse|INITED|RELOAD)' "$log" | tail -60
    crash="$(grep -oE "Test unit written to [^ ]+" "$log" | tail -1 | sed 's/Test unit written to //')"
    echo "${t}_fuzzer: CRASHED (exit $rc) after ${runs:-?} runs; input: ${crash:-?}"
    echo "reproduce: $BUILD/${t}_fuzzer ${crash:-CRASH_FILE}   (log: $log)"
  else
    echo "${t}_fuzzer: ok, ${runs:-?} runs, ${eps:-?} exec/s, ${cov:-}"
  fi
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "build_and_run: FAILED: ${failed[*]}"
  exit 1
fi
echo "build_and_run: all targets ran ${SECONDS_PER_TARGET} s without a crash"
