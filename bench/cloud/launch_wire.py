#!/usr/bin/env python3
"""Launch decision to launch request on the wire, for bench/cloud/run.

Submits jobs that only the cloud site can run, one at a time, to a
running tenbind, and times each from tenbind's 201 to the provider's
launch request, both as the kernel stamped their packets on the loopback
device: a packet socket (AF_PACKET, needs CAP_NET_RAW) with
SO_TIMESTAMPNS sees every segment when it crosses `lo`, so neither this
script's scheduling nor the fake cloud's adds to the figure.

  - the 201: the first segment from tenbind's port whose payload starts
    "HTTP/1.1 201" after a submit was written;
  - the launch: the first segment to the cloud's port that carries the
    launch request's words after that: `Action=RunInstances` (EC2, in
    the form body), `POST .../instances?requestId=` (Compute Engine) or
    `PUT .../virtualMachines/` (ARM).

The path measured: the submit's commit kicks a scheduler pass; the pass
finds no node with room, so the job waits for the site to grow and is
its demand; the pass ends with an autoscaler tick, whose plan launches a
node (ops->scale: the node's commit, then the provider's launch call).
The job is placed on that node by the pass after.  Each sample reads
the tick's decision in the autoscaler log (its time, ms), the job's
events (which node) and tenbind's log line "launching node N" (ms,
written just before the provider builds its request), which split the
wait into: 201 to the tick (the kicked pass, its commit), the tick to
the launch call (the plan, the node's commit) and the provider's part
(building, signing, libcurl sending, and whatever the loop does first).

The autoscaler ticks for a pass's demand at most once a second
(SCALE_MIN_GAP_MS in broker/autoscaler.c); a submission sooner after
the last tick waits for the next.  Each submission here is made at least
--gap-ms after the last launch was seen, whose tick came before it, so
the figure is a lone submission's; the config's policy.burst.tick_s
should be long, so that no timed tick comes just before one.

usage: launch_wire.py --api-port P --cloud-port Q --log TENBIND_STDERR
                      --gpu-type T [--site cloud] [--samples 200]
                      [--gap-ms 1050:1150] [--warmup 3] [--out FILE]

Prints one "BENCH key=value ..." line (medians, p90, p99, max in ms) and
writes every sample to --out.  Standard library only.
"""
import argparse
import json
import http.client
import random
import re
import socket
import statistics
import struct
import sys
import threading
import time

ETH_P_ALL = 0x0003
SO_TIMESTAMPNS = 35        # x86-64 and arm64 (asm-generic)
PACKET_OUTGOING = 4
MAX_SAMPLES = 100000
MIN_TICK_GAP_MS = 1000     # broker/autoscaler.c, SCALE_MIN_GAP_MS
HTTP_METHOD = re.compile(rb"^(GET|POST|PUT|DELETE|PATCH) /")
LAUNCH_MARKERS = (
    re.compile(rb"Action=RunInstances"),
    re.compile(rb"^POST /\S*/instances\?requestId=", re.M),
    re.compile(rb"^PUT /\S*/virtualMachines/", re.M),
)


class Sniffer(threading.Thread):
    """Kernel timestamps of 201s from the API and launches to the cloud.

    Each segment on `lo` is seen twice (leaving and arriving): only the
    arriving copy is kept.  Events go to a list under a condition, in the
    order the kernel saw them."""

    def __init__(self, api_port, cloud_port):
        super().__init__(daemon=True)
        self.api_port, self.cloud_port = api_port, cloud_port
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW,
                                  socket.htons(ETH_P_ALL))
        self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.sock.bind(("lo", 0))
        self.cv = threading.Condition()
        self.events = []          # (ns, "201" | "launch")
        self.cloud = []           # (ns, client port, "syn" | "req" | "ans")
        self.stop = False

    def run(self):
        while not self.stop:
            try:
                data, anc, _, addr = self.sock.recvmsg(65536, 64)
            except OSError:
                return
            if addr[2] == PACKET_OUTGOING or len(data) < 14 + 20 + 20:
                continue
            ns = time.time_ns()
            for level, kind, val in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS \
                        and len(val) >= 16:
                    sec, nsec = struct.unpack("qq", val[:16])
                    ns = sec * 1000000000 + nsec
            ip = data[14:]
            if ip[0] >> 4 != 4 or ip[9] != 6:
                continue
            ihl = (ip[0] & 15) * 4
            tcp = ip[ihl:]
            if len(tcp) < 20:
                continue
            sport, dport = struct.unpack("!HH", tcp[:4])
            payload = tcp[(tcp[12] >> 4) * 4:]
            if dport == self.cloud_port and tcp[13] & 0x12 == 0x02:
                self.cloud.append((ns, sport, "syn"))
            if not payload:
                continue
            # Each connection to the cloud: a request out, then answered.
            if dport == self.cloud_port and HTTP_METHOD.match(payload):
                self.cloud.append((ns, sport, "req"))
            elif sport == self.cloud_port and payload.startswith(b"HTTP/1."):
                self.cloud.append((ns, dport, "ans"))
            kind = None
            if sport == self.api_port and \
                    payload.startswith(b"HTTP/1.1 201"):
                kind = "201"
            elif dport == self.cloud_port and \
                    any(m.search(payload) for m in LAUNCH_MARKERS):
                kind = "launch"
            if kind is not None:
                with self.cv:
                    self.events.append((ns, kind))
                    self.cv.notify_all()

    def wait_for(self, kind, after_ix, timeout):
        """The first event of kind at index >= after_ix: (ns, index), or
        None after timeout seconds."""
        end = time.monotonic() + timeout
        with self.cv:
            while True:
                for i in range(after_ix, len(self.events)):
                    if self.events[i][1] == kind:
                        return self.events[i][0], i
                left = end - time.monotonic()
                if left <= 0:
                    return None
                self.cv.wait(left)

    def mark(self):
        with self.cv:
            return len(self.events)


def iso_ms(s):
    """Unix ms from tenbind's 2026-11-27T04:43:38.627Z."""
    m = re.match(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)\.(\d{3})Z$",
                 s)
    if not m:
        raise ValueError(f"not a tenbind time: {s[:40]!r}")
    y, mo, d, h, mi, sec, ms = (int(x) for x in m.groups())
    import calendar
    return calendar.timegm((y, mo, d, h, mi, sec, 0, 0, 0)) * 1000 + ms


def launching_ms(log_path, node):
    """When tenbind logged "launching node N", or None."""
    pat = re.compile(r"^(\S+) info\s+site \S+: launching node %d " % node)
    with open(log_path, encoding="utf-8", errors="replace") as fp:
        for line in fp:
            m = pat.match(line)
            if m:
                return iso_ms(m.group(1))
    return None


def tick_ms(conn, site, node_launch_ms, t201_ms):
    """When the autoscaler's tick that launched the sample's node began:
    the newest launch decision of site in [t201_ms - 1, node_launch_ms],
    or None.  The log is newest first; its times are whole ms."""
    conn.request("GET", f"/v1/autoscaler/log?site={site}&limit=20")
    r = conn.getresponse()
    body = r.read()
    if r.status != 200:
        return None
    for d in json.loads(body).get("decisions", []):
        if d.get("launched", 0) <= 0 or not d.get("at"):
            continue
        at = iso_ms(d["at"])
        if at > node_launch_ms:
            continue
        return at if at >= t201_ms - 1 else None
    return None


def pct(v, p):
    """The p-th percentile (nearest rank) of sorted v."""
    if not v:
        return float("nan")
    k = max(0, min(len(v) - 1, int(round(p / 100.0 * len(v) + 0.5)) - 1))
    return v[k]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--api-port", type=int, required=True)
    ap.add_argument("--cloud-port", type=int, required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--gpu-type", required=True)
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--gap-ms", default="1050:1150")
    ap.add_argument("--site", default="cloud")
    ap.add_argument("--out")
    ap.add_argument("--tag", default="w")
    a = ap.parse_args()
    if not 1 <= a.samples <= MAX_SAMPLES:
        print(f"launch_wire: --samples must be 1..{MAX_SAMPLES}",
              file=sys.stderr)
        return 2
    lo, _, hi = a.gap_ms.partition(":")
    gap = (int(lo), int(hi or lo))
    if not MIN_TICK_GAP_MS < gap[0] <= gap[1] <= 60000:
        print(f"launch_wire: --gap-ms must be LO[:HI] with "
              f"{MIN_TICK_GAP_MS} < LO <= HI <= 60000: each submission "
              f"waits out the autoscaler's minimum gap", file=sys.stderr)
        return 2
    try:
        sn = Sniffer(a.api_port, a.cloud_port)
    except PermissionError:
        print("launch_wire: a packet socket needs CAP_NET_RAW (root)",
              file=sys.stderr)
        return 3
    sn.start()
    conn = http.client.HTTPConnection("127.0.0.1", a.api_port, timeout=30)
    rows, misses = [], 0
    next_ns = 0               # the next submission, no sooner
    for i in range(a.warmup + a.samples):
        wait = (next_ns - time.time_ns()) / 1e9
        if wait > 0:
            time.sleep(wait)
        body = json.dumps({"name": f"wire-{a.tag}-{i}", "command": ["true"],
                           "gpus": 1, "gpu_type": a.gpu_type}).encode()
        ix = sn.mark()
        conn.request("POST", "/v1/jobs", body,
                     {"Content-Type": "application/json"})
        r = conn.getresponse()
        ans = r.read()
        if r.status != 201:
            print(f"launch_wire: submit answered {r.status}: "
                  f"{ans[:200]!r}", file=sys.stderr)
            return 1
        job = json.loads(ans)["id"]
        got = sn.wait_for("201", ix, 5)
        launch = sn.wait_for("launch", ix, 10)
        # The gap runs from the launch, after the tick (kernel times are
        # CLOCK_REALTIME, as time.time_ns()).
        next_ns = (launch[0] if launch is not None else time.time_ns()) + \
            int(random.uniform(*gap) * 1e6)
        if got is None or launch is None:
            misses += 1
            print(f"launch_wire: job {job}: no "
                  f"{'201' if got is None else 'launch'} seen",
                  file=sys.stderr)
            continue
        t201, tl = got[0], launch[0]
        # The job's events: placed on the new node by the pass after the
        # tick, then submitted "on node N (...)".
        placed = node = None
        for _ in range(100):
            conn.request("GET", f"/v1/jobs/{job}/events")
            r = conn.getresponse()
            ev = json.loads(r.read()).get("events", [])
            for e in ev:
                if e.get("to") == "placed" and placed is None:
                    placed = iso_ms(e["at"])
                m = re.match(r"^on node (\d+) ", e.get("detail") or "")
                if e.get("to") == "submitted" and m:
                    node = int(m.group(1))
            if node is not None:
                break
            time.sleep(0.01)
        logged = launching_ms(a.log, node) if node is not None else None
        ticked = tick_ms(conn, a.site, logged, t201 / 1e6) \
            if logged is not None else None
        if i >= a.warmup:
            rows.append({"job": job, "node": node, "t201_ns": t201,
                         "launch_ns": tl, "tick_ms": ticked,
                         "logged_ms": logged, "placed_ms": placed})
    sn.stop = True
    conn.close()
    if a.out:
        with open(a.out, "w") as fp:
            for r in rows:
                fp.write(json.dumps(r) + "\n")
    wire = sorted((r["launch_ns"] - r["t201_ns"]) / 1e6 for r in rows)
    # Splits at ms resolution (tenbind's clock is ms).
    tick = sorted(r["tick_ms"] - r["t201_ns"] / 1e6 for r in rows
                  if r["tick_ms"] is not None)
    scale = sorted(r["logged_ms"] - r["tick_ms"] for r in rows
                   if r["logged_ms"] is not None and r["tick_ms"] is not None)
    prov = sorted(r["launch_ns"] / 1e6 - r["logged_ms"] for r in rows
                  if r["logged_ms"] is not None)
    fields = [f"samples={len(rows)}", f"misses={misses}",
              f"unsplit={sum(1 for r in rows if r['tick_ms'] is None)}"]
    for name, v in (("wire", wire), ("tick", tick), ("scale", scale),
                    ("provider", prov)):
        if v:
            fields += [f"{name}_p50_ms={statistics.median(v):.2f}",
                       f"{name}_p90_ms={pct(v, 90):.2f}",
                       f"{name}_p99_ms={pct(v, 99):.2f}",
                       f"{name}_min_ms={v[0]:.2f}",
                       f"{name}_max_ms={v[-1]:.2f}"]
    print("BENCH " + " ".join(fields), flush=True)
    # The slowest samples, split, so that an outlier says where it was.
    for r in sorted(rows, key=lambda r: r["t201_ns"] - r["launch_ns"])[:3]:
        w = (r["launch_ns"] - r["t201_ns"]) / 1e6
        parts = []
        if r["tick_ms"] is not None:
            parts.append(f"201->tick {r['tick_ms'] - r['t201_ns'] / 1e6:.1f}")
        if r["logged_ms"] is not None and r["tick_ms"] is not None:
            parts.append(f"tick->call {r['logged_ms'] - r['tick_ms']}")
        if r["logged_ms"] is not None:
            parts.append(f"call->wire {r['launch_ns'] / 1e6 - r['logged_ms']:.1f}")
        # Connections to the cloud with a request unanswered when it left
        # (tenbind's HTTP client holds at most 8 to a host), and whether
        # it opened a connection of its own.
        busy = {}
        new = False
        for ns, port, what in sn.cloud:
            if ns >= r["launch_ns"] - 1000:
                break
            if what == "req":
                busy[port] = True
            elif what == "ans":
                busy[port] = False
            elif r["logged_ms"] is not None and ns >= r["logged_ms"] * 1e6:
                new = True
        parts.append(f"{sum(busy.values())} requests to the cloud "
                     f"unanswered{', on a new connection' if new else ''}")
        print(f"slow: job {r['job']}: {w:.1f} ms ({', '.join(parts)})",
              flush=True)
    return 0 if rows and misses == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
