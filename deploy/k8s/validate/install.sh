#!/usr/bin/env bash
# Installs the npm packages of the offline deployment checks (kubernetes-models, ajv,
# js-yaml; pinned in package-lock.json) into deploy/k8s/validate/node_modules, if they
# are missing or older than the lock file. Run it before `bazel test` (scripts/test.sh
# does): the Bazel tests do not reach the network; they only load these packages.
# Needs node and npm (Debian: nodejs, npm).
set -euo pipefail
cd "$(dirname "$0")"

for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "deploy/k8s/validate/install.sh: '$tool' not found; install Debian's nodejs and npm" >&2
    exit 1
  fi
done

# npm writes node_modules/.package-lock.json on every install; it is newer than the
# committed lock file unless the lock file changed since.
stamp=node_modules/.package-lock.json
if [ -f "$stamp" ] && [ ! package-lock.json -nt "$stamp" ]; then
  exit 0
fi
echo "deploy/k8s/validate: npm ci" >&2
npm ci --no-audit --no-fund --loglevel=error
