#!/usr/bin/env bash
# Installs onnxruntime-node (pinned in package-lock.json), the independent
# runtime tests/onnx_runtime_test.sh runs asgd's ONNX export in, into
# tests/onnx/node_modules, if it is missing or older than the lock file. Run
# it before `bazel test` (scripts/test.sh does): the Bazel tests do not reach
# the network. Needs node and npm (Debian: nodejs, npm).
#
# --ignore-scripts: the package bundles its CPU runtime
# (bin/napi-v*/linux/x64/libonnxruntime.so.1); its install script would only
# fetch GPU add-ons from elsewhere, which is not needed and fails offline.
set -euo pipefail
cd "$(dirname "$0")"

for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "tests/onnx/install.sh: '$tool' not found; install Debian's nodejs and npm" >&2
    exit 1
  fi
done

# npm writes node_modules/.package-lock.json on every install; it is newer than the
# committed lock file unless the lock file changed since.
stamp=node_modules/.package-lock.json
if [ -f "$stamp" ] && [ ! package-lock.json -nt "$stamp" ]; then
  exit 0
fi
echo "tests/onnx: npm ci --ignore-scripts" >&2
npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
