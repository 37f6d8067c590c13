#!/usr/bin/env python3
"""Smaller models through the real binaries:

  make_corpus (tiny) -> asgd_server + asgd_worker --save_model ->
  asgd_shrink (full rank: the same held-out accuracy; low rank: fewer
  parameters) -> asgd_server --init_model (the servers hold the file's
  weights: the same accuracy on the servers as from the file) -> asgd_worker
  retrains the factored model;

  asgd_shrink --prune=0.7 -> servers with --init_model and a checkpoint
  directory -> a worker retrains it with 1-bit pushes -> the servers are
  stopped and restarted from their checkpoint -> a worker retrains it with
  float32 pushes: every pruned weight is still exactly 0 in each worker's
  saved model, which names the same pruned tensors; with 1-bit pushes the
  worker's pulls were updates replayed under the mask (delta pulls);

  a small student trained through its servers against the full model as
  teacher (asgd_worker --teacher_model);

  a multi-frame model (asgd_server --output_frames=2) trained through its
  servers and scored by its heads by asgd_eval, from the file and from the
  servers alike; one made from the full model by asgd_shrink
  --output_frames=2 scores exactly as frame skipping does, and retrains;

and bad requests refused with exit status 1, a message, and no file
written: a rank larger than the layer, an energy outside (0, 1], both or
neither of --rank and --energy, a layer that does not exist, a missing
model; --init_model with --model_config, a missing --init_model file, and
a checkpoint of the full model under a factored --init_model.

Usage: shrink_binary_test.py SERVER WORKER EVAL SHRINK MAKE_CORPUS
"""
import os
import re
import struct
import subprocess
import sys
import tempfile

import testlib
from testlib import LOGS, read_port

DEADLINE_S = 120
CHECKS = testlib.Checks()
check, fail, report_and_exit = CHECKS.check, CHECKS.fail, CHECKS.report_and_exit


def run(args):
    return testlib.run(args, DEADLINE_S)


def accuracy(stdout):
    m = re.search(r"^held-out frame accuracy: ([0-9.]+)%$", stdout, re.M)
    return float(m.group(1)) if m else None


def parameters(path):
    return len(read_model(path)[1])


def read_model(path):
    """(pruned tensor names, the float values) of a saved model."""
    data = open(path, "rb").read()
    pruned, at = [], 0
    while True:
        end = data.index(b"\n", at)
        line = data[at:end].decode()
        at = end + 1
        if line.startswith("pruned "):
            pruned.append(line.split()[1])
        if line.startswith("data "):
            n = int(line.split()[1])
            return pruned, struct.unpack(f"<{n}f", data[at:at + 4 * n])


class Pool:
    """One server (--num_shards=2) on port 0, stopped on exit."""

    def __init__(self, server, tmp, name, flags):
        self.port_file = os.path.join(tmp, f"{name}.port")
        self.log = os.path.join(tmp, f"{name}.log")
        LOGS.append(self.log)
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(
                [server, "--host=127.0.0.1", "--port=0",
                 f"--port_file={self.port_file}", "--num_shards=2",
                 "--log_every_s=0"] + flags,
                stdout=log, stderr=subprocess.STDOUT)

    def __enter__(self):
        port = testlib.wait_for("the server's port",
                                lambda: read_port(self.port_file),
                                timeout=DEADLINE_S, interval=0.05,
                                proc=self.proc)
        return f"127.0.0.1:{port}"

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(timeout=DEADLINE_S)


def check_pruning(server, worker, shrink, tmp, full, train):
    pruned = os.path.join(tmp, "pruned.mdl")
    r = run([shrink, f"--model={full}", f"--out={pruned}", "--prune=0.7"])
    names, values = read_model(pruned)
    zeros = [i for i, v in enumerate(values) if v == 0.0]
    check("asgd_shrink --prune=0.7 zeros 70% of the weights and names the "
          "pruned tensors",
          r.returncode == 0 and len(names) == 3
          and 0.69 * len(values) < len(zeros) < 0.71 * len(values),
          f"{r.stdout} {r.stderr} {names} {len(zeros)} of {len(values)}")
    bad = os.path.join(tmp, "bad.mdl")
    for flags, what in ((["--prune=1.0"], "a sparsity of 1"),
                        (["--prune=-0.1"], "a negative sparsity"),
                        (["--prune=0.5", "--prune_tensors=layer9/weight"],
                         "a tensor that is not in the model"),
                        (["--prune=0.5", "--prune_scope=row"], "a bad scope")):
        r = run([shrink, f"--model={full}", f"--out={bad}"] + flags)
        check(f"asgd_shrink refuses {what}",
              r.returncode == 1 and not os.path.exists(bad), r.stderr)
    r = run([shrink, f"--model={pruned}", f"--out={bad}", "--factor=all",
             "--rank=4"])
    check("asgd_shrink refuses to factor a pruned model",
          r.returncode == 1 and not os.path.exists(bad), r.stderr)

    checkpoints = os.path.join(tmp, "pruned-checkpoints")
    flags = [f"--init_model={pruned}", f"--checkpoint_dir={checkpoints}"]
    for run_index, encoding in enumerate(("onebit", "fp32")):
        with Pool(server, tmp, f"pruned{run_index}", flags) as s:
            saved = os.path.join(tmp, f"retrained-pruned{run_index}.mdl")
            r = run([worker, f"--servers={s}", "--epochs=1",
                     f"--push_encoding={encoding}", f"--save_model={saved}"]
                    + train)
            if r.returncode != 0:
                fail(f"asgd_worker on the pruned model: {r.stdout[-2000:]} "
                     f"{r.stderr[-2000:]}")
        log = open(os.path.join(tmp, f"pruned{run_index}.log")).read()
        if encoding == "onebit":
            m = re.search(r"delta pulls: ([0-9]+) of updates", r.stdout)
            check("1-bit pushes on a pruned model: the pulls are updates, "
                  "replayed under the mask",
                  m is not None and int(m.group(1)) > 0, r.stdout[-1500:])
        got_names, got = read_model(saved)
        moved = sum(1 for a, b in zip(values, got) if a != b)
        check(f"{encoding} pushes{' after a restart' if run_index else ''}: "
              "every pruned weight is still 0 and the others trained",
              got_names == names and all(got[i] == 0.0 for i in zeros)
              and moved > len(values) // 5
              and f"{len(zeros)} of {len(values)} weights held at 0" in log
              and (run_index == 0 or "restored checkpoint" in log),
              f"{got_names} {sum(1 for i in zeros if got[i] != 0.0)} pruned "
              f"weights non-zero, {moved} moved; {log[-1500:]}")
    other = os.path.join(tmp, "pruned-half.mdl")
    run([shrink, f"--model={full}", f"--out={other}", "--prune=0.5"])
    r = run([server, "--host=127.0.0.1", "--port=0", f"--init_model={other}",
             f"--checkpoint_dir={checkpoints}"])
    check("asgd_server refuses a checkpoint of another pruning mask",
          r.returncode == 2 and "does not belong to this server" in r.stderr,
          r.stderr[-500:])


def check_teacher(server, worker, tmp, full, train):
    with Pool(server, tmp, "student", ["--hidden=16"]) as s:
        r = run([worker, f"--servers={s}", "--epochs=2", f"--teacher_model={full}",
                 "--teacher_weight=0.7", "--teacher_temperature=2"] + train)
        check("a student trains through the servers against its teacher",
              r.returncode == 0 and f"teacher {full}: dense(64,relu)" in r.stdout
              and re.search(r"^worker 0 held-out frame accuracy: [0-9.]+%$",
                            r.stdout, re.M),
              r.stdout[-2000:] + r.stderr[-2000:])
        r = run([worker, f"--servers={s}", "--epochs=1", f"--teacher_model={full}",
                 "--teacher_weight=1.5"] + train)
        check("asgd_worker refuses a teacher weight above 1",
              r.returncode == 1 and "teacher weight" in r.stderr, r.stderr)
    with Pool(server, tmp, "student3", ["--hidden=16", "--context=3"]) as s:
        r = run([worker, f"--servers={s}", "--epochs=1",
                 f"--teacher_model={full}"] + train)
        check("asgd_worker refuses a teacher of another shape",
              r.returncode == 1 and "does not fit the student" in r.stderr,
              r.stderr)


def check_multi_frame(server, worker, evaluate, shrink, tmp, corpus, train,
                      full, full_acc):
    multi = os.path.join(tmp, "multi.mdl")
    with Pool(server, tmp, "multi", ["--hidden=64,48",
                                     "--output_frames=2"]) as s:
        r = run([worker, f"--servers={s}", "--epochs=2",
                 f"--save_model={multi}"] + train)
        check("a multi-frame model (2 heads) trains through the servers",
              r.returncode == 0 and "2xsoftmax(40)" in r.stdout,
              r.stdout[-2000:] + r.stderr[-2000:])
        from_servers = run([evaluate, f"--servers={s}", f"--corpus={corpus}"])
    r = run([evaluate, f"--model={multi}", f"--corpus={corpus}"])
    acc = accuracy(r.stdout)
    check("asgd_eval scores the multi-frame model by its heads, near the "
          "one-frame model",
          r.returncode == 0 and acc is not None and acc > full_acc - 15
          and "one frame in 2 computed, its 2 heads" in r.stdout
          and accuracy(from_servers.stdout) == acc,
          f"{acc} vs {full_acc}: {r.stdout} {r.stderr} {from_servers.stdout}")
    r = run([evaluate, f"--model={multi}", f"--corpus={corpus}",
             "--frame_skip=2"])
    check("asgd_eval refuses frame skipping on a multi-frame model",
          r.returncode == 1 and "multi-frame" in r.stderr, r.stderr)
    # From the one-frame model: every head a copy of its output layer, so
    # until retrained it scores exactly as frame skipping does.
    warm = os.path.join(tmp, "warm2.mdl")
    r = run([shrink, f"--model={full}", f"--out={warm}", "--output_frames=2"])
    warm_acc = accuracy(run([evaluate, f"--model={warm}",
                             f"--corpus={corpus}"]).stdout)
    skip_acc = accuracy(run([evaluate, f"--model={full}", f"--corpus={corpus}",
                             "--frame_skip=2"]).stdout)
    check("asgd_shrink --output_frames=2 starts both heads as the output "
          "layer: the accuracy of --frame_skip=2",
          r.returncode == 0 and "2xsoftmax(40)" in r.stdout
          and warm_acc is not None and warm_acc == skip_acc,
          f"{warm_acc} vs {skip_acc}: {r.stdout} {r.stderr}")
    with Pool(server, tmp, "warm2", [f"--init_model={warm}"]) as s:
        r = run([worker, f"--servers={s}", "--epochs=1"] + train)
        check("the servers retrain the warm-started multi-frame model",
              r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:])
    bad = os.path.join(tmp, "bad-multi.mdl")
    for flags, what in ((["--output_frames=0"], "0 output frames"),
                        (["--output_frames=17"], "17 output frames")):
        r = run([shrink, f"--model={full}", f"--out={bad}"] + flags)
        check(f"asgd_shrink refuses {what}",
              r.returncode == 1 and "output frames" in r.stderr
              and not os.path.exists(bad), f"{r.returncode} {r.stderr}")
    r = run([shrink, f"--model={warm}", f"--out={bad}", "--output_frames=2"])
    check("asgd_shrink refuses to add heads to a multi-frame model",
          r.returncode == 1 and not os.path.exists(bad), r.stderr)

    for flags, what in ((["--output_frames=17"], "17 output frames"),
                        (["--output_frames=0"], "0 output frames"),
                        (["--model=lstm", "--output_frames=2"],
                         "a multi-frame LSTM")):
        r = run([server, "--host=127.0.0.1", "--port=0"] + flags)
        check(f"asgd_server refuses {what}",
              r.returncode == 2 and "output_frames" in r.stderr,
              f"{r.returncode} {r.stderr[-500:]}")


def main():
    server, worker, evaluate, shrink, make_corpus = sys.argv[1:6]
    tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
    corpus = os.path.join(tmp, "corpus")
    r = run([make_corpus, f"--out={corpus}", "--num_train=24",
             "--num_heldout=6", "--jobs=2", "--noprogress"])
    if r.returncode != 0:
        fail(f"make_corpus: {r.stderr}")
    train = ["--backend=cpu", "--log_every=0", "--batch_size=128",
             f"--corpus={corpus}"]
    full = os.path.join(tmp, "full.mdl")
    checkpoints = os.path.join(tmp, "checkpoints")
    with Pool(server, tmp, "full", ["--hidden=64,48",
                                    f"--checkpoint_dir={checkpoints}"]) as s:
        r = run([worker, f"--servers={s}", "--epochs=2",
                 f"--save_model={full}"] + train)
        if r.returncode != 0:
            fail(f"asgd_worker: {r.stdout[-2000:]} {r.stderr[-2000:]}")
    full_acc = accuracy(run([evaluate, f"--model={full}",
                             f"--corpus={corpus}"]).stdout)
    check("the full model is evaluated", full_acc is not None and full_acc > 20,
          str(full_acc))

    r = run([evaluate, f"--model={full}", f"--corpus={corpus}",
             "--frame_skip=2"])
    check("asgd_eval --frame_skip=2 scores every other frame",
          r.returncode == 0 and accuracy(r.stdout) is not None
          and "frames/s" in r.stdout, r.stdout + r.stderr)
    r = run([evaluate, f"--model={full}", f"--corpus={corpus}",
             "--frame_skip=0"])
    check("asgd_eval refuses --frame_skip=0", r.returncode == 1, r.stderr)

    # Full rank: the same function, so the same held-out accuracy.
    same = os.path.join(tmp, "same.mdl")
    r = run([shrink, f"--model={full}", f"--out={same}", "--factor=0:64,1:48"])
    same_acc = accuracy(run([evaluate, f"--model={same}",
                             f"--corpus={corpus}"]).stdout)
    check("asgd_shrink at full rank keeps the held-out accuracy",
          r.returncode == 0 and same_acc == full_acc,
          f"{full_acc} vs {same_acc}: {r.stdout} {r.stderr}")

    small = os.path.join(tmp, "small.mdl")
    r = run([shrink, f"--model={full}", f"--out={small}", "--factor=all",
             "--rank=8"])
    check("asgd_shrink writes a model with fewer parameters",
          r.returncode == 0 and "rank 8 of 40" in r.stdout
          and parameters(small) < parameters(full) / 3,
          f"{r.stdout} {r.stderr} {parameters(small)} {parameters(full)}")

    bad = os.path.join(tmp, "bad.mdl")
    for flags, what in (
            (["--factor=0:65"], "a rank larger than the layer"),
            (["--factor=output:41"], "a rank larger than the output layer"),
            (["--factor=all", "--energy=1.5"], "an energy above 1"),
            (["--factor=all", "--energy=0", "--rank=0"], "neither rank nor energy"),
            (["--factor=all", "--energy=0.5", "--rank=3"], "both rank and energy"),
            (["--factor=7", "--rank=2"], "a layer that does not exist"),
            (["--factor=1,1", "--rank=2"], "a layer named twice"),
            (["--rank=2"], "no --factor")):
        r = run([shrink, f"--model={full}", f"--out={bad}"] + flags)
        check(f"asgd_shrink refuses {what}",
              r.returncode == 1 and r.stderr.startswith("asgd_shrink: ")
              and not os.path.exists(bad), f"{r.returncode} {r.stderr}")
    r = run([shrink, f"--model={tmp}/missing.mdl", f"--out={bad}",
             "--factor=all", "--rank=2"])
    check("asgd_shrink refuses a missing model",
          r.returncode == 1 and not os.path.exists(bad), r.stderr)

    # The servers start from the factored model and retrain it.
    with Pool(server, tmp, "small", [f"--init_model={small}"]) as s:
        r = run([evaluate, f"--servers={s}", f"--corpus={corpus}"])
        from_file = accuracy(run([evaluate, f"--model={small}",
                                  f"--corpus={corpus}"]).stdout)
        check("the servers hold --init_model's weights",
              accuracy(r.stdout) is not None and accuracy(r.stdout) == from_file
              and "initial weights from" in open(
                  os.path.join(tmp, "small.log")).read(),
              f"{r.stdout} {r.stderr} vs {from_file}")
        retrained = os.path.join(tmp, "retrained.mdl")
        r = run([worker, f"--servers={s}", "--epochs=2",
                 f"--save_model={retrained}"] + train)
        check("a worker retrains the factored model through the servers",
              r.returncode == 0 and parameters(retrained) == parameters(small),
              r.stdout[-2000:] + r.stderr[-2000:])

    check_pruning(server, worker, shrink, tmp, full, train)
    check_teacher(server, worker, tmp, full, train)
    check_multi_frame(server, worker, evaluate, shrink, tmp, corpus, train,
                      full, full_acc)

    for flags, what in (
            ([f"--init_model={small}", f"--model_config={tmp}/x.txt"],
             "--init_model with --model_config"),
            ([f"--init_model={tmp}/missing.mdl"], "a missing --init_model"),
            ([f"--init_model={small}", f"--checkpoint_dir={checkpoints}"],
             "a checkpoint of another model")):
        # (exit status 2: the server's for a start it refuses)
        r = run([server, "--host=127.0.0.1", "--port=0"] + flags)
        check(f"asgd_server refuses {what}",
              r.returncode == 2 and r.stderr.startswith("asgd_server: "),
              f"{r.returncode} {r.stdout[-500:]} {r.stderr[-500:]}")
    report_and_exit()


if __name__ == "__main__":
    main()
