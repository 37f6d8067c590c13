#!/usr/bin/env bash
# Installs the Debian packages asgd builds and runs with, if any is missing.
# Idempotent and quiet: does nothing when everything is already installed.
# Needs root (or sudo) only when something must be installed. Extra package
# names given as arguments are installed too (e.g. gnuplot-nox for plots).
set -euo pipefail

PACKAGES=(
  g++ python3
  bazel-bootstrap
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev prometheus-cpp-dev
  # The /metrics HTTP server (common/metrics_endpoint).
  libmicrohttpd-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-dev libfftw3-dev
  flite flite1-dev
  # gzip'd Kaldi archives and alignments (kaldi/); ONNX export (model/onnx_export).
  zlib1g-dev libonnx-dev
  # Tests of the monitoring, deployment and security features (python3-h2:
  # the raw HTTP/2 attack client of tests/hostile_http2_test.py).
  prometheus docker-compose nodejs openssl python3-h2
  # The fuzz test (libFuzzer and the sanitizer runtimes come with clang's).
  clang libclang-rt-14-dev
  "$@"
)
# npm: Debian's package conflicts with a nodejs that bundles its own npm.
command -v npm >/dev/null 2>&1 || PACKAGES+=(npm)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install_deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=600 \
  "${missing[@]}" >/dev/null
