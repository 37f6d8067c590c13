#!/usr/bin/env python3
"""Training from a Kaldi recipe's layout through the real binaries, and bad
data refused or skipped by the worker:

  make_corpus (tiny) -> corpus_to_kaldi (compressed features) -> asgd_server +
  asgd_worker --kaldi_data -> asgd_eval --kaldi_data -> compute_priors ->
  asgd_forward (pseudo-log-likelihoods and log-posteriors, read back here
  from the archive's bytes; lazy scores of per-frame pdf lists given as a
  text posterior archive, against those log-posteriors) -> a student
  trained against the model's posteriors of the training set
  (--teacher_posteriors) -> asgd_export_onnx;

  then copies of the training directory with one bad utterance each (features
  and alignment of different lengths, a missing alignment, NaN in the
  features, a truncated archive, a label beyond the class count): with
  --bad_data=refuse the worker stops with a message naming the utterance,
  the file and the byte offset; with --bad_data=skip it trains on the rest
  and logs and counts each one. A label beyond the model's classes without
  --kaldi_num_classes is a class-count mismatch, refused at start.

Usage: kaldi_binary_test.py SERVER WORKER EVAL FORWARD EXPORT_ONNX MAKE_CORPUS
       CORPUS_TO_KALDI COMPUTE_PRIORS
"""
import math
import os
import shutil
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


# ----- Kaldi archives, read and written here from the published format.

def read_scp(path):
    entries = []
    with open(path) as f:
        for line in f:
            key, rx = line.split()
            ark, offset = rx.rsplit(":", 1)
            entries.append((key, ark, int(offset)))
    return entries


def read_fm(data, offset):
    """The FM matrix whose object starts at `offset`: (rows, cols, values)."""
    if data[offset:offset + 5] != b"\0BFM ":
        raise ValueError(f"no FM object at byte {offset}")
    size1, rows, size2, cols = struct.unpack_from("<bibi", data, offset + 5)
    if size1 != 4 or size2 != 4:
        raise ValueError("bad size bytes")
    values = struct.unpack_from(f"<{rows * cols}f", data, offset + 15)
    return rows, cols, values


def read_int32_vectors(path):
    """A binary int32-vector archive as [(key, [labels])]."""
    data = open(path, "rb").read()
    out, pos = [], 0
    while pos < len(data):
        space = data.index(b" ", pos)
        key = data[pos:space].decode()
        pos = space + 1
        assert data[pos:pos + 2] == b"\0B"
        (n,) = struct.unpack_from("<i", data, pos + 3)
        pos += 7
        labels = [struct.unpack_from("<i", data, pos + 5 * i + 1)[0]
                  for i in range(n)]
        pos += 5 * n
        out.append((key, labels))
    return out


def write_int32_vectors(path, entries):
    with open(path, "wb") as f:
        for key, labels in entries:
            f.write(key.encode() + b" \0B" + struct.pack("<bi", 4, len(labels)))
            for label in labels:
                f.write(struct.pack("<bi", 4, label))


def read_posteriors(path):
    """A binary posterior archive with float weights: {key: [[(id, w)]]}."""
    data = open(path, "rb").read()
    out, pos = {}, 0
    while pos < len(data):
        space = data.index(b" ", pos)
        key = data[pos:space].decode()
        pos = space + 1
        assert data[pos:pos + 2] == b"\0B", data[pos:pos + 2]
        pos += 2

        def int32():
            nonlocal pos
            assert data[pos] == 4
            v = struct.unpack_from("<i", data, pos + 1)[0]
            pos += 5
            return v
        frames = []
        for _ in range(int32()):
            pairs = []
            for _ in range(int32()):
                pdf = int32()
                assert data[pos] == 4
                pairs.append((pdf, struct.unpack_from("<f", data, pos + 1)[0]))
                pos += 5
            frames.append(pairs)
        out[key] = frames
    return out


def write_text_posteriors(path, entries):
    """entries: [(key, [[pdf, ...] per frame])], as Kaldi's ark,t writes."""
    with open(path, "w") as f:
        for key, frames in entries:
            f.write(key + " " + " ".join(
                "[ " + "".join(f"{p} 1 " for p in pdfs) + "]"
                for pdfs in frames) + " \n")


def read_float_vector(path):
    data = open(path, "rb").read()
    assert data[:5] == b"\0BFV ", data[:5]
    (n,) = struct.unpack_from("<i", data, 6)
    return struct.unpack_from(f"<{n}f", data, 10)


def logsumexp(values):
    m = max(values)
    return m + math.log(sum(math.exp(v - m) for v in values))


# ----- The test.

def check_teacher_posteriors(forward, worker, train_flags, model, kaldi, tmp,
                             cmvn_flag, priors):
    """asgd_worker --teacher_posteriors: the trained model's log-posteriors
    of the training set (asgd_forward) teach a student through the servers;
    log-likelihoods instead are refused as bad_teacher."""
    archives = {}
    for name, extra in (("teacher", ["--log_posteriors"]),
                        ("loglikes", [f"--priors={priors}"])):
        scp = os.path.join(tmp, f"train-{name}.scp")
        r = run([forward, f"--model={model}", f"--kaldi_data={kaldi}/train",
                 cmvn_flag, f"--out={tmp}/train-{name}.ark",
                 f"--out_scp={scp}"] + extra)
        if r.returncode != 0:
            fail(f"asgd_forward {extra} over the training set: {r.stderr}")
        archives[name] = scp
    student = [worker] + train_flags + [
        f"--kaldi_data={kaldi}/train",
        f"--kaldi_alignments={kaldi}/train/pdf.ark",
        f"--kaldi_heldout_data={kaldi}/heldout",
        f"--kaldi_heldout_alignments={kaldi}/heldout/pdf.ark", cmvn_flag,
        "--epochs=1", "--teacher_weight=0.5", "--teacher_temperature=2"]
    r = run(student + [f"--teacher_posteriors={archives['teacher']}"])
    check("asgd_worker --teacher_posteriors trains against the archive's "
          "posteriors",
          r.returncode == 0 and "teacher posteriors from" in r.stdout
          and "held-out frame accuracy" in r.stdout
          and "bad data skipped: none" in r.stdout,
          r.stdout[-2000:] + r.stderr[-2000:])
    r = run(student + [f"--teacher_posteriors={archives['loglikes']}"])
    check("pseudo-log-likelihoods as teacher posteriors are refused "
          "(bad_teacher)", r.returncode == 1 and "bad_teacher" in r.stderr,
          r.stdout[-1000:] + r.stderr)
    r = run(student + [f"--teacher_posteriors={archives['teacher']}",
                       f"--teacher_model={model}"])
    check("--teacher_posteriors with --teacher_model is refused",
          r.returncode == 1 and "--teacher_posteriors" in r.stderr, r.stderr)


def check_lazy_forward(forward, model, kaldi, tmp, cmvn_flag, priors, prior,
                       log_posteriors):
    """asgd_forward --active_pdfs: each frame's listed pdfs (its label and
    two others, one frame with none) scored as log-posterior - log prior +
    one constant per frame; bad lists refused or skipped by the policy."""
    heldout = read_int32_vectors(os.path.join(kaldi, "heldout", "pdf.ark"))
    lists = [(key, [[] if t == 1 else [l, (l + 1) % 40, (l + 7) % 40]
                    for t, l in enumerate(labels)]) for key, labels in heldout]
    active = os.path.join(tmp, "active.txt")
    write_text_posteriors(active, lists)
    out = os.path.join(tmp, "lazy.ark")
    base = [forward, f"--model={model}", f"--kaldi_data={kaldi}/heldout",
            cmvn_flag, f"--priors={priors}", f"--out={out}"]
    r = run(base + [f"--active_pdfs={active}", "--compare_full_layer"])
    if r.returncode != 0:
        fail(f"asgd_forward --active_pdfs: {r.stdout} {r.stderr}")
    scores = read_posteriors(out)
    problems = []
    for key, frames in lists:
        got = scores.get(key)
        rows, cols, lp = log_posteriors[key]
        if got is None or len(got) != len(frames):
            problems.append(f"{key}: {None if got is None else len(got)} "
                            f"frames for {len(frames)}")
            continue
        for t, pdfs in enumerate(frames):
            if [p for p, _ in got[t]] != pdfs:
                problems.append(f"{key} frame {t}: pdfs {got[t]}, want {pdfs}")
                continue
            shifts = [v - (lp[t * cols + p] - math.log(prior[p]))
                      for p, v in got[t] if prior[p] > 0]
            if shifts and max(shifts) - min(shifts) > 1e-4:
                problems.append(f"{key} frame {t}: shifts {shifts}")
    check("asgd_forward --active_pdfs: the listed pdfs of every frame, each "
          "scored as its pseudo-log-likelihood + one constant per frame; the "
          "full layer compared",
          set(scores) == {k for k, _ in lists} and not problems
          and "lazy output:" in r.stdout and "largest |lazy - full|" in r.stdout,
          "\n".join(problems[:5]) + r.stdout[-1500:])

    # A pdf past the model's 40 classes in one list, another list missing.
    bad = [(k, [[45] + f for f in frames] if i == 1 else frames)
           for i, (k, frames) in enumerate(lists) if i != 2]
    write_text_posteriors(active, bad)
    r = run(base + [f"--active_pdfs={active}"])
    check("a list with a pdf past the classes is refused, naming the "
          "utterance", r.returncode == 1 and lists[1][0] in r.stderr, r.stderr)
    r = run(base + [f"--active_pdfs={active}", "--bad_data=skip"])
    check("--bad_data=skip leaves out the utterance with a bad list and the "
          "one without a list",
          r.returncode == 0 and set(read_posteriors(out)) ==
          {k for i, (k, _) in enumerate(lists) if i not in (1, 2)}
          and lists[2][0] in r.stdout and "no active pdf list" in r.stdout,
          r.stdout[-2000:] + r.stderr)
    with open(active, "w") as f:
        f.write(f"{lists[0][0]} [ 1 1 ] [ x 1 ]\n")
    r = run(base + [f"--active_pdfs={active}"])
    check("a malformed list archive is refused, naming the file and the key",
          r.returncode == 1 and "active.txt" in r.stderr
          and lists[0][0] in r.stderr, r.stderr)
    for extra, why in ((["--compare_full_layer"], "--active_pdfs"),
                       ([f"--active_pdfs={active}", "--frame_skip=2"],
                        "--frame_skip")):
        r = run(base + extra)
        check(f"asgd_forward {extra[-1].split('=')[0]} without what it "
              f"needs is refused",
              r.returncode == 1 and why in r.stderr, r.stderr)


def main():
    (server, worker, evaluate, forward, export_onnx, make_corpus,
     to_kaldi, compute_priors) = sys.argv[1:9]
    tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
    corpus = os.path.join(tmp, "corpus")
    r = run([make_corpus, f"--out={corpus}", "--num_train=24",
             "--num_heldout=6", "--jobs=2", "--noprogress"])
    if r.returncode != 0:
        fail(f"make_corpus: {r.stderr}")
    kaldi = os.path.join(tmp, "kaldi")
    r = run([to_kaldi, f"--corpus={corpus}", f"--out={kaldi}"])
    if r.returncode != 0:
        fail(f"corpus_to_kaldi: {r.stderr}")
    feats = open(os.path.join(kaldi, "train", "feats.ark"), "rb").read()
    check("the features are compressed (CM)", b"\0BCM " in feats[:200])
    flat = os.path.join(tmp, "flat")  # FM features, to corrupt values
    r = run([to_kaldi, f"--corpus={corpus}", f"--out={flat}",
             "--feature_format=fm"])
    if r.returncode != 0:
        fail(f"corpus_to_kaldi --feature_format=fm: {r.stderr}")

    port_file = os.path.join(tmp, "port")
    server_log = os.path.join(tmp, "server.log")
    LOGS.append(server_log)
    with open(server_log, "w") as log:
        proc = subprocess.Popen(
            [server, "--host=127.0.0.1", "--port=0", f"--port_file={port_file}",
             "--num_shards=1", "--hidden=64", "--log_every_s=0"],
            stdout=log, stderr=subprocess.STDOUT)
    try:
        port = testlib.wait_for("the server's port", lambda: read_port(port_file),
                                timeout=DEADLINE_S, interval=0.05, proc=proc)
        servers = f"127.0.0.1:{port}"
        train_flags = [f"--servers={servers}", "--backend=cpu", "--log_every=0",
                       "--batch_size=128"]

        # Train, evaluate, write log-likelihoods, export.
        model = os.path.join(tmp, "model.mdl")
        global_cmvn = os.path.join(tmp, "global_cmvn.mat")
        cmvn_flag = f"--kaldi_global_cmvn={global_cmvn}"
        r = run([forward, f"--model={model}", f"--kaldi_data={kaldi}/heldout",
                 "--log_posteriors", f"--out={tmp}/none.ark", cmvn_flag])
        check("asgd_forward refuses a missing --kaldi_global_cmvn file",
              r.returncode == 1 and "no such file" in r.stderr, r.stderr)
        r = run([worker] + train_flags + [
            f"--kaldi_data={kaldi}/train",
            f"--kaldi_alignments={kaldi}/train/pdf.ark",
            f"--kaldi_heldout_data={kaldi}/heldout",
            f"--kaldi_heldout_alignments={kaldi}/heldout/pdf.ark",
            "--epochs=3", f"--save_model={model}", cmvn_flag])
        check("asgd_worker trains from the Kaldi directory and writes the "
              "global CMVN statistics",
              r.returncode == 0 and "held-out frame accuracy" in r.stdout
              and "streamed in windows" in r.stdout
              and f"global CMVN: {global_cmvn} (written" in r.stdout
              and "bad data skipped: none" in r.stdout
              and open(global_cmvn, "rb").read(5) == b"\0BDM ",
              r.stdout[-2000:] + r.stderr[-2000:])
        r = run([evaluate, f"--model={model}", f"--kaldi_data={kaldi}/heldout",
                 f"--kaldi_alignments={kaldi}/heldout/pdf.ark", cmvn_flag])
        check("asgd_eval reads the Kaldi held-out directory",
              r.returncode == 0 and "held-out frame accuracy:" in r.stdout
              and f"global CMVN: {global_cmvn}," in r.stdout,
              r.stdout + r.stderr)

        priors = os.path.join(tmp, "prior.vec")
        r = run([compute_priors, f"--alignments={kaldi}/train/pdf.ark",
                 f"--priors_out={priors}"])
        if r.returncode != 0:
            fail(f"compute_priors: {r.stderr}")
        prior = read_float_vector(priors)
        heldout_frames = {k: len(l) for k, l in read_int32_vectors(
            os.path.join(kaldi, "heldout", "pdf.ark"))}
        matrices = {}
        for mode, extra in (("log-posteriors", ["--log_posteriors"]),
                            ("pseudo-log-likelihoods", [f"--priors={priors}"])):
            ark = os.path.join(tmp, f"{mode}.ark")
            scp = os.path.join(tmp, f"{mode}.scp")
            r = run([forward, f"--model={model}",
                     f"--kaldi_data={kaldi}/heldout", f"--out={ark}",
                     f"--out_scp={scp}", cmvn_flag] + extra)
            if r.returncode != 0:
                fail(f"asgd_forward {extra}: {r.stdout} {r.stderr}")
            data = open(ark, "rb").read()
            matrices[mode] = {key: read_fm(data, offset)
                              for key, _, offset in read_scp(scp)}
        problems = []
        for key, (rows, cols, lp) in matrices["log-posteriors"].items():
            if rows != heldout_frames.get(key) or cols != 40:
                problems.append(f"{key}: {rows} x {cols}")
                continue
            _, _, ll = matrices["pseudo-log-likelihoods"][key]
            for t in range(rows):
                row = lp[t * cols:(t + 1) * cols]
                if abs(logsumexp(row)) > 1e-4:
                    problems.append(f"{key} frame {t}: posteriors sum to "
                                    f"{math.exp(logsumexp(row))}")
                for c in range(cols):
                    v, want = ll[t * cols + c], None
                    if prior[c] > 0:
                        want = row[c] - math.log(prior[c])
                        bad = abs(v - want) > 1e-4 * max(1.0, abs(want))
                    else:  # never seen in training: avoided by the decoder
                        bad = v > -1e18
                    if bad:
                        problems.append(f"{key} frame {t} pdf {c}: {v}, want "
                                        f"{want if want is not None else '< -1e18'}")
        check("asgd_forward: one frames x 40 matrix per held-out utterance; "
              "log-posteriors summing to 1; log-likelihoods = log-posteriors "
              "- log priors",
              set(matrices["log-posteriors"]) == set(heldout_frames)
              and set(matrices["pseudo-log-likelihoods"]) == set(heldout_frames)
              and not problems, "\n".join(problems[:5]))

        check_lazy_forward(forward, model, kaldi, tmp, cmvn_flag, priors,
                           prior, matrices["log-posteriors"])
        check_teacher_posteriors(forward, worker, train_flags, model, kaldi,
                                 tmp, cmvn_flag, priors)

        onnx = os.path.join(tmp, "model.onnx")
        r = run([export_onnx, f"--model={model}", f"--out={onnx}"])
        check("asgd_export_onnx writes a checked model",
              r.returncode == 0 and os.path.getsize(onnx) > 1000,
              r.stdout + r.stderr)

        # Bad data: one bad utterance per copy of the (FM) training directory.
        train = os.path.join(flat, "train")
        scp = read_scp(os.path.join(train, "feats.scp"))
        alignments = read_int32_vectors(os.path.join(train, "pdf.ark"))
        keys = [k for k, _, _ in scp]

        def copy_with(name, bad_cases):
            """A copy of the training directory with `bad_cases` applied."""
            d = os.path.join(tmp, name)
            shutil.copytree(train, d)
            # feats.scp names the archive by its absolute path: point it here.
            with open(os.path.join(d, "feats.scp"), "w") as f:
                for key, _, offset in scp:
                    f.write(f"{key} {d}/feats.ark:{offset}\n")
            entries = alignments
            path = os.path.join(d, "feats.ark")
            data = bytearray(open(path, "rb").read())
            for case in bad_cases:
                entries = case["alignments"](entries)
                data = case["features"](data)
            write_int32_vectors(os.path.join(d, "pdf.ark"), entries)
            open(path, "wb").write(bytes(data))
            return d

        def same(x):
            return x

        def with_nan(data):
            struct.pack_into("<f", data, scp[7][2] + 15 + 4 * 3, float("nan"))
            return data

        cases = [
            {"reason": "length_mismatch", "key": keys[3],
             "where": "feats.ark at byte", "features": same,
             "alignments": lambda e: [(k, l[:-1] if k == keys[3] else l)
                                      for k, l in e]},
            {"reason": "missing_alignment", "key": keys[5],
             "where": "feats.ark at byte", "features": same,
             "alignments": lambda e: [(k, l) for k, l in e if k != keys[5]]},
            {"reason": "non_finite", "key": keys[7],
             "where": "feats.ark at byte", "features": with_nan,
             "alignments": same},
            {"reason": "truncated", "key": keys[-1],
             "where": "feats.ark at byte",
             "features": lambda data: data[:scp[-1][2] + 100],
             "alignments": same},
            {"reason": "label_out_of_range", "key": keys[9],
             "where": "pdf.ark at byte", "features": same,
             "alignments": lambda e: [(k, [45] + l[1:] if k == keys[9] else l)
                                      for k, l in e]},
        ]
        everything = copy_with("all_bad", cases)
        for case in cases:
            d = copy_with(case["reason"], [case])
            r = run([worker] + train_flags + [
                f"--kaldi_data={d}", f"--kaldi_alignments={d}/pdf.ark",
                "--kaldi_num_classes=40", "--bad_data=refuse", "--epochs=1"])
            check(f"--bad_data=refuse stops at {case['reason']}, naming the "
                  f"utterance, the file and the offset",
                  r.returncode == 1 and case["reason"] in r.stderr
                  and case["key"] in r.stderr and case["where"] in r.stderr,
                  r.stdout[-1000:] + r.stderr)

        r = run([worker] + train_flags + [
            f"--kaldi_data={everything}",
            f"--kaldi_alignments={everything}/pdf.ark",
            "--kaldi_num_classes=40", "--bad_data=skip", "--epochs=1"])
        skipped_lines = [l for l in r.stdout.splitlines()
                         if "skipped bad data:" in l]
        check("--bad_data=skip trains on the rest, logging and counting each "
              "bad utterance once",
              r.returncode == 0 and len(skipped_lines) == len(cases)
              and all(any(c["key"] in l for l in skipped_lines) for c in cases)
              and "worker 0 done:" in r.stdout,
              r.stdout[-3000:] + r.stderr)
        counted = [l for l in r.stdout.splitlines()
                   if "bad data skipped:" in l]
        reasons = set(counted[-1].split(": ", 2)[-1].split()) if counted else set()
        check("the counts by reason",
              reasons == {f"{c['reason']}=1" for c in cases}, str(counted))

        # A label beyond the model's classes, the class count left to the
        # alignments: the data has 46 classes, the model 40.
        d = os.path.join(tmp, "label_out_of_range")
        r = run([worker] + train_flags + [
            f"--kaldi_data={d}", f"--kaldi_alignments={d}/pdf.ark",
            "--epochs=1"])
        check("a class count other than the model's is refused at start",
              r.returncode == 1 and "46 classes" in r.stderr
              and "--kaldi_num_classes" in r.stderr, r.stderr)

        r = run([worker] + train_flags + [f"--kaldi_data={kaldi}/train"])
        check("--kaldi_data without --kaldi_alignments is refused",
              r.returncode == 1 and "--kaldi_alignments" in r.stderr, r.stderr)
        r = run([worker] + train_flags + [
            f"--kaldi_data={kaldi}/train", f"--corpus={corpus}",
            f"--kaldi_alignments={kaldi}/train/pdf.ark"])
        check("--corpus and --kaldi_data together are refused",
              r.returncode == 1 and "exactly one" in r.stderr, r.stderr)
    finally:
        proc.kill()
        proc.wait()
    report_and_exit()


if __name__ == "__main__":
    main()
