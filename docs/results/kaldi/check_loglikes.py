"""Sanity check of a log-likelihood archive against its data directory and priors
(reads the Kaldi binary formats directly: FM/CM matrices, FV vectors)."""
import math, struct, sys

def read_token(f):
    t = b''
    while True:
        c = f.read(1)
        if c in (b' ', b''): return t
        t += c

def read_int(f):
    assert f.read(1) == b'\x04'
    return struct.unpack('<i', f.read(4))[0]

def header_rows(f):
    assert f.read(2) == b'\x00B'
    tok = read_token(f)
    if tok == b'FM':
        r = read_int(f); c = read_int(f); return tok, r, c
    if tok in (b'CM', b'CM2', b'CM3'):
        mn, rg, r, c = struct.unpack('<ffii', f.read(16)); return tok, r, c
    raise ValueError(tok)

def read_fm(f):
    tok, r, c = header_rows(f)
    assert tok == b'FM'
    data = struct.unpack('<%df' % (r * c), f.read(4 * r * c))
    return r, c, data

def read_fv(path):
    with open(path, 'rb') as f:
        assert f.read(2) == b'\x00B'
        assert read_token(f) == b'FV'
        n = read_int(f)
        return struct.unpack('<%df' % n, f.read(4 * n))

data_dir, ark, prior_path = sys.argv[1:4]
frames = {}
for line in open(data_dir + '/feats.scp'):
    key, loc = line.split()
    path, off = loc.rsplit(':', 1)
    with open(path, 'rb') as f:
        f.seek(int(off))
        frames[key] = header_rows(f)[1]
priors = read_fv(prior_path)
logp = [math.log(p) if p > 0 else -1e30 for p in priors]
print('priors: %d pdfs, sum %.6f, min %.3g' % (len(priors), sum(priors), min(priors)))
n = rows = 0
worst = 0.0
mismatched = 0
with open(ark, 'rb') as f:
    while True:
        key = read_token(f)
        if not key: break
        r, c, d = read_fm(f)
        assert c == len(priors), (c, len(priors))
        n += 1; rows += r
        if frames.get(key.decode()) != r: mismatched += 1
        for i in range(r):
            row = d[i * c:(i + 1) * c]
            assert all(math.isfinite(x) for x in row)
            s = [x + lp for x, lp in zip(row, logp)]
            m = max(s)
            lse = m + math.log(sum(math.exp(x - m) for x in s))
            worst = max(worst, abs(lse))
print('archive: %d utterances, %d rows x %d pdfs; data dir: %d utterances, %d frames; '
      'utterances whose row count differs from their frames: %d' %
      (n, rows, c, len(frames), sum(frames.values()), mismatched))
print('largest |log sum_pdf exp(loglike + log prior)| over all rows: %.3g' % worst)
