#!/usr/bin/env python3
"""Turns the logs of scripts/experiment.sh into CSV, markdown tables and plots.

Reads RUNS/index.csv and each run's worker-*.log and eval.log; writes
results.csv, runs.csv, table.md, README.md and PNG plots (with gnuplot) into
OUT. Time is measured from worker 0's start; the frame axis counts frames of
all workers (worker 0's frames times the number of workers, exact for the
static partitions of equal size, approximate for the pool and stragglers).
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


def read_run(runs, row):
    d = os.path.join(runs, row["name"])
    n = int(row["workers"])
    curve, workers = [], {}
    for w in range(n):
        with open(os.path.join(d, f"worker-{w}.log")) as f:
            for line in f:
                m = EVAL.search(line)
                if m and w == 0:
                    t, frames, version, acc = m.groups()
                    curve.append((float(t), int(frames) * n, float(acc)))
                m = DONE.search(line)
                if m:
                    workers[int(m.group(1))] = dict(
                        steps=int(m.group(2)), pushes=int(m.group(3)),
                        frames=int(m.group(4)), seconds=float(m.group(5)))
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
                wall=float(row["wall_seconds"]))


def time_to(curve, target):
    for t, _, acc in curve:
        if acc >= target:
            return t
    return None


def fmt_time(t):
    return "not reached" if t is None else f"{t:.0f} s"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--targets", default="60 70 75")
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
    main_runs = [r for r in runs if r["straggler"] == "0"]
    lines = []
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
    stragglers = [r for r in runs if r["straggler"] == "1"]
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
    table = "\n".join(lines) + "\n"
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(table)

    plots = []
    if subprocess.run(["which", "gnuplot"], capture_output=True).returncode == 0:
        for name, col, xlabel, subset in [
                ("accuracy_vs_time", 6, "wall time (s)", main_runs),
                ("accuracy_vs_frames", 7, "frames processed (all workers)", main_runs),
                ("straggler", 6, "wall time (s)", stragglers + ([base] if base else []))]:
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
