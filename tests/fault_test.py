#!/usr/bin/env python3
"""Fault tests: asgd survives dead workers and a dead server.

  fault_test.py workers SERVER WORKER EVAL MAKE_CORPUS
    An undisturbed run, then the same run while a worker chosen at random is
    killed with SIGKILL at least 20 times, each time replaced by a new one
    with the same index (workers take minibatches from the shared pool, so a
    replacement simply continues). Training must finish, and both runs must
    reach the same held-out accuracy target (TARGET_ACCURACY; undisturbed runs
    end at 70-72% on this corpus, chance is 2.5%); a run below it is run
    once more (see run_to_target).

  fault_test.py server SERVER WORKER EVAL MAKE_CORPUS
    A server is killed with SIGKILL mid-training and restarted DOWN_S later
    with the same flags: it restores its checkpoint, the workers reconnect by themselves and
    training finishes. Measures when the restarted server accepts connections
    (a TCP connect to its port, polled every 5 ms) and when it applies its
    first update (its model version, polled every 10 ms), and requires at
    most FIRST_UPDATE_BOUND_S between the two. Reports the recovery time and
    the updates lost.

Bounded in time, deterministic seed, every port chosen by the OS, every
process stopped at the end.
"""
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from testlib import LOGS, fail, read_port, wait_for

SEED = 20261122
TARGET_ACCURACY = 65.0
DEADLINE_S = 240
# How long the killed server stays down before it is restarted, and the
# most allowed from the restarted server accepting connections to its first
# applied update (the workers' reconnection delay).
DOWN_S = 4.0
FIRST_UPDATE_BOUND_S = 1.5


class Cluster:
    def __init__(self, tmp, server_bin, worker_bin):
        self.tmp, self.server_bin, self.worker_bin = tmp, server_bin, worker_bin
        self.procs = []

    def start(self, args, name):
        log = os.path.join(self.tmp, f"{name}.log")
        LOGS.append(log)
        p = subprocess.Popen(args, stdout=open(log, "a"), stderr=subprocess.STDOUT)
        self.procs.append(p)
        return p

    def server(self, i, n, port=0, extra=(), on_start=None):
        """Starts server i of n; `on_start(process)` runs right after the
        process starts, before waiting for its port files."""
        pf, mf = (os.path.join(self.tmp, f"{k}.server{i}") for k in ("port", "mport"))
        for f in (pf, mf):
            if os.path.exists(f):
                os.remove(f)
        p = self.start([self.server_bin, "--host=127.0.0.1", f"--port={port}",
                        f"--port_file={pf}", "--metrics_port=0",
                        f"--metrics_port_file={mf}", f"--server_index={i}",
                        f"--num_servers={n}", "--num_shards=2", "--hidden=128",
                        "--learning_rate=0.05", "--log_every_s=0", *extra],
                       f"server{i}")
        if on_start is not None:
            on_start(p)
        return p, wait_for(f"server {i}", lambda: read_port(pf)), \
            wait_for(f"server {i} metrics", lambda: read_port(mf))

    def worker(self, servers, corpus, i, n, extra=()):
        return self.start([self.worker_bin, f"--servers={servers}",
                           f"--corpus={corpus}", f"--worker_index={i}",
                           f"--num_workers={n}", "--backend=cpu",
                           "--log_every=100000", "--rpc_timeout_s=10",
                           *extra], f"worker{i}")

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        self.procs = []


def evaluate(eval_bin, servers, corpus):
    out = subprocess.run([eval_bin, f"--servers={servers}", f"--corpus={corpus}"],
                         capture_output=True, text=True, timeout=120)
    m = re.search(r"held-out frame accuracy: ([\d.]+)%", out.stdout)
    if out.returncode != 0 or not m:
        fail(f"evaluation failed: {out.stdout}{out.stderr}")
    return float(m.group(1))


def model_version(metrics_port):
    try:
        page = urllib.request.urlopen(
            f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
    except OSError:
        return None
    m = re.search(r"^asgd_server_model_version\{[^}]*\} ([\d.e+]+)$", page, re.M)
    return int(float(m.group(1))) if m else None


def accepts(port):
    """True when something accepts TCP connections on 127.0.0.1:port."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def wait_all(procs, deadline):
    for p in procs:
        try:
            rc = p.wait(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            fail("a worker hung")
        if rc != 0:
            fail(f"a worker exited with {rc}")


def pool_run(cluster, args, corpus, kills, rng):
    """Trains with 3 pool workers; kills (and replaces) `kills` of them."""
    _, p0, _ = cluster.server(0, 2)
    _, p1, _ = cluster.server(1, 2)
    servers = f"127.0.0.1:{p0},127.0.0.1:{p1}"
    # The run's secret, shared by every worker of this run, replacements too.
    run_id = os.path.join(cluster.tmp, f"pool_run_id.{p0}")
    with open(run_id, "w") as f:
        f.write(os.urandom(16).hex())
    flags = ("--minibatch_pool", f"--pool_run_id_file={run_id}", "--epochs=30",
             "--batch_size=128")
    workers = [cluster.worker(servers, corpus, i, 3, flags) for i in range(3)]
    done_kills = 0
    deadline = time.time() + DEADLINE_S
    while done_kills < kills:
        time.sleep(rng.uniform(0.1, 0.3))  # the fault schedule, not a wait
        i = rng.randrange(3)
        if workers[i].poll() is not None:
            if all(w.poll() is not None for w in workers):
                fail(f"training ended after only {done_kills} kills")
            continue
        workers[i].kill()
        workers[i].wait()
        workers[i] = cluster.worker(servers, corpus, i, 3, flags)
        done_kills += 1
    wait_all(workers, deadline)
    acc = evaluate(args["eval"], servers, corpus)
    cluster.stop()
    return acc


def run_to_target(name, run):
    """Runs `run()` (a held-out accuracy) once, and once more if it ended
    below TARGET_ACCURACY; fails if the second run does too. On a machine
    loaded by other tests an undisturbed run has ended, rarely, 6-12 points
    below its usual 70-72% (and above the target on the rerun); a regression
    ends below the target every time. Every attempt is printed."""
    for attempt in (1, 2):
        t0 = time.time()
        acc = run()
        print(f"{name} (attempt {attempt}): held-out accuracy {acc:.1f}% in "
              f"{time.time() - t0:.1f} s; load average "
              f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        if acc >= TARGET_ACCURACY:
            return acc
    fail(f"the {name} run ended at {acc:.1f}% twice, below the target "
         f"{TARGET_ACCURACY:.0f}%")


def workers_test(args, tmp, corpus):
    rng = random.Random(SEED)
    cluster = Cluster(tmp, args["server"], args["worker"])
    try:
        run_to_target("undisturbed",
                      lambda: pool_run(cluster, args, corpus, 0, rng))
        run_to_target("20 workers killed with SIGKILL and replaced",
                      lambda: pool_run(cluster, args, corpus, 20, rng))
    finally:
        cluster.stop()


def server_test(args, tmp, corpus):
    rng = random.Random(SEED)
    cluster = Cluster(tmp, args["server"], args["worker"])
    ckpt = os.path.join(tmp, "checkpoints")
    extra = (f"--checkpoint_dir={ckpt}", "--checkpoint_every_s=1")
    try:
        procs, ports, mports = [], [], []
        for i in range(2):
            p, port, mport = cluster.server(i, 2, extra=extra)
            procs.append(p)
            ports.append(port)
            mports.append(mport)
        servers = ",".join(f"127.0.0.1:{p}" for p in ports)
        workers = [cluster.worker(servers, corpus, i, 2,
                                  ("--epochs=20", "--batch_size=128"))
                   for i in range(2)]
        victim = rng.randrange(2)
        # Mid-training: some checkpoints written, plenty of training left.
        wait_for("training progress",
                 lambda: (model_version(mports[victim]) or 0) >= 300, timeout=120)
        time.sleep(rng.uniform(0.3, 0.9))  # land between checkpoints
        before = model_version(mports[victim])
        killed_at = time.time()
        procs[victim].kill()
        procs[victim].wait()
        time.sleep(DOWN_S)  # the outage (the fault schedule, not a wait)
        accepting = {}

        def watch_port(proc):
            # The first moment the new process accepts connections.
            wait_for("the restarted server to accept connections",
                     lambda: accepts(ports[victim]), timeout=60,
                     interval=0.005, proc=proc)
            accepting["at"] = time.time()

        restarted_at = time.time()
        _, port, mport = cluster.server(victim, 2, port=ports[victim],
                                        extra=extra, on_start=watch_port)
        if port != ports[victim]:
            fail("the restarted server did not get its port back")
        log = os.path.join(tmp, f"server{victim}.log")
        restored = wait_for("the restore line", lambda: re.findall(
            r"restored checkpoint \S+ at version (\d+)", open(log).read()))
        restored = int(restored[-1])
        wait_for("updates on the restarted server",
                 lambda: (model_version(mport) or 0) > restored,
                 timeout=60, interval=0.01)
        recovered_at = time.time()
        wait_all(workers, time.time() + DEADLINE_S)
        acc = evaluate(args["eval"], servers, corpus)
    finally:
        cluster.stop()
    lost = max(0, (before or 0) - restored)
    reconnect = recovered_at - accepting["at"]
    print(f"server {victim} killed with SIGKILL at version >= {before}, "
          f"restarted; restored checkpoint version {restored}: about {lost} "
          f"updates lost")
    print(f"recovery: first update applied {recovered_at - killed_at:.2f} s "
          f"after the kill ({recovered_at - restarted_at:.2f} s after the "
          f"restart, {reconnect:.2f} s after the restarted server accepted "
          f"connections); training finished, held-out accuracy {acc:.1f}%")
    if reconnect > FIRST_UPDATE_BOUND_S:
        fail(f"the first update came {reconnect:.2f} s after the restarted "
             f"server accepted connections (bound {FIRST_UPDATE_BOUND_S} s)")
    if acc < 40:
        fail(f"accuracy {acc:.1f}% after recovery is too low")


def main():
    mode = sys.argv[1]
    args = dict(zip(["server", "worker", "eval", "make_corpus"], sys.argv[2:6]))
    tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
    corpus = os.path.join(tmp, "corpus")
    subprocess.run([args["make_corpus"], f"--out={corpus}", "--num_train=150",
                    "--num_heldout=20", "--jobs=2", "--noprogress",
                    f"--seed={SEED % 1000}"], check=True)
    {"workers": workers_test, "server": server_test}[mode](args, tmp, corpus)
    print("PASS")


if __name__ == "__main__":
    main()
