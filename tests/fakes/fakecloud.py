"""What the cloud fakes share (gce_fake.py, azure_fake.py and, where it
fits a proxy, aws_front.py): the test controls under /_fake/ (faults,
interrupt, vms, stats, instances), the instance metadata routes /_meta/<vm>/...
into the VM emulator (vmemu.py), the bookkeeping every fake keeps
(a lock, faults, stats, VM ids, tokens), an HTTP handler that bounds
every request and logs one line per answer, and the serving loop:
port file, ticker, SIGTERM.

What a provider documents (its routes, error shapes, tokens, resources)
stays in its fake; a fake plugs it in through the hooks below
(FakeState.advance/interrupt/vm_row/all_vms, Handler.route/refusal).

Ownership: a FakeState owns its Emulator from serve() on; serve()
closes it.  Loopback only, standard library only.
"""
import http.server
import json
import os
import signal
import sys
import threading
import time
import traceback
import urllib.parse

MAX_FAULT_ENTRIES = 256     # capacity and quota entries
MAX_FAULT_NAME = 200        # one zone, shape or "zone/shape"
MAX_CALL_NAMES = 1000       # distinct actions counted in /_fake/stats
MAX_QUERY_FIELDS = 50
MAX_NOTICE_S = 3600
MAX_ADD_NAME = 64           # a VM added by POST /_fake/instances
MAX_ADD_FIELD = 256         # its zone, shape, address, one label's value
MAX_ADD_LABELS = 50         # Azure's tag cap; GCE's is higher


class ApiError(Exception):
    """An answer that is an error: HTTP status, JSON body, headers."""

    def __init__(self, status, body, headers=None):
        super().__init__(status)
        self.status = status
        self.body = body
        self.headers = headers or {}


def control_error(status, message):
    return ApiError(status, {"error": message})


def parse_json(body):
    """A control request's JSON body (none is {}), or a 400."""
    try:
        return json.loads(body or b"{}")
    except (ValueError, RecursionError):
        raise control_error(400, "body is not JSON")


# --- faults ------------------------------------------------------------------

class Faults:
    """What POST /_fake/faults sets: zones or shapes without capacity or
    quota, calls to throttle, VMs that boot late or never, and how long
    a new VM stays pending."""

    def __init__(self, pending_s=0.0):
        self.capacity = []
        self.quota = []
        self.throttle = 0
        self.boot_delay_s = 0.0
        self.never_boot = 0
        self.pending_s = float(pending_s)

    def as_json(self):
        return {"capacity": list(self.capacity), "quota": list(self.quota),
                "throttle": self.throttle, "boot_delay_s": self.boot_delay_s,
                "never_boot": self.never_boot, "pending_s": self.pending_s}

    def update(self, d):
        """Apply a POST /_fake/faults body; raises ValueError naming the
        field, leaving every field as it was."""
        if not isinstance(d, dict):
            raise ValueError("the body must be a JSON object")
        new = self.as_json()
        for k, v in d.items():
            if k in ("capacity", "quota"):
                if not isinstance(v, list) or len(v) > MAX_FAULT_ENTRIES or \
                        not all(isinstance(s, str) and
                                0 < len(s) <= MAX_FAULT_NAME for s in v):
                    raise ValueError(f"{k} must be a list of strings")
                v = list(v)
            elif k in ("throttle", "never_boot"):
                if isinstance(v, bool) or not isinstance(v, int) or \
                        not 0 <= v <= 1000000:
                    raise ValueError(f"{k} must be an integer >= 0")
            elif k in ("boot_delay_s", "pending_s"):
                if isinstance(v, bool) or not isinstance(v, (int, float)) \
                        or not 0 <= v <= 3600:
                    raise ValueError(f"{k} must be seconds in 0..3600")
                v = float(v)
            else:
                raise ValueError(f"unknown field {k[:64]}")
            new[k] = v
        for k, v in new.items():
            setattr(self, k, v)

    # Each take_* spends one of its fault, under the caller's lock.
    def take_throttle(self):
        if self.throttle <= 0:
            return False
        self.throttle -= 1
        return True

    def take_never_boot(self):
        if self.never_boot <= 0:
            return False
        self.never_boot -= 1
        return True


# --- the state every fake keeps ----------------------------------------------

class FakeState:
    """A fake's bookkeeping under one lock.  A fake subclasses it and
    defines advance(now) (timed transitions), all_vms() (live and gone,
    each with seq, vm_id and interrupted), vm_row(vm, now) (its line in
    /_fake/vms) and interrupt(vm, notice_s) (POST /_fake/interrupt,
    answering a dict or raising ApiError).  A fake whose VMs are no
    such objects (aws_front) defines fake_vms() itself; one with
    operations keeps them in self.ops, for trim_ops."""

    notice_s = 30           # an interruption's notice when none is asked

    def __init__(self, emu, pending_s=0.0):
        self.emu = emu
        self.base = ""      # http://127.0.0.1:PORT once serving
        self.lock = threading.RLock()
        self.faults = Faults(pending_s)
        self.tokens = {}
        self.vm_ids = set()
        self.seq = 0
        self.stats = {"calls": {}, "launched": 0, "deduplicated": 0,
                      "throttled": 0, "refused": 0, "terminated": 0}

    def next_seq(self):
        self.seq += 1
        return self.seq

    def advance(self, now):
        pass

    def count(self, action):
        """One more call of action in /_fake/stats."""
        with self.lock:
            calls = self.stats["calls"]
            if action in calls or len(calls) < MAX_CALL_NAMES:
                calls[action] = calls.get(action, 0) + 1

    def take_throttle(self):
        """True when this call is to be throttled (and counted so)."""
        with self.lock:
            if not self.faults.take_throttle():
                return False
            self.stats["throttled"] += 1
            return True

    def new_vm_id(self, name):
        """An emulator id for a VM called name: the name, or name.N when
        a VM of that name came before (the emulator keeps their
        directories apart)."""
        vm_id, k = name, 1
        while vm_id in self.vm_ids:
            k += 1
            vm_id = f"{name}.{k}"
        self.vm_ids.add(vm_id)
        return vm_id

    def trim_ops(self, cap):
        """At cap operations in self.ops, drop the older half of those
        done (by t_done) and return them; a caller still at cap refuses
        the new one."""
        if len(self.ops) < cap:
            return []
        now = time.time()
        done = [k for k, o in self.ops.items() if o.t_done <= now]
        return [self.ops.pop(k) for k in done[:max(1, len(done) // 2)]]

    def keep_token(self, token, entry, now, cap):
        """Store an access token's entry (expiry first); at cap, the
        expired go first, else the oldest tenth."""
        if len(self.tokens) >= cap:
            for k in [k for k, v in self.tokens.items() if v[0] <= now] or \
                    list(self.tokens)[:cap // 10]:
                self.tokens.pop(k, None)
        self.tokens[token] = entry

    def add_instance(self, req):
        """POST /_fake/instances: a running VM that someone else (a
        cluster's manager) launched, from instance_request's dict; boots
        nothing in the emulator.  A fake that has them overrides this."""
        raise control_error(404, "this fake adds no instances")

    def remove_instance(self, name):
        """DELETE /_fake/instances/NAME: that VM is gone at once."""
        raise control_error(404, "this fake adds no instances")

    def fake_vms(self):
        """GET /_fake/vms: every VM in launch order, with its emulator
        process."""
        now = time.time()
        procs = {v["id"]: v for v in self.emu.vms()}
        with self.lock:
            self.advance(now)
            out = []
            for vm in sorted(self.all_vms(), key=lambda v: v.seq):
                p = procs.get(vm.vm_id) or {}
                row = self.vm_row(vm, now)
                row.update(pid=p.get("pid"), booted=p.get("booted", False),
                           interrupted=vm.interrupted)
                out.append(row)
            return out


def stop_later(emu, vm_id):
    """Stop a VM's processes in the background: a provider answers a
    delete before the machine is down."""
    def stop():
        try:
            emu.stop(vm_id)
        except KeyError:
            pass
    threading.Thread(target=stop, daemon=True).start()


# --- the control endpoints ---------------------------------------------------

def interrupt_request(req, default_notice):
    """(vm, notice_s) from a POST /_fake/interrupt body, or a 400."""
    if not isinstance(req, dict) or not isinstance(req.get("vm"), str):
        raise control_error(400, "want {\"vm\": name, \"notice_s\": x}")
    notice = req.get("notice_s", default_notice)
    if isinstance(notice, bool) or not isinstance(notice, (int, float)) or \
            not 0 <= notice <= MAX_NOTICE_S:
        raise control_error(400, f"notice_s must be 0..{MAX_NOTICE_S}")
    return req["vm"], notice


def _short_str(req, field, required=False, cap=MAX_ADD_FIELD):
    v = req.get(field)
    if v is None and not required:
        return None
    if not isinstance(v, str) or not 0 < len(v) <= cap or \
            any(ord(c) < 0x20 for c in v):
        raise control_error(400, f"{field} must be a string of 1..{cap} "
                            "printable characters")
    return v


def instance_request(req):
    """The dict of a POST /_fake/instances body {"name", "zone",
    "shape", "labels" (or "tags"), "network_ip", "group" (Azure's
    resource group)}, each bounded, or a 400 naming the field."""
    if not isinstance(req, dict):
        raise control_error(400, "want {\"name\": ..., \"zone\": ...}")
    known = {"name", "zone", "shape", "labels", "tags", "network_ip",
             "group"}
    extra = sorted(set(req) - known)
    if extra:
        raise control_error(400, f"unknown field {extra[0][:100]}")
    out = {"name": _short_str(req, "name", True, MAX_ADD_NAME),
           "zone": _short_str(req, "zone"),
           "shape": _short_str(req, "shape"),
           "network_ip": _short_str(req, "network_ip"),
           "group": _short_str(req, "group")}
    if "labels" in req and "tags" in req:
        raise control_error(400, "labels or tags, not both")
    field = "tags" if "tags" in req else "labels"
    labels = req.get(field, {})
    if not isinstance(labels, dict) or len(labels) > MAX_ADD_LABELS:
        raise control_error(400, f"{field} must be an object of at most "
                            f"{MAX_ADD_LABELS} entries")
    for k, v in labels.items():
        if not 0 < len(k) <= MAX_ADD_FIELD or not isinstance(v, str) or \
                len(v) > MAX_ADD_FIELD:
            raise control_error(400, f"{field}: each key 1..{MAX_ADD_FIELD}"
                                f" characters, each value a string of at "
                                f"most {MAX_ADD_FIELD}")
    out["labels"] = dict(labels)
    return out


def control(st, method, path, body):
    """(status, body, headers) of a control endpoint: no auth, never
    throttled, never counted."""
    if path == "/_fake/faults" and method in ("GET", "POST"):
        with st.lock:
            if method == "POST":
                try:
                    st.faults.update(parse_json(body))
                except ValueError as e:
                    raise control_error(400, str(e))
            return 200, st.faults.as_json(), None
    if path == "/_fake/interrupt" and method == "POST":
        vm, notice = interrupt_request(parse_json(body), st.notice_s)
        return 200, st.interrupt(vm, notice), None
    if path == "/_fake/vms" and method == "GET":
        return 200, st.fake_vms(), None
    if path == "/_fake/instances" and method == "POST":
        return 200, st.add_instance(instance_request(parse_json(body))), None
    if path.startswith("/_fake/instances/") and method == "DELETE":
        name = urllib.parse.unquote(path[len("/_fake/instances/"):])
        if not 0 < len(name) <= MAX_ADD_NAME:
            raise control_error(400, f"a name of 1..{MAX_ADD_NAME} characters")
        return 200, st.remove_instance(name), None
    if path == "/_fake/stats" and method == "GET":
        with st.lock:
            return 200, json.loads(json.dumps(st.stats)), None
    raise control_error(404, f"no control endpoint {method} {path[:100]}")


def metadata(emu, method, target, headers):
    """(status, content type, bytes) of /_meta/<vm>/PATH?QUERY: the
    emulator's metadata service as that VM sees it."""
    rest = target[len("/_meta/"):]
    vm_id, _, tail = rest.partition("/")
    return emu.metadata(urllib.parse.unquote(vm_id), method, "/" + tail,
                        headers)


# --- HTTP --------------------------------------------------------------------

class Handler(http.server.BaseHTTPRequestHandler):
    """Bounds every request, answers /_meta/ and /_fake/ itself and the
    rest through route(); logs "NAME: METHOD TARGET -> STATUS".  A fake
    sets name, max_body, max_path and json_type, and defines
    route(path, query, body) -> (status, body, headers) and
    refusal(status) -> ApiError in its provider's error shape for 400
    (query), 411, 413, 414 and 500."""

    protocol_version = "HTTP/1.1"
    timeout = 60               # a client that stalls loses its thread
    name = "fake"
    max_body = 1 << 20
    max_path = 4096
    json_type = "application/json; charset=utf-8"
    meta_headers = None        # added to every metadata answer

    def log_message(self, fmt, *args):
        sys.stderr.write(f"{self.name}: %s\n" % (fmt % args))

    def log_request(self, code="-", size="-"):
        if isinstance(code, http.HTTPStatus):
            code = code.value
        self.log_message("%s %s -> %s", self.command, self.path[:300], code)

    def do_GET(self):
        self.handle_any()

    do_POST = do_PUT = do_DELETE = do_PATCH = do_GET

    def answer_headers(self):
        """Headers every answer carries (a fake's request ids)."""
        return {}

    def send(self, status, body, ctype=None, headers=None):
        if body is None:
            body = b""
        elif isinstance(body, (dict, list)):
            body = json.dumps(body, indent=1).encode() + b"\n"
        self.send_response(status)
        if body or status != 204:
            self.send_header("Content-Type", ctype or self.json_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in self.answer_headers().items():
            self.send_header(k, v)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def read_body(self):
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            raise self.refusal(411)
        n = self.headers.get("Content-Length", "0").strip()
        if not n.isdigit() or int(n) > self.max_body:
            self.close_connection = True
            raise self.refusal(413)
        return self.rfile.read(int(n)) if int(n) else b""

    def handle_any(self):
        st = self.server.st
        try:
            if len(self.path) > self.max_path:
                self.close_connection = True
                raise self.refusal(414)
            body = self.read_body()
            u = urllib.parse.urlsplit(self.path)
            if u.path.startswith("/_meta/"):
                status, ctype, data = metadata(
                    st.emu, self.command,
                    u.path + ("?" + u.query if u.query else ""),
                    self.headers)
                self.send(status, data, ctype=ctype,
                          headers=self.meta_headers)
                return
            if u.path.startswith("/_fake/"):
                status, out, headers = control(st, self.command, u.path,
                                               body)
                self.send(status, out, headers=headers)
                return
            try:
                q = urllib.parse.parse_qs(u.query, keep_blank_values=True,
                                          max_num_fields=MAX_QUERY_FIELDS)
            except ValueError:
                raise self.refusal(400)
            query = {k: v[0] for k, v in q.items()}
            status, out, headers = self.route(u.path, query, body)
            self.send(status, out, headers=headers)
        except ApiError as e:
            self.send(e.status, e.body, headers=e.headers)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception:
            traceback.print_exc(file=sys.stderr)
            e = self.refusal(500)
            self.send(e.status, e.body, headers=e.headers)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64


# --- start-up ----------------------------------------------------------------

def add_server_args(ap):
    """The arguments every fake takes: --root, --port-file, --port."""
    ap.add_argument("--root", required=True,
                    help="the VMs' directories, root/<vm>")
    ap.add_argument("--port-file", required=True,
                    help="written (atomically) once the fake listens")
    ap.add_argument("--port", type=int, default=0)


def check_ranges(ap, args, ranges):
    """ap.error for the first (flag, value, lo, hi) out of its range;
    --port is always checked."""
    for name, v, lo, hi in list(ranges) + [("--port", args.port, 0, 65535)]:
        if not lo <= v <= hi:
            ap.error(f"{name} must be in {lo}..{hi}")


def write_port_file(path, port):
    """The port, written whole or not at all: a test polls for it."""
    part = f"{path}.tmp{os.getpid()}"
    with open(part, "w") as f:
        f.write(f"{port}\n")
    os.replace(part, path)


def serve(st, handler, port, port_file, note="", tick=True):
    """Serve st on 127.0.0.1:port until SIGTERM or SIGINT, advancing its
    timed transitions every 50 ms (tick), then stop every VM (the
    emulator is closed) and return."""
    srv = Server(("127.0.0.1", port), handler)
    srv.st = st
    port = srv.server_address[1]
    st.base = f"http://127.0.0.1:{port}"
    st.emu.set_base(st.base)

    # The handler only sets a flag: a handler that took a lock (as
    # Event.set does) would deadlock when the signal lands while the main
    # thread holds that very lock.
    stopping = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda s, f: stopping.append(s))

    def ticker():
        while not stopping:
            time.sleep(0.05)
            with st.lock:
                st.advance(time.time())

    threading.Thread(target=srv.serve_forever, daemon=True).start()
    if tick:
        threading.Thread(target=ticker, daemon=True).start()
    write_port_file(port_file, port)
    print(f"{handler.name}: listening on {st.base}{note}", file=sys.stderr,
          flush=True)
    while not stopping:
        time.sleep(0.2)
    print(f"{handler.name}: stopping", file=sys.stderr, flush=True)
    srv.shutdown()
    srv.server_close()
    st.emu.close()
