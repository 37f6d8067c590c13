#!/usr/bin/env bash
# Bazel wrapper of prometheus_live_test.py (see its docstring).
set -euo pipefail
exec python3 "${TEST_SRCDIR}/${TEST_WORKSPACE}/tests/prometheus_live_test.py" "$@"
