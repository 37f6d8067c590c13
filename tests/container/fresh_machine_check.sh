#!/usr/bin/env bash
# Fresh-machine check: the README's "Try it" commands on a brand-new Debian 12.
#
# Makes a Debian 12 (bookworm) base with debootstrap (tests/container/lib.sh),
# starts a brand-new container from it and, in it, as a user would:
#   1. gets a fresh clone of the commit being tested (HEAD of the checkout this
#      script is in; uncommitted changes are not part of it),
#   2. runs `scripts/demo.sh`, then `scripts/test.sh`, exactly as the README
#      shows them, in the README's order, from the clone's root.
# It fails unless the demo prints "held-out frame accuracy: NN.N%" with NN.N of
# at least 75 and the test line says "N passed, 0 failed".
#
# What the fresh machine has: a Debian 12 minbase (debootstrap
# --variant=minbase: apt, dpkg, bash, coreutils; no compiler, no python3, no
# CUDA toolkit) plus what a user of a freshly installed Debian has to get and
# run the repository: git, sudo and ca-certificates, and a non-root user
# account in the sudo group (password-less sudo here, since nobody is there to
# type the password). Everything else the scripts need, they install
# themselves with `sudo apt-get`. The container reaches the Debian mirror the
# host uses and, for npm, the host's CA bundle is passed in
# (NODE_EXTRA_CA_CERTS, npm_config_cafile) so that a host whose HTTPS goes
# through an inspecting proxy works; proxy variables are passed through.
#
# Usage (as root, from anywhere):  tests/container/fresh_machine_check.sh
# Progress and timings go to stdout; the full output of every step is kept in
# the logs directory it names. Last line: "PASS: ..." or "FAIL: ...".
#
# Settings (environment variables):
#   FRESH_DEMO_TIMEOUT_S  bound on scripts/demo.sh (default 2400)
#   FRESH_TEST_TIMEOUT_S  bound on scripts/test.sh (default 2700)
#   FRESH_MIN_ACCURACY    held-out accuracy the demo must reach (default 75)
#   ASGD_CHECK_DIR, ASGD_CONTAINER_CACHE: see tests/container/lib.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

DEMO_TIMEOUT=${FRESH_DEMO_TIMEOUT_S:-2400}
TEST_TIMEOUT=${FRESH_TEST_TIMEOUT_S:-2700}
MIN_ACCURACY=${FRESH_MIN_ACCURACY:-75}
USER_NAME=debian
CONTAINER=asgd-fresh-debian

ctr_setup fresh-machine
ctr_base_image

# The repository as a bundle of the tested commit: the container clones it
# with its own git, as a user clones a repository.
src=$(git -C "$here" rev-parse --show-toplevel)
git -C "$src" diff --quiet HEAD 2>/dev/null ||
  ctr_say "note: $src has uncommitted changes; they are not part of the checked commit"
git -C "$src" bundle create "$CTR_RUN/asgd.bundle" HEAD >"$CTR_LOGS/bundle.log" 2>&1 ||
  { cat "$CTR_LOGS/bundle.log" >&2; ctr_fail "git bundle failed"; }
ctr_say "testing commit $(git -C "$src" log -1 --format='%h %s' | cut -c1-80)"

env_args=()
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  cp /etc/ssl/certs/ca-certificates.crt "$CTR_RUN/host-ca.crt"
  env_args+=(-v "$CTR_RUN/host-ca.crt:/etc/asgd-check/host-ca.crt:ro"
             -e NODE_EXTRA_CA_CERTS=/etc/asgd-check/host-ca.crt
             -e npm_config_cafile=/etc/asgd-check/host-ca.crt)
fi
for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
  [ -z "${!v:-}" ] || env_args+=(-e "$v=${!v}")
done

# Its own network (a free subnet); no published ports.
podman network create --disable-dns asgd-fresh >/dev/null
ctr_say "starting a brand-new container ($CONTAINER) from debian:bookworm"
podman run -d --name "$CONTAINER" --hostname fresh-debian --network asgd-fresh --init \
  -v "$CTR_RUN/asgd.bundle:/mnt/asgd.bundle:ro" "${env_args[@]}" \
  localhost/debian:bookworm sleep infinity >/dev/null

# in_container USER LOG TIMEOUT_S SCRIPT [FILTER]: runs SCRIPT with bash in
# the container as USER (in the user's home, root in /; the environment given to the
# container), output to LOG; lines matching the extended regex FILTER are also
# shown. Returns SCRIPT's status (124 when it timed out).
in_container() {
  local user=$1 log=$2 timeout=$3 script=$4 filter=${5:-^$} rc wd=/home/$USER_NAME
  [ "$user" != root ] || wd=/
  {
    rc=0
    timeout -k 10 "$timeout" podman exec --user "$user" --workdir "$wd" \
      "$CONTAINER" bash -c "$script" </dev/null || rc=$?
    echo "$rc" >"$log.rc"
  } 2>&1 | tee "$log" | { grep --line-buffered -E "$filter" | sed -u 's/^/    | /'; true; }
  rc=$(cat "$log.rc")
  rm -f "$log.rc"
  [ "$rc" -ne 124 ] || ctr_say "timed out after $timeout s (log: $log)"
  return "$rc"
}

ctr_say "user's machine: apt-get install git sudo ca-certificates; user '$USER_NAME' with sudo"
ctr_timed "container: git, sudo, user account" in_container root "$CTR_LOGS/setup.log" 900 "
  set -e
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends git sudo ca-certificates >/dev/null
  useradd --create-home --shell /bin/bash --groups sudo $USER_NAME
  echo '$USER_NAME ALL=(ALL) NOPASSWD:ALL' >/etc/sudoers.d/$USER_NAME
  chmod 440 /etc/sudoers.d/$USER_NAME
  ! command -v nvcc && [ ! -e /usr/local/cuda ]
" || { tail -20 "$CTR_LOGS/setup.log" >&2; ctr_fail "setting up the container failed"; }

ctr_timed "git clone" in_container "$USER_NAME" "$CTR_LOGS/clone.log" 300 \
  "git -c advice.detachedHead=false clone /mnt/asgd.bundle asgd" ||
  { cat "$CTR_LOGS/clone.log" >&2; ctr_fail "git clone failed"; }

ctr_say "scripts/demo.sh (log: $CTR_LOGS/demo.log)"
demo_rc=0
ctr_timed "scripts/demo.sh (cold)" in_container "$USER_NAME" "$CTR_LOGS/demo.log" "$DEMO_TIMEOUT" \
  "cd asgd && scripts/demo.sh" '^== |^make_corpus: done|done:|held-out frame accuracy|failed|rror' ||
  demo_rc=$?

ctr_say "scripts/test.sh (log: $CTR_LOGS/test.log)"
test_rc=0
ctr_timed "scripts/test.sh" in_container "$USER_NAME" "$CTR_LOGS/test.log" "$TEST_TIMEOUT" \
  "cd asgd && scripts/test.sh" \
  '^//[^ ]+ +(\(cached\) +)?(FAILED|TIMEOUT|NO STATUS|FLAKY|INCOMPLETE)|^//[^ ]+: |^[0-9]+ passed, [0-9]+ failed|^ERROR:' ||
  test_rc=$?

# The logs of failed test targets, for the record.
failed_targets=$(grep -oE '^//[^ ]+ +(\(cached\) +)?(FAILED|TIMEOUT|FLAKY)' "$CTR_LOGS/test.log" |
                 awk '{print $1}' | sort -u || true)
if [ -n "$failed_targets" ]; then
  mkdir -p "$CTR_LOGS/testlogs"
  for t in $failed_targets; do
    path=${t#//}; path=${path/://}
    podman exec --user "$USER_NAME" "$CONTAINER" cat "/home/$USER_NAME/asgd/bazel-testlogs/$path/test.log" \
      >"$CTR_LOGS/testlogs/${path//\//_}.log" 2>/dev/null || true
    # What failed, in this script's own output too (CI keeps only that): a
    # script check's FAILED line and its detail, a gtest failure and its
    # message, at most 40 lines per target.
    ctr_say "$t: what failed"
    grep -E -A3 '^FAILED: |^FAIL: |Failure$|^\[  FAILED  \]|Assertion|Check failed' \
      "$CTR_LOGS/testlogs/${path//\//_}.log" 2>/dev/null | head -40 | sed 's/^/    | /' || true
  done
  ctr_say "logs of the failed tests: $CTR_LOGS/testlogs"
fi

# Verdicts.
problems=()
accuracy=$(grep -E '^held-out frame accuracy: [0-9.]+%' "$CTR_LOGS/demo.log" | tail -1 |
           sed -E 's/.*: ([0-9.]+)%.*/\1/' || true)
if [ "$demo_rc" -ne 0 ]; then
  problems+=("scripts/demo.sh exited with status $demo_rc")
fi
if [ -z "$accuracy" ]; then
  problems+=("scripts/demo.sh printed no 'held-out frame accuracy' line")
elif ! python3 -c "import sys; sys.exit(0 if float('$accuracy') >= $MIN_ACCURACY else 1)"; then
  problems+=("the demo's held-out frame accuracy is $accuracy%, below $MIN_ACCURACY%")
fi
test_line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$CTR_LOGS/test.log" | tail -1 || true)
if [ -z "$test_line" ]; then
  problems+=("scripts/test.sh printed no 'N passed, N failed' line (status $test_rc)")
elif ! grep -qE '^[0-9]+ passed, 0 failed' <<<"$test_line"; then
  problems+=("scripts/test.sh: $test_line")
elif [ "$test_rc" -ne 0 ]; then
  problems+=("scripts/test.sh exited with status $test_rc after '$test_line'")
fi

ctr_timings
summary="demo held-out accuracy ${accuracy:-none}%, tests: ${test_line:-none}"
if [ ${#problems[@]} -gt 0 ]; then
  for p in "${problems[@]}"; do ctr_say "problem: $p"; done
  ctr_fail "fresh Debian 12: $summary (logs: $CTR_LOGS)"
fi
ctr_say "PASS: fresh Debian 12: $summary"
