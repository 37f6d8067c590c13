#!/usr/bin/env bash
# asgd's ONNX export of every model kind run in onnxruntime (an independent
# runtime) against asgd's own log-posteriors: tests/onnx_reference_main.cc
# writes the models, inputs and expected outputs; tests/onnx_runtime_test.js
# runs them. onnxruntime-node is installed outside Bazel by
# tests/onnx/install.sh (scripts/test.sh runs it first), because tests do not
# reach the network.
# Then a smoke run of bench/onnx_decode_bench.js on the exported models.
# Usage: onnx_runtime_test.sh REFERENCE_TOOL SCRIPT.js BENCH.js
set -euo pipefail
REFERENCE=$1 SCRIPT=$2 BENCH=$3
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
# The decode bench: one line per model with a positive speed; a bad flag is
# refused.
out=$(NODE_PATH="$modules" node "$BENCH" --frames=512 --batch=256 --rounds=1 \
  "$DIR/dnn.onnx" "$DIR/lstm.onnx")
echo "$out"
for kind in dnn lstm; do
  grep -qE "/$kind\.onnx frames_per_s [1-9][0-9]*$" <<<"$out" ||
    { echo "FAIL: onnx_decode_bench gave no speed for $kind" >&2; exit 1; }
done
if NODE_PATH="$modules" node "$BENCH" --frames=0 "$DIR/dnn.onnx" 2>/dev/null; then
  echo "FAIL: onnx_decode_bench accepted --frames=0" >&2
  exit 1
fi
echo "onnx_decode_bench: ok"
