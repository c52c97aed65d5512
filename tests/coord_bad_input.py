#!/usr/bin/env python3
"""Bad input on the coordinator's port and its HTTP server (tests/coord_test.sh bad_input):
    coord_bad_input.py HOST:PORT HTTPHOST:PORT
Truncated frames, lengths 0 and 0x7FFFFFFF, an 11-byte varint, random bytes, a Hello in 1-byte writes,
two messages in one write, 1,000 idle connections, a client trickling bytes to /metrics, 300 slow HTTP
clients from one address (a scrape from that address is still answered). After each,
the coordinator must still serve: a fresh Hello gets a Challenge and /healthz answers. Frames are built
by hand from proto/odl.proto (Envelope.version = 1, Envelope.hello = 2, Envelope.challenge = 3,
Envelope.refused = 6). Exit 0 when every check passed."""
import os
import random
import resource
import socket
import struct
import sys
import threading
import time
import urllib.request

host, port = sys.argv[1].rsplit(":", 1)
port = int(port)
http = sys.argv[2]
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, wire, payload):
    key = varint(num << 3 | wire)
    if wire == 0:
        return key + varint(payload)
    return key + varint(len(payload)) + payload


def frame(body):
    return struct.pack(">I", len(body)) + body


def hello(rank=0, world=2, generation=1):
    h = field(1, 0, rank) + field(2, 0, world) + field(3, 0, generation) + field(4, 2, b"bad_input")
    return frame(field(1, 0, 1) + field(2, 2, h))


def connect():
    s = socket.create_connection((host, port), timeout=10)
    s.settimeout(10)
    return s


def read_frames(s, until_close=False, want=1):
    """Frames received (envelope bytes) until `want` frames, or the peer closes."""
    buf, frames = b"", []
    try:
        while until_close or len(frames) < want:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
            while len(buf) >= 4:
                n = struct.unpack(">I", buf[:4])[0]
                if len(buf) < 4 + n:
                    break
                frames.append(buf[4:4 + n])
                buf = buf[4 + n:]
    except socket.timeout:
        pass
    return frames


def msg_field(env):
    """The field number of the envelope's message (after version = field 1)."""
    i = 0
    while i < len(env):
        key = env[i]
        i += 1
        num, wire = key >> 3, key & 7
        if wire == 0:
            while env[i] & 0x80:
                i += 1
            i += 1
        elif wire == 2:
            n, shift = 0, 0
            while True:
                b = env[i]
                i += 1
                n |= (b & 0x7F) << shift
                shift += 7
                if not b & 0x80:
                    break
            if num != 1:
                return num
            i += n
        else:
            return -1
    return 0


def closed_by_peer(s):
    try:
        return read_frames(s, until_close=True) is not None
    finally:
        s.close()


def still_serves(what):
    s = connect()
    s.sendall(hello())
    f = read_frames(s)
    s.close()
    check(len(f) == 1 and msg_field(f[0]) == 3, f"after {what}: a fresh hello gets a challenge")
    with urllib.request.urlopen(f"http://{http}/healthz", timeout=5) as r:
        check(r.status == 200 and r.read() == b"ok\n", f"after {what}: /healthz answers")


def refused_and_closed(payload, what):
    s = connect()
    s.sendall(payload)
    f = read_frames(s, until_close=True)
    s.close()
    check(len(f) >= 1 and msg_field(f[-1]) == 6, f"{what}: refused and closed")
    still_serves(what)


# truncated frames: a header promising 100 bytes, 10 sent, then our side closed
s = connect()
s.sendall(struct.pack(">I", 100) + b"\x08\x01" + b"\x00" * 8)
s.shutdown(socket.SHUT_WR)
check(closed_by_peer(s), "truncated frame: connection closed")
still_serves("a truncated frame")
s = connect()
s.sendall(b"\x00\x00")  # half a header
s.close()
still_serves("half a header")

refused_and_closed(b"\x00\x00\x00\x00", "length 0")
refused_and_closed(b"\x7f\xff\xff\xff", "length 0x7FFFFFFF")
refused_and_closed(frame(b"\x08" + b"\xff" * 10 + b"\x01"), "an 11-byte varint")
refused_and_closed(frame(field(1, 0, 2) + field(2, 2, b"")), "protocol version 2")

rng = random.Random(1234)
for i in range(20):
    s = connect()
    try:
        s.sendall(bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 3000))))
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # the coordinator may close first
    read_frames(s, until_close=True)
    s.close()
still_serves("20 connections of random bytes")

# a hello in 1-byte writes is decoded as one message
s = connect()
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
for b in hello():
    s.send(bytes([b]))
    time.sleep(0.002)
f = read_frames(s)
s.close()
check(len(f) == 1 and msg_field(f[0]) == 3, "hello in 1-byte writes: answered with a challenge")

# two messages in one write: the first is answered, the second (hello where a proof belongs) refused
s = connect()
s.sendall(hello() + hello())
f = read_frames(s, until_close=True)
s.close()
check(len(f) == 2 and msg_field(f[0]) == 3 and msg_field(f[1]) == 6,
      "two messages in one write: challenge, then refused (hello where the proof belongs)")

# 1,000 idle connections, then others are still served
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
idle = [connect() for _ in range(1000)]
still_serves("1,000 idle connections")
for s in idle:
    s.close()

# a client trickling bytes to /metrics does not hold the others up
hhost, hport = http.rsplit(":", 1)
stop = threading.Event()


def trickle():
    t = socket.create_connection((hhost, int(hport)), timeout=10)
    try:
        for b in b"GET /metrics HTTP/1.1\r\nHost: x\r\n":
            if stop.is_set():
                break
            t.send(bytes([b]))
            time.sleep(0.2)
    except OSError:
        pass
    t.close()


th = threading.Thread(target=trickle)
th.start()
time.sleep(0.5)
t0 = time.monotonic()
with urllib.request.urlopen(f"http://{http}/metrics", timeout=5) as r:
    body = r.read().decode()
check(r.status == 200 and "odl_generation" in body and time.monotonic() - t0 < 2,
      "/metrics served while another client trickles bytes")
stop.set()
th.join()
still_serves("a trickling /metrics client")

# 300 slow clients from this one address, each holding a request half sent, past the 256 pending slots
# and the per-address cap there once was: a scrape from the same address is still answered (a
# Prometheus on the coordinator's host shares its address with whatever else runs there).
slow = []
for _ in range(300):
    sk = socket.create_connection((hhost, int(hport)), timeout=10)
    sk.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
    slow.append(sk)
try:
    with urllib.request.urlopen(f"http://{http}/metrics", timeout=10) as r:
        body = r.read().decode()
    scraped = r.status == 200 and "odl_generation" in body
except OSError as e:
    scraped = False
    print("scrape: %s" % e)
check(scraped, "/metrics answered while 300 slow clients from the same address hold requests half sent")
for sk in slow:
    sk.close()
still_serves("300 slow HTTP clients")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("every bad input was refused and the coordinator kept serving")
