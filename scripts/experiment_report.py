#!/usr/bin/env python3
"""Turns the logs of scripts/experiment.sh into CSV, markdown tables and plots.

Reads RUNS/index.csv and each run's worker-*.log and eval.log; writes
results.csv, runs.csv, table.md, README.md and PNG plots (with gnuplot) into
OUT. Time is measured from worker 0's start; the frame axis counts frames of
all workers (worker 0's frames times the number of workers, exact for the
static partitions of equal size, approximate for the pool and stragglers).
The decentralized runs (modes adpsgd and allreduce) get their own tables and
plots, against asgd at the same worker count; their curve is worker 0's own
model, and their final accuracy that of the model worker 0 handed to the
servers. So do the consensus runs (easgd, admm), whose curve and final
accuracy are the servers' consensus. The pipeline runs (one pipeline of
stages: stage 0's worker-0.log, stage s's stage-s.log) get a table of their
own with each stage's utilization and delays; their curve is stage 0's
evaluations through the pipeline, their final accuracy the model the stages
handed to the servers. With the methods grid (--grids), one table first
puts every method side by side: time and frames to each target, final
accuracy and wall time, without and with a straggler.
"""
import argparse
import csv
import os
import re
import subprocess
import sys

EVAL = re.compile(r"worker 0 eval t=([\d.]+) frames=(\d+) version=(\d+) "
                  r"held-out frame accuracy: ([\d.]+)%")
DONE = re.compile(r"worker (\d+) done: (\d+) steps, (\d+) pushes, (\d+) frames "
                  r"in ([\d.]+) s")
FINAL = re.compile(r"held-out frame accuracy: ([\d.]+)%")
PHASES = re.compile(r"worker (\d+) phases: .* blocked on communication (\d+)%")
PEERS = re.compile(r"worker (\d+) peers: (\d+) averages started \((\d+) failed, "
                   r"(\d+) skipped\), (\d+) answered, last consensus distance "
                   r"([-\d.e+]+)")
PEER_SERVICE = re.compile(r"worker 0: peer service on \S+ \((\w+)(?:, (\w+))?"
                          r"(, delay-by-one)?\)")
CONSENSUS = re.compile(r"worker (\d+) done: .*, mode (?:easgd|admm): (\d+) "
                       r"communications, (\d+) server parts not applied, "
                       r"last consensus distance ([-\d.e+]+)")
PROGRESS = re.compile(r"worker 0 step \d+ epoch ([\d.]+) ")
PIPELINE = re.compile(r"^stage 0: (\d+) stages, depth (\d+), weights "
                      r"(local|on the servers), learning rate")
STAGE_PLAN = re.compile(r"^stage (\d+): (layers? [\d-]+), [\d.e+-]+ G "
                        r"multiply-adds per minibatch \((\d+)%\)")
STAGE_DONE = re.compile(r"^stage (\d+) done: (\d+) minibatches in ([\d.]+) s, "
                        r"busy (\d+)% \(forward ([\d.]+) s, backward ([\d.]+) "
                        r"s, idle ([\d.]+) s\), delays \{([^}]*)\}, at most "
                        r"(\d+) in flight")
SERVER_MODEL = re.compile(r"listening on \S+ \(model (.*), (\d+) params,")
PS_MODES = ("sgd", "asgd", "sync")
DECENTRALIZED_MODES = ("adpsgd", "allreduce")
CONSENSUS_MODES = ("easgd", "admm")


# The index's straggler column: none, a slow last worker, or the last worker
# killed halfway and restarted in its place (experiment.sh's run SLOW 2).
STRAGGLER = {"0": "no", "1": "yes", "2": "restarted"}


def read_run(runs, row):
    d = os.path.join(runs, row["name"])
    n = int(row["workers"])
    curve, workers, comm, peers, method = [], {}, {}, {}, None
    rounds = {}
    epochs_done = ""
    # A worker restarted in its place (straggler 2) logs its second life in
    # worker-W-restarted.log, whose done line counts only that life.
    logs = []
    for w in range(n):
        logs.append((w, os.path.join(d, f"worker-{w}.log")))
        restarted = os.path.join(d, f"worker-{w}-restarted.log")
        if os.path.exists(restarted):
            logs.append((w, restarted))
    for w, path in logs:
        with open(path) as f:
            for line in f:
                m = PROGRESS.search(line)
                if m and w == 0:
                    epochs_done = m.group(1)
                m = EVAL.search(line)
                if m and w == 0:
                    t, frames, version, acc = m.groups()
                    curve.append((float(t), int(frames) * n, float(acc)))
                m = DONE.search(line)
                if m:
                    workers[int(m.group(1))] = dict(
                        steps=int(m.group(2)), pushes=int(m.group(3)),
                        frames=int(m.group(4)), seconds=float(m.group(5)))
                m = PHASES.search(line)
                if m:
                    comm[int(m.group(1))] = float(m.group(2))
                m = CONSENSUS.search(line)
                if m:
                    rounds[int(m.group(1))] = dict(
                        rounds=int(m.group(2)), lost=int(m.group(3)),
                        distance=float(m.group(4)))
                m = PEERS.search(line)
                if m:
                    peers[int(m.group(1))] = dict(
                        started=int(m.group(2)), failed=int(m.group(3)),
                        skipped=int(m.group(4)), answered=int(m.group(5)),
                        distance=float(m.group(6)))
                m = PEER_SERVICE.search(line)
                if m:
                    method = m.groups()
    model, params = row.get("model") or "", 0
    server_log = os.path.join(d, "server-0.log")
    if os.path.exists(server_log):
        with open(server_log) as f:
            m = SERVER_MODEL.search(f.read())
            if m:
                model, params = m.group(1), int(m.group(2))
    final = None
    with open(os.path.join(d, "eval.log")) as f:
        for line in f:
            m = FINAL.search(line)
            if m:
                final = float(m.group(1))
    if final is None or not curve or len(workers) != n:
        sys.exit(f"run {row['name']}: incomplete logs in {d}")
    # The run ends with the servers' final model, evaluated on all frames.
    curve.append((float(row["wall_seconds"]),
                  sum(x["frames"] for x in workers.values()), final))
    return dict(row, curve=curve, workers=workers, final=final, n=n,
                wall=float(row["wall_seconds"]), comm=comm, peers=peers,
                rounds=rounds,
                method=method_name(row["mode"], method),
                model_name=row.get("model") or "", model=model, params=params,
                epochs_done=epochs_done)


def method_name(mode, peer_service):
    """What a run trained with, for the decentralized tables."""
    if mode == "asgd":
        return "ASGD through the servers"
    if mode == "sync":
        return "synchronous SGD through the servers"
    if mode == "allreduce":
        return "ring allreduce (synchronous)"
    if mode == "easgd":
        return "EASGD (elastic averaging) with the servers"
    if mode == "admm":
        return "ADMM (consensus) with the servers"
    if mode == "adpsgd":
        topology = (peer_service[1] if peer_service and peer_service[1]
                    else "?").replace("_", " ")
        delay = ", delay-by-one" if peer_service and peer_service[2] else ""
        return f"AD-PSGD, {topology}{delay}"
    return mode


def reached(curve, target):
    """The first point of `curve` at `target` or above: (seconds, frames),
    or (None, None)."""
    for t, frames, acc in curve:
        if acc >= target:
            return t, frames
    return None, None


def time_to(curve, target):
    return reached(curve, target)[0]


def fmt_time(t):
    return "not reached" if t is None else f"{t:.0f} s"


def fmt_frames(f):
    return "not reached" if f is None else f"{f / 1e6:.2f} M"


def methods_table(runs, targets, slowdown, lines):
    """Appends the methods grid's table (every method side by side) to
    `lines`."""
    order = {"sgd": 0, "asgd": 1, "adpsgd": 2, "allreduce": 3, "easgd": 4,
             "admm": 5, "pipeline": 6}
    chosen = sorted(
        (r for r in runs if r["mode"] in order and r["pool"] == "0" and
         r["name"] != r["model_name"] and
         not (r["mode"] == "adpsgd" and r["method"] != "AD-PSGD, fixed ring")),
        key=lambda r: (r["straggler"], r["mode"] == "pipeline", r["n"],
                       order[r["mode"]], r["name"]))
    heads = " | ".join(f"{t:g}%" for t in targets)
    lines.append("Every method on the same model and data, side by side: time "
                 "(from worker 0's or stage 0's start) and frames (all "
                 "workers'; for a pipeline, the minibatches' frames once) to "
                 "each held-out accuracy target, then the final accuracy and "
                 "wall time. Straggler: the last worker, or for a pipeline "
                 f"the stage named in the run, {slowdown}x slower. Frames of "
                 "a straggler run count the slow worker's as worker 0's "
                 "(approximate).\n")
    lines.append(f"| run | method | workers (stages) | straggler | time to "
                 f"{heads} | frames to {heads} | final accuracy | wall time |")
    lines.append("|---|---|---|---|" + "---|" * (2 * len(targets) + 2))
    for r in chosen:
        times = " | ".join(fmt_time(time_to(r["curve"], t)) for t in targets)
        frames = " | ".join(fmt_frames(reached(r["curve"], t)[1])
                            for t in targets)
        slow = "yes" if r["straggler"] == "1" else "no"
        method = r["method"]
        size = str(r["n"])
        if r["mode"] == "sgd":
            method = "local SGD (one process)"
        elif r["mode"] == "pipeline":
            method = "pipelined back-propagation"
            m = re.match(r"pipeline-(\d+)", r["name"])
            size = f"({m.group(1)})" if m else ""
        lines.append(f"| {r['name']} | {method} | {size} | {slow} | {times} | "
                     f"{frames} | {r['final']:.1f}% | {r['wall']:.0f} s |")
    lines.append("")


def decentralized_tables(runs, targets, lines):
    """Appends the decentralized comparison to `lines`; returns its runs
    without and with a straggler (empty without decentralized runs)."""
    counts = sorted({r["n"] for r in runs if r["mode"] in DECENTRALIZED_MODES})
    if not counts:
        return [], []
    n = counts[-1]
    order = {"asgd": 0, "adpsgd": 1, "allreduce": 2}
    chosen = sorted(
        (r for r in runs if r["n"] == n and r["pool"] == "0" and
         r["mode"] in ("asgd",) + DECENTRALIZED_MODES),
        key=lambda r: (order[r["mode"]], r["method"]))
    normal = [r for r in chosen if r["straggler"] == "0"]
    slow = [r for r in chosen if r["straggler"] == "1"]
    heads = " | ".join(f"{t:g}%" for t in targets)

    def comm(r):
        return (f"{sum(r['comm'].values()) / len(r['comm']):.0f}%"
                if r["comm"] else "")

    def averages(r):
        if not r["peers"]:
            return ""
        started = sum(p["started"] for p in r["peers"].values())
        failed = sum(p["failed"] + p["skipped"] for p in r["peers"].values())
        distance = r["peers"].get(0, {}).get("distance", -1)
        text = f"{started - failed} ok, {failed} not"
        if distance >= 0:
            text += f"; distance {distance:.3g}"
        return text

    lines.append("")
    lines.append(f"Decentralized training against ASGD through the servers, "
                 f"{n} workers (time from worker 0's start to the accuracy "
                 "targets, as above; for the decentralized runs the curve is "
                 "worker 0's own model and the final accuracy that of the "
                 "model worker 0 hands to the servers at the end; blocked: "
                 "share of step time spent waiting on the servers or peers, "
                 "mean over workers; averages: exchanges the workers started, "
                 "done / failed or skipped, and worker 0's last model "
                 "distance to a peer):\n")
    lines.append(f"| run | method | {heads} | final accuracy | wall time | "
                 "blocked | steps per worker | averages |")
    lines.append("|---|---|" + "---|" * (len(targets) + 5))
    for r in normal:
        cells = " | ".join(fmt_time(time_to(r["curve"], t)) for t in targets)
        steps = " / ".join(str(r["workers"][i]["steps"]) for i in range(r["n"]))
        lines.append(f"| {r['name']} | {r['method']} | {cells} | "
                     f"{r['final']:.1f}% | {r['wall']:.0f} s | {comm(r)} | "
                     f"{steps} | {averages(r)} |")
    if slow:
        plain = {r["method"]: r for r in normal}
        lines.append("")
        lines.append(f"The same with the last worker {n - 1} slowed down on "
                     "purpose (`--slowdown`); wall time also against the run "
                     "without the straggler:\n")
        lines.append(f"| run | method | {heads} | final accuracy | wall time "
                     "| vs no straggler | steps (worker 0 / slow) | averages |")
        lines.append("|---|---|" + "---|" * (len(targets) + 5))
        for r in slow:
            cells = " | ".join(fmt_time(time_to(r["curve"], t))
                               for t in targets)
            other = plain.get(r["method"])
            ratio = f"{r['wall'] / other['wall']:.2f}x" if other else ""
            steps = (f"{r['workers'][0]['steps']} / "
                     f"{r['workers'][r['n'] - 1]['steps']}")
            lines.append(f"| {r['name']} | {r['method']} | {cells} | "
                         f"{r['final']:.1f}% | {r['wall']:.0f} s | {ratio} | "
                         f"{steps} | {averages(r)} |")
    return normal, slow


def consensus_tables(runs, targets, lines):
    """Appends the consensus comparison (easgd and admm against asgd at the
    same worker counts) to `lines`; returns its runs (empty without
    consensus runs)."""
    counts = sorted({r["n"] for r in runs if r["mode"] in CONSENSUS_MODES})
    if not counts:
        return []
    order = {"asgd": 0, "easgd": 1, "admm": 2}
    chosen = sorted(
        (r for r in runs if r["n"] in counts and r["pool"] == "0" and
         r["mode"] in order and r["name"] != r["model_name"]),
        key=lambda r: (r["straggler"], r["n"], order[r["mode"]]))
    heads = " | ".join(f"{t:g}%" for t in targets)

    def rounds(r):
        if not r["rounds"]:
            return ""
        done = sum(x["rounds"] for x in r["rounds"].values())
        lost = sum(x["lost"] for x in r["rounds"].values())
        distance = r["rounds"].get(0, {}).get("distance", -1)
        return f"{done}, {lost} parts not applied; distance {distance:.3g}"

    lines.append("")
    lines.append("Consensus training (each worker trains its own model, pulled "
                 "toward the servers' consensus at each communication) against "
                 "ASGD through the servers (time from worker 0's start to the "
                 "accuracy targets, as above; for easgd and admm the curve is "
                 "the consensus as worker 0 last pulled it, and the final "
                 "accuracy the servers' consensus after the run; blocked: "
                 "share of step time spent communicating, mean over workers; "
                 "communications: all workers', the server parts not applied, "
                 "and worker 0's last distance to the consensus):\n")
    lines.append(f"| run | method | workers | straggler | {heads} | "
                 "final accuracy | wall time | blocked | steps per worker | "
                 "communications |")
    lines.append("|---|---|---|---|" + "---|" * (len(targets) + 5))
    for r in chosen:
        cells = " | ".join(fmt_time(time_to(r["curve"], t)) for t in targets)
        steps = " / ".join(str(r["workers"][i]["steps"]) for i in range(r["n"]))
        blocked = (f"{sum(r['comm'].values()) / len(r['comm']):.0f}%"
                   if r["comm"] else "")
        slow = STRAGGLER.get(r["straggler"], r["straggler"])
        lines.append(f"| {r['name']} | {r['method']} | {r['n']} | {slow} | "
                     f"{cells} | {r['final']:.1f}% | {r['wall']:.0f} s | "
                     f"{blocked} | {steps} | {rounds(r)} |")
    return chosen


def read_stages(runs_dir, name):
    """A pipeline run's stages: depth, and per stage its layers, share of
    the work, done line (minibatches, seconds, busy %, idle, delays)."""
    d = os.path.join(runs_dir, name)
    stages, depth, weights, plan, done = 0, 0, "", {}, {}
    with open(os.path.join(d, "worker-0.log")) as f:
        for line in f:
            m = PIPELINE.search(line)
            if m:
                stages, depth = int(m.group(1)), int(m.group(2))
                weights = m.group(3)
            m = STAGE_PLAN.search(line)
            if m:
                plan[int(m.group(1))] = (m.group(2), int(m.group(3)))
    for s in range(stages):
        path = os.path.join(d, "worker-0.log" if s == 0 else f"stage-{s}.log")
        with open(path) as f:
            for line in f:
                m = STAGE_DONE.search(line)
                if m:
                    done[s] = dict(minibatches=int(m.group(2)),
                                   seconds=float(m.group(3)),
                                   busy=int(m.group(4)),
                                   idle=float(m.group(7)),
                                   delays=m.group(8))
    if len(done) != stages or stages == 0:
        sys.exit(f"run {name}: incomplete stage logs in {d}")
    return dict(stages=stages, depth=depth, weights=weights, plan=plan,
                done=done)


def pipeline_tables(runs_dir, runs, targets, lines):
    """Appends the pipeline comparison (pipeline runs against sgd-1 and
    asgd-2) to `lines`; returns the runs it shows (empty without
    pipeline runs)."""
    pipes = [r for r in runs if r["mode"] == "pipeline"]
    if not pipes:
        return []
    by_name = {r["name"]: r for r in runs}
    chosen = [by_name[n] for n in ("sgd-1", "asgd-2") if n in by_name] + pipes
    heads = " | ".join(f"{t:g}%" for t in targets)
    lines.append("")
    lines.append("Pipelined back-propagation (the model's layers split into "
                 "stages, one process each, balanced by training work; depth: "
                 "minibatches in flight at stage 0, stage s updating "
                 "max(0, depth - 1 - s) updates late) against local SGD and "
                 "ASGD with 2 workers; pipelines: more than one train the "
                 "same model, each on its part of the data, with their "
                 "weights on the servers (time from stage 0's start to the "
                 "accuracy targets, held-out accuracy measured through the "
                 "pipeline; final accuracy: the model the stages handed to "
                 "the servers; per stage: layers, share of the training "
                 "work, busy share of the run, delays seen as delay: "
                 "updates):\n")
    lines.append(f"| run | pipelines (weights) | stages | depth | straggler "
                 f"| {heads} | final accuracy | wall time | frames/s | stages "
                 "of pipeline 0 (layers, work, busy, delays) |")
    lines.append("|---|---|---|---|---|" + "---|" * (len(targets) + 4))
    for r in chosen:
        cells = " | ".join(fmt_time(time_to(r["curve"], t)) for t in targets)
        frames = sum(x["frames"] for x in r["workers"].values())
        fps = f"{frames / r['wall']:.0f}" if r["wall"] > 0 else ""
        slow = "yes" if r["straggler"] == "1" else "no"
        if r["mode"] != "pipeline":
            lines.append(f"| {r['name']} | ({r['mode']}, {r['n']} workers) | "
                         f"| | {slow} | {cells} | {r['final']:.1f}% | "
                         f"{r['wall']:.0f} s | {fps} | |")
            continue
        st = read_stages(runs_dir, r["name"])
        desc = "; ".join(
            f"{s}: {st['plan'].get(s, ('?', 0))[0]}, "
            f"{st['plan'].get(s, ('?', 0))[1]}%, busy {st['done'][s]['busy']}%"
            f", {{{st['done'][s]['delays']}}}"
            for s in range(st["stages"]))
        lines.append(f"| {r['name']} | {r['n']} ({st['weights']}) | "
                     f"{st['stages']} | {st['depth']} | "
                     f"{slow} | {cells} | {r['final']:.1f}% | "
                     f"{r['wall']:.0f} s | {fps} | {desc} |")
    return chosen


def models_table(runs, lines):
    """Appends the side-by-side comparison of the models grid (runs named
    after their model) to `lines`; returns those runs."""
    chosen = [r for r in runs if r["name"] == r["model_name"]]
    if not chosen:
        return []
    lines.append("")
    lines.append("Models side by side: 2 ASGD workers through 2 servers, the "
                 "same wall-clock budget each (frames: labelled frames "
                 "computed by both workers; epochs: worker 0's passes over "
                 "its half; accuracy: the servers' model "
                 "after the budget, all held-out frames; best: the best "
                 "periodic evaluation on the 5,000-frame subset):\n")
    lines.append("| model | layers | parameters | frames/s (both workers) | "
                 "frames in budget | epochs | best periodic | final accuracy "
                 "| blocked |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for r in chosen:
        frames = sum(x["frames"] for x in r["workers"].values())
        secs = max(x["seconds"] for x in r["workers"].values())
        best = max(acc for _, _, acc in r["curve"][:-1]) if len(
            r["curve"]) > 1 else r["final"]
        comm = (f"{sum(r['comm'].values()) / len(r['comm']):.0f}%"
                if r["comm"] else "")
        lines.append(f"| {r['name']} | {r['model']} | {r['params']:,} | "
                     f"{frames / max(secs, 1e-9):,.0f} | {frames:,} | "
                     f"{r.get('epochs_done', '')} | {best:.1f}% | "
                     f"{r['final']:.1f}% | {comm} |")
    return chosen


def targets_table(main_runs, base, targets, lines):
    """Appends the time-to-target table of the scaling runs to `lines`."""
    lines.append("Time to reach held-out frame accuracy targets (from worker "
                 "0's start; periodic evaluations on a 5,000-frame held-out "
                 "subset every 3 s), with the scaling efficiency against "
                 "1-worker SGD in brackets: T(sgd-1) / (workers x T).\n")
    lines.append("| run | workers | " +
                 " | ".join(f"{t:g}%" for t in targets) + " |")
    lines.append("|---|---|" + "---|" * len(targets))
    for r in main_runs:
        cells = []
        for target in targets:
            t = time_to(r["curve"], target)
            cell = fmt_time(t)
            tb = time_to(base["curve"], target) if base else None
            if t is not None and tb is not None and r is not base:
                cell += f" [{100 * tb / (r['n'] * t):.0f}%]"
            cells.append(cell)
        lines.append(f"| {r['name']} | {r['n']} | " + " | ".join(cells) + " |")
    lines.append("")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--targets", default="60 70 75")
    ap.add_argument("--grids", default="",
                    help="the grids that ran (methods adds its table)")
    ap.add_argument("--slowdown", default="3")
    ap.add_argument("--machine", required=True)
    ap.add_argument("--command", required=True)
    ap.add_argument("--settings", required=True)
    a = ap.parse_args()
    targets = [float(x) for x in a.targets.split()]
    with open(os.path.join(a.runs, "index.csv")) as f:
        runs = [read_run(a.runs, row) for row in csv.DictReader(f)]
    os.makedirs(a.out, exist_ok=True)

    with open(os.path.join(a.out, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["run", "mode", "workers", "straggler", "pool", "seconds",
                    "frames", "heldout_accuracy_percent"])
        for r in runs:
            for t, frames, acc in r["curve"]:
                w.writerow([r["name"], r["mode"], r["n"], r["straggler"],
                            r["pool"], t, frames, acc])
    with open(os.path.join(a.out, "runs.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["run", "mode", "workers", "straggler", "pool",
                    "wall_seconds", "final_heldout_accuracy_percent",
                    "steps_per_worker", "pushes_total"])
        for r in runs:
            steps = "/".join(str(r["workers"][i]["steps"]) for i in range(r["n"]))
            pushes = sum(x["pushes"] for x in r["workers"].values())
            w.writerow([r["name"], r["mode"], r["n"], r["straggler"], r["pool"],
                        r["wall"], r["final"], steps, pushes])

    by_name = {r["name"]: r for r in runs}
    base = by_name.get("sgd-1")
    ps_runs = [r for r in runs
               if r["mode"] in PS_MODES and r["name"] != r["model_name"]]
    main_runs = [r for r in ps_runs if r["straggler"] == "0"]
    lines = []
    if "methods" in a.grids.split():
        methods_table(runs, targets, a.slowdown, lines)
    if main_runs:
        targets_table(main_runs, base, targets, lines)
    lines.append("Final held-out frame accuracy (all held-out frames, the "
                 "servers' model after the run) and wall time:\n")
    lines.append("| run | mode | workers | final accuracy | vs sgd-1 | wall time "
                 "| steps per worker |")
    lines.append("|---|---|---|---|---|---|---|")
    for r in runs:
        diff = f"{r['final'] - base['final']:+.1f} pp" if base else ""
        steps = " / ".join(str(r["workers"][i]["steps"]) for i in range(r["n"]))
        lines.append(f"| {r['name']} | {r['mode']} | {r['n']} | {r['final']:.1f}% "
                     f"| {diff} | {r['wall']:.0f} s | {steps} |")
    lines.append("")
    stragglers = [r for r in ps_runs if r["straggler"] == "1"]
    if stragglers:
        lines.append("One worker slowed down on purpose (the last one, "
                     "`--slowdown`), with static per-worker partitions and with "
                     "the shared minibatch pool:\n")
        lines.append("| run | data | " +
                     " | ".join(f"{t:g}%" for t in targets) +
                     " | final accuracy | wall time | steps (fast / slow) |")
        lines.append("|---|---|" + "---|" * (len(targets) + 3))
        for r in stragglers:
            data = "shared pool" if r["pool"] == "1" else "static partition"
            steps = " / ".join(str(r["workers"][i]["steps"]) for i in range(r["n"]))
            cells = " | ".join(fmt_time(time_to(r["curve"], t)) for t in targets)
            lines.append(f"| {r['name']} | {data} | {cells} | {r['final']:.1f}% "
                         f"| {r['wall']:.0f} s | {steps} |")
    comparison, comparison_stragglers = decentralized_tables(
        runs, targets, lines)
    consensus = consensus_tables(runs, targets, lines)
    pipelines = pipeline_tables(a.runs, runs, targets, lines)
    models = models_table(runs, lines)
    table = "\n".join(lines) + "\n"
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(table)

    plots = []
    if subprocess.run(["which", "gnuplot"], capture_output=True).returncode == 0:
        for name, col, xlabel, subset in [
                ("accuracy_vs_time", 6, "wall time (s)", main_runs),
                ("accuracy_vs_frames", 7, "frames processed (all workers)", main_runs),
                ("straggler", 6, "wall time (s)", stragglers + ([base] if base else [])),
                ("decentralized", 6, "wall time (s)", comparison),
                ("decentralized_straggler", 6, "wall time (s)",
                 comparison_stragglers),
                ("consensus", 6, "wall time (s)",
                 [r for r in consensus if r["straggler"] == "0"]),
                ("consensus_straggler", 6, "wall time (s)",
                 [r for r in consensus if r["straggler"] == "1"]),
                ("pipeline", 6, "wall time (s)", pipelines),
                ("models_vs_time", 6, "wall time (s)", models),
                ("models_vs_frames", 7, "frames processed (all workers)",
                 models)]:
            if not subset:
                continue
            series = []
            for r in subset:
                path = os.path.join(a.out, "results.csv")
                series.append(
                    f"'{path}' using (strcol(1) eq '{r['name']}' ? ${col} : 1/0):8 "
                    f"with linespoints title '{r['name']}'")
            script = "set datafile separator ','\nset terminal png size 800,500\n"
            script += (f"set output '{os.path.join(a.out, name + '.png')}'\n"
                       f"set xlabel '{xlabel}'\n"
                       "set ylabel 'held-out frame accuracy (%)'\n"
                       "set key bottom right\nset grid\nset yrange [0:*]\n"
                       "plot " + ", ".join(series) + "\n")
            subprocess.run(["gnuplot"], input=script, text=True, check=True)
            plots.append(name + ".png")
    with open(os.path.join(a.out, "README.md"), "w") as f:
        f.write("# asgd experiment results\n\n")
        f.write(f"- Machine: {a.machine}\n- Command: `{a.command}`\n"
                f"- Settings: {a.settings}\n\n")
        f.write(table + "\n")
        for p in plots:
            f.write(f"![{p}]({p})\n\n")
        f.write("Data: `results.csv` (accuracy curve points), `runs.csv` "
                "(one line per run).\n")


if __name__ == "__main__":
    main()
