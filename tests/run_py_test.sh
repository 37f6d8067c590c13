#!/usr/bin/env bash
# Runs a Python test script from the runfiles: run_py_test.sh SCRIPT ARGS...
# (SCRIPT relative to the workspace root).
set -euo pipefail
script=$1
shift
exec python3 "${TEST_SRCDIR}/${TEST_WORKSPACE}/${script}" "$@"
