# Shell library of the container checks (fresh_machine_check.sh, compose_check.sh).
# Source it from a bash script that runs with `set -euo pipefail`, then call
# `ctr_setup NAME` before anything else.
#
# A private podman per run. Each run gets its own directory, $CTR_RUN (under
# $ASGD_CHECK_DIR, default /var/tmp/asgd-container-checks), and points podman at
# storage, run state, locks, network definitions and an event log inside it
# (CONTAINERS_CONF, CONTAINERS_STORAGE_CONF). So a run neither sees nor changes
# any other container, image, volume or network on the machine, everything it
# made can be found and removed exactly, and it needs no change to /etc. The
# settings also include the three podman needs on hosts with cgroup v1 (or
# hybrid) and without CAP_SYS_RESOURCE: runc (crun refuses the hybrid mode),
# the cgroupfs manager and the file event logger (no systemd), and ulimits it
# is allowed to set.
#
# The Debian 12 base image is made here with debootstrap (minbase) from the
# host's own Debian mirror (/etc/apt/sources.list.d/debian.sources), since no
# image registry may be reachable. Its root file system is cached as a tarball
# in $ASGD_CONTAINER_CACHE (default /var/tmp/asgd-container-cache), keyed by
# everything it is made from and refused once older than 7 days, and imported
# into each run's private storage as debian:bookworm.
#
# On exit, also on failure and Ctrl-C, ctr_cleanup stops and removes every
# container, volume, network and image of the run, stops the processes the run
# started (ctr_bg), removes the storage and keeps the logs ($CTR_LOGS).
#
# Needs root (podman, debootstrap, overlay mounts), podman with runc,
# netavark, aardvark-dns and catatonit, iptables, debootstrap, python3.

CTR_CACHE=${ASGD_CONTAINER_CACHE:-/var/tmp/asgd-container-cache}
CTR_START=$(date +%s)
CTR_TIMINGS=()     # "label seconds" lines, printed by ctr_timings
CTR_BG_PIDS=()     # processes started with ctr_bg, stopped at cleanup
CTR_CLEANUP_HOOKS=()
CTR_RUN=""
CTR_RUNROOT=""

# ctr_say MSG...: a progress line with the time since the check started.
ctr_say() {
  local t=$(( $(date +%s) - CTR_START ))
  printf '[%s +%02d:%02d] %s\n' "$CTR_NAME" $((t / 60)) $((t % 60)) "$*"
}

# ctr_fail MSG...: says why the check failed and exits non-zero (cleanup runs).
ctr_fail() {
  ctr_say "FAIL: $*" >&2
  exit 1
}

# ctr_timed LABEL CMD...: runs CMD, records and prints how long it took.
# Returns CMD's status.
ctr_timed() {
  local label=$1 t0 rc=0
  shift
  t0=$(date +%s)
  "$@" || rc=$?
  local dt=$(( $(date +%s) - t0 ))
  CTR_TIMINGS+=("$label ${dt}")
  ctr_say "$label: ${dt} s$([ $rc -eq 0 ] || echo " (exit status $rc)")"
  return $rc
}

# ctr_timings: prints every recorded duration, one per line.
ctr_timings() {
  local line
  ctr_say "timings (seconds):"
  for line in "${CTR_TIMINGS[@]}"; do printf '    %-40s %6s\n' "${line% *}" "${line##* }"; done
  printf '    %-40s %6s\n' total $(( $(date +%s) - CTR_START ))
}

# ctr_logged LOG CMD...: runs CMD with its output to LOG; on failure shows
# LOG's last lines. Returns CMD's status.
ctr_logged() {
  local log=$1 rc=0
  shift
  "$@" >"$log" 2>&1 || rc=$?
  [ $rc -eq 0 ] || { tail -20 "$log" | sed 's/^/    | /' >&2; }
  return $rc
}

# ctr_wait DESCRIPTION TIMEOUT_S CMD...: runs CMD every second until it
# succeeds; fails the check with DESCRIPTION when TIMEOUT_S pass first.
ctr_wait() {
  local what=$1 timeout=$2
  shift 2
  ctr_wait_quiet "$timeout" "$@" || ctr_fail "timed out after ${timeout} s waiting for $what"
}

# ctr_wait_quiet TIMEOUT_S CMD...: like ctr_wait, but returns 1 when the time
# is up instead of failing the check.
ctr_wait_quiet() {
  local deadline=$(( $(date +%s) + $1 ))
  shift
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 1
  done
}

# ctr_bg LOG CMD...: starts CMD in the background with output to LOG; it is
# stopped at cleanup. Sets CTR_LAST_PID.
ctr_bg() {
  local log=$1
  shift
  "$@" >"$log" 2>&1 &
  CTR_LAST_PID=$!
  CTR_BG_PIDS+=("$CTR_LAST_PID")
}

# ctr_on_cleanup CMD: a shell command run at cleanup, before the podman objects
# are removed (hooks run last-registered first).
ctr_on_cleanup() { CTR_CLEANUP_HOOKS+=("$1"); }

ctr_require() {
  local missing=() tool
  [ "$(id -u)" -eq 0 ] || ctr_fail "run as root (podman, debootstrap and overlay mounts need it)"
  for tool in podman runc debootstrap iptables python3 "$@"; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
  done
  [ -x /usr/lib/podman/netavark ] || [ -x /usr/libexec/podman/netavark ] || missing+=(netavark)
  [ -x /usr/libexec/podman/catatonit ] || command -v catatonit >/dev/null 2>&1 || missing+=(catatonit)
  [ ${#missing[@]} -eq 0 ] || ctr_fail "missing: ${missing[*]}; on Debian 12:" \
    "apt-get install --no-install-recommends podman runc netavark aardvark-dns catatonit iptables debootstrap docker-compose python3"
}

# ctr_setup NAME: the run directory, the private podman configuration, and the
# exit trap. Sets CTR_NAME, CTR_RUN, CTR_LOGS.
ctr_setup() {
  CTR_NAME=$1
  shift
  ctr_require "$@"
  local parent=${ASGD_CHECK_DIR:-/var/tmp/asgd-container-checks}
  mkdir -p "$parent"
  CTR_RUN=$(mktemp -d "$parent/$CTR_NAME-$(date +%Y%m%d-%H%M%S)-XXXX")
  CTR_LOGS=$CTR_RUN/logs
  mkdir -p "$CTR_LOGS" "$CTR_RUN/podman/tmp" "$CTR_RUN/podman/networks"
  # podman refuses a run root path longer than 50 characters; it is per-boot
  # state, so it goes to /run.
  CTR_RUNROOT=$(mktemp -d /run/asgd-check-XXXXXX)
  trap ctr_cleanup EXIT
  trap 'echo; ctr_say "interrupted"; exit 130' INT TERM HUP

  cat >"$CTR_RUN/podman/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
init_path = "/usr/libexec/podman/catatonit"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$CTR_RUN/podman/events.log"
tmp_dir = "$CTR_RUN/podman/tmp"
lock_type = "file"

[network]
network_backend = "netavark"
network_config_dir = "$CTR_RUN/podman/networks"
EOF
  cat >"$CTR_RUN/podman/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$CTR_RUN/podman/storage"
runroot = "$CTR_RUNROOT"
EOF
  export CONTAINERS_CONF=$CTR_RUN/podman/containers.conf
  export CONTAINERS_STORAGE_CONF=$CTR_RUN/podman/storage.conf
  # Builds copy layers through TMPDIR; keep that inside the run as well.
  mkdir -p "$CTR_RUN/podman/build-tmp"
  export TMPDIR=$CTR_RUN/podman/build-tmp
  ctr_say "run directory $CTR_RUN; logs in $CTR_LOGS"
}

# The mirror the host's apt uses (first URIs: line of its debian.sources).
ctr_mirror() {
  local sources=/etc/apt/sources.list.d/debian.sources
  [ -f "$sources" ] || ctr_fail "$sources not found: the base image is made from the host's Debian mirror"
  awk '$1 == "URIs:" {print $2; exit}' "$sources"
}

# ctr_base_image: imports a Debian 12 (bookworm) minbase as debian:bookworm
# (also under the fully qualified name a FROM line resolves it to), made with
# debootstrap or taken from the cache.
ctr_base_image() {
  local mirror key tar
  mirror=$(ctr_mirror)
  [ -n "$mirror" ] || ctr_fail "no URIs: line in /etc/apt/sources.list.d/debian.sources"
  # Everything the root file system is made from: a change in any of them
  # (or in this recipe) makes a new cache entry.
  key=$( {
    echo "recipe 1 bookworm minbase $(dpkg --print-architecture)"
    dpkg-query -W -f='${Version}\n' debootstrap
    cat /etc/apt/sources.list.d/debian.sources
  } | sha256sum | cut -c1-16)
  tar=$CTR_CACHE/debian-bookworm-minbase-$key.tar
  mkdir -p "$CTR_CACHE"
  # One run at a time makes the cache entry; the others wait for it.
  exec 9>"$CTR_CACHE/lock"
  flock -w 1800 9 || ctr_fail "could not lock $CTR_CACHE/lock within 30 minutes"
  if [ -f "$tar" ] && [ -f "$tar.sha256" ] && [ -z "$(find "$tar" -mtime +7)" ] &&
     (cd "$CTR_CACHE" && sha256sum --quiet -c "$tar.sha256" >/dev/null 2>&1); then
    ctr_say "base image: using the cached root file system $tar"
  else
    rm -f "$CTR_CACHE"/debian-bookworm-minbase-*.tar*
    local rootfs=$CTR_RUN/rootfs
    ctr_say "base image: debootstrap --variant=minbase bookworm from $mirror (log: $CTR_LOGS/debootstrap.log)"
    ctr_timed "debootstrap" ctr_logged "$CTR_LOGS/debootstrap.log" \
      debootstrap --variant=minbase bookworm "$rootfs" "$mirror" || ctr_fail "debootstrap failed"
    # The image's apt uses the same mirror and the same sources as the host.
    rm -f "$rootfs/etc/apt/sources.list"
    cp /etc/apt/sources.list.d/debian.sources "$rootfs/etc/apt/sources.list.d/"
    # As in Debian's official images: no package files, and a policy that
    # keeps package scripts from starting services.
    printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
    chmod 755 "$rootfs/usr/sbin/policy-rc.d"
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar --numeric-owner -C "$rootfs" -cf "$tar.tmp" . || ctr_fail "could not write $tar"
    rm -rf "$rootfs"
    mv "$tar.tmp" "$tar"
    (cd "$CTR_CACHE" && sha256sum "$(basename "$tar")" >"$tar.sha256")
  fi
  exec 9>&-
  ctr_timed "base image import" ctr_logged "$CTR_LOGS/import.log" \
    podman import --quiet "$tar" localhost/debian:bookworm || ctr_fail "podman import failed"
  podman tag localhost/debian:bookworm docker.io/library/debian:bookworm
}

# ctr_clone DEST: a fresh clone of the commit checked out where the check runs
# from (HEAD of that checkout; uncommitted changes are not part of it).
ctr_clone() {
  local dest=$1 src head
  src=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
  head=$(git -C "$src" rev-parse HEAD)
  git -C "$src" diff --quiet HEAD 2>/dev/null ||
    ctr_say "note: $src has uncommitted changes; they are not part of the checked commit"
  git clone --quiet --no-checkout "$src" "$dest"
  git -C "$dest" checkout --quiet --detach "$head"
  ctr_say "fresh clone of $(git -C "$dest" log -1 --format='%h %s' | cut -c1-70) in $dest"
}

# ctr_leftovers: prints what the run's podman still holds and the processes
# that still use the run directory; prints nothing when all is gone.
ctr_leftovers() {
  local out
  out=$(podman ps -a --format '{{.Names}}' 2>/dev/null); [ -z "$out" ] || echo "containers: $(echo $out)"
  out=$(podman pod ps -q 2>/dev/null); [ -z "$out" ] || echo "pods: $(echo $out)"
  out=$(podman volume ls -q 2>/dev/null); [ -z "$out" ] || echo "volumes: $(echo $out)"
  out=$(podman network ls --format '{{.Name}}' 2>/dev/null | grep -vx podman || true)
  [ -z "$out" ] || echo "networks: $(echo $out)"
  out=$(ctr_run_processes); [ -z "$out" ] || echo "processes: $(echo $out)"
}

# Processes whose command line or environment names the run directory (conmon,
# aardvark-dns, the podman service, docker-compose, anything started here),
# other than this scan and the shells it runs in.
ctr_run_processes() {
  python3 - "$CTR_RUN/" "$CTR_RUNROOT" <<'PY'
import os, sys
needles = [a.encode() for a in sys.argv[1:] if a]
parent, found = {}, []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            parent[pid] = f.read().rsplit(b")", 1)[1].split()[1].decode()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            hit = any(n in f.read() for n in needles)
        if not hit:
            with open(f"/proc/{pid}/environ", "rb") as f:
                hit = any(n in f.read() for n in needles)
        if hit:
            found.append(pid)
    except (OSError, IndexError):
        pass
scan, pid = set(), str(os.getpid())
while pid in parent and pid not in scan:
    scan.add(pid)
    pid = parent[pid]
for pid in found:
    if pid not in scan and os.path.exists(f"/proc/{pid}"):
        try:
            comm = open(f"/proc/{pid}/comm").read().strip()
        except OSError:
            continue
        print(f"{pid}({comm})")
PY
}

# ctr_remove_all: stops and removes every container, pod, volume, network and
# image of this run's podman, and the processes started with ctr_bg.
ctr_remove_all() {
  local i
  for ((i = ${#CTR_CLEANUP_HOOKS[@]} - 1; i >= 0; i--)); do eval "${CTR_CLEANUP_HOOKS[$i]}" || true; done
  CTR_CLEANUP_HOOKS=()
  podman pod rm -a -f -t 0 >/dev/null 2>&1 || true
  podman rm -a -f -t 0 >/dev/null 2>&1 || true
  podman volume rm -a -f >/dev/null 2>&1 || true
  podman network ls --format '{{.Name}}' 2>/dev/null | grep -vx podman |
    xargs -r podman network rm -f >/dev/null 2>&1 || true
  ctr_stop_bg
}

# ctr_stop_bg: stops the processes started with ctr_bg and their children
# (e.g. a loop's sleep). Each is stopped (SIGSTOP) first, so that it cannot
# start another child between its children's end and its own, which would
# outlive it; then its children and it get SIGTERM, and it is continued to
# take it.
ctr_stop_bg() {
  local i
  for i in "${CTR_BG_PIDS[@]}"; do
    kill -STOP "$i" 2>/dev/null || continue
    pkill -TERM -P "$i" 2>/dev/null || true
    kill -TERM "$i" 2>/dev/null || true
    kill -CONT "$i" 2>/dev/null || true
  done
  for i in "${CTR_BG_PIDS[@]}"; do wait "$i" 2>/dev/null || true; done
  CTR_BG_PIDS=()
}

ctr_cleanup() {
  local rc=$?
  trap - EXIT INT TERM HUP
  [ -n "$CTR_RUN" ] && [ -d "$CTR_RUN/podman" ] || exit $rc
  ctr_say "cleaning up"
  ctr_remove_all
  local left
  left=$(ctr_leftovers)
  if [ -n "$left" ]; then
    ctr_say "WARNING: left after cleanup: $left" >&2
    [ $rc -ne 0 ] || rc=1
  fi
  # Images and the storage itself (unmounts the overlay driver's mounts).
  podman rmi -a -f >/dev/null 2>&1 || true
  podman system reset --force >/dev/null 2>&1 || true
  local m
  for m in $(findmnt -rn -o TARGET | grep -F -e "$CTR_RUN/" -e "$CTR_RUNROOT/" | sort -r); do umount -l "$m" 2>/dev/null || true; done
  # Everything of the run but its logs.
  find "$CTR_RUN" -mindepth 1 -maxdepth 1 ! -name logs -exec rm -rf {} +
  rm -rf "$CTR_RUNROOT"
  ctr_say "logs kept in $CTR_LOGS"
  exit $rc
}
