#!/usr/bin/env python3
"""A Compute Engine fake for tenbin's tests: the OAuth token endpoint of
a service account (RS256 JWT bearer grant, checked with `openssl`),
instances.insert/get/list/delete and zone operations under /compute/v1,
and the Cloud Billing Catalog's SKU list, all as Google documents them
(shared/research/cloud-contracts.md sections 2 and 6.2).  Each instance
that reaches RUNNING boots its startup-script metadata item in the VM
emulator (vmemu.py), which also serves its metadata at /_meta/<vm>/.

Loopback only, standard library only.  Ids come from counters, so two
runs that make the same calls see the same names.  SIGTERM stops every
VM this fake started and exits 0.

usage: gce_fake.py --root DIR --port-file FILE --service-account KEY.json
                   [--port 0] [--token-ttl 3599] [--op-seconds 1]
                   [--pending-s 1] [--wait-s 2] [--skus FILE]

Control endpoints (no auth, never throttled): POST /_fake/faults,
GET /_fake/faults, POST /_fake/interrupt, GET /_fake/vms,
GET /_fake/stats (tests/fakes/selftest_gce.sh shows each), and
POST /_fake/instances and DELETE /_fake/instances/NAME: a running VM
that a cluster's manager launched, booting nothing, and its end
(tests/integration/t43_*.sh).
"""
import argparse
import base64
import binascii
import datetime
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import fakecloud  # noqa: E402  (what the fakes share)
import vmemu  # noqa: E402  (the emulator beside this file)
from fakecloud import ApiError  # noqa: E402

# --- limits: every input is bounded -----------------------------------------
MAX_BODY = 2 << 20          # a request body
MAX_PATH = 4096             # a request target
MAX_ASSERTION = 16384       # a JWT
MAX_INSTANCES = 4096        # alive or gone, like the emulator's own cap
MAX_OPS = 20000             # operations kept; the oldest DONE go first
MAX_TOKENS = 10000          # access tokens kept
MAX_FILTER = 2048
MAX_LABELS = 64
MAX_ITEMS = 1000            # metadata items
MAX_ITEM_VALUE = 256 * 1024  # Google's limit on one metadata value
MAX_METADATA = 512 * 1024   # and on all of them together
MAX_SKUS = 100000
MAX_LIST = 500              # instances.list's maxResults ceiling
MAX_SKU_PAGE = 5000         # Cloud Billing's pageSize ceiling

BILLING_SERVICE = "6F81-5844-456A"   # Compute Engine in Cloud Billing
JWT_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
COMPUTE_SCOPES = ("https://www.googleapis.com/auth/cloud-platform",
                  "https://www.googleapis.com/auth/compute",
                  "https://www.googleapis.com/auth/compute.readonly")
READONLY_SCOPE = "https://www.googleapis.com/auth/compute.readonly"

NAME_RE = re.compile(r"^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$")
ZONE_RE = re.compile(r"^[a-z]+-[a-z]+[0-9]+-[a-z]$")
UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                     r"[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
LABEL_KEY_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
LABEL_VALUE_RE = re.compile(r"^[a-z0-9_-]{0,63}$")
META_KEY_RE = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
MACHINE_TYPE_RE = re.compile(
    r"^(?:(?:https?://[^/]+/compute/v1/)?projects/([^/]+)/)?"
    r"zones/([^/]+)/machineTypes/([^/]+)$")

INSTANCE_FIELDS = {
    "advancedMachineFeatures", "canIpForward", "confidentialInstanceConfig",
    "cpuPlatform", "creationTimestamp", "deletionProtection", "description",
    "disks", "displayDevice", "fingerprint", "guestAccelerators", "hostname",
    "id", "instanceEncryptionKey", "keyRevocationActionType", "kind",
    "labelFingerprint", "labels", "lastStartTimestamp", "lastStopTimestamp",
    "lastSuspendedTimestamp", "machineType", "metadata", "minCpuPlatform",
    "name", "networkInterfaces", "networkPerformanceConfig", "params",
    "privateIpv6GoogleAccessType", "reservationAffinity",
    "resourcePolicies", "resourceStatus", "satisfiesPzi", "satisfiesPzs",
    "scheduling", "selfLink", "serviceAccounts", "shieldedInstanceConfig",
    "shieldedInstanceIntegrityPolicy", "sourceMachineImage",
    "sourceMachineImageEncryptionKey", "startRestricted", "status",
    "statusMessage", "tags", "zone"}
OP_FIELDS = {"kind", "id", "name", "zone", "operationType", "targetLink",
             "targetId", "status", "statusMessage", "user", "progress",
             "insertTime", "startTime", "endTime", "error",
             "httpErrorStatusCode", "httpErrorMessage", "selfLink",
             "clientOperationId"}
SCHEDULING_FIELDS = {
    "automaticRestart", "onHostMaintenance", "preemptible",
    "provisioningModel", "instanceTerminationAction", "maxRunDuration",
    "terminationTime", "nodeAffinities", "minNodeCpus", "locationHint",
    "localSsdRecoveryTimeout", "availabilityDomain", "onInstanceStopAction",
    "hostErrorTimeoutSeconds"}

# Machine families that carry their GPUs, and the quota each draws on.
GPU_QUOTAS = (("a4-highgpu", "NVIDIA_B200_GPUS"),
              ("a3-ultragpu", "NVIDIA_H200_GPUS"),
              ("a3-megagpu", "NVIDIA_H100_MEGA_GPUS"),
              ("a3-", "NVIDIA_H100_GPUS"),
              ("a2-ultragpu", "NVIDIA_A100_80GB_GPUS"),
              ("a2-", "NVIDIA_A100_GPUS"),
              ("g2-", "NVIDIA_L4_GPUS"))
PACIFIC = datetime.timezone(datetime.timedelta(hours=-8))


def gtime(t):
    """A Compute Engine timestamp: RFC 3339 with milliseconds and the
    -08:00 offset Google's answers carry, so clients parse offsets."""
    d = datetime.datetime.fromtimestamp(t, PACIFIC)
    return d.strftime("%Y-%m-%dT%H:%M:%S.") + \
        "%03d-08:00" % (d.microsecond // 1000)


def b64url_decode(s):
    if not re.match(r"^[A-Za-z0-9_-]*$", s):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def num_id(*parts):
    """A decimal id as Compute Engine spells them, from parts."""
    h = hashlib.sha256(":".join(str(p) for p in parts).encode()).hexdigest()
    return str(1000000000000000000 + int(h[:15], 16) % 8000000000000000000)


def gerr(status, reason, message, domain="global", status_word=None,
         extra=None):
    """Compute Engine's error shape (contracts 2.5)."""
    err = {"message": message, "domain": domain, "reason": reason}
    if extra:
        err.update(extra)
    body = {"error": {"code": status, "message": message, "errors": [err]}}
    if status_word:
        body["error"]["status"] = status_word
    return ApiError(status, body)


def invalid(field, value, why):
    v = value if isinstance(value, str) else json.dumps(value)
    if len(v) > 200:
        v = v[:200] + "..."
    return gerr(400, "invalid",
                f"Invalid value for field '{field}': '{v}'. {why}")


# --- the filter expressions instances.list takes ---------------------------

class FilterError(ValueError):
    pass


def _filter_tokens(text):
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "()":
            out.append(("p", c))
            i += 1
        elif text.startswith("!=", i):
            out.append(("op", "!="))
            i += 2
        elif c in "=:":
            out.append(("op", c))
            i += 1
        elif c == '"':
            j, val = i + 1, []
            while j < len(text) and text[j] != '"':
                if text[j] == "\\" and j + 1 < len(text):
                    j += 1
                val.append(text[j])
                j += 1
            if j >= len(text):
                raise FilterError("unterminated string")
            out.append(("s", "".join(val)))
            i = j + 1
        else:
            m = re.compile(r"[A-Za-z0-9_.*/-]+").match(text, i)
            if not m:
                raise FilterError(f"unexpected {c!r}")
            out.append(("w", m.group(0)))
            i = m.end()
    return out


def parse_filter(text, fields):
    """Parse what tenbin sends: `FIELD OP VALUE`, or several such terms,
    each in parentheses, joined by AND or by nothing (Google's implicit
    AND).  OP is =, != or :* (the key is present).  Returns a list of
    (path, op, value); anything else raises FilterError."""
    toks = _filter_tokens(text)
    terms, i = [], 0

    def term(i):
        if i + 3 > len(toks):
            raise FilterError("a term is cut short")
        (k1, field), (k2, op), (k3, value) = toks[i], toks[i + 1], toks[i + 2]
        if k1 != "w" or k2 != "op" or k3 not in ("w", "s"):
            raise FilterError("a term must be FIELD OP VALUE")
        path = field.split(".")
        if path[0] not in fields or any(p == "" for p in path):
            raise FilterError(f"unknown field {field}")
        if path[0] == "labels" and (len(path) != 2 or
                                    not LABEL_KEY_RE.match(path[1])):
            raise FilterError(f"bad label field {field}")
        if op == ":" and value != "*":
            raise FilterError("only the :* comparison is supported")
        if value.upper() in ("AND", "OR", "NOT") and k3 == "w":
            raise FilterError("a value is missing")
        return (path, op, value), i + 3

    while i < len(toks):
        if terms:
            if toks[i] == ("w", "AND"):
                i += 1
            elif toks[i][0] == "w" and toks[i][1].upper() in ("OR", "NOT"):
                raise FilterError(f"{toks[i][1]} is not supported")
        if i >= len(toks):
            raise FilterError("AND at the end")
        if toks[i] == ("p", "("):
            t, i = term(i + 1)
            if i >= len(toks) or toks[i] != ("p", ")"):
                raise FilterError("missing )")
            i += 1
        else:
            t, i = term(i)
        terms.append(t)
    if not terms:
        raise FilterError("empty")
    return terms


def filter_match(terms, resource):
    for path, op, value in terms:
        v = resource
        for p in path:
            v = v.get(p) if isinstance(v, dict) else None
        if isinstance(v, bool):
            v = "true" if v else "false"
        elif v is not None and not isinstance(v, (dict, list)):
            v = str(v)
        if op == ":":
            ok = v is not None
        elif op == "=":
            ok = v == value
        else:
            ok = v != value
        if not ok:
            return False
    return True


def page_token(key, filter_text):
    raw = json.dumps({"a": key, "f": hashlib.sha256(
        filter_text.encode()).hexdigest()[:12]})
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def read_page_token(token, filter_text):
    """The key after which the page starts; raises ValueError."""
    if len(token) > 1024:
        raise ValueError("too long")
    d = json.loads(b64url_decode(token))
    if not isinstance(d, dict) or d.get("f") != hashlib.sha256(
            filter_text.encode()).hexdigest()[:12]:
        raise ValueError("not for this filter")
    return d["a"]


# --- the fake's state --------------------------------------------------------

class Instance:
    def __init__(self, **kw):
        self.network_ip = None         # set only by POST /_fake/instances
        self.__dict__.update(kw)
        self.status_override = None   # STOPPING, TERMINATED
        self.deleted = False
        self.ended = None
        self.started = False           # handed to the emulator
        self.interrupted = False
        self.deleting = None           # the delete op's name
        self.stopped_at = None


class Op:
    def __init__(self, **kw):
        self.error = None              # (code, message, http, httpmsg, det)
        self.__dict__.update(kw)

    def status(self, now):
        if now < self.t_run:
            return "PENDING"
        if now < self.t_done:
            return "RUNNING"
        return "DONE"


class State(fakecloud.FakeState):
    def __init__(self, args, sa, emu):
        super().__init__(emu, args.pending_s)
        self.args = args
        self.sa = sa
        self.instances = {}            # (project, zone, name) -> Instance
        self.gone = []                 # deleted Instances, for /_fake/vms
        self.ops = {}                  # (project, zone, name) -> Op
        self.request_ids = {}          # (project, requestId) -> op key
        # self.tokens: token -> (expiry, scopes)
        self.throttle_seq = 0
        self.skus = []

    # Timed transitions happen here, under the lock, before every answer
    # and on a ticker, so what a client reads never runs ahead of them.
    def advance(self, now):
        for key, inst in list(self.instances.items()):
            if inst.deleted:
                continue
            if inst.deleting:
                op = self.ops.get(inst.deleting)
                if op is None or now >= op.t_done:
                    self._remove(key, inst, now)
                continue
            if not inst.started and inst.status_override is None and \
                    now >= inst.t_running:
                inst.started = True
                try:
                    self.emu.start(inst.vm_id, inst.script,
                                   boot_delay_s=inst.boot_delay_s,
                                   never_boot=inst.never_boot,
                                   info={"zone": inst.zone,
                                         "shape": inst.shape,
                                         "project": inst.project})
                except ValueError as exc:
                    print(f"gce-fake: vm {inst.vm_id}: {exc}",
                          file=sys.stderr)

    def _remove(self, key, inst, now):
        inst.deleted = True
        inst.ended = inst.ended or now
        self.stats["terminated"] += 1
        del self.instances[key]
        self.gone.append(inst)

    def status_of(self, inst, now):
        if inst.status_override:
            return inst.status_override
        if now < inst.t_staging:
            return "PROVISIONING"
        if now < inst.t_running:
            return "STAGING"
        return "RUNNING"

    def add_op(self, op):
        for o in self.trim_ops(MAX_OPS):
            if o.request_id:
                self.request_ids.pop((o.project, o.request_id), None)
        if len(self.ops) >= MAX_OPS:
            raise gerr(503, "backendError",
                       f"fake: over {MAX_OPS} operations in flight")
        self.ops[(op.project, op.zone, op.name)] = op

    # --- what the test controls see (fakecloud) ---

    def all_vms(self):
        return list(self.instances.values()) + self.gone

    def vm_row(self, inst, now):
        return {"id": inst.name, "vm_id": inst.vm_id,
                "state": "DELETED" if inst.deleted
                else self.status_of(inst, now),
                "zone": inst.zone, "shape": inst.shape, "spot": inst.spot,
                "node": inst.labels.get("tenbin-node"),
                "instance": inst.labels.get("tenbin-instance"),
                "launched": inst.t0, "ended": inst.ended}

    def add_instance(self, req):
        """A RUNNING instance of the service account's project, as a
        cluster's manager launched it: in the emulator it is never
        started (started is set so advance leaves it)."""
        name, zone = req["name"], req["zone"] or "us-central1-a"
        if not NAME_RE.match(name) or not ZONE_RE.match(zone):
            raise ApiError(400, {"error": "name or zone is no GCE name"})
        for k, v in req["labels"].items():
            if not LABEL_KEY_RE.match(k) or not LABEL_VALUE_RE.match(v):
                raise ApiError(400, {"error": f"bad label {k[:64]}"})
        now = time.time()
        project = self.sa["project_id"]
        with self.lock:
            self.advance(now)
            key = (project, zone, name)
            if key in self.instances:
                raise ApiError(409, {"error": f"{name} exists in {zone}"})
            if len(self.instances) + len(self.gone) >= MAX_INSTANCES:
                raise ApiError(409, {"error": f"over {MAX_INSTANCES}"})
            n = self.next_seq()
            inst = Instance(
                project=project, zone=zone, seq=n,
                id=num_id("instance", project, zone, name, n),
                vm_id=self.new_vm_id(name), name=name,
                shape=req["shape"] or "a3-highgpu-8g", spot=False,
                labels=req["labels"], network_ip=req["network_ip"],
                t0=now, t_staging=now, t_running=now, never_boot=False,
                boot_delay_s=0, script="", disks=[], nics=[{}],
                service_accounts=[], meta_items=[], accelerators=[],
                description="", can_ip_forward=False,
                deletion_protection=False, on_host_maintenance="TERMINATE",
                automatic_restart=False, preemptible=False,
                provisioning_model="STANDARD", term_action=None,
                meta_fingerprint="ZmFrZQ==", label_fingerprint="ZmFrZQ==")
            inst.started = True
            self.instances[key] = inst
            return {"name": name, "zone": zone, "vm_id": inst.vm_id}

    def remove_instance(self, name):
        now = time.time()
        with self.lock:
            self.advance(now)
            key = next((k for k, i in self.instances.items()
                        if i.name == name and not i.deleting), None)
            if key is None:
                raise ApiError(404, {"error": f"no live vm {name[:100]}"})
            inst = self.instances[key]
            self._remove(key, inst, now)
            return {"name": name, "zone": inst.zone}

    def interrupt(self, vm, notice):
        now = time.time()
        with self.lock:
            self.advance(now)
            inst = next((i for i in self.instances.values()
                         if i.name == vm or i.vm_id == vm), None)
            if inst is None:
                raise ApiError(404, {"error": f"no live vm {vm[:100]}"})
            if not inst.spot:
                raise ApiError(409, {"error": "only Spot VMs are preempted"})
            if not inst.started or inst.deleting or inst.status_override:
                raise ApiError(409, {"error": "the VM is not RUNNING"})
            inst.interrupted = True
            # During the notice a preempted instance is STOPPING (its
            # guest got the ACPI soft-off), as on Compute Engine.
            inst.status_override = "STOPPING"
            inst.stopped_at = now
            try:
                self.emu.interrupt(inst.vm_id, notice,
                                   lambda vm_id: preempted(self, inst))
            except (KeyError, ValueError) as e:
                raise ApiError(409, {"error": f"emulator: {e}"})
        return {"vm": inst.name, "notice_s": notice}


# --- rendering ---------------------------------------------------------------

def zone_url(st, project, zone):
    return f"{st.base}/compute/v1/projects/{project}/zones/{zone}"


def render_op(st, op, now):
    status = op.status(now)
    d = {"kind": "compute#operation", "id": op.id, "name": op.name,
         "zone": zone_url(st, op.project, op.zone),
         "operationType": op.type,
         "targetLink": zone_url(st, op.project, op.zone) +
         f"/instances/{op.target}",
         "targetId": op.target_id, "status": status, "user": op.user,
         "progress": 100 if status == "DONE" else 0,
         "insertTime": gtime(op.t0),
         "selfLink": zone_url(st, op.project, op.zone) +
         f"/operations/{op.name}"}
    if status != "PENDING":
        d["startTime"] = gtime(op.t_run)
    if status == "DONE":
        d["endTime"] = gtime(op.t_done)
        if op.error:
            code, msg, http, httpmsg, details = op.error
            e = {"code": code, "message": msg}
            if details:
                e["errorDetails"] = details
            d["error"] = {"errors": [e]}
            d["httpErrorStatusCode"] = http
            d["httpErrorMessage"] = httpmsg
        if op.status_message:
            d["statusMessage"] = op.status_message
    return d


def render_instance(st, inst, now):
    z = zone_url(st, inst.project, inst.zone)
    status = st.status_of(inst, now)
    disks = []
    for i, dk in enumerate(inst.disks):
        ip = dk.get("initializeParams") or {}
        disks.append({
            "kind": "compute#attachedDisk", "type": dk.get("type",
                                                           "PERSISTENT"),
            "mode": dk.get("mode", "READ_WRITE"),
            "source": f"{z}/disks/{inst.name}" + (f"-{i}" if i else ""),
            "deviceName": dk.get("deviceName", f"persistent-disk-{i}"),
            "index": i, "boot": bool(dk.get("boot", i == 0)),
            "autoDelete": bool(dk.get("autoDelete", True)),
            "interface": "SCSI",
            "diskSizeGb": str(ip.get("diskSizeGb", "10"))})
    nics = []
    for i, n in enumerate(inst.nics):
        nic = {"kind": "compute#networkInterface", "name": f"nic{i}",
               "network": n.get("network", f"{st.base}/compute/v1/projects/"
                                f"{inst.project}/global/networks/default"),
               "networkIP": inst.network_ip or
                            f"10.128.{inst.seq // 250 % 250}."
                            f"{inst.seq % 250 + 2}",
               "fingerprint": "ZmFrZS1uaWM="}
        if n.get("subnetwork"):
            nic["subnetwork"] = n["subnetwork"]
        if n.get("accessConfigs"):
            nic["accessConfigs"] = [
                {"kind": "compute#accessConfig", "type": "ONE_TO_ONE_NAT",
                 "name": "External NAT",
                 "natIP": f"203.0.113.{inst.seq % 250 + 1}"}]
        nics.append(nic)
    sched = {"onHostMaintenance": inst.on_host_maintenance,
             "automaticRestart": inst.automatic_restart,
             "preemptible": inst.preemptible,
             "provisioningModel": inst.provisioning_model}
    if inst.term_action:
        sched["instanceTerminationAction"] = inst.term_action
    d = {"kind": "compute#instance", "id": inst.id,
         "creationTimestamp": gtime(inst.t0), "name": inst.name,
         "tags": {"fingerprint": "42WmSpB8rSM="},
         "machineType": f"{z}/machineTypes/{inst.shape}",
         "status": status, "zone": z, "canIpForward": inst.can_ip_forward,
         "networkInterfaces": nics, "disks": disks,
         "metadata": {"kind": "compute#metadata",
                      "fingerprint": inst.meta_fingerprint},
         "selfLink": f"{z}/instances/{inst.name}", "scheduling": sched,
         "cpuPlatform": "Unknown CPU Platform" if status == "PROVISIONING"
         else "Intel Sapphire Rapids",
         "labelFingerprint": inst.label_fingerprint,
         "startRestricted": False,
         "deletionProtection": inst.deletion_protection,
         "satisfiesPzi": False}
    if inst.meta_items:
        d["metadata"]["items"] = inst.meta_items
    if inst.labels:
        d["labels"] = dict(inst.labels)
    if inst.service_accounts:
        d["serviceAccounts"] = inst.service_accounts
    if inst.accelerators:
        d["guestAccelerators"] = inst.accelerators
    if inst.description:
        d["description"] = inst.description
    if status in ("RUNNING", "STOPPING", "TERMINATED") and \
            now >= inst.t_running:
        d["lastStartTimestamp"] = gtime(inst.t_running)
    if inst.stopped_at is not None:
        d["lastStopTimestamp"] = gtime(inst.stopped_at)
    return d


# --- instances.insert validation --------------------------------------------

def check_bool(v, field):
    if not isinstance(v, bool):
        raise invalid(field, v, "Expected a boolean.")
    return v


def check_known(d, fields, where):
    """Refuse the first key of d that is not one of fields, as Google's
    JSON parser does."""
    for k in d:
        if k not in fields:
            raise gerr(400, "invalid",
                       f'Invalid JSON payload received. Unknown name "{k}" '
                       f"at '{where}': Cannot find field.",
                       status_word="INVALID_ARGUMENT")


def validate_insert(body, project, zone):
    """What an insert body asks for, or ApiError naming what is wrong."""
    if not isinstance(body, dict):
        raise gerr(400, "parseError", "Parse Error")
    check_known(body, INSTANCE_FIELDS, "resource")
    out = {}
    name = body.get("name")
    if not isinstance(name, str) or not name:
        raise gerr(400, "required",
                   "Required field 'resource.name' not specified")
    if not NAME_RE.match(name):
        raise invalid("resource.name", name,
                      "Must be a match of regex "
                      "'(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'")
    out["name"] = name
    mt = body.get("machineType")
    if not isinstance(mt, str) or not mt:
        raise gerr(400, "required",
                   "Required field 'resource.machineType' not specified")
    m = MACHINE_TYPE_RE.match(mt) if len(mt) <= 512 else None
    if not m:
        raise invalid("resource.machineType", mt, "The URL is malformed.")
    mproject, mzone, shape = m.groups()
    if (mproject and mproject != project) or mzone != zone:
        raise invalid("resource.machineType", mt,
                      "Cross-zone references are not allowed.")
    if not NAME_RE.match(shape):
        raise invalid("resource.machineType", mt,
                      f"Machine type with name '{shape}' does not exist in "
                      f"zone '{zone}'.")
    out["shape"] = shape

    labels = body.get("labels", {})
    if not isinstance(labels, dict) or len(labels) > MAX_LABELS:
        raise invalid("resource.labels", labels,
                      f"Labels must be a map of at most {MAX_LABELS} "
                      "entries.")
    for k, v in labels.items():
        if not LABEL_KEY_RE.match(k):
            raise invalid("resource.labels", k,
                          f"Label key '{k}' violates format constraints. "
                          "The key must start with a lowercase character, "
                          "can only contain lowercase letters, numeric "
                          "characters, underscores and dashes. The key can "
                          "be at most 63 characters long. International "
                          "characters are allowed.")
        if not isinstance(v, str) or not LABEL_VALUE_RE.match(v):
            raise invalid("resource.labels", v,
                          f"Label value '{v}' violates format constraints. "
                          "The value can only contain lowercase letters, "
                          "numeric characters, underscores and dashes. The "
                          "value can be at most 63 characters long. "
                          "International characters are allowed.")
    out["labels"] = dict(labels)

    meta = body.get("metadata", {})
    if not isinstance(meta, dict) or \
            any(k not in ("items", "fingerprint", "kind") for k in meta):
        raise invalid("resource.metadata", meta,
                      "Metadata takes items, fingerprint and kind.")
    items = meta.get("items", [])
    if not isinstance(items, list) or len(items) > MAX_ITEMS:
        raise invalid("resource.metadata.items", items,
                      "Metadata items must be a list.")
    seen, total, script = set(), 0, ""
    for i, it in enumerate(items):
        f = f"resource.metadata.items[{i}]"
        if not isinstance(it, dict) or \
                any(k not in ("key", "value") for k in it):
            raise invalid(f, it, "An item is {key, value}.")
        key, value = it.get("key"), it.get("value", "")
        if not isinstance(key, str) or not META_KEY_RE.match(key):
            raise invalid(f + ".key", key,
                          "Must be a match of regex '[a-zA-Z0-9-_]{1,128}'")
        if not isinstance(value, str):
            raise invalid(f + ".value", value, "Expected a string.")
        if len(value.encode()) > MAX_ITEM_VALUE:
            raise invalid(f + ".value", key,
                          "Metadata value is too large: at most "
                          f"{MAX_ITEM_VALUE} bytes.")
        if key in seen:
            raise invalid("resource.metadata", key,
                          "Metadata has duplicate keys.")
        seen.add(key)
        total += len(key) + len(value.encode())
        if key == "startup-script":
            script = value
    if total > MAX_METADATA:
        raise invalid("resource.metadata", "",
                      f"Metadata is too large: at most {MAX_METADATA} "
                      "bytes in all.")
    out["meta_items"] = [{"key": it["key"], "value": it.get("value", "")}
                         for it in items]
    out["script"] = script

    sched = body.get("scheduling", {})
    if not isinstance(sched, dict):
        raise invalid("resource.scheduling", sched, "Expected an object.")
    check_known(sched, SCHEDULING_FIELDS, "resource.scheduling")
    pm = sched.get("provisioningModel", "STANDARD")
    if pm not in ("STANDARD", "SPOT", "RESERVATION_BOUND"):
        raise invalid("resource.scheduling.provisioningModel", pm,
                      "Must be one of STANDARD, SPOT, RESERVATION_BOUND.")
    preemptible = check_bool(sched.get("preemptible", False),
                             "resource.scheduling.preemptible")
    if preemptible and pm != "SPOT" and "provisioningModel" in sched:
        raise invalid("resource.scheduling.preemptible", True,
                      "Preemptible VMs must use provisioningModel SPOT.")
    spot = pm == "SPOT" or preemptible
    ohm = sched.get("onHostMaintenance")
    if ohm is not None and ohm not in ("MIGRATE", "TERMINATE"):
        raise invalid("resource.scheduling.onHostMaintenance", ohm,
                      "Must be one of MIGRATE, TERMINATE.")
    restart = sched.get("automaticRestart")
    if restart is not None:
        check_bool(restart, "resource.scheduling.automaticRestart")
    if spot and restart:
        raise invalid("resource.scheduling.automaticRestart", "true",
                      "Preemptible instances cannot be automatically "
                      "restarted.")
    if spot and ohm == "MIGRATE":
        raise invalid("resource.scheduling.onHostMaintenance", ohm,
                      "Preemptible instances must have onHostMaintenance "
                      "set to TERMINATE.")
    action = sched.get("instanceTerminationAction")
    if action is not None:
        if action not in ("STOP", "DELETE"):
            raise invalid("resource.scheduling.instanceTerminationAction",
                          action, "Must be one of STOP, DELETE.")
        if not spot and "maxRunDuration" not in sched and \
                "terminationTime" not in sched:
            raise invalid("resource.scheduling.instanceTerminationAction",
                          action, "Instance termination action can only be "
                          "set on Spot VMs or VMs with a run duration.")
    accels = body.get("guestAccelerators", [])
    if not isinstance(accels, list) or len(accels) > 8 or \
            not all(isinstance(a, dict) and
                    isinstance(a.get("acceleratorType"), str) and
                    isinstance(a.get("acceleratorCount"), int) and
                    1 <= a["acceleratorCount"] <= 16 for a in accels):
        raise invalid("resource.guestAccelerators", accels,
                      "Each accelerator needs acceleratorType and an "
                      "acceleratorCount of 1..16.")
    gpu_family = any(shape.startswith(p) for p, _ in GPU_QUOTAS)
    if (accels and not spot and ohm != "TERMINATE") or \
            (gpu_family and ohm == "MIGRATE"):
        raise invalid("resource.scheduling.onHostMaintenance",
                      ohm or "MIGRATE", "Instances with guest accelerators "
                      "do not support live migration.")
    out.update(spot=spot, provisioning_model=pm, preemptible=preemptible,
               on_host_maintenance=ohm or ("TERMINATE" if spot or accels or
                                           gpu_family else "MIGRATE"),
               automatic_restart=bool(restart) if restart is not None
               else not spot,
               term_action=action or ("STOP" if spot else None),
               accelerators=accels)

    for field, cap in (("disks", 128), ("networkInterfaces", 16),
                       ("serviceAccounts", 1)):
        v = body.get(field, [])
        if not isinstance(v, list) or len(v) > cap or \
                not all(isinstance(x, dict) for x in v):
            raise invalid(f"resource.{field}", v,
                          f"Expected a list of at most {cap} objects.")
    for i, dk in enumerate(body.get("disks", [])):
        ip = dk.get("initializeParams", {})
        if not isinstance(ip, dict) or \
                not isinstance(ip.get("diskSizeGb", "10"), (str, int)):
            raise invalid(f"resource.disks[{i}].initializeParams", ip,
                          "Expected an object with a diskSizeGb.")
    for i, nic in enumerate(body.get("networkInterfaces", [])):
        for f in ("network", "subnetwork"):
            if not isinstance(nic.get(f, ""), str):
                raise invalid(f"resource.networkInterfaces[{i}].{f}",
                              nic[f], "Expected a string.")
    boots = [d for d in body.get("disks", []) if d.get("boot")]
    if len(boots) > 1:
        raise invalid("resource.disks", "", "At most one boot disk.")
    out["disks"] = body.get("disks", [])
    out["nics"] = body.get("networkInterfaces", [])
    out["service_accounts"] = body.get("serviceAccounts", [])
    for f in ("canIpForward", "deletionProtection"):
        if f in body:
            check_bool(body[f], f"resource.{f}")
    out["can_ip_forward"] = body.get("canIpForward", False)
    out["deletion_protection"] = body.get("deletionProtection", False)
    desc = body.get("description", "")
    if not isinstance(desc, str) or len(desc) > 2048:
        raise invalid("resource.description", desc,
                      "Expected a string of at most 2048 characters.")
    out["description"] = desc
    return out


def quota_metric(shape, spot):
    metric = "CPUS"
    for prefix, q in GPU_QUOTAS:
        if shape.startswith(prefix):
            metric = q
            break
    return ("PREEMPTIBLE_" if spot else "") + metric


# --- HTTP ----------------------------------------------------------------------

class Handler(fakecloud.Handler):
    name = "gce-fake"
    server_version = "gce-fake/1"
    max_body = MAX_BODY
    max_path = MAX_PATH
    json_type = "application/json; charset=UTF-8"
    meta_headers = {"Metadata-Flavor": "Google"}

    def refusal(self, status):
        if status == 411:
            return ApiError(411, {"error": {"code": 411,
                                            "message": "Length Required"}})
        if status == 500:
            return ApiError(500, {"error": {"code": 500, "message":
                                            "fake: internal error"}})
        return gerr(status, "invalid", {
            400: "Too many query parameters.",
            413: "Request body too large or its Content-Length malformed.",
            414: "Request URI too long."}[status])

    def route(self, path, query, body):
        return route(self.server.st, self, path, query, body)


def check_auth(st, handler, want_write):
    auth = handler.headers.get("Authorization", "")
    tok = auth[7:].strip() if auth[:7].lower() == "bearer " else None
    with st.lock:
        ent = st.tokens.get(tok) if tok else None
    if ent is None or ent[0] <= time.time():
        e = gerr(401, "authError", "Request had invalid authentication "
                 "credentials. Expected OAuth 2 access token, login cookie "
                 "or other valid authentication credential. See "
                 "https://developers.google.com/identity/sign-in/web/"
                 "devconsole-project.", status_word="UNAUTHENTICATED",
                 extra={"location": "Authorization",
                        "locationType": "header"})
        e.body["error"]["errors"][0]["message"] = "Invalid Credentials"
        e.headers = {"WWW-Authenticate": 'Bearer realm="https://accounts.'
                     'google.com/", error="invalid_token"'}
        raise e
    scopes = ent[1]
    ok = any(s in scopes for s in COMPUTE_SCOPES)
    if ok and want_write and not any(s in scopes for s in COMPUTE_SCOPES
                                     if s != READONLY_SCOPE):
        ok = False
    if not ok:
        raise gerr(403, "insufficientPermissions",
                   "Request had insufficient authentication scopes.",
                   status_word="PERMISSION_DENIED")


def maybe_throttle(st, billing=False):
    with st.lock:
        if not st.take_throttle():
            return
        st.throttle_seq += 1
        second = st.throttle_seq % 2 == 0
    # Both shapes Google sends (contracts 2.5), by turns: the Compute
    # doc's 403 rateLimitExceeded and the newer front ends' 429.
    if billing or second:
        raise gerr(429, "rateLimitExceeded",
                   "Quota exceeded for quota metric 'Read requests' and "
                   "limit 'Read requests per minute' of service "
                   "'compute.googleapis.com' for consumer "
                   "'project_number:123456789012'.",
                   status_word="RESOURCE_EXHAUSTED")
    raise gerr(403, "rateLimitExceeded", "Rate Limit Exceeded",
               domain="usageLimits")


def check_project_zone(st, project, zone):
    if project != st.sa["project_id"]:
        raise gerr(403, "forbidden",
                   f"Required 'compute.instances.list' permission for "
                   f"'projects/{project}'")
    if zone is not None and not ZONE_RE.match(zone):
        raise invalid("zone", zone, "Unknown zone.")


RE_INSTANCES = re.compile(
    r"^/compute/v1/projects/([^/]+)/zones/([^/]+)/instances$")
RE_INSTANCE = re.compile(
    r"^/compute/v1/projects/([^/]+)/zones/([^/]+)/instances/([^/]+)$")
RE_OPS = re.compile(
    r"^/compute/v1/projects/([^/]+)/zones/([^/]+)/operations$")
RE_OP = re.compile(
    r"^/compute/v1/projects/([^/]+)/zones/([^/]+)/operations/([^/]+)$")
RE_OP_WAIT = re.compile(
    r"^/compute/v1/projects/([^/]+)/zones/([^/]+)/operations/([^/]+)/wait$")
RE_AGG = re.compile(r"^/compute/v1/projects/([^/]+)/aggregated/instances$")
RE_SKUS = re.compile(r"^/v1/services/([^/]+)/skus$")


def route(st, h, path, query, body):
    """(status, body, headers) for one request."""
    m = h.command
    if path == "/token" and m == "POST":
        st.count("token")
        return token(st, h, body)
    if query.get("alt", "json") != "json":
        raise invalid("alt", query["alt"], "Only alt=json is served.")

    mm = RE_SKUS.match(path)
    if mm and m == "GET":
        st.count("skus.list")
        return skus(st, h, mm.group(1), query)

    routes = ((RE_INSTANCES, "POST", "instances.insert", True, insert),
              (RE_INSTANCES, "GET", "instances.list", False, list_instances),
              (RE_INSTANCE, "GET", "instances.get", False, get_instance),
              (RE_INSTANCE, "DELETE", "instances.delete", True, delete),
              (RE_OPS, "GET", "zoneOperations.list", False, list_ops),
              (RE_OP, "GET", "zoneOperations.get", False, get_op),
              (RE_OP_WAIT, "POST", "zoneOperations.wait", False, wait_op),
              (RE_AGG, "GET", "instances.aggregatedList", False,
               aggregated))
    for rx, method, action, write, fn in routes:
        mm = rx.match(path)
        if mm and m == method:
            st.count(action)
            check_auth(st, h, write)
            maybe_throttle(st)
            groups = [urllib.parse.unquote(g) for g in mm.groups()]
            check_project_zone(st, groups[0],
                               groups[1] if len(groups) > 1 else None)
            return fn(st, h, *groups, query=query, body=body)
    raise gerr(404, "notFound", f"The requested URL {path[:200]} was not "
               "found on this server.")


# --- token endpoint ------------------------------------------------------------

def grant_error(status, error, desc):
    return ApiError(status, {"error": error, "error_description": desc})


def openssl_verify(st, signing_input, sig):
    with tempfile.TemporaryDirectory(dir=st.tmp) as d:
        msg, sgn = os.path.join(d, "msg"), os.path.join(d, "sig")
        with open(msg, "wb") as f:
            f.write(signing_input)
        with open(sgn, "wb") as f:
            f.write(sig)
        try:
            r = subprocess.run(["openssl", "dgst", "-sha256", "-verify",
                                st.pubkey, "-signature", sgn, msg],
                               capture_output=True, timeout=20)
        except subprocess.TimeoutExpired:
            return False
        return r.returncode == 0 and b"Verified OK" in r.stdout


def token(st, h, body):
    ctype = h.headers.get("Content-Type", "").split(";")[0].strip().lower()
    if ctype != "application/x-www-form-urlencoded":
        raise grant_error(400, "invalid_request",
                          "Content-Type must be "
                          "application/x-www-form-urlencoded.")
    try:
        form = urllib.parse.parse_qs(body.decode("ascii"),
                                     keep_blank_values=True,
                                     max_num_fields=20)
    except (UnicodeDecodeError, ValueError):
        raise grant_error(400, "invalid_request", "Malformed form body.")
    if any(len(v) != 1 for v in form.values()):
        raise grant_error(400, "invalid_request", "A parameter is repeated.")
    form = {k: v[0] for k, v in form.items()}
    if form.get("grant_type") != JWT_GRANT:
        raise grant_error(400, "unsupported_grant_type",
                          f"Invalid grant_type: {form.get('grant_type', '')[:100]}")
    jwt = form.get("assertion", "")
    if not jwt or len(jwt) > MAX_ASSERTION or jwt.count(".") != 2:
        raise grant_error(400, "invalid_request",
                          "Invalid JWT: the assertion is missing or is not "
                          "a JWS compact serialization.")
    h64, c64, s64 = jwt.split(".")
    try:
        header = json.loads(b64url_decode(h64))
        claims = json.loads(b64url_decode(c64))
        sig = b64url_decode(s64)
    except (ValueError, binascii.Error):
        raise grant_error(400, "invalid_grant",
                          "Invalid JWT: the parts are not base64url JSON.")
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise grant_error(400, "invalid_grant", "Invalid JWT Signature.")
    if header.get("alg") != "RS256" or \
            header.get("kid", st.sa["private_key_id"]) != \
            st.sa["private_key_id"]:
        raise grant_error(400, "invalid_grant", "Invalid JWT Signature.")
    if not openssl_verify(st, f"{h64}.{c64}".encode(), sig):
        raise grant_error(400, "invalid_grant", "Invalid JWT Signature.")
    if claims.get("iss") != st.sa["client_email"]:
        raise grant_error(400, "invalid_grant",
                          "Invalid grant: account not found")
    if claims.get("aud") != f"{st.base}/token":
        raise grant_error(400, "invalid_grant",
                          "Invalid JWT: Failed audience check. The expected "
                          "audience is the token endpoint.")
    scope = claims.get("scope")
    if not isinstance(scope, str) or not scope.strip() or len(scope) > 2048:
        raise grant_error(400, "invalid_scope",
                          "Invalid OAuth scope or ID token audience "
                          "provided.")
    scopes = scope.split()
    if not all(s.startswith("https://www.googleapis.com/auth/")
               for s in scopes):
        raise grant_error(400, "invalid_scope",
                          "Invalid OAuth scope or ID token audience "
                          "provided.")
    iat, exp, now = claims.get("iat"), claims.get("exp"), time.time()
    if not all(isinstance(x, int) and not isinstance(x, bool)
               for x in (iat, exp)) or exp <= iat or exp - iat > 3600 or \
            iat > now + 300 or exp <= now:
        raise grant_error(400, "invalid_grant",
                          "Invalid JWT: Token must be a short-lived token "
                          "(60 minutes) and in a reasonable timeframe. "
                          "Check your iat and exp values in the JWT claim.")
    with st.lock:
        n = st.next_seq()
        tok = "ya29.c.fake" + hashlib.sha256(
            f"tok:{n}".encode()).hexdigest()[:48]
        st.keep_token(tok, (now + st.args.token_ttl, set(scopes)), now,
                      MAX_TOKENS)
    return 200, {"access_token": tok, "expires_in": st.args.token_ttl,
                 "token_type": "Bearer"}, {"Cache-Control": "no-store"}


# --- compute ---------------------------------------------------------------------

def new_op(st, project, zone, optype, target, target_id, request_id,
           user, now, error=None, message=None):
    n = st.next_seq()
    h = hashlib.sha256(f"op:{n}".encode()).hexdigest()
    op = Op(name=f"operation-{n:013d}-{h[:13]}-{h[13:21]}-{h[21:29]}",
            id=num_id("op", n), project=project, zone=zone, type=optype,
            target=target, target_id=target_id, request_id=request_id,
            user=user, t0=now, t_run=now + st.args.op_seconds / 3.0,
            t_done=now + st.args.op_seconds, error=error,
            status_message=message)
    st.add_op(op)
    if request_id:
        st.request_ids[(project, request_id)] = (project, zone, op.name)
    return op


def request_id_of(query):
    rid = query.get("requestId")
    if rid is None or rid == "":
        return None
    if not UUID_RE.match(rid) or set(rid) <= set("0-"):
        raise invalid("requestId", rid, "The request id must be a valid "
                      "UUID with the exception that zero UUID is not "
                      "supported (00000000-0000-0000-0000-000000000000).")
    return rid.lower()


def replay(st, project, rid, now):
    """The operation a requestId already made, or None."""
    key = st.request_ids.get((project, rid)) if rid else None
    op = st.ops.get(key) if key else None
    if op is None:
        return None
    st.stats["deduplicated"] += 1
    st.advance(now)
    return render_op(st, op, now)


def insert(st, h, project, zone, query, body):
    rid = request_id_of(query)
    now = time.time()
    with st.lock:
        again = replay(st, project, rid, now)
    if again is not None:
        return 200, again, None
    try:
        req = json.loads(body or b"null")
        want = validate_insert(req, project, zone)
    except (ValueError, RecursionError):
        with st.lock:
            st.stats["refused"] += 1
        raise gerr(400, "parseError", "Parse Error")
    except ApiError:
        with st.lock:
            st.stats["refused"] += 1
        raise
    name, shape = want["name"], want["shape"]
    with st.lock:
        again = replay(st, project, rid, now)   # a racing twin
        if again is not None:
            return 200, again, None
        st.advance(now)
        f = st.faults
        key = (project, zone, name)
        if key in st.instances:
            st.stats["refused"] += 1
            raise gerr(409, "alreadyExists",
                       f"The resource 'projects/{project}/zones/{zone}/"
                       f"instances/{name}' already exists")
        if len(st.instances) + len(st.gone) >= MAX_INSTANCES:
            st.stats["refused"] += 1
            raise gerr(403, "quotaExceeded",
                       f"fake: over {MAX_INSTANCES} instances")
        region = zone.rsplit("-", 1)[0]
        error = None
        if shape in f.quota:
            metric = quota_metric(shape, want["spot"])
            error = ("QUOTA_EXCEEDED",
                     f"Quota '{metric}' exceeded.  Limit: 0.0 in region "
                     f"{region}.", 403, "FORBIDDEN",
                     [{"quotaInfo": {
                         "metricName": "compute.googleapis.com/" +
                         metric.lower(),
                         "limitName": metric.replace("_", "-") +
                         "-per-project-region",
                         "dimensions": {"region": region}, "limit": 0}}])
        elif zone in f.capacity or f"{zone}/{shape}" in f.capacity:
            error = ("ZONE_RESOURCE_POOL_EXHAUSTED",
                     f"The zone 'projects/{project}/zones/{zone}' does not "
                     "have enough resources available to fulfill the "
                     "request.  Try a different zone, or try again later.",
                     503, "SERVICE UNAVAILABLE",
                     [{"help": {"links": [{
                         "description": "Troubleshooting documentation",
                         "url": "https://cloud.google.com/compute/docs/"
                                "resource-error"}]}}])
        inst_id = num_id("instance", project, zone, name, st.seq + 1)
        op = new_op(st, project, zone, "insert", name, inst_id, rid,
                    st.sa["client_email"], now, error=error)
        if error:
            st.stats["refused"] += 1
            return 200, render_op(st, op, now), None
        vm_id = st.new_vm_id(name)
        never = f.take_never_boot()
        fp = hashlib.sha256(json.dumps(want, sort_keys=True).encode())
        inst = Instance(
            project=project, zone=zone, id=inst_id, seq=st.seq, vm_id=vm_id,
            t0=now, t_staging=now + f.pending_s / 2.0,
            t_running=now + f.pending_s, never_boot=never,
            boot_delay_s=f.boot_delay_s,
            meta_fingerprint=base64.b64encode(fp.digest()[:8]).decode(),
            label_fingerprint=base64.b64encode(fp.digest()[8:16]).decode(),
            **want)
        st.instances[key] = inst
        st.stats["launched"] += 1
        st.advance(now)
        return 200, render_op(st, op, now), None


def zone_get(st, what, table, render, project, zone, name):
    """instances.get and zoneOperations.get: one row of table."""
    now = time.time()
    with st.lock:
        st.advance(now)
        x = table.get((project, zone, name))
        if x is None:
            raise not_found(project, zone, what, name)
        return 200, render(st, x, now), None


def get_instance(st, h, project, zone, name, query, body):
    return zone_get(st, "instances", st.instances, render_instance,
                    project, zone, name)


def not_found(project, zone, kind, name):
    return gerr(404, "notFound", f"The resource 'projects/{project}/zones/"
                f"{zone}/{kind}/{name[:200]}' was not found")


def list_args(query, fields):
    ftext = query.get("filter", "")
    if len(ftext) > MAX_FILTER:
        raise invalid("filter", ftext[:50], "The filter is too long.")
    terms = None
    if ftext.strip():
        try:
            terms = parse_filter(ftext, fields)
        except FilterError as e:
            raise invalid("filter", ftext,
                          f"Invalid list filter expression ({e}).")
    mr = query.get("maxResults", str(MAX_LIST))
    if not mr.isdigit() or int(mr) > MAX_LIST:
        raise invalid("maxResults", mr, f"Must be less than or equal to "
                      f"{MAX_LIST}")
    limit = int(mr) or MAX_LIST
    if query.get("orderBy"):
        raise invalid("orderBy", query["orderBy"],
                      "This fake sorts by name only.")
    after = None
    if query.get("pageToken"):
        try:
            after = read_page_token(query["pageToken"], ftext)
        except (ValueError, KeyError, binascii.Error):
            raise invalid("pageToken", query["pageToken"][:50],
                          "Invalid page token.")
    return ftext, terms, limit, after


def page(rows, keyf, terms, limit, after, ftext):
    """rows sorted by keyf, filtered, from after; (items, next token)."""
    rows = sorted(rows, key=keyf)
    if after is not None:
        rows = [r for r in rows if list(keyf(r)) > list(after)]
    if terms:
        rows = [r for r in rows if filter_match(terms, r)]
    items = rows[:limit]
    nxt = page_token(list(keyf(items[-1])), ftext) \
        if len(rows) > limit else None
    return items, nxt


def list_answer(kind, ident, self_link, items, nxt):
    """A list's answer: items and nextPageToken only when there are."""
    out = {"kind": kind, "id": ident, "selfLink": self_link}
    if items:
        out["items"] = items
    if nxt:
        out["nextPageToken"] = nxt
    return 200, out, None


def zone_list(st, query, fields, project, zone, what, table, render,
              kind):
    """instances.list and zoneOperations.list: the zone's rows of table,
    rendered, filtered and paged by name."""
    ftext, terms, limit, after = list_args(query, fields)
    now = time.time()
    with st.lock:
        st.advance(now)
        rows = [render(st, x, now) for k, x in table.items()
                if k[0] == project and k[1] == zone]
    items, nxt = page(rows, lambda r: (r["name"],), terms, limit, after,
                      ftext)
    return list_answer(kind, f"projects/{project}/zones/{zone}/{what}",
                       zone_url(st, project, zone) + f"/{what}", items, nxt)


def list_instances(st, h, project, zone, query, body):
    return zone_list(st, query, INSTANCE_FIELDS, project, zone, "instances",
                     st.instances, render_instance, "compute#instanceList")


def aggregated(st, h, project, query, body):
    ftext, terms, limit, after = list_args(query, INSTANCE_FIELDS)
    now = time.time()
    with st.lock:
        st.advance(now)
        rows = [(k[1], render_instance(st, i, now))
                for k, i in st.instances.items() if k[0] == project]
    items, nxt = page([dict(r, _zone=z) for z, r in rows],
                      lambda r: (r["_zone"], r["name"]), terms, limit,
                      after, ftext)
    groups = {}
    for r in items:
        groups.setdefault("zones/" + r.pop("_zone"),
                          {"instances": []})["instances"].append(r)
    return list_answer("compute#instanceAggregatedList",
                       f"projects/{project}/aggregated/instances",
                       f"{st.base}/compute/v1/projects/{project}/"
                       "aggregated/instances", groups, nxt)


def delete(st, h, project, zone, name, query, body):
    rid = request_id_of(query)
    now = time.time()
    with st.lock:
        again = replay(st, project, rid, now)
        if again is not None:
            return 200, again, None
        st.advance(now)
        inst = st.instances.get((project, zone, name))
        if inst is None:
            raise not_found(project, zone, "instances", name)
        if inst.deleting:
            raise gerr(400, "resourceNotReady",
                       f"The resource 'projects/{project}/zones/{zone}/"
                       f"instances/{name}' is not ready")
        if inst.deletion_protection:
            raise gerr(400, "resourceInUseByAnotherResource",
                       f"Invalid resource usage: 'Resource cannot be deleted "
                       f"if it's protected against deletion.'.")
        op = new_op(st, project, zone, "delete", name, inst.id, rid,
                    st.sa["client_email"], now)
        inst.deleting = (project, zone, op.name)
        if inst.status_override != "TERMINATED":
            inst.status_override = "STOPPING"
            inst.stopped_at = now
        inst.ended = now
        vm_id = inst.vm_id if inst.started else None
        out = render_op(st, op, now)
    if vm_id:
        fakecloud.stop_later(st.emu, vm_id)
    return 200, out, None


def get_op(st, h, project, zone, name, query, body):
    return zone_get(st, "operations", st.ops, render_op, project, zone,
                    name)


def wait_op(st, h, project, zone, name, query, body):
    deadline = time.time() + st.args.wait_s
    while True:
        now = time.time()
        with st.lock:
            st.advance(now)
            op = st.ops.get((project, zone, name))
            if op is None:
                raise not_found(project, zone, "operations", name)
            if op.status(now) == "DONE" or now >= deadline:
                return 200, render_op(st, op, now), None
            left = min(op.t_done, deadline) - now
        time.sleep(max(0.005, min(left, 0.05)))


def list_ops(st, h, project, zone, query, body):
    return zone_list(st, query, OP_FIELDS, project, zone, "operations",
                     st.ops, render_op, "compute#operationList")


# --- Cloud Billing Catalog ----------------------------------------------------

def skus(st, h, service, query):
    if not query.get("key"):
        auth = h.headers.get("Authorization", "")
        tok = auth[7:].strip() if auth[:7].lower() == "bearer " else None
        if tok is None:
            raise ApiError(403, {"error": {
                "code": 403, "message": "The request is missing a valid API "
                "key.", "status": "PERMISSION_DENIED"}})
        with st.lock:
            ent = st.tokens.get(tok)
        if ent is None or ent[0] <= time.time():
            raise ApiError(401, {"error": {
                "code": 401, "message": "Request had invalid authentication "
                "credentials.", "status": "UNAUTHENTICATED"}})
    maybe_throttle(st, billing=True)
    if service != BILLING_SERVICE:
        raise ApiError(404, {"error": {
            "code": 404, "message": f"Service not found: services/"
            f"{service[:100]}", "status": "NOT_FOUND"}})
    ps = query.get("pageSize", str(MAX_SKU_PAGE))
    if not ps.isdigit() or not 0 <= int(ps) <= MAX_SKU_PAGE:
        raise ApiError(400, {"error": {
            "code": 400, "message": f"Invalid page size: {ps[:20]}",
            "status": "INVALID_ARGUMENT"}})
    size = int(ps) or MAX_SKU_PAGE
    start = 0
    if query.get("pageToken"):
        try:
            start = read_page_token(query["pageToken"], "skus")
            if not isinstance(start, int) or not 0 < start <= len(st.skus):
                raise ValueError("out of range")
        except (ValueError, KeyError, binascii.Error):
            raise ApiError(400, {"error": {
                "code": 400, "message": "Invalid page token.",
                "status": "INVALID_ARGUMENT"}})
    rows = st.skus[start:start + size]
    nxt = page_token(start + size, "skus") \
        if start + size < len(st.skus) else ""
    return 200, {"skus": rows, "nextPageToken": nxt}, None


# --- preemptions -------------------------------------------------------------

def preempted(st, inst):
    """The emulator ended a preempted VM: DELETE removes it, STOP leaves
    it TERMINATED; either way a compute.instances.preempted operation
    says why, as Google's zone operations do."""
    now = time.time()
    with st.lock:
        if inst.deleted or inst.deleting:
            return
        new_op(st, inst.project, inst.zone, "compute.instances.preempted",
               inst.name, inst.id, None, "system", now - st.args.op_seconds,
               message="Instance was preempted.")
        inst.ended = now
        if inst.term_action == "DELETE":
            st._remove((inst.project, inst.zone, inst.name), inst, now)
        else:
            inst.status_override = "TERMINATED"
            st.stats["terminated"] += 1


# --- start-up ---------------------------------------------------------------------

def load_service_account(path, tmp):
    with open(path) as f:
        sa = json.load(f)
    for k in ("client_email", "private_key", "private_key_id", "project_id"):
        if not isinstance(sa.get(k), str) or not sa[k]:
            raise SystemExit(f"gce-fake: {path}: no {k}")
    key = os.path.join(tmp, "key.pem")
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(sa["private_key"])
    pub = os.path.join(tmp, "pub.pem")
    r = subprocess.run(["openssl", "pkey", "-in", key, "-pubout", "-out",
                        pub], capture_output=True, timeout=30)
    os.unlink(key)
    if r.returncode != 0:
        raise SystemExit(f"gce-fake: {path}: openssl pkey: "
                         f"{r.stderr.decode(errors='replace').strip()}")
    return sa, pub


def load_skus(path):
    with open(path) as f:
        data = json.load(f)
    if isinstance(data, dict):
        data = data.get("skus")
    if not isinstance(data, list) or len(data) > MAX_SKUS or \
            not all(isinstance(s, dict) for s in data):
        raise SystemExit(f"gce-fake: {path}: want a JSON list of sku "
                         "objects")
    return data


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    fakecloud.add_server_args(ap)
    ap.add_argument("--service-account", required=True)
    ap.add_argument("--token-ttl", type=int, default=3599)
    ap.add_argument("--op-seconds", type=float, default=1.0)
    ap.add_argument("--pending-s", type=float, default=1.0)
    ap.add_argument("--wait-s", type=float, default=2.0,
                    help="how long operations/wait blocks at most")
    ap.add_argument("--skus", help="JSON list of Cloud Billing sku objects")
    args = ap.parse_args()
    fakecloud.check_ranges(ap, args, (
        ("--token-ttl", args.token_ttl, 1, 86400),
        ("--op-seconds", args.op_seconds, 0, 3600),
        ("--pending-s", args.pending_s, 0, 3600),
        ("--wait-s", args.wait_s, 0, 600)))

    os.makedirs(args.root, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="gce-fake-")
    try:
        sa, pub = load_service_account(args.service_account, tmp)
        emu = vmemu.Emulator(args.root, "gcp")
        st = State(args, sa, emu)
        st.tmp, st.pubkey = tmp, pub
        if args.skus:
            st.skus = load_skus(args.skus)
        fakecloud.serve(st, Handler, args.port, args.port_file)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
