#!/usr/bin/env python3
"""The VM emulator the cloud fakes share: each "VM" is its startup script
run as local processes, and its instance metadata service is served
through the fake's /_meta/<vm_id>/... routes.

A VM is a small init process (this file run with --vm-init) in a new
session.  It makes itself a child subreaper, so that every process the
script starts stays below it even when it forks away, calls setsid or
puts a job in a process group of its own (the node agent's local
runner does).  Stopping a VM therefore ends every process it started,
as terminating a real VM does, and never a process it did not start.

Ownership: an Emulator owns its VMs' processes and the directories
root/<vm_id>; close() stops every VM.  Standard library only.
"""
import ctypes
import email.utils
import errno
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.parse

PROVIDERS = ("aws", "gcp", "azure")
VM_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
MAX_SCRIPT = 1 << 20      # bytes; every provider's own limit is lower
MAX_VMS = 4096            # per emulator, so a runaway test fails loudly
MAX_TOKENS = 256          # IMDSv2 tokens kept per VM
MAX_NOTICE_S = 3600.0
STOP_GRACE_S = 3.0        # SIGTERM, then SIGKILL (the emulator)
INIT_GRACE_S = 2.0        # the init's own grace, under STOP_GRACE_S
PR_SET_CHILD_SUBREAPER = 36


def rfc3339(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def rfc1123(t):
    return email.utils.formatdate(t, usegmt=True)


def header(headers, name):
    """A header's value from a dict or an http.server message, any case."""
    if headers is None:
        return None
    getter = getattr(headers, "get", None)
    if hasattr(headers, "get_all"):
        return getter(name)
    for k, v in headers.items():
        if k.lower() == name.lower():
            return v
    return None


def proc_table():
    """{pid: ppid} of every live, non-zombie process (Linux /proc)."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: split after
        # its last ')'.
        rest = stat[stat.rfind(b")") + 2:].split()
        if len(rest) < 2 or rest[0] == b"Z":
            continue
        table[int(name)] = int(rest[1])
    return table


def descendants(root_pid):
    """Live pids below root_pid, found by walking parent links."""
    table = proc_table()
    children = {}
    for pid, ppid in table.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [root_pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def signal_pids(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


class _Vm:
    def __init__(self, vm_id, info):
        self.id = vm_id
        self.info = dict(info or {})
        self.proc = None          # the VM's init, a subprocess.Popen
        self.timer = None         # the boot delay, until it fires
        self.started = time.time()
        self.ended = None
        self.booted = False
        self.interrupted = False
        self.end_at = None        # when an interruption ends the VM
        self.notice_timer = None
        self.incarnation = 1      # Azure's DocumentIncarnation
        self.tokens = {}          # IMDSv2 token -> expiry
        self.token_seq = 0
        self.stop_lock = threading.Lock()


class Emulator:
    """VMs of one provider under one directory.  Thread-safe."""

    def __init__(self, root, provider):
        if provider not in PROVIDERS:
            raise ValueError(f"provider must be one of {PROVIDERS}")
        self.root = os.path.abspath(root)
        self.provider = provider
        self.base = ""
        self._vms = {}
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._closed = False
        os.makedirs(self.root, exist_ok=True)

    def set_base(self, url):
        self.base = url.rstrip("/")

    # --- life cycle -------------------------------------------------------

    def start(self, vm_id, script_text, boot_delay_s=0.0, never_boot=False,
              info=None):
        """Make vm_id "running" and boot its script after boot_delay_s.

        info, optional, tells the metadata service more about the VM:
        {"zone": ..., "shape": ...}.  Raises ValueError on a bad id, a
        taken id, an oversized script or too many VMs.
        """
        if not isinstance(vm_id, str) or not VM_ID_RE.match(vm_id):
            raise ValueError(f"bad vm id {vm_id!r}")
        if isinstance(script_text, str):
            script_text = script_text.encode("utf-8", "surrogateescape")
        if script_text is None:
            script_text = b""
        if len(script_text) > MAX_SCRIPT:
            raise ValueError(f"script of vm {vm_id} over {MAX_SCRIPT} bytes")
        delay = max(0.0, min(float(boot_delay_s or 0.0), 3600.0))
        vmdir = os.path.join(self.root, vm_id)
        with self._lock:
            if self._closed:
                raise ValueError("emulator closed")
            if vm_id in self._vms:
                raise ValueError(f"vm {vm_id} exists")
            if len(self._vms) >= MAX_VMS:
                raise ValueError(f"over {MAX_VMS} vms")
            vm = _Vm(vm_id, info)
            self._vms[vm_id] = vm
        os.makedirs(vmdir, exist_ok=True)
        path = os.path.join(vmdir, "user-data")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(script_text)
        if never_boot:
            return
        if delay > 0:
            vm.timer = threading.Timer(delay, self._boot, (vm,))
            vm.timer.daemon = True
            vm.timer.start()
        else:
            self._boot(vm)

    def _boot(self, vm):
        vmdir = os.path.join(self.root, vm.id)
        env = dict(os.environ)
        env["TENBIN_VM_ID"] = vm.id
        env["TENBIN_VM_ROOT"] = vmdir
        env["TENBIN_METADATA_URL"] = f"{self.base}/_meta/{vm.id}"
        # stop() holds stop_lock while it ends the VM: booting under it
        # means a VM is never booted after it was stopped.
        with vm.stop_lock:
            if vm.ended is not None:
                return
            with open(os.path.join(vmdir, "console.log"), "ab") as log:
                vm.proc = subprocess.Popen(
                    [sys.executable, os.path.abspath(__file__), "--vm-init",
                     os.path.join(vmdir, "user-data")],
                    cwd=vmdir, env=env, stdin=subprocess.DEVNULL,
                    stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True, close_fds=True)
            vm.booted = True

    def stop(self, vm_id):
        """End vm_id: SIGTERM its process group (its init ends every
        process below it), SIGKILL after 3 s, reap.  Idempotent."""
        with self._lock:
            vm = self._vms.get(vm_id)
        if vm is None:
            raise KeyError(vm_id)
        with vm.stop_lock:
            if vm.ended is not None:
                return
            if vm.timer is not None:
                vm.timer.cancel()
            if vm.notice_timer is not None and \
                    vm.notice_timer is not threading.current_thread():
                vm.notice_timer.cancel()
            p = vm.proc
            # The init is not reaped until p.wait() below, so its pid,
            # which is the group's id, cannot be reused while we signal.
            if p is not None and p.returncode is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except OSError:
                    pass
                try:
                    p.wait(timeout=STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    signal_pids(descendants(p.pid), signal.SIGKILL)
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except OSError:
                        pass
                    p.wait()
            with self._lock:
                vm.ended = time.time()
                self._changed.notify_all()

    def interrupt(self, vm_id, notice_s, on_gone):
        """Spot preemption: the metadata service says so at once; after
        notice_s the VM is stopped and on_gone(vm_id) is called (from a
        timer thread).  Returns False if it was already interrupted."""
        notice = max(0.0, min(float(notice_s), MAX_NOTICE_S))
        with self._lock:
            vm = self._vms.get(vm_id)
            if vm is None:
                raise KeyError(vm_id)
            if vm.ended is not None:
                raise ValueError(f"vm {vm_id} has ended")
            if vm.interrupted:
                return False
            vm.interrupted = True
            vm.end_at = time.time() + notice
            vm.incarnation += 1
            self._changed.notify_all()

        def gone():
            try:
                self.stop(vm_id)
            finally:
                try:
                    if on_gone is not None:
                        on_gone(vm_id)
                except Exception as exc:  # a fake's bug must not kill us
                    print(f"vmemu: on_gone({vm_id}): {exc!r}",
                          file=sys.stderr)

        vm.notice_timer = threading.Timer(notice, gone)
        vm.notice_timer.daemon = True
        vm.notice_timer.start()
        return True

    def vms(self):
        with self._lock:
            return [{"id": v.id, "pid": v.proc.pid if v.proc else None,
                     "started": v.started, "ended": v.ended,
                     "booted": v.booted, "interrupted": v.interrupted}
                    for v in self._vms.values()]

    def close(self):
        """Stop every VM, in parallel so that close takes one grace."""
        with self._lock:
            self._closed = True
            ids = list(self._vms)
            self._changed.notify_all()
        threads = [threading.Thread(target=self.stop, args=(i,))
                   for i in ids]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    # --- metadata ---------------------------------------------------------

    def metadata(self, vm_id, method, path_and_query, headers):
        """The instance metadata service as vm_id sees it.
        Returns (status, content_type, body_bytes)."""
        with self._lock:
            vm = self._vms.get(vm_id)
        if vm is None or vm.ended is not None:
            return 404, "text/plain", b"no such vm\n"
        if len(path_and_query) > 2048:
            return 414, "text/plain", b"uri too long\n"
        u = urllib.parse.urlsplit(path_and_query)
        query = urllib.parse.parse_qs(u.query, keep_blank_values=True)
        fn = {"aws": self._meta_aws, "gcp": self._meta_gcp,
              "azure": self._meta_azure}[self.provider]
        return fn(vm, method.upper(), u.path, query, headers)

    def _meta_aws(self, vm, method, path, query, headers):
        now = time.time()
        if path == "/latest/api/token":
            if method != "PUT":
                return 405, "text/plain", b"Method Not Allowed\n"
            ttl = header(headers, "X-aws-ec2-metadata-token-ttl-seconds")
            if ttl is None or not ttl.strip().isdigit() or \
                    not 1 <= int(ttl) <= 21600:
                return 400, "text/plain", b"Bad Request\n"
            with self._lock:
                vm.token_seq += 1
                seed = f"{vm.id}:{vm.token_seq}".encode()
                tok = "AQAEA" + hashlib.sha256(seed).hexdigest()[:51]
                vm.tokens[tok] = now + int(ttl)
                if len(vm.tokens) > MAX_TOKENS:
                    del vm.tokens[next(iter(vm.tokens))]
            return 200, "text/plain", tok.encode()
        if method != "GET":
            return 405, "text/plain", b"Method Not Allowed\n"
        tok = header(headers, "X-aws-ec2-metadata-token")
        with self._lock:
            exp = vm.tokens.get(tok) if tok else None
        if exp is None or exp < now:
            return 401, "text/plain", b"Unauthorized\n"
        info = vm.info
        md = "/latest/meta-data/"
        if path in ("/latest/meta-data", md):
            names = ["instance-id", "instance-type", "placement/", "spot/"]
            return 200, "text/plain", "\n".join(names).encode()
        if path == md + "instance-id":
            return 200, "text/plain", vm.id.encode()
        if path == md + "instance-type" and info.get("shape"):
            return 200, "text/plain", str(info["shape"]).encode()
        if path == md + "placement/availability-zone" and info.get("zone"):
            return 200, "text/plain", str(info["zone"]).encode()
        if path == md + "spot/instance-action" and vm.interrupted:
            body = {"action": "terminate", "time": rfc3339(vm.end_at)}
            return 200, "text/plain", json.dumps(body).encode()
        if path == md + "spot/termination-time" and vm.interrupted:
            return 200, "text/plain", rfc3339(vm.end_at).encode()
        return 404, "text/plain", b"Not Found\n"

    def _meta_gcp(self, vm, method, path, query, headers):
        if header(headers, "Metadata-Flavor") != "Google":
            return 403, "text/plain", \
                b"Missing Metadata-Flavor:Google header.\n"
        if method != "GET":
            return 405, "text/plain", b"Method Not Allowed\n"
        base = "/computeMetadata/v1/instance/"
        info = vm.info
        if path == base + "preempted":
            if query.get("wait_for_change", [""])[0] == "true":
                self._wait_preempted(vm, query)
            return 200, "application/text", \
                b"TRUE" if vm.interrupted else b"FALSE"
        if path == base + "name":
            return 200, "application/text", vm.id.encode()
        if path == base + "id":
            num = int(hashlib.sha256(vm.id.encode()).hexdigest()[:15], 16)
            return 200, "application/text", str(num).encode()
        if path == base + "zone" and info.get("zone"):
            z = f"projects/{info.get('project', '0')}/zones/{info['zone']}"
            return 200, "application/text", z.encode()
        if path == base + "machine-type" and info.get("shape"):
            m = f"projects/{info.get('project', '0')}/machineTypes/" \
                f"{info['shape']}"
            return 200, "application/text", m.encode()
        return 404, "text/html", b"Not Found\n"

    def _wait_preempted(self, vm, query):
        """GCE's wait_for_change: block until preempted changes, or
        timeout_sec (capped here so a test never hangs on it)."""
        try:
            limit = float(query.get("timeout_sec", ["60"])[0])
        except ValueError:
            limit = 60.0
        deadline = time.time() + max(0.0, min(limit, 300.0))
        with self._lock:
            while not vm.interrupted and vm.ended is None and \
                    not self._closed:
                left = deadline - time.time()
                if left <= 0:
                    break
                self._changed.wait(left)

    def _meta_azure(self, vm, method, path, query, headers):
        if header(headers, "Metadata") != "true":
            return 400, "application/json", json.dumps(
                {"error": "Bad request. Required metadata header not "
                          "specified"}).encode()
        if not query.get("api-version", [""])[0]:
            return 400, "application/json", json.dumps(
                {"error": "Bad request. api-version was not specified in "
                          "the request"}).encode()
        if path == "/metadata/scheduledevents":
            if method == "POST":
                return 200, "application/json", b""
            if method != "GET":
                return 405, "text/plain", b"Method Not Allowed\n"
            events = []
            if vm.interrupted:
                eid = hashlib.sha256(f"evt:{vm.id}".encode()).hexdigest()
                eid = f"{eid[:8]}-{eid[8:12]}-{eid[12:16]}-{eid[16:20]}-" \
                      f"{eid[20:32]}".upper()
                events.append({
                    "EventId": eid, "EventType": "Preempt",
                    "ResourceType": "VirtualMachine",
                    "Resources": [vm.id], "EventStatus": "Scheduled",
                    "NotBefore": rfc1123(vm.end_at),
                    "Description": "Virtual machine is being evicted "
                                   "(Azure Spot).",
                    "EventSource": "Platform", "DurationInSeconds": -1})
            body = {"DocumentIncarnation": vm.incarnation, "Events": events}
            return 200, "application/json", json.dumps(body).encode()
        if path == "/metadata/instance/compute/name":
            return 200, "text/plain", vm.id.encode()
        return 404, "application/json", json.dumps(
            {"error": "Not found"}).encode()


# --- the VM's init ----------------------------------------------------------

def vm_init(script):
    """Run script with /bin/sh and stay up, reaping, until SIGTERM; then
    end every process below us (grace, then SIGKILL) and exit.  Also ends
    the VM if the fake that started it dies."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # without it, processes that fork away can escape
    term = []
    signal.signal(signal.SIGTERM, lambda s, f: term.append(s))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.getppid()
    subprocess.Popen(["/bin/sh", script], close_fds=True)
    me = os.getpid()

    def reap():
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return

    while not term and os.getppid() == parent:
        reap()
        time.sleep(0.1)
    signal_pids(descendants(me), signal.SIGTERM)
    deadline = time.time() + INIT_GRACE_S
    while time.time() < deadline and descendants(me):
        reap()
        time.sleep(0.05)
    deadline = time.time() + 1.0
    while time.time() < deadline:
        left = descendants(me)
        if not left:
            break
        signal_pids(left, signal.SIGKILL)
        reap()
        time.sleep(0.02)
    reap()
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--vm-init":
        sys.exit(vm_init(sys.argv[2]))
    print("usage: vmemu.py --vm-init SCRIPT (the emulator runs this)",
          file=sys.stderr)
    sys.exit(2)
