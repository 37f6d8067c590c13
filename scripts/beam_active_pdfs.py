#!/usr/bin/env python3
"""Per-frame active pdf lists from a model's own log-posteriors: the pdfs
within BEAM (natural log) of each frame's best, written as a Kaldi text
posterior archive (weight 1) for asgd_forward --active_pdfs. A stand-in for
the pdfs a decoder's acoustic beam keeps when no lattice is at hand (with
Kaldi: lattice-to-post | post-to-pdf-post).

Usage: beam_active_pdfs.py LOG_POSTERIORS.ark BEAM OUT.txt
  LOG_POSTERIORS.ark: asgd_forward --log_posteriors output (binary FM).
Prints the mean number of active pdfs per frame.
"""
import struct
import sys


def read_fm_archive(path):
    """Yields (key, rows, cols, values) of a binary float-matrix archive."""
    data = open(path, "rb").read()
    pos = 0
    while pos < len(data):
        space = data.index(b" ", pos)
        key = data[pos:space].decode()
        pos = space + 1
        if data[pos:pos + 5] != b"\0BFM ":
            sys.exit(f"{path}: {key} is not a binary float matrix (FM)")
        rows = struct.unpack_from("<i", data, pos + 6)[0]
        cols = struct.unpack_from("<i", data, pos + 11)[0]
        pos += 15
        values = struct.unpack_from(f"<{rows * cols}f", data, pos)
        pos += 4 * rows * cols
        yield key, rows, cols, values


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    src, beam, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    if not beam > 0:
        sys.exit("BEAM must be > 0")
    frames = active = 0
    with open(out, "w") as f:
        for key, rows, cols, v in read_fm_archive(src):
            parts = []
            for t in range(rows):
                row = v[t * cols:(t + 1) * cols]
                best = max(row)
                pdfs = [p for p in range(cols) if row[p] >= best - beam]
                parts.append("[ " + "".join(f"{p} 1 " for p in pdfs) + "]")
                active += len(pdfs)
            frames += rows
            f.write(f"{key} {' '.join(parts)} \n")
    print(f"{frames} frames, {active / max(frames, 1):.2f} active pdfs per frame")


if __name__ == "__main__":
    main()
