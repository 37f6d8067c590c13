#!/usr/bin/env bash
# Offline check of the docker-compose Prometheus configuration with Debian's promtool:
# `promtool check config` (which also checks the rule files it loads) and the alert
# unit tests in deploy/prometheus/alerts_test.yml. Fails, never skips, when promtool
# is missing.
set -euo pipefail

fail() { echo "FAIL: $*" >&2; exit 1; }
command -v promtool >/dev/null 2>&1 ||
  fail "promtool not found: install Debian's prometheus package (scripts/install_deps.sh)"

echo "== promtool check config deploy/prometheus/prometheus.yml"
promtool check config deploy/prometheus/prometheus.yml ||
  fail "deploy/prometheus/prometheus.yml is not a valid Prometheus configuration"
echo "== promtool test rules deploy/prometheus/alerts_test.yml"
promtool test rules deploy/prometheus/alerts_test.yml ||
  fail "the alert unit tests in deploy/prometheus/alerts_test.yml failed"
echo "PASS"
