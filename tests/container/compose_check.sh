#!/usr/bin/env bash
# Image and compose check: builds deploy/docker/Dockerfile with podman and runs
# deploy/docker-compose.yml for real through podman's Docker-compatible API with
# docker-compose, on a fresh clone of the commit being tested (HEAD of the
# checkout this script is in).
#
#   1. Makes (or takes from the cache) the Debian 12 base and imports it as
#      debian:bookworm (tests/container/lib.sh): the Dockerfile's FROM lines
#      resolve to it and nothing is pulled (--pull=never).
#   2. Builds the image as the README says, with podman, CPU-only
#      (--build-arg ASGD_GPU=none: NVIDIA's CUDA image cannot be pulled here),
#      with the absolute -f path podman needs to read
#      deploy/docker/Dockerfile.dockerignore; checks that the ignore file was
#      honoured (files it excludes, planted in the clone, are not in the build
#      context) and that the image is the CPU-only variant.
#   3. Builds Prometheus from Debian's package (prometheus.Dockerfile) and
#      brings the stack up with docker-compose: the user's compose file plus
#      docker-compose.check.yml (a small corpus; the Prometheus image built
#      here instead of the upstream one). Grafana is left out: no reachable
#      registry has it (see docker-compose.check.yml).
#   4. Asserts: the corpus job completes; both servers pass their health
#      checks; both workers train to the end (exit 0) and print a held-out
#      frame accuracy of at least CHECK_MIN_ACCURACY; then the on-demand `eval`
#      service (`docker-compose run --rm eval`, as deploy/README.md says)
#      evaluates the servers' model: at least CHECK_MIN_SERVERS_ACCURACY;
#      Prometheus (HTTP API)
#      has exactly the five targets of deploy/prometheus/prometheus.yml, every
#      one scraped with up == 1 (the workers' while they trained, the others
#      still at the end), and asgd metrics from both workers.
#   5. Takes the stack down (`down -v`) and fails if any container, volume,
#      network or process of the run is left.
#
# Podman runs health checks from systemd timers; where systemd is not running
# (containers, CI machines) nothing would run them and the servers would never
# turn healthy, so this script runs `podman healthcheck run` for each
# container at the interval its health check asks for, as the timer would.
#
# Usage (as root):  tests/container/compose_check.sh
# Progress and timings go to stdout, every log to the directory it names.
# Last line: "PASS: ..." or "FAIL: ...".
#
# Settings (environment variables):
#   CHECK_MIN_ACCURACY     lower bound on each worker's held-out accuracy (default 50).
#                          A worker evaluates the model at its own end; the first to end
#                          sees it while the other still trains, and such models ranged
#                          from 63.8% to 76.3% over 19 runs
#   CHECK_MIN_SERVERS_ACCURACY  lower bound on the held-out accuracy of the servers'
#                          model after both workers have ended (default 70; the last
#                          worker to end saw 76.5-76.9% in the same runs)
#   CHECK_BUILD_TIMEOUT_S  bound on the image build (default 2400)
#   CHECK_TRAIN_TIMEOUT_S  bound on the stack's start and training (default 900)
#   ASGD_CHECK_DIR, ASGD_CONTAINER_CACHE: see tests/container/lib.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

MIN_ACCURACY=${CHECK_MIN_ACCURACY:-50}
MIN_SERVERS_ACCURACY=${CHECK_MIN_SERVERS_ACCURACY:-70}
BUILD_TIMEOUT=${CHECK_BUILD_TIMEOUT_S:-2400}
TRAIN_TIMEOUT=${CHECK_TRAIN_TIMEOUT_S:-900}
PROM_IMAGE=localhost/asgd-check-prometheus:latest
# Every service but grafana (not available here; see docker-compose.check.yml).
SERVICES=(corpus server-0 server-1 worker-0 worker-1 prometheus)

ctr_setup compose docker-compose
# A compose project of its own: podman keeps the DNS entries of compose networks in
# one directory for the whole machine, by network name.
PROJECT=asgd-check-$(echo "${CTR_RUN##*-}" | tr 'A-Z' 'a-z')
ctr_base_image
clone=$CTR_RUN/clone
ctr_clone "$clone"

# --- The image --------------------------------------------------------------
# Files the ignore file excludes, planted in the build context: none may reach it.
planted=(bazel-planted tests/node_modules/planted planted.tmp)
for f in "${planted[@]}"; do mkdir -p "$clone/$(dirname "$f")"; echo planted >"$clone/$f"; done
build_args=(--pull=never --build-arg ASGD_GPU=none -f "$clone/deploy/docker/Dockerfile")
ctr_say "podman build ${build_args[*]} -t asgd:latest $clone (log: $CTR_LOGS/image-build.log)"
ctr_timed "image build (CPU-only, cold)" ctr_logged "$CTR_LOGS/image-build.log" \
  timeout -k 10 "$BUILD_TIMEOUT" podman build "${build_args[@]}" -t asgd:latest "$clone" ||
  ctr_fail "the image did not build (log: $CTR_LOGS/image-build.log)"

# The build stage again (every layer cached) to look at its copy of the context.
ctr_logged "$CTR_LOGS/image-build-stage.log" \
  podman build "${build_args[@]}" --target build -t asgd-check-build-stage "$clone" ||
  ctr_fail "could not tag the build stage"
context=$(podman run --rm asgd-check-build-stage sh -c \
  'cd /src && ls -A; ls -A tests | sed "s|^|tests/|"') ||
  ctr_fail "could not list the build context"
for f in .git deploy "${planted[@]}"; do
  if grep -qx "${f%%/planted}" <<<"$context" || grep -qx "$f" <<<"$context"; then
    ctr_fail "$f is in the build context: deploy/docker/Dockerfile.dockerignore was not honoured"
  fi
done
for f in WORKSPACE worker tests/BUILD; do
  grep -qx "$f" <<<"$context" || ctr_fail "$f is missing from the build context"
done
ctr_say "build context: the ignore file was honoured (no .git, deploy/, bazel-*, node_modules, *.tmp)"
podman rmi asgd-check-build-stage >/dev/null

gpu=$(podman image inspect --format '{{index .Config.Labels "io.asgd.gpu"}}' asgd:latest)
[ "$gpu" = none ] || ctr_fail "image label io.asgd.gpu is '$gpu', not 'none'"
bins=$(podman run --rm asgd:latest ls /usr/local/bin | tr '\n' ' ')
for b in asgd_server asgd_worker asgd_eval make_corpus; do
  grep -qw "$b" <<<"$bins" || ctr_fail "the image has no $b (has: $bins)"
done
! grep -qw libasgd_cuda.so <<<"$bins" || ctr_fail "the CPU-only image has the CUDA plugin"
size=$(podman image inspect --format '{{.Size}}' asgd:latest)
ctr_say "image asgd:latest: CPU-only, $((size / 1000000)) MB, /usr/local/bin: $bins"

ctr_timed "Prometheus image build" ctr_logged "$CTR_LOGS/prometheus-build.log" \
  timeout -k 10 600 podman build --pull=never -f "$here/prometheus.Dockerfile" -t "$PROM_IMAGE" "$here" ||
  ctr_fail "the Prometheus image did not build (log: $CTR_LOGS/prometheus-build.log)"

# --- The stack --------------------------------------------------------------
ctr_bg "$CTR_LOGS/podman-service.log" podman system service --time=0 "unix://$CTR_RUN/podman.sock"
export DOCKER_HOST=unix://$CTR_RUN/podman.sock
ctr_wait "podman's API socket" 60 test -S "$CTR_RUN/podman.sock"

# health_driver: runs each running container's health check at its interval
# (what podman's systemd timer does where systemd runs).
health_driver() {
  local -A interval last
  local id now iv
  while true; do
    now=$(date +%s)
    for id in $(podman ps -q --no-trunc --filter status=running 2>/dev/null); do
      if [ -z "${interval[$id]:-}" ]; then
        iv=$(podman inspect --format '{{json .Config.Healthcheck}}' "$id" 2>/dev/null |
             python3 -c 'import json,sys; h=json.load(sys.stdin) or {}; print(int(h.get("Interval", 0) / 1e9))' \
             2>/dev/null) || continue
        interval[$id]=${iv:-0}
        last[$id]=$now
      fi
      [ "${interval[$id]}" -gt 0 ] || continue
      if [ $((now - last[$id])) -ge "${interval[$id]}" ]; then
        last[$id]=$now
        if podman healthcheck run "$id" >/dev/null 2>&1; then
          echo "$(date +%s.%N) $id healthy"
        else
          echo "$(date +%s.%N) $id not-healthy"
        fi
      fi
    done
    sleep 1
  done
}
ctr_bg "$CTR_LOGS/health-checks.log" health_driver

prom_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export ASGD_PROMETHEUS_PORT=$prom_port
unset ASGD_IMAGE COMPOSE_FILE COMPOSE_PROJECT_NAME COMPOSE_PROFILES || true
compose=(docker-compose --ansi never -p "$PROJECT" -f "$clone/deploy/docker-compose.yml"
         -f "$clone/tests/container/docker-compose.check.yml")
ctr_on_cleanup "${compose[*]} down -v -t 5 >>'$CTR_LOGS/compose-down.log' 2>&1"

# target_log: every change of a Prometheus target's health (and its last scrape
# error), polled every second from the API while the stack runs.
target_log() {
  python3 - "http://127.0.0.1:$prom_port/api/v1/targets" <<'PY'
import json, sys, time, urllib.request
last = {}
while True:
    try:
        with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
            targets = json.load(r)["data"]["activeTargets"]
    except Exception as e:  # not up yet
        targets = []
    for t in targets:
        key = t["labels"]["instance"]
        state = (t["health"], t.get("lastError", ""))
        if last.get(key) != state:
            last[key] = state
            print(f"{time.time():.1f} {key} {state[0]} {state[1]}", flush=True)
    time.sleep(1)
PY
}
ctr_bg "$CTR_LOGS/prometheus-targets.log" target_log

ctr_say "docker-compose up -d ${SERVICES[*]} (Prometheus on 127.0.0.1:$prom_port; log: $CTR_LOGS/compose-up.log)"
up_start=$(date +%s.%N)
ctr_timed "compose up -d (until the workers start)" ctr_logged "$CTR_LOGS/compose-up.log" \
  timeout -k 10 "$TRAIN_TIMEOUT" "${compose[@]}" up -d --no-build "${SERVICES[@]}" ||
  ctr_fail "docker-compose up failed (log: $CTR_LOGS/compose-up.log; health checks: $CTR_LOGS/health-checks.log)"

container() { echo "${PROJECT}_$1_1"; }

# Podman's DNS server for compose networks (aardvark-dns 1.4, Debian 12) sometimes
# misses the reload for containers that join while others start or stop: their names
# then do not resolve until its next reload, and Prometheus could not reach the
# workers while they train. So: wait until the workers' names resolve on the stack's
# network; if they do not within a few seconds, make aardvark-dns reload its
# configuration (SIGHUP, as netavark sends when a container joins) and wait again.
names_resolve() { podman exec "$(container prometheus)" getent hosts worker-0 worker-1; }
# The configuration directory of the aardvark-dns serving this project's network.
aardvark_dir() {
  local pid dir
  for pid in $(pgrep -x aardvark-dns || true); do
    dir=$(tr '\0' '\n' <"/proc/$pid/cmdline" | sed -n '/^--config$/{n;p}')
    [ -f "$dir/${PROJECT}_default" ] && { echo "$dir"; return 0; }
  done
  return 1
}
# dns_reload WHAT: makes the aardvark-dns of this project's network reload.
dns_reload() {
  local dir
  dir=$(aardvark_dir) || ctr_fail "$1, and no aardvark-dns serves ${PROJECT}_default"
  ctr_say "$1; making aardvark-dns reload"
  kill -HUP "$(cat "$dir/aardvark.pid")"
}
if ! ctr_wait_quiet 5 names_resolve; then
  dns_reload "the workers' names do not resolve on the stack's network"
  ctr_wait "the workers' names to resolve on the stack's network" 20 names_resolve
fi
state() { podman inspect --format "{{.State.$2}}" "$(container "$1")"; }
workers_done() {
  local w
  for w in worker-0 worker-1; do [ "$(state "$w" Status)" = exited ] || return 1; done
}
ctr_say "waiting for the workers to train to the end (at most $TRAIN_TIMEOUT s)"
ctr_wait "the workers to finish training" "$TRAIN_TIMEOUT" workers_done
train_end=$(date +%s)

# Logs of every service, for the record.
for s in "${SERVICES[@]}"; do
  podman logs "$(container "$s")" >"$CTR_LOGS/$s.log" 2>&1 || true
done

# Start-up times from the containers' own records, relative to `up`.
python3 - "$up_start" "$CTR_LOGS/health-checks.log" "$(podman inspect "$(container corpus)" "$(container server-0)" \
  "$(container server-1)" "$(container worker-0)" "$(container worker-1)" \
  "$(container prometheus)")" >"$CTR_LOGS/startup-times.txt" <<'PY'
import datetime, json, sys
t0 = float(sys.argv[1])
first_healthy = {}
for line in open(sys.argv[2]):
    when, cid, verdict = line.split()
    if verdict == "healthy":
        first_healthy.setdefault(cid, float(when) - t0)
def ts(s):
    # RFC 3339 with nanoseconds; keep microseconds.
    s = s.replace("Z", "+00:00")
    head, _, rest = s.partition(".")
    frac, sign, tz = rest.partition("+") if "+" in rest else rest.partition("-")
    return datetime.datetime.fromisoformat(f"{head}.{frac[:6].ljust(6, '0')}{sign}{tz}").timestamp() - t0
rows = []
for c in json.loads(sys.argv[3]):
    name = c["Name"].split("_")[1]
    st = c["State"]
    rows.append((name, "started", ts(st["StartedAt"])))
    if st["Status"] == "exited":
        rows.append((name, "exited (%d)" % st["ExitCode"], ts(st["FinishedAt"])))
    if c["Id"] in first_healthy:
        rows.append((name, "healthy", first_healthy[c["Id"]]))
for name, what, t in sorted(rows, key=lambda r: r[2]):
    print(f"{t:7.1f} s  {name:<11} {what}")
PY
ctr_say "start-up, seconds after 'docker-compose up' ($CTR_LOGS/startup-times.txt):"
sed 's/^/    /' "$CTR_LOGS/startup-times.txt"
CTR_TIMINGS+=("compose up to the workers' end $(( train_end - ${up_start%.*} ))")

problems=()
[ "$(state corpus ExitCode)" = 0 ] || problems+=("the corpus job exited with $(state corpus ExitCode)")
for s in server-0 server-1; do
  h=$(state "$s" Health.Status)
  [ "$h" = healthy ] || problems+=("$s is $h, not healthy")
done
accuracies=()
for w in worker-0 worker-1; do
  code=$(state "$w" ExitCode)
  [ "$code" = 0 ] || problems+=("$w exited with status $code (log: $CTR_LOGS/$w.log)")
  line=$(grep -E "^worker [0-9]+ held-out frame accuracy: [0-9.]+%" "$CTR_LOGS/$w.log" | tail -1 || true)
  if [ -z "$line" ]; then
    problems+=("$w printed no held-out accuracy line (log: $CTR_LOGS/$w.log)")
  else
    ctr_say "$w: $line"
    acc=$(sed -E 's/.*: ([0-9.]+)%.*/\1/' <<<"$line")
    accuracies+=("$acc%")
    python3 -c "import sys; sys.exit(0 if $acc >= $MIN_ACCURACY else 1)" ||
      problems+=("$w: held-out accuracy $acc% is below $MIN_ACCURACY%")
  fi
done

# The servers' model once both workers have ended, as deploy/README.md tells users to
# evaluate it (the on-demand `eval` service).
ctr_say "the servers' model: docker-compose run --rm eval (log: $CTR_LOGS/eval.log)"
servers_acc=none
if ctr_timed "compose run --rm eval" ctr_logged "$CTR_LOGS/eval.log" \
    timeout -k 10 300 "${compose[@]}" run -T --rm eval; then
  line=$(grep -E "held-out frame accuracy: [0-9.]+%" "$CTR_LOGS/eval.log" | tail -1 || true)
  if [ -z "$line" ]; then
    problems+=("the eval service printed no held-out accuracy (log: $CTR_LOGS/eval.log)")
  else
    servers_acc=$(sed -E 's/.*: ([0-9.]+)%.*/\1/' <<<"$line")
    ctr_say "servers' model: $line"
    python3 -c "import sys; sys.exit(0 if $servers_acc >= $MIN_SERVERS_ACCURACY else 1)" ||
      problems+=("the servers' model: held-out accuracy $servers_acc% is below $MIN_SERVERS_ACCURACY%")
    servers_acc+=%
  fi
else
  problems+=("docker-compose run --rm eval failed (log: $CTR_LOGS/eval.log)")
fi

# Prometheus, through its HTTP API on the published port.
#
# The servers keep running, so Prometheus must still scrape them: wait for a
# successful scrape of each, newer than this point. A scrape that fails is told
# apart: the server's own endpoint, asked from inside its container, and its name,
# resolved inside Prometheus's. Podman's DNS server (aardvark-dns 1.4) reloads as
# containers come and go, and a scrape across a reload has timed out on the name
# ("context deadline exceeded") while the server answered; then it is made to
# reload once more, as for the workers above. A server whose endpoint does not
# answer fails the check.
servers_scraped() {
  python3 - "http://127.0.0.1:$prom_port/api/v1/targets" "$1" <<'PY'
import datetime, json, sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
    targets = json.load(r)["data"]["activeTargets"]
def when(s):  # RFC 3339 with nanoseconds
    head, _, frac = s.rstrip("Z").partition(".")
    frac = frac.split("+")[0].split("-")[0]
    t = datetime.datetime.fromisoformat(head).replace(tzinfo=datetime.timezone.utc)
    return t.timestamp() + float("0." + (frac or "0"))
stale = [t["labels"]["instance"] for t in targets
         if not t["labels"]["instance"].startswith("worker-")
         and not (t["health"] == "up" and when(t["lastScrape"]) > float(sys.argv[2]))]
print(" ".join(stale))
sys.exit(1 if stale else 0)
PY
}
# metrics_answer SERVICE: the status line of the service's /metrics, asked inside it.
metrics_answer() {
  timeout -k 2 10 podman exec "$(container "$1")" bash -c \
    'exec 3<>/dev/tcp/127.0.0.1/9100 && printf "GET /metrics HTTP/1.0\r\n\r\n" >&3 && head -1 <&3'
}
scrape_from=$(date +%s)
if ! ctr_wait_quiet 20 servers_scraped "$scrape_from"; then
  for s in server-0 server-1; do
    answer=$(metrics_answer "$s" 2>&1 | tr -d '\r' || true)
    start=$(date +%s.%N)
    name=$(timeout -k 2 10 podman exec "$(container prometheus)" getent hosts "$s" 2>&1 || true)
    took=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
    ctr_say "$s: its /metrics answered '${answer:-nothing}' inside its container;" \
      "inside Prometheus's, its name resolved to '${name:-nothing}' in $took s"
  done
  dns_reload "a server was not scraped in 20 s"
  scrape_from=$(date +%s)
  ctr_wait_quiet 20 servers_scraped "$scrape_from" ||
    problems+=("a server was not scraped in 20 s after aardvark-dns reloaded: $(servers_scraped "$scrape_from" || true)")
fi
prom_check=0
python3 - "http://127.0.0.1:$prom_port" "$clone/deploy/prometheus/prometheus.yml" \
  >"$CTR_LOGS/prometheus-check.txt" 2>&1 <<'PY' || prom_check=$?
import json, re, sys, time, urllib.parse, urllib.request
base, config = sys.argv[1], sys.argv[2]
def get(path, **params):
    url = base + path + ("?" + urllib.parse.urlencode(params) if params else "")
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise SystemExit(f"{url}: {body}")
    return body["data"]
# Every target of the compose configuration, from the file itself.
want = set(re.findall(r'"([\w.-]+:\d+)"', open(config).read()))
errors = []
targets = get("/api/v1/targets")["activeTargets"]
have = {t["labels"]["instance"] for t in targets}
if have != want:
    errors.append(f"targets {sorted(have)}, the configuration has {sorted(want)}")
# Each target's best `up` since the start: 1 once it was scraped successfully.
ever = {r["metric"]["instance"]: float(r["value"][1])
        for r in get("/api/v1/query", query="max_over_time(up[1h])")["result"]}
now = {r["metric"]["instance"]: float(r["value"][1])
       for r in get("/api/v1/query", query="up")["result"]}
for t in sorted(want):
    print(f"{t:16} up now {now.get(t)}, max over the run {ever.get(t)}")
    if ever.get(t) != 1:
        errors.append(f"{t} never had up == 1")
    if not t.startswith("worker-") and now.get(t) != 1:
        errors.append(f"{t} has up == {now.get(t)} now (servers and Prometheus keep running)")
steps = {r["metric"]["instance"]: float(r["value"][1]) for r in
         get("/api/v1/query", query="max_over_time(asgd_worker_steps_total[1h])")["result"]}
print("asgd_worker_steps_total:", steps)
for w in ("worker-0:9200", "worker-1:9200"):
    if steps.get(w, 0) <= 0:
        errors.append(f"no asgd_worker_steps_total > 0 scraped from {w}")
for e in errors:
    print("ERROR:", e)
sys.exit(1 if errors else 0)
PY
sed 's/^/    /' "$CTR_LOGS/prometheus-check.txt"
[ "$prom_check" -eq 0 ] || problems+=("Prometheus: $(grep ERROR "$CTR_LOGS/prometheus-check.txt" | tr '\n' ' ')")

# --- Down, and nothing left --------------------------------------------------
ctr_timed "compose down -v" ctr_logged "$CTR_LOGS/compose-down.log" \
  timeout -k 10 300 "${compose[@]}" down -v -t 10 ||
  problems+=("docker-compose down failed (log: $CTR_LOGS/compose-down.log)")
CTR_CLEANUP_HOOKS=()
ctr_stop_bg   # the health checks and the podman service
left=$(ctr_leftovers)
for dir in /run/containers/networks/aardvark-dns "$CTR_RUNROOT/networks/aardvark-dns"; do
  [ ! -e "$dir/${PROJECT}_default" ] || left+=" DNS entries: $dir/${PROJECT}_default"
done
[ -z "$left" ] || problems+=("left after docker-compose down: $left")

ctr_timings
summary="corpus job, 2 healthy servers, 2 workers (held-out ${accuracies[*]:-none}; the servers' model $servers_acc),"
summary+=" Prometheus with every target up; nothing left"
if [ ${#problems[@]} -gt 0 ]; then
  for p in "${problems[@]}"; do ctr_say "problem: $p"; done
  ctr_fail "compose stack: ${#problems[@]} problem(s) (logs: $CTR_LOGS)"
fi
ctr_say "PASS: image built in podman; compose stack: $summary"
