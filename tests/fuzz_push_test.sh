#!/usr/bin/env bash
# Bazel wrapper of fuzz/build_and_run.sh: builds every libFuzzer target with
# clang from the runfiles and fuzzes each for a bounded time (args from BUILD:
# 15 s per target). Longer: bazel test //tests:fuzz_push_test
#   --test_arg=--seconds=600 --test_timeout=1800
# Crash inputs land in bazel-testlogs/tests/fuzz_push_test/test.outputs/.
set -euo pipefail
exec "${TEST_SRCDIR}/${TEST_WORKSPACE}/fuzz/build_and_run.sh" "$@"
