#!/usr/bin/env bash
# Bazel wrapper of build_and_run.sh for the Kaldi reader target: builds
# kaldi_fuzzer with clang from the runfiles and fuzzes it for a bounded time
# (args from BUILD: 15 s). Longer: bazel test //fuzz:kaldi_fuzz_test
#   --test_arg=--seconds=600 --test_timeout=1800
# Crash inputs land in bazel-testlogs/fuzz/kaldi_fuzz_test/test.outputs/.
set -euo pipefail
exec "${TEST_SRCDIR}/${TEST_WORKSPACE}/fuzz/build_and_run.sh" --target=kaldi "$@"
