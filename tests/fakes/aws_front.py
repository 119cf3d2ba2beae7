#!/usr/bin/env python3
"""A loopback proxy in front of moto_server's EC2 Query API that adds what
moto leaves out (cloud-contracts.md 1.10 and 6.1): ClientToken
idempotency, capacity/quota/throttle faults, a pending period, VMs that
really run their user data (vmemu), spot interruptions and a spot price
history read from a file.

usage: aws_front.py --moto http://127.0.0.1:PORT --root DIR --port-file FILE
                    [--port 0] [--access-key K --secret-key S]
                    [--region us-east-1] [--spot-prices FILE]

EC2 requests are forwarded to moto byte for byte (method, path, body and
every header, Host and Authorization included), so moto's SigV4 check,
when it runs one (INITIAL_NO_AUTH_ACTION_COUNT), sees what the client
signed.  The proxy's own calls to moto (terminating an interrupted
instance, finding a subnet's zone) use boto3 with --access-key/--secret-key
(else AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, else "testing"): when moto
checks signatures these must be a key moto's IAM knows.

Routes besides EC2: /_meta/<vm>/... (instance metadata, IMDSv2), and the
test controls POST /_fake/faults, POST /_fake/interrupt, GET /_fake/vms,
GET /_fake/stats (see tests/fakes/README or the selftest).  Times in
/_fake/vms are Unix seconds.  Standard library plus boto3 (moto's).
"""
import argparse
import base64
import binascii
import calendar
import fnmatch
import hashlib
import http.client
import http.server
import json
import os
import re
import sys
import threading
import time
import urllib.parse
import xml.etree.ElementTree as ET
from xml.sax.saxutils import escape

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import fakecloud  # noqa: E402  (what the fakes share)
import vmemu  # noqa: E402
from fakecloud import control_error  # noqa: E402

MAX_BODY = 1 << 20          # an EC2 request; user data is 16 KiB
MAX_FIELDS = 10000
MAX_TOKENS = 100000         # client tokens kept; the oldest go first
MAX_TOKEN_LEN = 64
MAX_NAME = 128
MAX_PRICES = 100000
XMLNS = "http://ec2.amazonaws.com/doc/2016-11-15/"
XML_DECL = b'<?xml version="1.0" encoding="UTF-8"?>\n'
RESERVED = ("/_fake/", "/_meta/", "/moto-api/")


class Fault(Exception):
    """An EC2 error answer: HTTP status, code, message."""

    def __init__(self, status, code, message):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class BadControl(Exception):
    """A request the front refuses before reading it, with its HTTP
    status."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def iso_parse(s):
    """Unix seconds from an ISO 8601 UTC time, or ValueError."""
    m = re.match(r"^(\d{4})-(\d\d)-(\d\d)(?:[T ](\d\d):(\d\d)(?::(\d\d))?"
                 r"(?:\.\d{1,9})?)?(Z|[+-]00:?00)?$", s.strip())
    if not m:
        raise ValueError(f"not an ISO 8601 UTC time: {s[:64]!r}")
    y, mo, d, h, mi, sec = (int(x) if x else 0 for x in m.groups()[:6])
    return calendar.timegm((y, mo, d, h, mi, sec, 0, 0, 0))


def iso_format(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(t))


def local(tag):
    return tag.rsplit("}", 1)[-1]


def child(el, name):
    for c in el:
        if local(c.tag) == name:
            return c
    return None


def children(el, name):
    return [c for c in el if local(c.tag) == name]


def text(el, *path):
    for name in path:
        if el is None:
            return ""
        el = child(el, name)
    return (el.text or "") if el is not None else ""


def instance_items(root):
    """Every instance <item> of a Run/DescribeInstances answer."""
    out = []
    sets = [root] if local(root.tag) == "RunInstancesResponse" else \
        [r for rs in children(root, "reservationSet")
         for r in children(rs, "item")]
    for s in sets:
        for iset in children(s, "instancesSet"):
            out.extend(children(iset, "item"))
    return out


def load_prices(path):
    with open(path, "rb") as f:
        data = json.load(f)
    if not isinstance(data, list) or len(data) > MAX_PRICES:
        raise ValueError(f"{path}: want a list of at most {MAX_PRICES}")
    rows = []
    for i, r in enumerate(data):
        if not isinstance(r, dict):
            raise ValueError(f"{path}: entry {i} is not an object")
        for k in ("zone", "type", "timestamp"):
            if not isinstance(r.get(k), str) or not 0 < len(r[k]) <= MAX_NAME:
                raise ValueError(f"{path}: entry {i}: bad '{k}'")
        price = r.get("price")
        if isinstance(price, (int, float)) and not isinstance(price, bool):
            price = f"{price:.6f}"
        elif not isinstance(price, str) or \
                not re.match(r"^\d{1,9}(\.\d{1,9})?$", price):
            raise ValueError(f"{path}: entry {i}: bad 'price'")
        product = r.get("product", "Linux/UNIX")
        if not isinstance(product, str) or len(product) > MAX_NAME:
            raise ValueError(f"{path}: entry {i}: bad 'product'")
        rows.append({"zone": r["zone"], "type": r["type"], "price": price,
                     "product": product, "t": iso_parse(r["timestamp"])})
    # Newest first, as EC2 answers; the rest only makes the order total.
    rows.sort(key=lambda r: (-r["t"], r["zone"], r["type"], r["product"]))
    return rows


class Front(fakecloud.FakeState):
    """The proxy's state.  One lock guards it all; RunInstances calls are
    serialised by launch_lock so that a token's first answer is stored
    before its replay is looked at."""

    notice_s = 120          # EC2's two-minute warning

    def __init__(self, args):
        u = urllib.parse.urlsplit(args.moto)
        if u.scheme != "http" or not u.hostname or not u.port:
            raise ValueError("--moto must be http://HOST:PORT")
        prices = load_prices(args.spot_prices) if args.spot_prices \
            else None
        super().__init__(vmemu.Emulator(args.root, "aws"))
        self.moto_url = f"http://{u.hostname}:{u.port}"
        self.moto_host, self.moto_port = u.hostname, u.port
        self.region = args.region
        self.key = args.access_key or os.environ.get("AWS_ACCESS_KEY_ID") \
            or "testing"
        self.secret = args.secret_key or \
            os.environ.get("AWS_SECRET_ACCESS_KEY") or "testing"
        self.prices = prices
        self.launch_lock = threading.Lock()
        # self.tokens: ClientToken -> (params, status, hdrs, body)
        self.instances = {}   # instance id -> record
        self.subnet_zone = {}
        self._ec2 = None

    def request_id(self):
        with self.lock:
            n = self.next_seq()
        h = hashlib.sha256(f"aws_front:{n}".encode()).hexdigest()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"

    def ec2(self):
        """boto3's EC2 client talking to moto directly (made once)."""
        with self.lock:
            if self._ec2 is None:
                import boto3
                self._ec2 = boto3.client(
                    "ec2", endpoint_url=self.moto_url,
                    region_name=self.region, aws_access_key_id=self.key,
                    aws_secret_access_key=self.secret)
            return self._ec2

    # --- faults -----------------------------------------------------------

    def zone_of(self, p):
        """The zone a RunInstances lands in: Placement, else the subnet's,
        else moto's default (the region's first zone)."""
        z = p.get("Placement.AvailabilityZone")
        if z:
            return z
        subnet = p.get("SubnetId") or p.get("NetworkInterface.1.SubnetId")
        if subnet:
            with self.lock:
                z = self.subnet_zone.get(subnet)
            if z is None:
                try:
                    r = self.ec2().describe_subnets(SubnetIds=[subnet])
                    z = r["Subnets"][0]["AvailabilityZone"]
                except Exception:
                    z = ""
                with self.lock:
                    if len(self.subnet_zone) < 4096:
                        self.subnet_zone[subnet] = z
            if z:
                return z
        return self.region + "a"

    def check_faults(self, p):
        zone, shape = self.zone_of(p), p.get("InstanceType", "m1.small")
        with self.lock:
            cap = list(self.faults.capacity)
            quota = list(self.faults.quota)

        def blocked(z):
            return any(c in (z, "*", f"{z}/{shape}", f"*/{shape}")
                       for c in cap)
        if blocked(zone):
            others = [self.region + c for c in "abcdef"
                      if self.region + c != zone and
                      not blocked(self.region + c)][:3]
            msg = (f"We currently do not have sufficient {shape} capacity "
                   f"in the Availability Zone you requested ({zone}). Our "
                   "system will be working on provisioning additional "
                   f"capacity. You can currently get {shape} capacity by "
                   "not specifying an Availability Zone in your request or "
                   f"choosing {', '.join(others)}.")
            raise Fault(500, "InsufficientInstanceCapacity", msg)
        if shape in quota or "*" in quota:
            raise Fault(400, "VcpuLimitExceeded",
                        "You have requested more vCPU capacity than your "
                        "current vCPU limit of 0 allows for the instance "
                        "bucket that the specified instance type belongs "
                        "to. Please visit http://aws.amazon.com/contact-us/"
                        "ec2-request to request an adjustment to this "
                        "limit.")

    # --- launches and ends ------------------------------------------------

    def launched(self, pairs, body):
        """Record the instances of an accepted RunInstances and boot them."""
        p = dict(pairs)
        try:
            root = ET.fromstring(body)
        except ET.ParseError as exc:
            print(f"aws_front: moto's RunInstances answer: {exc}",
                  file=sys.stderr)
            return
        script = b""
        if p.get("UserData"):
            try:
                script = base64.b64decode(p["UserData"], validate=True)
            except (binascii.Error, ValueError):
                print("aws_front: UserData is not base64; the VM runs an "
                      "empty script", file=sys.stderr)
        now = time.time()
        for item in instance_items(root):
            iid = text(item, "instanceId")
            tags = {text(t, "key"): text(t, "value")
                    for ts in children(item, "tagSet")
                    for t in children(ts, "item")}
            rec = {"id": iid, "zone": text(item, "placement",
                                           "availabilityZone"),
                   "shape": text(item, "instanceType"),
                   "spot": text(item, "instanceLifecycle") == "spot",
                   "node": tags.get("tenbin-node", ""),
                   "instance": tags.get("tenbin-instance", ""),
                   "launched": now, "ended": None, "interrupted": False,
                   "gone": False}
            with self.lock:
                self.instances[iid] = rec
                self.stats["launched"] += 1
                never = self.faults.take_never_boot()
                delay = self.faults.boot_delay_s
            try:
                self.emu.start(iid, script, boot_delay_s=delay,
                               never_boot=never,
                               info={"zone": rec["zone"],
                                     "shape": rec["shape"]})
            except (ValueError, OSError) as exc:
                print(f"aws_front: vm {iid}: {exc}", file=sys.stderr)

    def ended(self, ids):
        """Instances moto has terminated: stop their VMs (in the
        background, as EC2 answers before the VM is down)."""
        now, stop = time.time(), []
        with self.lock:
            for iid in ids:
                rec = self.instances.get(iid)
                if rec is not None and rec["ended"] is None:
                    rec["ended"] = now
                    self.stats["terminated"] += 1
                    stop.append(iid)
        for iid in stop:
            fakecloud.stop_later(self.emu, iid)

    def interrupt(self, iid, notice):
        with self.lock:
            rec = self.instances.get(iid)
            if rec is None:
                raise control_error(404, f"interrupt: no vm '{iid[:64]}'")
            if rec["ended"] is not None or rec["interrupted"]:
                raise control_error(409, f"interrupt: vm '{iid[:64]}' is "
                                    "ending")
            rec["interrupted"] = True
        try:
            self.emu.interrupt(iid, notice, self.interrupted_gone)
        except (KeyError, ValueError) as exc:
            raise control_error(409, f"interrupt: {exc}")
        return {"vm": iid, "notice_s": notice,
                "end": vmemu.rfc3339(time.time() + notice)}

    def interrupted_gone(self, iid):
        """The notice is over and the VM stopped: terminate it in moto."""
        try:
            self.ec2().terminate_instances(InstanceIds=[iid])
        except Exception as exc:
            print(f"aws_front: terminating {iid} in moto: {exc}",
                  file=sys.stderr)
        with self.lock:
            rec = self.instances[iid]
            rec["gone"] = True
            if rec["ended"] is None:
                rec["ended"] = time.time()
                self.stats["terminated"] += 1

    # --- answers moto's would get wrong -----------------------------------

    def rewrite_describe(self, body):
        """Pending for young instances, the spot reason for interrupted
        ones.  moto's bytes pass untouched when nothing applies."""
        now = time.time()
        with self.lock:
            pend = self.faults.pending_s
            young = {i for i, r in self.instances.items()
                     if now - r["launched"] < pend}
            gone = {i for i, r in self.instances.items() if r["gone"]}
        if not any(i.encode() in body for i in young | gone):
            return body
        try:
            root = ET.fromstring(body)
        except ET.ParseError:
            return body
        ns = root.tag[1:].split("}")[0] if root.tag.startswith("{") else ""
        for item in instance_items(root):
            iid = text(item, "instanceId")
            st = child(item, "instanceState")
            if iid in young and st is not None and \
                    text(st, "code") == "16":
                child(st, "code").text = "0"
                child(st, "name").text = "pending"
            if iid in gone:
                sr = child(item, "stateReason")
                if sr is None:
                    sr = ET.SubElement(item, f"{{{ns}}}stateReason" if ns
                                       else "stateReason")
                for name, val in (
                        ("code", "Server.SpotInstanceTermination"),
                        ("message", "Server.SpotInstanceTermination: "
                                    "Spot instance termination")):
                    el = child(sr, name)
                    if el is None:
                        el = ET.SubElement(sr, f"{{{ns}}}{name}" if ns
                                           else name)
                    el.text = val
        if ns:
            ET.register_namespace("", ns)
        return XML_DECL + ET.tostring(root, encoding="unicode").encode()

    def spot_history(self, pairs):
        """DescribeSpotPriceHistory from the --spot-prices table."""
        p = dict(pairs)
        types = {v for k, v in pairs if re.match(r"^InstanceType\.\d+$", k)}
        prods = {v for k, v in pairs
                 if re.match(r"^ProductDescription\.\d+$", k)}
        zone = p.get("AvailabilityZone")
        filters = {}
        for k, v in pairs:
            m = re.match(r"^Filter\.(\d+)\.Name$", k)
            if m:
                vals = [pv for pk, pv in pairs
                        if re.match(rf"^Filter\.{m.group(1)}\.Value\.\d+$",
                                    pk)]
                filters[v] = vals
        fields = {"availability-zone": "zone", "instance-type": "type",
                  "product-description": "product", "spot-price": "price",
                  "timestamp": "ts"}
        for name in filters:
            if name not in fields:
                raise Fault(400, "InvalidParameterValue",
                            f"The filter '{name[:64]}' is invalid")
        try:
            start = iso_parse(p["StartTime"]) if p.get("StartTime") \
                else None
            end = iso_parse(p["EndTime"]) if p.get("EndTime") else None
        except ValueError as exc:
            raise Fault(400, "InvalidParameterValue", str(exc))
        size = 1000
        if p.get("MaxResults"):
            if not p["MaxResults"].isdigit() or \
                    not 0 <= int(p["MaxResults"]) <= 1000:
                raise Fault(400, "InvalidParameterValue",
                            "Value for parameter MaxResults is invalid. "
                            "Valid range is 0 to 1000.")
            size = int(p["MaxResults"]) or 1000
        # A token is bound to the question it pages through.
        question = sorted((k, v) for k, v in pairs
                          if k not in ("MaxResults", "NextToken"))
        qhash = hashlib.sha256(json.dumps(question).encode()).hexdigest()
        offset = 0
        if p.get("NextToken"):
            try:
                tok = json.loads(base64.urlsafe_b64decode(
                    p["NextToken"].encode()[:512] + b"=="))
                offset = int(tok["o"])
                if tok["q"] != qhash[:16] or offset < 0:
                    raise ValueError
            except (ValueError, KeyError, TypeError, binascii.Error):
                raise Fault(400, "InvalidPaginationToken",
                            "The specified pagination token is not valid "
                            "or is expired.")

        def match(r):
            if types and r["type"] not in types:
                return False
            if prods and r["product"] not in prods:
                return False
            if zone and r["zone"] != zone:
                return False
            row = dict(r, ts=iso_format(r["t"]))
            return all(any(fnmatch.fnmatchcase(row[fields[n]], v)
                           for v in vals) for n, vals in filters.items())
        rows = [r for r in self.prices if match(r)]
        if end is not None:
            rows = [r for r in rows if r["t"] <= end]
        if start is not None:
            # Keep the price in effect at start: the newest of each series
            # at or before it (rows are newest first).
            seen, kept = set(), []
            for r in rows:
                series = (r["zone"], r["type"], r["product"])
                if r["t"] >= start:
                    kept.append(r)
                elif series not in seen:
                    seen.add(series)
                    kept.append(r)
                if r["t"] <= start:
                    seen.add(series)
            rows = kept
        page = rows[offset:offset + size]
        items = "".join(
            "<item>"
            f"<availabilityZone>{escape(r['zone'])}</availabilityZone>"
            f"<instanceType>{escape(r['type'])}</instanceType>"
            f"<productDescription>{escape(r['product'])}"
            "</productDescription>"
            f"<spotPrice>{escape(r['price'])}</spotPrice>"
            f"<timestamp>{iso_format(r['t'])}</timestamp>"
            "</item>" for r in page)
        if offset + size < len(rows):
            nxt = base64.urlsafe_b64encode(json.dumps(
                {"o": offset + size, "q": qhash[:16]}).encode()).decode()
            nxt = f"<nextToken>{nxt.rstrip('=')}</nextToken>"
        else:
            nxt = "<nextToken/>"
        body = (f'<DescribeSpotPriceHistoryResponse xmlns="{XMLNS}">'
                f"<requestId>{self.request_id()}</requestId>"
                f"<spotPriceHistorySet>{items}</spotPriceHistorySet>{nxt}"
                "</DescribeSpotPriceHistoryResponse>")
        return XML_DECL + body.encode()

    def fake_vms(self):
        now = time.time()
        procs = {v["id"]: v for v in self.emu.vms()}
        with self.lock:
            pend = self.faults.pending_s
            out = []
            for r in self.instances.values():
                if r["ended"] is not None:
                    state = "terminated"
                elif now - r["launched"] < pend:
                    state = "pending"
                else:
                    state = "running"
                v = procs.get(r["id"], {})
                out.append({"id": r["id"], "state": state,
                            "zone": r["zone"], "shape": r["shape"],
                            "spot": r["spot"], "node": r["node"],
                            "instance": r["instance"],
                            "launched": r["launched"], "ended": r["ended"],
                            "pid": v.get("pid"),
                            "booted": v.get("booted", False),
                            "interrupted": r["interrupted"]})
            return out


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "aws_front"
    name = "aws_front"

    def log_message(self, fmt, *args):
        pass  # one line per request is written by reply()

    def reply(self, status, ctype, body, headers=(), note=""):
        self.send_response_only(status)
        seen = set()
        for k, v in headers:
            seen.add(k.lower())
            self.send_header(k, v)
        if "date" not in seen:
            self.send_header("Date", self.date_time_string())
        if ctype and "content-type" not in seen:
            self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        print(f"aws_front: {self.command} {self.path[:120]} {note} "
              f"-> {status}", file=sys.stderr, flush=True)

    def reply_json(self, status, obj):
        self.reply(status, "application/json",
                   json.dumps(obj).encode() + b"\n")

    def reply_fault(self, f, note=""):
        body = (f"<Response><Errors><Error><Code>{escape(f.code)}</Code>"
                f"<Message>{escape(f.message)}</Message></Error></Errors>"
                f"<RequestID>{self.server.st.request_id()}</RequestID>"
                "</Response>")
        self.reply(f.status, "text/xml;charset=UTF-8",
                   XML_DECL + body.encode(), note=note)

    def read_body(self):
        if self.headers.get("Transfer-Encoding"):
            raise BadControl(411, "send a Content-Length, not chunks")
        n = self.headers.get("Content-Length", "0").strip() or "0"
        if not n.isdigit() or int(n) > MAX_BODY:
            raise BadControl(413, f"body over {MAX_BODY} bytes or bad "
                             "Content-Length")
        return self.rfile.read(int(n)) if int(n) else b""

    def do_GET(self):
        self.dispatch()

    do_POST = do_PUT = do_DELETE = do_HEAD = do_GET

    def dispatch(self):
        try:
            body = self.read_body()
        except BadControl as exc:
            self.close_connection = True
            self.reply(exc.status, "text/plain", str(exc).encode() + b"\n")
            return
        path = urllib.parse.urlsplit(self.path).path
        st = self.server.st
        try:
            if path.startswith("/_fake/"):
                status, out, _ = fakecloud.control(st, self.command, path,
                                                   body)
                self.reply_json(status, out)
            elif path.startswith("/_meta/"):
                status, ctype, out = fakecloud.metadata(
                    st.emu, self.command, self.path, self.headers)
                self.reply(status, ctype, out, note="meta")
            else:
                self.ec2(body)
        except fakecloud.ApiError as exc:
            self.reply_json(exc.status, exc.body)
        except BrokenPipeError:
            self.close_connection = True

    def ec2(self, body):
        f = self.server.st
        pairs = []
        u = urllib.parse.urlsplit(self.path)
        raw = u.query if self.command == "GET" else \
            body.decode("utf-8", "replace")
        if not u.path.startswith("/moto-api/"):
            try:
                pairs = urllib.parse.parse_qsl(raw, keep_blank_values=True,
                                               max_num_fields=MAX_FIELDS)
            except ValueError:
                pairs = []  # moto judges it
        action = dict(pairs).get("Action", "")[:MAX_NAME]
        if action and not body.isascii():
            # A form body is ASCII once percent-encoded; moto 5.2.1 hangs
            # on raw UTF-8 bytes instead of refusing them.
            return self.reply_fault(
                Fault(400, "MalformedQueryString",
                      "The request body is not percent-encoded ASCII."),
                note=action)
        if action:
            f.count(action)
            if f.take_throttle():
                return self.reply_fault(
                    Fault(503, "RequestLimitExceeded",
                          "Request limit exceeded."), note=action)
        try:
            if action == "RunInstances":
                return self.run_instances(pairs, body)
            if action == "DescribeSpotPriceHistory" and f.prices is not None:
                return self.reply(200, "text/xml;charset=UTF-8",
                                  f.spot_history(pairs), note=action)
        except Fault as exc:
            return self.reply_fault(exc, note=action)
        status, headers, out = self.forward(body)
        if status == 200 and action == "DescribeInstances":
            out = f.rewrite_describe(out)
        elif status == 200 and action == "TerminateInstances":
            try:
                root = ET.fromstring(out)
                f.ended([text(i, "instanceId")
                         for s in children(root, "instancesSet")
                         for i in children(s, "item")])
            except ET.ParseError:
                pass
        self.reply(status, None, out, headers, note=action)

    def run_instances(self, pairs, body):
        f = self.server.st
        p = dict(pairs)
        token = p.get("ClientToken", "")
        if len(token) > MAX_TOKEN_LEN or not token.isascii():
            raise Fault(400, "InvalidParameterValue",
                        "Value for parameter ClientToken is invalid: at "
                        f"most {MAX_TOKEN_LEN} ASCII characters.")
        params = sorted(pairs)
        with f.launch_lock:
            if token:
                with f.lock:
                    first = f.tokens.get(token)
                if first is not None:
                    if first[0] != params:
                        raise Fault(400, "IdempotentParameterMismatch",
                                    "Arguments on this idempotent request "
                                    "are inconsistent with arguments used "
                                    "in previous request(s).")
                    with f.lock:
                        f.stats["deduplicated"] += 1
                    return self.reply(first[1], None, first[3], first[2],
                                      note="RunInstances (replay)")
            try:
                f.check_faults(p)
            except Fault:
                with f.lock:
                    f.stats["refused"] += 1
                raise
            status, headers, out = self.forward(body)
            if status == 200:
                f.launched(pairs, out)
                if token:
                    with f.lock:
                        if len(f.tokens) >= MAX_TOKENS:
                            del f.tokens[next(iter(f.tokens))]
                        f.tokens[token] = (params, status, headers, out)
        self.reply(status, None, out, headers, note="RunInstances")

    def forward(self, body):
        """The request as it came, to moto; its answer, read whole."""
        f = self.server.st
        conn = http.client.HTTPConnection(f.moto_host, f.moto_port,
                                          timeout=30)
        try:
            conn.putrequest(self.command, self.path, skip_host=True,
                            skip_accept_encoding=True)
            for k, v in self.headers.items():
                conn.putheader(k, v)
            conn.endheaders(body if body else None)
            r = conn.getresponse()
            out = r.read()
            hop = ("connection", "keep-alive", "transfer-encoding",
                   "content-length", "server", "date")
            headers = [(k, v) for k, v in r.getheaders()
                       if k.lower() not in hop]
            return r.status, headers, out
        except (OSError, http.client.HTTPException) as exc:
            return 502, [("Content-Type", "text/plain")], \
                f"aws_front: moto at {f.moto_url}: {exc}\n".encode()
        finally:
            conn.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--moto", required=True)
    fakecloud.add_server_args(ap)
    ap.add_argument("--access-key")
    ap.add_argument("--secret-key")
    ap.add_argument("--region", default="us-east-1")
    ap.add_argument("--spot-prices")
    args = ap.parse_args()
    fakecloud.check_ranges(ap, args, ())
    try:
        front = Front(args)
    except (ValueError, OSError) as exc:
        print(f"aws_front: {exc}", file=sys.stderr)
        return 2
    fakecloud.serve(front, Handler, args.port, args.port_file,
                    note=f", moto at {front.moto_url}", tick=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
