#!/usr/bin/env python3
"""Attacks on the real asgd_server binary with raw HTTP/2 frames (the h2
library, no gRPC client, so nothing on the client side softens them), each
with the bound that holds it: the server's memory (VmRSS), how its calls end,
and whether it still answers and still applies honest pushes.

  1. rapid reset: N PullStream calls opened and reset at once on one
     connection (HTTP/2 "rapid reset") from 127.0.0.2, while DescribeModel
     calls from 127.0.0.1 are all answered (the attacker holds at most
     --max_calls_per_peer places); the same on DescribeModel and on the
     retired per-call Pull (answered UNIMPLEMENTED).
  2. zero window: M pull streams (one request each) on connections that
     grant no flow-control window, from one and from four local addresses:
     at most 16 admitted per address, the rest refused at once (PEER_LIMIT,
     or SERVER_LIMIT once every --max_calls place is taken); the server cuts
     the admitted ones off at the progress timeout (RST_STREAM), and memory
     comes back.
  3. a PushStream that never reads its replies: the push is applied, the
     stream is ended and cancelled at the progress timeout, and the address's
     places come back.
  4. 16 pushes that send 62 bytes and stall: another address's pushes all
     apply (push memory is charged as bytes arrive).

Usage: hostile_http2_test.py SERVER [--model=small|seed] [--resets=N]
       [--zero_window=M] [--legacy]
With --legacy (a server from before these limits) the server is started
without the new flags and the bounds are reported; checks may fail there.
"""
import collections
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

try:
    import h2.config
    import h2.exceptions
    import h2.connection
    import h2.events
    import h2.settings
except ImportError:  # a Python without Debian's packages: use Debian's
    if os.path.exists("/usr/bin/python3") and sys.executable != "/usr/bin/python3":
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise

import testlib
from testlib import LOGS, read_port

CHECKS = testlib.Checks()
check, fail = CHECKS.check, CHECKS.fail

PROGRESS_TIMEOUT_S = 2
SERVICE = "/asgd.v1.ParameterServer/"
GROWTH_BOUND_MB = 300
# What a server may still hold once a burst's calls are gone: the server
# trims malloc only when more than 64 MB lie free (server_main.cc,
# common/freed_memory.h), so up to 64 MB freed stay resident by design, plus
# what it still uses (+5 to +25 MB after a trim, under load too). A server
# that gives nothing back keeps +195 to +219 MB after 10,000 reset
# PullStreams (docs/reliability.md). Under load, some bursts that peaked at
# +67 to +135 MB left +58 to +92 MB: free memory just under the trim
# threshold, or gRPC's backlog of reset calls not yet freed.
TRIM_KEEP_MB = 64
KEPT_BOUND_MB = TRIM_KEEP_MB + 32


# --- Protocol Buffers, by hand (varints and length-delimited fields) -------

def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(number, value):
    """One field: an int (varint) or bytes/str (length-delimited)."""
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    if isinstance(value, str):
        value = value.encode()
    return varint(number << 3 | 2) + varint(len(value)) + value


def parse(buf):
    """The fields of a message: [(number, value)], value int or bytes."""
    out, i = [], 0
    while i < len(buf):
        key, i = read_varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = read_varint(buf, i)
        elif wire == 2:
            n, i = read_varint(buf, i)
            value, i = buf[i:i + n], i + n
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        else:
            raise ValueError(f"wire type {wire}")
        out.append((number, value))
    return out


def read_varint(buf, i):
    n = shift = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def grpc_frame(message):
    return b"\0" + struct.pack(">I", len(message)) + message


def pull_request():
    return field(1, 7) + field(3, 0)  # worker 7, FLOAT32


def push_messages(model, version, value=0.001):
    """The messages of one float32 gradient push of the whole model."""
    header = field(1, field(1, 99) + field(2, version) + field(3, 1)) + \
        field(4, version)
    msgs, count = [header], 0
    for name, size in model["tensors"]:
        for offset in range(0, size, model["max_chunk"]):
            n = min(model["max_chunk"], size - offset)
            chunk = field(1, name) + field(2, offset) + \
                field(3, struct.pack(f"<{n}f", *([value] * n)))
            msgs.append(field(2, chunk) + field(4, version))
            count += 1
    msgs.append(field(3, field(1, count)) + field(4, version))
    return msgs


def top_k_one(value):
    """A top-k chunk (compression/grad_codec.h) of 1 element holding
    `value`: 21 bytes."""
    # encoding 2 (top-k), version 1, flags 0, count 1, k 1, L 1; the value;
    # the index 0.
    return struct.pack("<BBHIII", 2, 1, 0, 1, 1, 1) + \
        struct.pack("<f", value) + varint(0)


def tiny_push_start(model):
    """A push's header and a valid first chunk of one element, top-k
    encoded: about 62 bytes, the start of a push that a server taking
    compressed pushes accepts."""
    name = model["tensors"][0][0]
    chunk = field(1, name) + field(2, 0) + field(3, top_k_one(0.5)) + \
        field(4, 3)  # TOP_K
    return [field(1, field(1, 98) + field(2, 0) + field(3, 1)) + field(4, 0),
            field(2, chunk) + field(4, 0)]


# --- HTTP/2 ------------------------------------------------------------------

class Conn:
    """One HTTP/2 connection to the server from `source` (a local address).
    `window`: the stream flow-control window granted to the server (0: it
    can send no DATA at all). Received data is never acknowledged, so the
    connection window is not replenished either."""

    def __init__(self, port, source="127.0.0.1", window=None, ack=True):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((source, 0))
        self.sock.connect(("127.0.0.1", port))
        self.sock.settimeout(0)
        self.ack = ack
        cfg = h2.config.H2Configuration(client_side=True,
                                        header_encoding="utf-8")
        self.h2 = h2.connection.H2Connection(config=cfg)
        self.h2.initiate_connection()
        if window is not None:
            self.h2.update_settings(
                {h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
        self.ended = {}    # stream id -> (grpc-status, asgd-refusal)
        self.reset = set()  # streams the server reset
        self.data = {}     # stream id -> bytes received
        self.messages = {}  # stream id -> grpc-message (reported only)
        self.port = port
        self.pending = b""
        self.flush()

    def headers(self, method):
        return [(":method", "POST"), (":scheme", "http"),
                (":path", SERVICE + method),
                (":authority", f"127.0.0.1:{self.port}"),
                ("content-type", "application/grpc"), ("te", "trailers")]

    def open(self, method, messages=(), end=True):
        # Within the server's MAX_CONCURRENT_STREAMS: wait (bounded) for
        # streams to end first.
        deadline = time.time() + 60
        while (self.h2.open_outbound_streams >=
               self.h2.remote_settings.max_concurrent_streams and
               time.time() < deadline):
            self.flush()
            self.poll(0.01)
        sid = self.h2.get_next_available_stream_id()
        self.h2.send_headers(sid, self.headers(method))
        size = sum(len(m) + 5 for m in messages)
        if size > 16000:  # beyond one frame: within the windows
            self.send(sid, messages, end=end)
            return sid
        for i, m in enumerate(messages):
            self.h2.send_data(sid, grpc_frame(m),
                              end_stream=end and i == len(messages) - 1)
        if end and not messages:
            self.h2.end_stream(sid)
        return sid

    def send(self, sid, messages, end=False):
        """Sends `messages` on stream `sid` within the server's flow-control
        windows (waiting, bounded, for it to grant more)."""
        data = b"".join(grpc_frame(m) for m in messages)
        deadline = time.time() + 60
        while data and time.time() < deadline:
            n = min(len(data), self.h2.local_flow_control_window(sid),
                    self.h2.max_outbound_frame_size)
            if n == 0:
                self.flush()
                self.poll(0.01)
                continue
            try:
                self.h2.send_data(sid, data[:n],
                                  end_stream=end and n == len(data))
            except h2.exceptions.StreamClosedError:
                return False  # the server ended it (see self.ended)
            data = data[n:]
        self.flush()
        return not data

    def rst(self, sid):
        self.h2.reset_stream(sid)

    def pump(self):
        """Sends what h2 has queued, in order, as far as the socket takes
        it; the rest stays pending."""
        self.pending += self.h2.data_to_send()
        while self.pending:
            try:
                sent = self.sock.send(self.pending)
            except BlockingIOError:
                return
            except ConnectionError:  # the server closed the connection
                self.pending = b""
                return
            self.pending = self.pending[sent:]

    def flush(self):
        """Sends everything queued (reading meanwhile, so that the server
        can go on)."""
        deadline = time.time() + 60
        self.pump()
        while self.pending and time.time() < deadline:
            self.poll(0.01)
            self.pump()

    def poll(self, seconds=0.0):
        """Reads what the server sent for up to `seconds`."""
        end = time.time() + seconds
        while True:
            try:
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    return False
                for ev in self.h2.receive_data(chunk):
                    self.event(ev)
            except BlockingIOError:
                if time.time() >= end:
                    return True
                time.sleep(0.005)
            except ConnectionError:
                return False
            self.pump()

    def event(self, ev):
        if isinstance(ev, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
            hdrs = dict(ev.headers)
            if "grpc-status" in hdrs:
                self.ended[ev.stream_id] = (int(hdrs["grpc-status"]),
                                            hdrs.get("asgd-refusal", ""))
                self.messages[ev.stream_id] = hdrs.get("grpc-message", "")
        elif isinstance(ev, h2.events.DataReceived):
            self.data[ev.stream_id] = self.data.get(ev.stream_id, b"") + ev.data
            if self.ack:
                self.h2.acknowledge_received_data(
                    ev.flow_controlled_length, ev.stream_id)
        elif isinstance(ev, h2.events.StreamReset):
            self.reset.add(ev.stream_id)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def grpc_messages(data):
    out, i = [], 0
    while i + 5 <= len(data):
        n = struct.unpack(">I", data[i + 1:i + 5])[0]
        out.append(data[i + 5:i + 5 + n])
        i += 5 + n
    return out


# --- The server ----------------------------------------------------------------

def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return -1


class Peak:
    """The largest VmRSS of `pid` while running (sampled every 20 ms)."""

    def __init__(self, pid):
        self.pid, self.peak, self.stop = pid, rss_mb(pid), False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop:
            try:
                self.peak = max(self.peak, rss_mb(self.pid))
            except OSError:
                return
            time.sleep(0.02)

    def done(self):
        self.stop = True
        self.thread.join()
        return self.peak


def describe_call(port, source="127.0.0.1"):
    """One DescribeModel call from `source`: (grpc-status, refusal) and the
    bytes received; (-1, "") when no status came within 10 s."""
    c = Conn(port, source=source)
    sid = c.open("DescribeModel", [b""])
    c.flush()
    answer_by = time.time() + 10
    while sid not in c.ended and time.time() < answer_by:
        c.poll(0.01)
    c.close()
    return c.ended.get(sid, (-1, "")), c.data.get(sid, b"")


def describe(port, busy_for_s=10, source="127.0.0.1"):
    """The server's DescribeModel answer as a dict, or None. A refusal for
    calls in flight (UNAVAILABLE with SERVER_LIMIT or PEER_LIMIT, as right
    after thousands of reset calls, until the server has retired them) is
    retried after a 0.1 s backoff, as the refusal asks, for up to busy_for_s
    seconds."""
    deadline = time.time() + busy_for_s
    while True:
        ended, data = describe_call(port, source)
        if ended not in ((14, "SERVER_LIMIT"), (14, "PEER_LIMIT")) or \
                time.time() > deadline:
            break
        time.sleep(0.1)  # the backoff the refusal asks for
    msgs = grpc_messages(data)
    if not msgs:
        return None
    model = {"tensors": [], "max_chunk": 256 * 1024, "version": 0}
    for number, value in parse(msgs[0]):
        if number == 1:
            name, size = "", 1
            for n2, v2 in parse(value):
                if n2 == 1:
                    name = v2.decode()
                elif n2 == 2:
                    if isinstance(v2, int):
                        size *= v2
                    else:  # packed
                        i = 0
                        while i < len(v2):
                            d, i = read_varint(v2, i)
                            size *= d
            model["tensors"].append((name, size))
        elif number == 7:
            model["max_chunk"] = value
        elif number == 5:
            model["version"] = value
    return model


def healthy(probe, port):
    r = subprocess.run([probe, f"--health_probe=127.0.0.1:{port}"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=30)
    return r.returncode == 0


class Server:
    started = 0

    def __init__(self, path, tmp, model_flags, flags, legacy,
                 progress_timeout_s=PROGRESS_TIMEOUT_S):
        self.path = path
        Server.started += 1
        pf = os.path.join(tmp, f"port.{Server.started}")
        log = os.path.join(tmp, f"server.{Server.started}.log")
        LOGS.append(log)
        # Flags a server from before these limits knows too.
        old = [f"--push_progress_timeout_s={progress_timeout_s}"] + \
            [f for f in flags if f.startswith("--push_memory_mb")]
        new = old if legacy else old + flags
        self.proc = subprocess.Popen(
            [path, "--host=0.0.0.0", "--port=0", f"--port_file={pf}",
             "--metrics_port=-1", "--log_every_s=0", "--num_shards=2"]
            + model_flags + sorted(set(new)),
            stdout=open(log, "w"), stderr=subprocess.STDOUT)
        self.port = testlib.wait_for("server port", lambda: read_port(pf),
                                     timeout=60, proc=self.proc)
        testlib.wait_for("server model", lambda: describe(self.port),
                         timeout=60, proc=self.proc)

    def rss(self):
        return rss_mb(self.proc.pid)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def settle(server, seconds=PROGRESS_TIMEOUT_S * 2 + 2):
    """Waits (bounded) until the server's RSS stops falling."""
    end, last = time.time() + seconds, server.rss()
    while time.time() < end:
        time.sleep(0.25)
        now = server.rss()
        if now >= last - 1:
            return now
        last = now
    return server.rss()


def kept_after(server, base):
    """What the server still holds over `base` (MB) once its RSS has
    settled, waiting (bounded) for it to fall under KEPT_BOUND_MB: the
    server trims every 2 s, and after a reset burst only once gRPC has
    worked through its backlog of calls (docs/reliability.md)."""
    after = settle(server)
    back_by = time.time() + 20
    while after - base >= KEPT_BOUND_MB and time.time() < back_by:
        time.sleep(0.25)
        after = server.rss()
    return after - base


# --- The attacks -------------------------------------------------------------

def rapid_reset(server, method, n, messages, source="127.0.0.1",
                probe_from=None):
    """n calls of `method` opened and reset at once on one connection from
    `source`. With `probe_from`, DescribeModel calls from that address go on
    while the attack runs and for a second after it, then `source` asks
    until it is answered (as describe() does). Returns the server's peak
    growth and what it still holds after (MB), the probes' (grpc-status,
    refusal) outcomes, and how long after its last reset `source` was
    answered again (None when it was not, or not asked)."""
    base = server.rss()
    peak = Peak(server.proc.pid)
    sent = {}

    def attack():
        c = Conn(server.port, source=source)
        t0 = time.time()
        for i in range(n):
            sid = c.open(method, messages)
            c.rst(sid)
            if i % 200 == 199:
                c.flush()
                c.poll()
        c.flush()
        sent["at"] = time.time()
        sent["s"] = sent["at"] - t0
        c.poll(0.5)
        c.close()

    thread = threading.Thread(target=attack)
    thread.start()
    probes = []
    while probe_from and (thread.is_alive() or time.time() < sent["at"] + 1):
        probes.append(describe_call(server.port, probe_from)[0])
        time.sleep(0.02)
    thread.join()
    back_s = None
    if probe_from and describe(server.port, source=source) is not None:
        back_s = time.time() - sent["at"]
    kept = kept_after(server, base)
    grown = peak.done() - base
    print(f"{n} {method} calls opened and reset on one connection from "
          f"{source} in {sent['s']:.1f} s: server RSS {base:.0f} MB -> peak "
          f"+{grown:.0f} MB, {kept:+.0f} MB after")
    return grown, kept, probes, back_s


def zero_window_pulls(server, n, sources):
    """n pull streams (one request each) spread over `sources` on connections
    that grant no window."""
    base = server.rss()
    peak = Peak(server.proc.pid)
    conns = [Conn(server.port, source=s, window=0, ack=False) for s in sources]
    sids = [[] for _ in conns]
    t0 = time.time()
    for i in range(n):
        k = i % len(conns)
        sids[k].append(conns[k].open("PullStream", [pull_request()]))
        if i % 100 == 99:
            for c in conns:
                c.flush()
                c.poll()
    for c in conns:
        c.flush()
    # Refusals come at once; the admitted pulls are cut off at the timeout.
    deadline = t0 + PROGRESS_TIMEOUT_S + 20
    while time.time() < deadline:
        for c in conns:
            c.poll(0.05)
        if all(len(c.ended) + len(c.reset - set(c.ended)) >= len(s)
               for c, s in zip(conns, sids)):
            break
    held_peak = peak.done() - base
    ended_s = time.time() - t0
    # Refused at once: UNAVAILABLE with PEER_LIMIT (the address's places
    # are taken), or SERVER_LIMIT (every --max_calls place is: 4 addresses
    # at --max_calls_per_peer alive calls each fill the server's 512 when
    # gRPC is slow to release the refused ones, as on a loaded machine).
    refusals = {"PEER_LIMIT": 0, "SERVER_LIMIT": 0}
    # Admitted and ended by the server: DEADLINE_EXCEEDED (4), CANCELLED
    # (1: "cancelled on the server side") or a reset.
    cut_off = sum(len(c.reset - set(c.ended)) for c in conns)
    others = collections.Counter()
    for c in conns:
        for sid, (st, r) in c.ended.items():
            if st == 14 and r in refusals:
                refusals[r] += 1
            elif st in (1, 4):
                cut_off += 1
            else:
                key = f"{st} {r} {c.messages.get(sid, '')!r}"
                others[key] += 1
    refused = sum(refusals.values())
    other = sum(others.values())
    open_left = sum(len(s) for s in sids) - refused - cut_off - other
    if others:
        print("ended otherwise: " + "; ".join(
            f"{count} x {key}" for key, count in sorted(others.items())))
    for c in conns:
        c.close()
    kept = kept_after(server, base)
    print(f"{n} zero-window pull streams from {len(sources)} addresses: peak "
          f"+{held_peak:.0f} MB, {refused} refused ({refusals['PEER_LIMIT']} "
          f"PEER_LIMIT, {refusals['SERVER_LIMIT']} SERVER_LIMIT), {cut_off} "
          f"ended by the server at the progress timeout (DEADLINE_EXCEEDED, "
          f"CANCELLED or RST_STREAM), {other} ended otherwise, {open_left} never ended, "
          f"{ended_s:.1f} s; {kept:+.0f} MB after the client left")
    return held_peak, refused, cut_off, open_left + other, kept


def push_stream_never_reads(server, model):
    """A PushStream that never reads its reply; then 16 PushStreams from the
    same address: admitted once the first is cut off."""
    version_before = describe(server.port)["version"]
    c = Conn(server.port, window=0, ack=False)
    sid = c.open("PushStream", end=False)
    if not c.send(sid, push_messages(model, version_before)):
        c.poll(0.5)
        print(f"the server ended the push stream while it was sent: "
              f"{c.ended.get(sid)}, reset {sid in c.reset}")
    c.flush()
    t0 = time.time()
    while sid not in c.reset and sid not in c.ended and \
            time.time() - t0 < PROGRESS_TIMEOUT_S + 20:
        c.poll(0.05)
    ended_s = time.time() - t0
    cut_off = sid in c.reset or sid in c.ended
    applied = describe(server.port)["version"] == version_before + 1
    # The address's places, the first connection still open: 16 streams
    # that stay open (refused ones end at once with PEER_LIMIT).
    c2 = Conn(server.port)
    probes = [c2.open("PushStream", end=False) for _ in range(16)]
    c2.flush()
    c2.poll(1.0)
    refused = sum(1 for s in probes if c2.ended.get(s, (0, ""))[1] == "PEER_LIMIT")
    c2.close()
    c.close()
    print(f"PushStream that never reads its reply: push applied: {applied}, "
          f"cut off by the server: {cut_off} after {ended_s:.1f} s; then "
          f"{16 - refused} of 16 new push streams from that address admitted")
    return applied, cut_off, ended_s, refused


def tiny_stalled_pushes(server, model, honest_pushes=20):
    """16 push streams that send ~62 bytes and stall (127.0.0.1), then
    `honest_pushes` whole pushes from 127.0.0.2, one at a time, each on its
    own stream."""
    attacker = Conn(server.port)
    for _ in range(16):
        attacker.open("PushStream", tiny_push_start(model), end=False)
    attacker.flush()
    attacker.poll(0.5)
    refused_attacks = len(attacker.ended)  # all should be held, not ended
    applied = 0
    results = []
    stalled_held = False
    for k in range(honest_pushes):
        version = describe(server.port)["version"]
        c = Conn(server.port, source="127.0.0.2")
        sid = c.open("PushStream", push_messages(model, version))
        c.flush()
        deadline = time.time() + 20
        while sid not in c.ended and time.time() < deadline:
            c.poll(0.02)
        status, refusal = c.ended.get(sid, (-1, ""))
        reply = grpc_messages(c.data.get(sid, b""))
        ok = status == 0 and reply and dict(parse(reply[0])).get(1, 0) == 1
        applied += bool(ok)
        results.append(refusal or str(status))
        c.close()
        if k == 0:  # the stalled pushes were there while it was applied
            attacker.poll(0.1)
            stalled_held = refused_attacks == 0 and not attacker.ended
    attacker.close()
    print(f"16 stalled 62-byte pushes from 127.0.0.1 ({refused_attacks} "
          f"refused at once), then {honest_pushes} pushes from 127.0.0.2: "
          f"{applied} applied (statuses: {', '.join(sorted(set(results)))})")
    return applied, stalled_held


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    opts = dict(a[2:].split("=", 1) if "=" in a else (a[2:], "1")
                for a in sys.argv[1:] if a.startswith("--"))
    path = args[0]
    legacy = "legacy" in opts
    seed = opts.get("model", "small") == "seed"
    resets = int(opts.get("resets", "50000"))
    zero = int(opts.get("zero_window", "2000"))
    model_flags = ["--feature_dim=440", "--context=0", "--num_classes=40",
                   "--hidden=512,512"]
    if seed:
        model_flags = ["--feature_dim=440", "--context=0",
                       "--hidden=2048,2048,2048,2048,2048",
                       "--num_classes=2000"]
    tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
    # Push memory for 16 pushes of the model: what 16 stalled pushes that
    # each took a model-sized buffer filled before.
    probe = Server(path, tmp, model_flags, [], legacy)
    model = describe(probe.port)
    probe.stop()
    model_mb = sum(s for _, s in model["tensors"]) * 4 / 2**20
    push_memory_mb = max(1, int(16 * model_mb + 0.999))
    print(f"model: {model_mb:.1f} MB in {len(model['tensors'])} tensors; "
          f"--push_memory_mb={push_memory_mb}")
    server = Server(path, tmp, model_flags,
                    [f"--push_memory_mb={push_memory_mb}"], legacy)
    try:
        # 1. Rapid reset.
        grown, kept, probes, back_s = rapid_reset(
            server, "PullStream", resets, [pull_request()],
            source="127.0.0.2", probe_from="127.0.0.1")
        check(f"{resets} reset PullStream calls hold < {GROWTH_BOUND_MB} MB "
              f"more", grown < GROWTH_BOUND_MB, f"+{grown:.0f} MB")
        check(f"and the server gives it back: < {KEPT_BOUND_MB} MB more "
              f"after", kept < KEPT_BOUND_MB, f"+{kept:.0f} MB")
        refused = [p for p in probes if p != (0, "")]
        back = "never" if back_s is None else f"{back_s:.1f} s"
        print(f"DescribeModel from 127.0.0.1 during the attack: "
              f"{len(probes) - len(refused)} of {len(probes)} answered; "
              f"127.0.0.2 answered again {back} after its last reset")
        check("another address is answered during and right after the "
              "attack (one address can not take every --max_calls place)",
              bool(probes) and not refused,
              f"{len(refused)} of {len(probes)} refused: "
              f"{sorted(set(refused))}")
        check("the server answers after the PullStream resets, the "
              "attacking address too", healthy(path, server.port) and
              describe(server.port) is not None and back_s is not None)
        for method, msgs in (("DescribeModel", [b""]),
                             ("Pull", [pull_request()])):
            g, kept, _, _ = rapid_reset(server, method, resets // 5, msgs)
            check(f"{resets // 5} reset {method} calls hold < "
                  f"{GROWTH_BOUND_MB} MB more, < {KEPT_BOUND_MB} MB after",
                  g < GROWTH_BOUND_MB and kept < KEPT_BOUND_MB,
                  f"+{g:.0f} MB, +{kept:.0f} MB after")
        check("the server answers after every reset attack",
              healthy(path, server.port))

        # 2. Zero window, from one address and from four.
        for sources in (["127.0.0.1"],
                        ["127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4"]):
            held, refused, cut, left, after = zero_window_pulls(
                server, zero, sources)
            check(f"{zero} zero-window pull streams from {len(sources)} address(es) "
                  f"hold < {GROWTH_BOUND_MB} MB more",
                  held < GROWTH_BOUND_MB, f"+{held:.0f} MB")
            check(f"at most 16 pulls per address admitted ({len(sources)} "
                  f"address(es)), the rest refused at once",
                  refused >= zero - 16 * len(sources),
                  f"{refused} refused of {zero}")
            check("every admitted zero-window pull is ended by the server "
                  "at the progress timeout",
                  left == 0 and cut == zero - refused,
                  f"{left} never ended or ended otherwise, {cut} cut off")
            check(f"the memory comes back once the client leaves: < "
                  f"{KEPT_BOUND_MB} MB more after", after < KEPT_BOUND_MB,
                  f"{after:+.0f} MB")
        check("the server answers after the zero-window pulls",
              healthy(path, server.port))

        # 3. A PushStream that never reads its replies.
        applied, cut_off, ended_s, refused = push_stream_never_reads(
            server, model)
        check("a push on a stream that reads nothing is applied", applied)
        check("that stream is cut off at the progress timeout",
              cut_off and ended_s < PROGRESS_TIMEOUT_S + 10,
              f"cut off {cut_off} after {ended_s:.1f} s")
        check("its place comes back: 16 new push streams admitted",
              refused == 0, f"{refused} refused")

        check("the server answers at the end", healthy(path, server.port))
    finally:
        server.stop()
    # 4. Tiny stalled pushes do not lock out another worker (a 30 s progress
    # timeout, so that they stay stalled while the other worker pushes).
    server = Server(path, tmp, model_flags,
                    [f"--push_memory_mb={push_memory_mb}"], legacy,
                    progress_timeout_s=30)
    try:
        applied, stalled_held = tiny_stalled_pushes(server, model)
        check("with 16 stalled 62-byte pushes, another worker's 20 pushes "
              "all apply", applied == 20, f"{applied} of 20")
        check("the 16 stalled pushes were held, not refused", stalled_held,
              "they ended before the first honest push was applied")
        check("the server answers at the end", healthy(path, server.port))
    finally:
        server.stop()
    CHECKS.report_and_exit()


if __name__ == "__main__":
    main()
