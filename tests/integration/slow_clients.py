#!/usr/bin/env python3
"""Hostile clients for t20: slowloris, half bodies past the connection
limit, unauthenticated uploads, and requests whose framing or path must
be refused.  Every check asserts service (requests answered), never a
time; the timeouts here only turn a hang into a failure.

usage: slow_clients.py PORT TOKEN TENBIND_PID
Prints "ok - ..." / "FAIL - ..." lines; exits 1 if any check failed.
"""
import http.client
import socket
import sys
import time

PORT = int(sys.argv[1])
TOKEN = sys.argv[2]
PID = int(sys.argv[3])
FAILS = 0


def check(desc, cond, detail=""):
    global FAILS
    if cond:
        print(f"ok - {desc}")
    else:
        FAILS += 1
        print(f"FAIL - {desc} {detail}", file=sys.stderr)


def connect(src):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((src, 0))
    s.connect(("127.0.0.1", PORT))
    return s


def closed_by_server(s):
    """Whether the server has closed s (EOF or reset), without waiting."""
    try:
        return s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def request(method, path, headers=None, body=None, timeout=60):
    """One request from 127.0.0.1: its status, or an error string."""
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=timeout,
                                   source_address=("127.0.0.1", 0))
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        r.read()
        return r.status
    except OSError as e:
        return f"error: {e}"
    finally:
        c.close()


def raw_status(text, timeout=30):
    """Send text on a new connection; the status of the answer."""
    s = connect("127.0.0.1")
    s.settimeout(timeout)
    try:
        s.sendall(text)
        data = b""
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        parts = data.split(b" ", 2)
        return int(parts[1]) if len(parts) > 1 else 0
    except OSError as e:
        return f"error: {e}"
    finally:
        s.close()


def rss_kib():
    with open(f"/proc/{PID}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def wait_all_closed(socks, secs):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if all(closed_by_server(s) for s in socks):
            return True
        time.sleep(0.2)
    return False


AUTH = {"Authorization": f"Bearer {TOKEN}"}

# ---- what the server refuses by itself ----
check("a percent-encoded NUL in the path is 400 (no job submitted)",
      raw_status(b"POST /v1/jobs%00/1/cancel HTTP/1.1\r\nHost: t\r\n"
                 b"Authorization: Bearer " + TOKEN.encode() +
                 b"\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 2\r\n\r\n{}") == 400)
check("a percent-encoded NUL in the query is 400",
      raw_status(b"GET /v1/jobs?project=de%00mo HTTP/1.1\r\nHost: t\r\n"
                 b"Authorization: Bearer " + TOKEN.encode() +
                 b"\r\n\r\n") == 400)
check("two Content-Length headers are 400",
      raw_status(b"POST /v1/jobs HTTP/1.1\r\nHost: t\r\n"
                 b"Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}") == 400)
check("Content-Length with Transfer-Encoding is 400",
      raw_status(b"POST /v1/jobs HTTP/1.1\r\nHost: t\r\n"
                 b"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n"
                 b"2\r\n{}\r\n0\r\n\r\n") == 400)

# ---- slowloris from one address: held to its share, others served ----
slow = []
for _ in range(1030):
    try:
        slow.append(connect("127.0.0.2"))
    except OSError:
        break
check("1030 slowloris connections were opened", len(slow) == 1030,
      f"({len(slow)})")
for s in slow:
    try:
        s.send(b"GET /healthz HTTP/1.1\r\n", socket.MSG_DONTWAIT)
    except OSError:
        pass
time.sleep(1.0)
held = sum(1 for s in slow if not closed_by_server(s))
check("one address holds at most its 128 connections", held <= 128,
      f"(holds {held})")
served_during = []
for i in range(6):
    # A header line every 0.3 s: never idle, never finished.
    for s in slow:
        try:
            s.send(b"X-a: b\r\n", socket.MSG_DONTWAIT)
        except OSError:
            pass
    if i % 2 == 0:
        served_during.append(request("GET", "/healthz"))
        served_during.append(request("GET", "/v1/jobs", AUTH))
    time.sleep(0.3)
check("others are served while the slowloris lasts",
      all(st == 200 for st in served_during), str(served_during))
check("slow headers are cut", wait_all_closed(slow, 20))
for s in slow:
    s.close()

# ---- half bodies past the connection limit, three rounds ----
addrs = [f"127.0.0.{i}" for i in range(3, 14)]
for rnd in range(3):
    half = []
    for i in range(1030):
        try:
            s = connect(addrs[i % len(addrs)])
        except OSError:
            break
        try:
            s.send(b"POST /v1/jobs HTTP/1.1\r\nHost: t\r\n"
                   b"Authorization: Bearer " + TOKEN.encode() + b"\r\n"
                   b"Content-Type: application/json\r\n"
                   b"Content-Length: 1000\r\n\r\n" + b" " * 500,
                   socket.MSG_DONTWAIT)
        except OSError:
            pass
        half.append(s)
    # Served once the half bodies are cut: accepting resumed.
    st = request("GET", "/v1/jobs", AUTH)
    check(f"round {rnd + 1}: after 1030 half bodies at the limit, "
          f"requests are served", st == 200, str(st))
    check(f"round {rnd + 1}: the half bodies were cut",
          wait_all_closed(half, 30))
    for s in half:
        s.close()

# ---- unauthenticated uploads: 401 from the headers, no memory kept ----
before = rss_kib()
ups = []
for i in range(200):
    s = connect(addrs[i % len(addrs)])
    s.settimeout(30)
    s.sendall(b"POST /v1/jobs HTTP/1.1\r\nHost: t\r\n"
              b"Content-Type: application/json\r\n"
              b"Content-Length: 1048576\r\n\r\n")
    ups.append(s)
got401 = 0
for s in ups:
    try:
        if s.recv(64).startswith(b"HTTP/1.1 401"):
            got401 += 1
    except OSError:
        pass
check("200 unauthenticated uploads are answered 401 before their body",
      got401 == 200, f"({got401})")
body = b"x" * (1 << 20)
for s in ups:
    try:
        s.sendall(body)
    except OSError:
        pass
    s.close()
grown = rss_kib() - before
check("tenbind did not keep the refused bodies (RSS grew < 64 MiB)",
      grown < 64 * 1024, f"(grew {grown} KiB)")
check("tenbind still serves after everything",
      request("GET", "/v1/jobs", AUTH) == 200)
sys.exit(1 if FAILS else 0)
