"""Helpers shared by the Python tests in tests/: failing with the logs of the
processes a test started, waiting on a condition with a deadline, and
reading port files."""
import os
import socket
import subprocess
import sys
import time
import urllib.request

# Logs of the processes started by a test, shown (their last lines) on failure.
LOGS = []


def print_logs(tail_lines=8):
    for log in LOGS:
        try:
            with open(log) as f:
                tail = f.readlines()[-tail_lines:]
            print(f"--- {os.path.basename(log)} (last lines)\n" + "".join(tail))
        except OSError:
            pass


def fail(msg):
    print_logs()
    print("FAIL:", msg)
    sys.exit(1)


class Checks:
    """Named checks of one test script, counted: check() records one, fail()
    records a failure that ends the script, report_and_exit() prints the
    "N passed, N failed" line scripts/test.sh counts and exits 1 on any
    failure."""

    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, name, ok, detail=""):
        if ok:
            self.passed += 1
            print(f"ok: {name}")
        else:
            self.failed += 1
            print(f"FAILED: {name}\n{detail}")

    def report_and_exit(self):
        print(f"{self.passed} passed, {self.failed} failed")
        sys.exit(1 if self.failed else 0)

    def fail(self, msg):
        print_logs()
        print("FAIL:", msg)
        self.failed += 1
        self.report_and_exit()


def wait_for(what, predicate, timeout=90, interval=0.1, must=True, proc=None):
    """Polls `predicate` until it returns a truthy value or time runs out
    (then fails, or returns None when not `must`). With `proc`, fails at once
    if that process exits first."""
    end = time.time() + timeout
    while time.time() < end:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            fail(f"{what}: the process exited with {proc.returncode}")
        time.sleep(interval)
    if must:
        fail(f"timed out waiting for {what}")
    return None


def run(args, timeout):
    """Runs a command to its end, stdout and stderr as text. One that runs
    past `timeout` seconds is killed and comes back with returncode None and
    "timed out" in stderr (e.g. a server that did start)."""
    try:
        return subprocess.run(args, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = e.stdout or ""
        if isinstance(out, bytes):
            out = out.decode(errors="replace")
        return subprocess.CompletedProcess(args, None, out,
                                           f"timed out after {timeout} s")


def read_port(path):
    """The port a process wrote to `path` (its --port_file), or None yet."""
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()
