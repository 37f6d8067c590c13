#!/usr/bin/env bash
# Every flag the deployment files pass to an asgd binary must be one that binary defines:
# the flag files (deploy/compose/*.flags, deploy/k8s/*.flags, read with --flagfile) and
# the per-container flags written in docker-compose.yml and the Kubernetes manifests.
# A renamed or removed flag would otherwise only show when a container fails to start.
#
# Usage (Bazel passes the binaries): deploy_flags_test.sh SERVER WORKER EVAL MAKE_CORPUS
set -euo pipefail

server=$1 worker=$2 eval_bin=$3 make_corpus=$4
failed=0

# Flags a binary defines, from its --helpfull ("    --name (description)...").
# (--helpfull exits 1 by absl convention.)
defined() { { "$1" --helpfull 2>&1 || true; } | sed -nE 's/^ +--([A-Za-z0-9_]+) \(.*/\1/p' | sort -u; }

declare -A known_flags
for bin in "$server" "$worker" "$eval_bin" "$make_corpus"; do
  known_flags[$bin]=$(defined "$bin")
  [ -n "${known_flags[$bin]}" ] || { echo "FAIL: $bin --helpfull lists no flags"; exit 1; }
done

# check BINARY WHERE FLAG...: each FLAG (a name; "no" prefixes of booleans allowed) must
# be defined by BINARY.
check() {
  local bin=$1 where=$2 flag known
  shift 2
  known=${known_flags[$bin]}
  for flag in "$@"; do
    if ! grep -qx "$flag" <<<"$known" && ! { [[ $flag == no* ]] && grep -qx "${flag#no}" <<<"$known"; }; then
      echo "FAIL: $where: --$flag is not a flag of $(basename "$bin")"
      failed=1
    fi
  done
}

# Flag names in an absl flag file.
flag_names() { sed -nE 's/^[[:space:]]*--([A-Za-z0-9_]+).*/\1/p' "$1"; }

for dir in deploy/compose deploy/k8s; do
  check "$server" "$dir/server.flags" $(flag_names "$dir/server.flags")
  check "$worker" "$dir/worker.flags" $(flag_names "$dir/worker.flags")
done

# Flags written directly in the compose file and manifests, per binary: take each line
# or list that starts the binary and collect its --flags.
direct_flags() { # FILE BINARY
  tr -d '",[]' <"$1" | awk -v b="$2" '
    { for (i = 1; i <= NF; i++) if ($i == b || $i ~ ("^" b "$")) on = 1 }
    on { for (i = 1; i <= NF; i++) if ($i ~ /^--[A-Za-z0-9_]+/) { sub(/^--/, "", $i); sub(/=.*/, "", $i); print $i } }
    { on = 0 }' | sort -u
}
for f in deploy/docker-compose.yml deploy/docker-compose.gpu.yml deploy/k8s/*.yaml; do
  check "$server" "$f" $(direct_flags "$f" asgd_server | grep -vx flagfile || true)
  check "$worker" "$f" $(direct_flags "$f" asgd_worker | grep -vx flagfile || true)
  check "$eval_bin" "$f" $(direct_flags "$f" asgd_eval || true)
  check "$make_corpus" "$f" $(direct_flags "$f" make_corpus || true)
done

if [ "$failed" -ne 0 ]; then
  echo "FAIL: the deployment files use flags the binaries do not define (see above)"
  exit 1
fi
echo "PASS: every flag in the deployment files is defined by its binary"
