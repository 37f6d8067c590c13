#!/usr/bin/env python3
"""Live monitoring test: a real Prometheus scrapes a real training run.

Starts 2 asgd servers and 2 workers on 127.0.0.1 (every port chosen by the
OS), checks both kinds of /metrics page with `promtool check metrics`, starts
Debian's Prometheus scraping all four every second, then asks it through
PromQL for the training throughput and a staleness quantile, and evaluates
every expression of the Grafana dashboard. Everything it starts is stopped at
the end. Usage: prometheus_live_test.py SERVER WORKER MAKE_CORPUS DASHBOARD
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

from testlib import LOGS, fail, free_port, http_get, read_port, wait_for


def main():
    server, worker, make_corpus, dashboard = sys.argv[1:5]
    for tool in ("prometheus", "promtool"):
        if shutil.which(tool) is None:
            fail(f"{tool} not found (Debian package 'prometheus'; "
                 "scripts/install_deps.sh installs it)")
    tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
    procs = []

    def start(args, log):
        LOGS.append(log)
        procs.append(subprocess.Popen(args, stdout=open(log, "w"),
                                      stderr=subprocess.STDOUT))
        return procs[-1]

    try:
        corpus = os.path.join(tmp, "corpus")
        subprocess.run([make_corpus, f"--out={corpus}", "--num_train=40",
                        "--num_heldout=8", "--jobs=2", "--noprogress"],
                       check=True)
        grpc_ports, metrics_ports = [], []
        for i in range(2):
            pf, mf = (os.path.join(tmp, f"{k}.server{i}") for k in ("port", "mport"))
            start([server, "--host=127.0.0.1", "--port=0", f"--port_file={pf}",
                   "--metrics_port=0", f"--metrics_port_file={mf}",
                   f"--server_index={i}", "--num_servers=2", "--num_shards=2",
                   "--hidden=64", "--log_every_s=0"],
                  os.path.join(tmp, f"server{i}.log"))
            grpc_ports.append(wait_for(f"server {i}", lambda: read_port(pf)))
            metrics_ports.append(wait_for(f"server {i} metrics",
                                          lambda: read_port(mf)))
        servers = ",".join(f"127.0.0.1:{p}" for p in grpc_ports)
        for i in range(2):
            mf = os.path.join(tmp, f"mport.worker{i}")
            start([worker, f"--servers={servers}", f"--corpus={corpus}",
                   f"--worker_index={i}", "--num_workers=2", "--epochs=0",
                   "--max_steps=100000000", "--batch_size=64",
                   "--backend=cpu", "--metrics_host=127.0.0.1", "--metrics_port=0",
                   f"--metrics_port_file={mf}", "--log_every=100000"],
                  os.path.join(tmp, f"worker{i}.log"))
            metrics_ports.append(wait_for(f"worker {i} metrics",
                                          lambda: read_port(mf)))

        # Both kinds of page pass promtool's lint once training has begun.
        def steps_page():
            page = http_get(f"http://127.0.0.1:{metrics_ports[2]}/metrics")
            return page if "asgd_worker_steps_total" in page and \
                not 'asgd_worker_steps_total{worker="0"} 0\n' in page else None
        wait_for("the first training steps", steps_page)
        for port in metrics_ports:
            page = http_get(f"http://127.0.0.1:{port}/metrics")
            lint = subprocess.run(["promtool", "check", "metrics"], input=page,
                                  capture_output=True, text=True)
            if lint.returncode != 0:
                fail(f"promtool check metrics on :{port}:\n{lint.stdout}{lint.stderr}")
        print("promtool check metrics: 4 pages OK")

        prom_port = free_port()
        config = os.path.join(tmp, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "scrape_configs:\n  - job_name: asgd\n    static_configs:\n"
                    "      - targets: [" +
                    ", ".join(f"'127.0.0.1:{p}'" for p in metrics_ports) + "]\n")
        start(["prometheus", f"--config.file={config}",
               f"--storage.tsdb.path={os.path.join(tmp, 'tsdb')}",
               f"--web.listen-address=127.0.0.1:{prom_port}"],
              os.path.join(tmp, "prometheus.log"))
        api = f"http://127.0.0.1:{prom_port}/api/v1/query?query="

        def query(expr):
            try:
                return json.loads(http_get(api + urllib.parse.quote(expr)))
            except (OSError, ValueError) as e:
                return {"status": "error", "error": str(e)}

        def scalar(expr):
            r = query(expr)
            if r.get("status") != "success" or not r["data"]["result"]:
                return None
            v = float(r["data"]["result"][0]["value"][1])
            return v if math.isfinite(v) else None

        if not wait_for("all 4 targets up",
                        lambda: scalar("count(up == 1)") == 4, interval=0.5,
                        must=False):
            targets = json.loads(http_get(
                f"http://127.0.0.1:{prom_port}/api/v1/targets"))
            fail("targets not up: " + "; ".join(
                f"{t['scrapeUrl']}: {t['health']} {t['lastError']}"
                for t in targets["data"]["activeTargets"]))
        steps_per_s = wait_for(
            "a training throughput",
            lambda: scalar("sum(rate(asgd_worker_steps_total[10s]))"),
            interval=0.5)
        frames_per_s = scalar("sum(rate(asgd_worker_frames_total[10s]))")
        # Both counters move together at every step: one query, one instant.
        # A scrape can still fall between the two counters' increments of one
        # step, and an epoch's last minibatch can be short: within 1%.
        frames_per_step = scalar(
            "sum(rate(asgd_worker_frames_total[10s])) / "
            "sum(rate(asgd_worker_steps_total[10s]))")
        p90 = wait_for(
            "a staleness quantile",
            lambda: scalar("histogram_quantile(0.9, sum by (le) "
                           "(rate(asgd_server_push_staleness_bucket[10s])))"),
            interval=0.5)
        if not steps_per_s > 0 or frames_per_s is None:
            fail("no training throughput")
        print(f"training throughput {steps_per_s:.1f} steps/s "
              f"({frames_per_s:.0f} frames/s), p90 push staleness {p90:.2f}")
        if frames_per_step is None or abs(frames_per_step - 64) > 0.64:
            fail(f"frames per step is {frames_per_step}, not the batch size 64")
        if not 0 <= p90 <= 64:
            fail(f"implausible staleness quantile {p90}")

        # Every expression of the dashboard evaluates without error.
        with open(dashboard) as f:
            board = json.load(f)
        panels = list(board.get("panels", []))
        exprs = []
        while panels:
            p = panels.pop()
            panels.extend(p.get("panels", []))
            exprs += [t["expr"] for t in p.get("targets", []) if t.get("expr")]
        if not exprs:
            fail("the dashboard has no expressions")
        with_data = 0
        for expr in exprs:
            e = (expr.replace("$__rate_interval", "10s")
                     .replace("$__interval", "5s").replace("$__range", "1m"))
            r = query(e)
            if r.get("status") != "success":
                fail(f"dashboard expression failed: {expr}: {r.get('error')}")
            with_data += bool(r["data"]["result"])
        print(f"dashboard: {len(exprs)} expressions evaluate, {with_data} "
              "return data")
        if with_data < len(exprs) // 2:
            fail("most dashboard expressions return no data")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
    print("PASS")


if __name__ == "__main__":
    main()
