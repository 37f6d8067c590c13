#!/usr/bin/env bash
# Runs every asgd test: installs missing Debian packages, then
# `bazel test //...`, and prints the totals as its last line:
#   N passed, N failed
# counted per test case from Bazel's test.xml files (a test target that fails
# to build or crashes without a report counts as one failed). Exits non-zero
# on any failure or build error. Extra arguments go to `bazel test`.
set -uo pipefail
cd "$(dirname "$0")/.."

scripts/install_deps.sh || { echo "0 passed, 1 failed"; exit 1; }
# npm packages of the Kubernetes and dashboard checks, and onnxruntime-node for
# the ONNX export check (no-op when installed).
deploy/k8s/validate/install.sh || { echo "0 passed, 1 failed"; exit 1; }
tests/onnx/install.sh || { echo "0 passed, 1 failed"; exit 1; }

log=$(mktemp)
trap 'rm -f "$log"' EXIT
bazel test //... --keep_going "$@" 2>&1 | tee "$log"
bazel_rc=${PIPESTATUS[0]}

targets=$(bazel query 'tests(//...) except attr(tags, manual, tests(//...))' 2>/dev/null)
python3 - "$log" $targets <<'PY'
import os, re, sys, xml.etree.ElementTree as ET
# Bazel's per-target verdict is the authority on whether a target built and
# ran in this invocation; its test.xml gives the per-case counts.
status = {}
pattern = re.compile(r"^(//\S+)\s+(?:\(cached\)\s+)?(PASSED|FAILED TO BUILD|"
                     r"FAILED|TIMEOUT|NO STATUS|FLAKY|INCOMPLETE|SKIPPED)")
for line in open(sys.argv[1], errors="replace"):
    m = pattern.match(line.strip())
    if m:
        status[m.group(1)] = m.group(2)
passed = failed = skipped = 0
for target in sys.argv[2:]:
    verdict = status.get(target, "NO STATUS")
    path = "bazel-testlogs/" + target.lstrip("/").replace(":", "/") + "/test.xml"
    if verdict not in ("PASSED", "FAILED", "FLAKY") or not os.path.exists(path):
        print(f"{target}: {verdict}")
        failed += 1
        continue
    try:
        cases = list(ET.parse(path).getroot().iter("testcase"))
    except ET.ParseError:
        cases = []
    p = f = s = 0
    for case in cases:
        if case.find("failure") is not None or case.find("error") is not None:
            f += 1
        elif case.get("result") == "skipped" or case.find("skipped") is not None:
            s += 1
        else:
            p += 1
    if verdict == "FAILED" and f == 0:
        f = 1  # crashed or failed outside a test case
    if not cases and verdict != "FAILED":
        p = 1  # a passing test binary that reports no cases
    passed, failed, skipped = passed + p, failed + f, skipped + s
line = f"{passed} passed, {failed} failed"
if skipped:
    line += f", {skipped} skipped"
print(line)
sys.exit(1 if failed else 0)
PY
count_rc=$?
if [ "$bazel_rc" -ne 0 ] || [ "$count_rc" -ne 0 ]; then exit 1; fi
exit 0
