#!/usr/bin/env bash
# asgd's ONNX export of every model kind run in onnxruntime (an independent
# runtime) against asgd's own log-posteriors: tests/onnx_reference_main.cc
# writes the models, inputs and expected outputs; tests/onnx_runtime_test.js
# runs them. onnxruntime-node is installed outside Bazel by
# tests/onnx/install.sh (scripts/test.sh runs it first), because tests do not
# reach the network.
# Usage: onnx_runtime_test.sh REFERENCE_TOOL SCRIPT.js
set -euo pipefail
REFERENCE=$1 SCRIPT=$2
if ! command -v node >/dev/null 2>&1; then
  echo "FAIL: node not found; install Debian's nodejs (and npm), then run tests/onnx/install.sh" >&2
  exit 1
fi
# node_modules lives next to the real package.json (it is not a Bazel input).
pkg=$(readlink -f tests/onnx/package.json)
modules="$(dirname "$pkg")/node_modules"
if [ ! -d "$modules/onnxruntime-node" ]; then
  echo "FAIL: $modules/onnxruntime-node is missing; run tests/onnx/install.sh" >&2
  exit 1
fi
DIR=$(mktemp -d "${TEST_TMPDIR:-/tmp}/onnx.XXXXXX")
"$REFERENCE" --out="$DIR"
NODE_PATH="$modules" node "$SCRIPT" "$DIR"
