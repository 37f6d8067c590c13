#!/usr/bin/env bash
# Offline check of deploy/docker-compose.yml (and its GPU override): docker-compose 1.29
# (Debian's docker-compose; no Docker daemon needed) must accept the file, the expected
# services must be there, and Prometheus must scrape exactly the server and worker
# services on their --metrics_port. Fails, never skips, when docker-compose is missing.
set -euo pipefail

compose=deploy/docker-compose.yml
gpu=deploy/docker-compose.gpu.yml
fail() { echo "FAIL: $*" >&2; exit 1; }

command -v docker-compose >/dev/null 2>&1 ||
  fail "docker-compose not found: install Debian's docker-compose (scripts/install_deps.sh)"

# Compose reads these from the environment; the checks must not depend on the caller's.
unset ASGD_IMAGE ASGD_GPU_IMAGE COMPOSE_FILE COMPOSE_PROJECT_NAME COMPOSE_PROFILES || true
export HOME=${TEST_TMPDIR:-${TMPDIR:-/tmp}}

echo "== docker-compose -f $compose config"
# The normalised config (anchors and paths resolved); fails on an invalid file.
normalized=$(docker-compose -f "$compose" config) || fail "$compose is not a valid compose file"
echo "== docker-compose -f $compose -f $gpu config -q"
docker-compose -f "$compose" -f "$gpu" config -q || fail "$gpu does not combine with $compose"

services=$(docker-compose -f "$compose" config --services)
for s in corpus server-0 server-1 worker-0 worker-1 prometheus grafana; do
  grep -qx "$s" <<<"$services" || fail "$compose has no service $s (has: $(echo $services))"
done

# The normalised config of one service.
service_config() {
  awk -v s="  $1:" <<<"$normalized" '
    $0 == s {on = 1; next}
    on && /^  [^ ]/ {on = 0}
    on {print}'
}
for s in server-0 server-1; do
  service_config "$s" | grep -q -- '--health_probe=127.0.0.1:50051' ||
    fail "$s has no healthcheck running asgd_server --health_probe"
done
for s in worker-0 worker-1; do
  cfg=$(service_config "$s")
  grep -q 'condition: service_healthy' <<<"$cfg" || fail "$s does not wait for healthy servers"
  grep -q 'condition: service_completed_successfully' <<<"$cfg" || fail "$s does not wait for the corpus"
done

# Prometheus targets <-> services and metrics ports.
server_port=$(sed -n 's/^--metrics_port=//p' deploy/compose/server.flags)
worker_port=$(sed -n 's/^--metrics_port=//p' deploy/compose/worker.flags)
want=$(
  grep -E '^(server|worker)-[0-9]+$' <<<"$services" | while read -r s; do
    case $s in server-*) echo "$s:$server_port" ;; worker-*) echo "$s:$worker_port" ;; esac
  done | sort
)
got=$(grep -oE '"(server|worker)-[0-9]+:[0-9]+"' deploy/prometheus/prometheus.yml | tr -d '"' | sort)
[ "$want" = "$got" ] ||
  fail "deploy/prometheus/prometheus.yml scrapes [$(echo $got)], the compose services are [$(echo $want)]"

# Pool sizes in the flag files match the services.
n_servers=$(grep -cE '^server-[0-9]+$' <<<"$services")
n_workers=$(grep -cE '^worker-[0-9]+$' <<<"$services")
grep -qx -- "--num_servers=$n_servers" deploy/compose/server.flags ||
  fail "deploy/compose/server.flags: --num_servers is not $n_servers (the server services)"
grep -qx -- "--num_workers=$n_workers" deploy/compose/worker.flags ||
  fail "deploy/compose/worker.flags: --num_workers is not $n_workers (the worker services)"
echo "PASS: compose files valid; $n_servers servers, $n_workers workers, Prometheus targets match"
