#!/usr/bin/env bash
# Runs one Node.js deployment check: deploy_node_test.sh tests/deploy_<name>_test.js [args]
# with the npm packages of deploy/k8s/validate (kubernetes-models, ajv, js-yaml).
# Those are installed outside Bazel, by deploy/k8s/validate/install.sh (scripts/test.sh
# runs it first), because tests do not reach the network. Run from the workspace root or
# the Bazel runfiles root.
set -euo pipefail

script=${1:?usage: deploy_node_test.sh SCRIPT.js [ARGS...]}
shift

if ! command -v node >/dev/null 2>&1; then
  echo "FAIL: node not found; install Debian's nodejs (and npm), then run deploy/k8s/validate/install.sh" >&2
  exit 1
fi

# The runfiles tree links to the source tree; node_modules lives next to the real
# package.json (it is not a Bazel input).
pkg=$(readlink -f deploy/k8s/validate/package.json)
ASGD_VALIDATE_DIR=$(dirname "$pkg")
if [ ! -d "$ASGD_VALIDATE_DIR/node_modules" ]; then
  echo "FAIL: $ASGD_VALIDATE_DIR/node_modules is missing; run deploy/k8s/validate/install.sh" >&2
  exit 1
fi
# The real source tree, for inputs no BUILD file exports yet (docs/metrics.md).
ASGD_REPO_ROOT=$(cd "$ASGD_VALIDATE_DIR/../../.." && pwd)
export ASGD_VALIDATE_DIR ASGD_REPO_ROOT
exec node "$script" "$@"
