#!/usr/bin/env python3
"""An Azure fake for tenbin's tests: Microsoft identity platform's v2.0
client-credentials token endpoint, Azure Resource Manager's
Microsoft.Compute/virtualMachines (PUT, GET, DELETE, list with nextLink)
with its Azure-AsyncOperation polling, and the public Retail Prices API,
all as Microsoft documents them (shared/research/cloud-contracts.md
sections 3 and 6.3).  Each VM that reaches provisioningState Succeeded
boots its base64-decoded osProfile.customData in the VM emulator
(vmemu.py), which also serves its Scheduled Events at /_meta/<vm>/.

Loopback only, standard library only.  Ids come from counters, so two
runs that make the same calls see the same ids.  SIGTERM stops every VM
this fake started and exits 0.

usage: azure_fake.py --root DIR --port-file FILE --tenant T --client-id C
                     --client-secret S [--port 0] [--subscription SUB]
                     [--token-ttl 3599] [--op-seconds 1] [--pending-s 0]
                     [--page-size 50] [--retry-after 1]
                     [--prices FILE] [--prices-page-size 100]

Control endpoints (no auth, never throttled): POST /_fake/faults,
GET /_fake/faults, POST /_fake/interrupt, GET /_fake/vms,
GET /_fake/stats (tests/fakes/selftest_azure.sh shows each), and
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
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import fakecloud  # noqa: E402  (what the fakes share)
import vmemu  # noqa: E402  (the emulator beside this file)
from fakecloud import ApiError  # noqa: E402

# --- limits: every input is bounded -----------------------------------------
MAX_BODY = 1 << 20          # a request body
MAX_PATH = 4096             # ARM's URLs may be up to 4 KB
MAX_VMS = 4096              # alive or gone, like the emulator's own cap
MAX_OPS = 20000
MAX_TOKENS = 10000
MAX_TAGS = 50               # ARM's limit per resource
MAX_CUSTOM_DATA = 87380     # base64 characters, Compute's limit
MAX_PAGE = 1000
MAX_PRICES = 200000
MAX_FILTER = 2048

API_VERSIONS = ("2023-03-01", "2023-07-01", "2023-09-01", "2024-03-01",
                "2024-07-01", "2024-11-01", "2025-04-01")
PRICES_API_VERSIONS = ("2021-10-01-preview", "2023-01-01-preview")
ARM_AUDIENCES = ("https://management.azure.com",
                 "https://management.core.windows.net")

VM_NAME_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,62}[A-Za-z0-9_])?$")
RG_RE = re.compile(r"^[-\w._()]{1,90}$")
GUIDISH_RE = re.compile(r"^[A-Za-z0-9-]{1,64}$")
LOCATION_RE = re.compile(r"^[a-z0-9]{2,40}$")
COMPUTER_NAME_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?$")
VM_SIZE_RE = re.compile(r"^(?:Standard|Basic)_[A-Za-z0-9_]{1,60}$")
TAG_BAD = set("<>%&\\?/")


def arm_time(t):
    """ARM's timestamps: seven fraction digits and an explicit offset."""
    d = datetime.datetime.fromtimestamp(t, datetime.timezone.utc)
    return d.strftime("%Y-%m-%dT%H:%M:%S.") + \
        "%07d+00:00" % (d.microsecond * 10)


def det_uuid(*parts):
    h = hashlib.sha256(":".join(str(p) for p in parts).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


def b64url(b):
    return base64.urlsafe_b64encode(b).decode().rstrip("=")


def aerr(status, code, message, target=None, headers=None):
    """ARM's error shape (contracts 3.5)."""
    e = {"code": code, "message": message}
    if target:
        e["target"] = target
    return ApiError(status, {"error": e}, headers)


def bad_param(target, message):
    return aerr(400, "InvalidParameter", message, target=target)


# --- state ---------------------------------------------------------------------

def is_shape(entry):
    return entry.lower().startswith(("standard_", "basic_"))


class Op:
    """An Azure-AsyncOperation: InProgress until t_done, then result."""

    def __init__(self, **kw):
        self.error = None
        self.__dict__.update(kw)

    def status(self, now):
        return "InProgress" if now < self.t_done else self.result


class Vm:
    def __init__(self, **kw):
        self.__dict__.update(kw)
        self.state = "Creating"        # provisioningState
        self.power = "starting"
        self.deleting = None           # the delete Op
        self.started = False
        self.interrupted = False
        self.ended = None
        self.gone = False              # deleted, evicted or failed


class State(fakecloud.FakeState):
    def __init__(self, args, emu):
        super().__init__(emu, args.pending_s)
        self.args = args
        self.vms = {}                  # (sub, rg, name) lowercased -> Vm
        self.gone = []
        self.ops = {}                  # op id -> Op
        # self.tokens: token -> (expiry, audience)
        self.req_seq = 0               # x-ms-request-id, trace ids
        self.prices = []

    # Timed transitions happen here, under the lock, before every answer
    # and on a ticker, so what a client reads never runs ahead of them.
    def advance(self, now):
        for key, vm in list(self.vms.items()):
            if vm.deleting is not None:
                if now >= vm.deleting.t_done:
                    self._remove(key, vm, vm.ended or now)
                    self.stats["terminated"] += 1
                continue
            if vm.state == "Creating" and now >= vm.create_op.t_done:
                if vm.create_op.result != "Succeeded":
                    self._remove(key, vm, now)
                    continue
                vm.state = "Succeeded"
                vm.power = "running"
                vm.started = True
                self.stats["launched"] += 1
                try:
                    self.emu.start(vm.vm_id, vm.script,
                                   boot_delay_s=vm.boot_delay_s,
                                   never_boot=vm.never_boot,
                                   info={"zone": vm.zone, "shape": vm.size})
                except ValueError as exc:
                    print(f"azure-fake: vm {vm.vm_id}: {exc}",
                          file=sys.stderr)

    def _remove(self, key, vm, now):
        vm.gone = True
        vm.ended = vm.ended or now
        del self.vms[key]
        self.gone.append(vm)

    def add_op(self, op):
        self.trim_ops(MAX_OPS)
        if len(self.ops) >= MAX_OPS:
            raise aerr(503, "ServiceUnavailable",
                       f"fake: over {MAX_OPS} operations in flight")
        self.ops[op.id] = op

    def next_req(self):
        """The next number of x-ms-request-id and of Entra's trace ids."""
        with self.lock:
            self.req_seq += 1
            return self.req_seq

    # --- what the test controls see (fakecloud) ---

    def all_vms(self):
        return list(self.vms.values()) + self.gone

    def vm_row(self, vm, now):
        if vm.gone:
            state = "Failed" if vm.create_op.result == "Failed" and \
                not vm.started else "deleted"
        elif vm.power == "deallocated":
            state = "deallocated"
        else:
            state = vm.state
        return {"id": vm.name, "vm_id": vm.vm_id, "state": state,
                "zone": vm.zone, "location": vm.location, "shape": vm.size,
                "spot": vm.spot, "node": vm.tags.get("tenbin-node"),
                "instance": vm.tags.get("tenbin-instance"),
                "launched": vm.t0, "ended": vm.ended}

    def add_instance(self, req):
        """A running VM of the subscription, as a cluster's manager
        created it: never started in the emulator (started is set, the
        create op already done, so advance leaves it)."""
        name, rg = req["name"], req["group"] or "rg-gpu"
        sub = self.args.subscription
        if not sub:
            raise ApiError(409, {"error": "a fake serving any subscription "
                                 "adds no VM: start it with --subscription"})
        size = req["shape"] or "Standard_ND96isr_H100_v5"
        if not VM_NAME_RE.match(name) or not RG_RE.match(rg) or \
                not VM_SIZE_RE.match(size):
            raise ApiError(400, {"error": "name, group or shape is no "
                                 "Azure name"})
        now = time.time()
        with self.lock:
            self.advance(now)
            key = vm_key(sub, rg, name)
            if key in self.vms:
                raise ApiError(409, {"error": f"{name} exists in {rg}"})
            if len(self.vms) + len(self.gone) >= MAX_VMS:
                raise ApiError(409, {"error": f"over {MAX_VMS}"})
            n = self.next_seq()
            vm = Vm(name=name, sub=sub, rg=rg, seq=n,
                    rid=(f"/subscriptions/{sub}/resourceGroups/{rg}/"
                         f"providers/Microsoft.Compute/virtualMachines/"
                         f"{name}"),
                    vm_id=self.new_vm_id(name), vm_uuid=det_uuid("vm", n),
                    t0=now, location="eastus", tags=req["labels"],
                    zones=[req["zone"]] if req["zone"] else [],
                    zone=req["zone"] or "", size=size, spot=False,
                    eviction=None, computer_name=name[:15], script="",
                    props={}, never_boot=False, boot_delay_s=0)
            vm.create_op = Op(id=det_uuid("op", n), t0=now, t_done=now,
                              result="Succeeded", api_version="2024-07-01")
            vm.state, vm.power, vm.started = "Succeeded", "running", True
            self.vms[key] = vm
            return {"name": name, "group": rg, "vm_id": vm.vm_id}

    def remove_instance(self, name):
        now = time.time()
        with self.lock:
            self.advance(now)
            key = next((k for k, v in self.vms.items()
                        if v.name.lower() == name.lower()), None)
            if key is None:
                raise ApiError(404, {"error": f"no live vm {name[:100]}"})
            vm = self.vms[key]
            vm.power = "deallocated"
            self._remove(key, vm, now)
            self.stats["terminated"] += 1
            return {"name": vm.name, "group": vm.rg}

    def interrupt(self, name, notice):
        now = time.time()
        with self.lock:
            self.advance(now)
            vm = next((v for v in self.vms.values()
                       if v.name.lower() == name.lower() or
                       v.vm_id == name), None)
            if vm is None:
                raise ApiError(404, {"error": f"no live vm {name[:100]}"})
            if not vm.spot:
                raise ApiError(409, {"error": "only Spot and Low priority "
                                     "VMs are evicted"})
            if not vm.started or vm.deleting is not None or \
                    vm.power != "running":
                raise ApiError(409, {"error": "the VM is not running"})
            vm.interrupted = True
            try:
                self.emu.interrupt(vm.vm_id, notice,
                                   lambda _: evicted(self, vm))
            except (KeyError, ValueError) as e:
                raise ApiError(409, {"error": f"emulator: {e}"})
        return {"vm": vm.name, "notice_s": notice}


# --- rendering -----------------------------------------------------------------

def op_url(st, vm, op, monitor=False):
    q = "monitor=true&" if monitor else ""
    return (f"{st.base}/subscriptions/{vm.sub}/providers/Microsoft.Compute/"
            f"locations/{vm.location}/operations/{op.id}?{q}"
            f"api-version={op.api_version}")


def render_op(op, now):
    status = op.status(now)
    d = {"startTime": arm_time(op.t0), "status": status, "name": op.id}
    if status != "InProgress":
        d["endTime"] = arm_time(op.t_done)
        if op.error:
            d["error"] = dict(op.error)
    return d


def instance_view(vm, now):
    prov = {"Creating": "creating", "Succeeded": "succeeded",
            "Deleting": "deleting"}.get(vm.state, vm.state.lower())
    statuses = [{"code": f"ProvisioningState/{prov}", "level": "Info",
                 "displayStatus": f"Provisioning {prov}",
                 "time": arm_time(vm.t0)}]
    if vm.power:
        statuses.append({"code": f"PowerState/{vm.power}", "level": "Info",
                         "displayStatus": f"VM {vm.power}"})
    return {"computerName": vm.computer_name, "osName": "ubuntu",
            "statuses": statuses}


def render_vm(vm, now, with_view=False):
    props = {"vmId": vm.vm_uuid, "hardwareProfile": {"vmSize": vm.size},
             "provisioningState": vm.state,
             "timeCreated": arm_time(vm.t0)}
    for k in ("storageProfile", "networkProfile", "diagnosticsProfile",
              "securityProfile", "additionalCapabilities"):
        if k in vm.props:
            props[k] = vm.props[k]
    if "osProfile" in vm.props:
        # ARM never returns customData or a password.
        osp = {k: v for k, v in vm.props["osProfile"].items()
               if k not in ("customData", "adminPassword")}
        osp.setdefault("allowExtensionOperations", True)
        osp.setdefault("requireGuestProvisionSignal", True)
        props["osProfile"] = osp
    for k in ("priority", "evictionPolicy", "billingProfile"):
        if k in vm.props:
            props[k] = vm.props[k]
    if with_view:
        props["instanceView"] = instance_view(vm, now)
    d = {"name": vm.name, "id": vm.rid,
         "type": "Microsoft.Compute/virtualMachines",
         "location": vm.location, "properties": props}
    if vm.tags:
        d["tags"] = dict(vm.tags)
    if vm.zones:
        d["zones"] = list(vm.zones)
    return d


# --- PUT validation ----------------------------------------------------------------

def validate_put(body, name):
    """What a PUT body asks for, or ApiError naming what is wrong."""
    if not isinstance(body, dict):
        raise aerr(400, "InvalidRequestContent",
                   "The request content was invalid and could not be "
                   "deserialized.")
    loc = body.get("location")
    if not isinstance(loc, str) or not loc:
        raise aerr(400, "LocationRequired",
                   "The location property is required for this definition.")
    loc = loc.replace(" ", "").lower()
    if not LOCATION_RE.match(loc):
        raise aerr(400, "NoRegisteredProviderFound",
                   f"No registered resource provider found for location "
                   f"'{loc[:50]}' and API version for type "
                   "'virtualMachines'.")
    tags = body.get("tags", {})
    if tags is None:
        tags = {}
    if not isinstance(tags, dict) or len(tags) > MAX_TAGS:
        raise aerr(400, "InvalidTag",
                   f"A resource takes a map of at most {MAX_TAGS} tags.")
    for k, v in tags.items():
        if not k or len(k) > 512 or set(k) & TAG_BAD:
            raise aerr(400, "InvalidTagNameCharacters",
                       f"The tag names '{k[:100]}' have reserved "
                       "characters '<,>,%,&,\\,?,/' or control characters.")
        if not isinstance(v, str) or len(v) > 256:
            raise aerr(400, "InvalidTag",
                       f"The value of tag '{k[:100]}' must be a string of "
                       "at most 256 characters.")
    zones = body.get("zones", [])
    if zones is None:
        zones = []
    if not isinstance(zones, list) or len(zones) > 1 or \
            not all(z in ("1", "2", "3") for z in zones):
        raise bad_param("zones", "The zones must be one of '1', '2', '3'.")
    props = body.get("properties")
    if not isinstance(props, dict):
        raise bad_param("properties", "Required parameter 'properties' is "
                        "missing (null).")
    hw = props.get("hardwareProfile")
    size = hw.get("vmSize") if isinstance(hw, dict) else None
    if not isinstance(size, str) or not size:
        raise bad_param("hardwareProfile.vmSize", "Required parameter "
                        "'hardwareProfile.vmSize' is missing (null).")
    if not VM_SIZE_RE.match(size):
        raise bad_param("hardwareProfile.vmSize",
                        f"The value {size[:80]} provided for the VM size is "
                        "not valid.")
    for k in ("storageProfile", "networkProfile", "osProfile",
              "billingProfile", "diagnosticsProfile", "securityProfile",
              "additionalCapabilities"):
        if k in props and not isinstance(props[k], dict):
            raise bad_param(k, f"'{k}' must be an object.")
    prio = props.get("priority", "Regular")
    if prio not in ("Regular", "Low", "Spot"):
        raise bad_param("priority", f"The value '{str(prio)[:40]}' of "
                        "parameter 'priority' is not allowed. Allowed "
                        "values are 'Regular', 'Low', 'Spot'.")
    spot = prio in ("Low", "Spot")
    evict = props.get("evictionPolicy")
    if evict is not None:
        if evict not in ("Deallocate", "Delete"):
            raise bad_param("evictionPolicy", "Allowed values are "
                            "'Deallocate', 'Delete'.")
        if not spot:
            raise bad_param("evictionPolicy", "Eviction policy can be set "
                            "only on Azure Spot Virtual Machines.")
    bp = props.get("billingProfile")
    if bp is not None:
        mp = bp.get("maxPrice")
        if isinstance(mp, bool) or not isinstance(mp, (int, float)) or \
                (mp != -1 and mp <= 0):
            raise bad_param("billingProfile.maxPrice",
                            "Max price must be -1 or greater than 0.")
        if not spot:
            raise bad_param("billingProfile", "Billing profile can be set "
                            "only on Azure Spot Virtual Machines.")
    osp = props.get("osProfile", {})
    computer = osp.get("computerName", name)
    if not isinstance(computer, str) or not COMPUTER_NAME_RE.match(computer):
        raise bad_param("osProfile.computerName",
                        "Linux host name cannot exceed 64 characters in "
                        "length or contain the following characters: "
                        "` ~ ! @ # $ % ^ & * ( ) = + _ [ ] { } \\ | ; : ' \" "
                        ", < > / ?.")
    if osp and not isinstance(osp.get("adminUsername"), str):
        raise bad_param("osProfile.adminUsername", "Required parameter "
                        "'osProfile.adminUsername' is missing (null).")
    script = b""
    cd = osp.get("customData")
    if cd is not None:
        try:
            if not isinstance(cd, str) or len(cd) > MAX_CUSTOM_DATA:
                raise ValueError("size")
            script = base64.b64decode(cd, validate=True)
        except (ValueError, binascii.Error):
            raise bad_param("customData", "Custom data in OSProfile must be "
                            "in Base64 encoding and with a maximum length "
                            f"of {MAX_CUSTOM_DATA} characters.")
    return {"location": loc, "tags": dict(tags), "zones": list(zones),
            "size": size, "spot": spot, "priority": prio,
            "eviction": evict or ("Deallocate" if spot else None),
            "computer_name": computer, "script": script,
            "props": json.loads(json.dumps(props))}


def quota_refusal(size, spot, loc):
    m = re.match(r"^(?:Standard|Basic)_([A-Za-z]+)(\d+)([A-Za-z]*)(.*)$",
                 size)
    cores = int(m.group(2)) if m else 1
    family = ("standard" + m.group(1) + m.group(4).replace("_", "") +
              "Family") if m else "standardFamily"
    what = "Total Regional Low-priority vCPUs" if spot \
        else f"{family} Cores"
    return aerr(409, "OperationNotAllowed",
                f"Operation could not be completed as it results in "
                f"exceeding approved {what} quota. Additional details - "
                f"Deployment Model: Resource Manager, Location: {loc}, "
                f"Current Limit: 0, Current Usage: 0, Additional Required: "
                f"{cores}, (Minimum) New Limit Required: {cores}. Submit a "
                f"request for Quota increase at https://aka.ms/"
                f"ProdportalCRP/#blade/Microsoft_Azure_Capacity/"
                f"UsageAndQuota.ReactView by specifying parameters listed in "
                f"the 'Details' section for deployment to succeed.")


# --- the Retail Prices filter ----------------------------------------------------

class FilterError(ValueError):
    pass


PRICE_FIELD_ALIASES = {"priceType": "type"}


def parse_price_filter(text):
    """`FIELD eq 'VALUE'` terms joined by `and`, optionally in
    parentheses: what tenbin sends.  Returns [(field, value)]."""
    terms, i, n = [], 0, len(text)
    rx_term = re.compile(r"\s*\(?\s*([A-Za-z]+)\s+eq\s+'((?:[^']|'')*)'"
                         r"\s*\)?\s*")
    while True:
        m = rx_term.match(text, i)
        if not m:
            raise FilterError(f"cannot read a term at {text[i:i + 40]!r}")
        terms.append((m.group(1), m.group(2).replace("''", "'")))
        i = m.end()
        if i >= n:
            break
        m = re.compile(r"and\s", re.IGNORECASE).match(text, i)
        if not m:
            raise FilterError(f"only 'and' joins terms, at "
                              f"{text[i:i + 40]!r}")
        i = m.end()
    return terms


def price_match(terms, row, case_sensitive):
    for field, value in terms:
        v = row.get(PRICE_FIELD_ALIASES.get(field, field))
        if v is None:
            v = row.get(field)
        if not isinstance(v, str):
            v = "" if v is None else json.dumps(v)
        if case_sensitive:
            if v != value:
                return False
        elif v.lower() != value.lower():
            return False
    return True


# --- HTTP ----------------------------------------------------------------------------

class Handler(fakecloud.Handler):
    name = "azure-fake"
    server_version = "azure-fake/1"
    max_body = MAX_BODY
    max_path = MAX_PATH

    def answer_headers(self):
        n = self.server.st.next_req()
        return {"x-ms-request-id": det_uuid("req", n),
                "x-ms-correlation-request-id": det_uuid("corr", n)}

    def refusal(self, status):
        if status == 500:
            return ApiError(500, {"error": {"code": "InternalServerError",
                                            "message": "fake: internal "
                                            "error"}})
        return aerr(status, *{
            400: ("InvalidQueryParameter", "Too many query parameters."),
            411: ("LengthRequired", "Content-Length is required."),
            413: ("RequestEntityTooLarge", "The request body is too large "
                  "or its Content-Length malformed."),
            414: ("RequestUriTooLong", "The request URI is too long.")}[
                status])

    def route(self, path, query, body):
        return route(self.server.st, self, path, query, body)


def check_auth(st, h):
    auth = h.headers.get("Authorization")
    www = f'Bearer authorization_uri="{st.base}/{st.args.tenant}", ' \
          'error="invalid_token"'
    if not auth:
        raise aerr(401, "AuthenticationFailed", "Authentication failed. The "
                   "'Authorization' header is missing.",
                   headers={"WWW-Authenticate": www})
    tok = auth[7:].strip() if auth[:7].lower() == "bearer " else None
    if not tok:
        raise aerr(401, "AuthenticationFailedInvalidHeader",
                   "Authentication failed. The 'Authorization' header is "
                   "provided in an invalid format.",
                   headers={"WWW-Authenticate": www})
    with st.lock:
        ent = st.tokens.get(tok)
    now = time.time()
    if ent is None:
        raise aerr(401, "InvalidAuthenticationToken",
                   "The access token is invalid.",
                   headers={"WWW-Authenticate": www})
    if ent[0] <= now:
        t = datetime.datetime.fromtimestamp
        fmt = "%m/%d/%Y %H:%M:%S"
        raise aerr(401, "ExpiredAuthenticationToken",
                   f"The access token expiry UTC time "
                   f"'{t(ent[0], datetime.timezone.utc).strftime(fmt)}' is "
                   f"earlier than current UTC time "
                   f"'{t(now, datetime.timezone.utc).strftime(fmt)}'.",
                   headers={"WWW-Authenticate": www})
    if ent[1] not in ARM_AUDIENCES:
        raise aerr(401, "InvalidAuthenticationTokenAudience",
                   f"The access token has been obtained for wrong audience "
                   f"or resource '{ent[1][:100]}'. It should exactly match "
                   "with one of the allowed audiences "
                   "'https://management.core.windows.net/',"
                   "'https://management.core.windows.net',"
                   "'https://management.azure.com/',"
                   "'https://management.azure.com'.",
                   headers={"WWW-Authenticate": www})


def check_api_version(query, versions=API_VERSIONS):
    v = query.get("api-version")
    if not v:
        raise aerr(400, "MissingApiVersionParameter",
                   "The api-version query parameter (?api-version=) is "
                   "required for all requests.")
    if v not in versions:
        raise aerr(400, "NoRegisteredProviderFound",
                   f"No registered resource provider found for API version "
                   f"'{v[:40]}' and type 'virtualMachines'. The supported "
                   f"api-versions are '{', '.join(versions)}'.")
    return v


def maybe_throttle(st, write):
    if not st.take_throttle():
        return
    kind = "write" if write else "read"
    ra = str(st.args.retry_after)
    raise aerr(429, "TooManyRequests",
               f"Number of '{kind}' requests for subscription actor has "
               f"exceeded the limit. Please try again after '{ra}' seconds "
               "after additional tokens are available. Refer to "
               "https://aka.ms/arm-throttling",
               headers={"Retry-After": ra,
                        f"x-ms-ratelimit-remaining-subscription-{kind}s":
                        "0"})


def check_sub_rg(st, sub, rg):
    if not GUIDISH_RE.match(sub) or \
            (st.args.subscription and
             sub.lower() != st.args.subscription.lower()):
        raise aerr(404, "SubscriptionNotFound",
                   f"The subscription '{sub[:64]}' could not be found.")
    if rg is not None and (not RG_RE.match(rg) or rg.endswith(".")):
        raise aerr(400, "InvalidResourceGroup",
                   f"The provided resource group name '{rg[:90]}' has these "
                   "invalid characters or is too long.")


NOCASE = re.IGNORECASE
PFX = r"^/subscriptions/([^/]+)"
RE_VM = re.compile(PFX + r"/resourceGroups/([^/]+)/providers/"
                   r"Microsoft\.Compute/virtualMachines/([^/]+)$", NOCASE)
RE_VIEW = re.compile(PFX + r"/resourceGroups/([^/]+)/providers/"
                     r"Microsoft\.Compute/virtualMachines/([^/]+)/"
                     r"instanceView$", NOCASE)
RE_LIST = re.compile(PFX + r"/resourceGroups/([^/]+)/providers/"
                     r"Microsoft\.Compute/virtualMachines$", NOCASE)
RE_LIST_ALL = re.compile(PFX + r"/providers/Microsoft\.Compute/"
                         r"virtualMachines$", NOCASE)
RE_OP = re.compile(PFX + r"/providers/Microsoft\.Compute/locations/"
                   r"([^/]+)/operations/([^/]+)$", NOCASE)
RE_TOKEN = re.compile(r"^/([^/]+)/oauth2/v2\.0/token$")


def route(st, h, path, query, body):
    m = h.command
    mm = RE_TOKEN.match(path)
    if mm and m == "POST":
        st.count("token")
        return token(st, h, urllib.parse.unquote(mm.group(1)), body)
    if path == "/api/retail/prices" and m == "GET":
        st.count("prices.list")
        maybe_throttle(st, False)
        return prices(st, query)

    routes = ((RE_VM, "PUT", "virtualMachines.createOrUpdate", put_vm),
              (RE_VM, "GET", "virtualMachines.get", get_vm),
              (RE_VM, "DELETE", "virtualMachines.delete", delete_vm),
              (RE_VIEW, "GET", "virtualMachines.instanceView", get_view),
              (RE_LIST, "GET", "virtualMachines.list", list_vms),
              (RE_LIST_ALL, "GET", "virtualMachines.listAll", list_vms),
              (RE_OP, "GET", "operations.get", get_op))
    for rx, method, action, fn in routes:
        mm = rx.match(path)
        if mm and m == method:
            st.count(action)
            check_auth(st, h)
            api = check_api_version(query)
            maybe_throttle(st, m != "GET")
            g = [urllib.parse.unquote(x) for x in mm.groups()]
            check_sub_rg(st, g[0], g[1] if fn is not get_op and
                         len(g) > 1 else None)
            return fn(st, h, api, query, body, *g)
    if any(rx.match(path) for rx, _, _, _ in routes):
        raise aerr(405, "MethodNotAllowed",
                   f"The requested method {m} is not allowed here.")
    raise aerr(404, "InvalidResourceType", f"The resource type could not be "
               f"found for the path '{path[:200]}'.")


# --- the token endpoint --------------------------------------------------------------

def aad_error(status, error, code, message, st):
    now = time.time()
    n = st.next_req()
    trace, corr = det_uuid("trace", n), det_uuid("corr", n)
    stamp = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(now))
    return ApiError(status, {
        "error": error,
        "error_description": f"AADSTS{code}: {message} Trace ID: {trace} "
                             f"Correlation ID: {corr} Timestamp: {stamp}",
        "error_codes": [code], "timestamp": stamp, "trace_id": trace,
        "correlation_id": corr,
        "error_uri": f"{st.base}/error?code={code}"})


def token(st, h, tenant, body):
    a = st.args
    if tenant.lower() != a.tenant.lower():
        raise aad_error(400, "invalid_request", 90002,
                        f"Tenant '{tenant[:64]}' not found. Check to make "
                        "sure you have the correct tenant ID and are signing "
                        "into the correct cloud.", st)
    ctype = h.headers.get("Content-Type", "").split(";")[0].strip().lower()
    if ctype != "application/x-www-form-urlencoded":
        raise aad_error(400, "invalid_request", 900144,
                        "The request body must contain the following "
                        "parameter: 'grant_type'.", st)
    try:
        form = urllib.parse.parse_qs(body.decode("utf-8"),
                                     keep_blank_values=True,
                                     max_num_fields=20)
    except (UnicodeDecodeError, ValueError):
        raise aad_error(400, "invalid_request", 900144,
                        "The request body is not a valid form.", st)
    if any(len(v) != 1 for v in form.values()):
        raise aad_error(400, "invalid_request", 90015,
                        "Requested query string is too long or repeats a "
                        "parameter.", st)
    form = {k: v[0] for k, v in form.items()}
    for p in ("grant_type", "client_id", "scope"):
        if not form.get(p):
            raise aad_error(400, "invalid_request", 900144,
                            f"The request body must contain the following "
                            f"parameter: '{p}'.", st)
    if form["grant_type"] != "client_credentials":
        raise aad_error(400, "unsupported_grant_type", 70003,
                        f"The app requested an unsupported grant type "
                        f"'{form['grant_type'][:64]}'.", st)
    if form["client_id"] != a.client_id:
        raise aad_error(400, "unauthorized_client", 700016,
                        f"Application with identifier "
                        f"'{form['client_id'][:64]}' was not found in the "
                        f"directory '{a.tenant}'. This can happen if the "
                        "application has not been installed by the "
                        "administrator of the tenant or consented to by any "
                        "user in the tenant. You may have sent your "
                        "authentication request to the wrong tenant.", st)
    if not form.get("client_secret"):
        raise aad_error(401, "invalid_client", 7000216,
                        "'client_assertion', 'client_secret' or 'request' is "
                        "required for the 'client_credentials' grant type.",
                        st)
    if form["client_secret"] != a.client_secret:
        raise aad_error(401, "invalid_client", 7000215,
                        "Invalid client secret provided. Ensure the secret "
                        "being sent in the request is the client secret "
                        "value, not the client secret ID, for a secret added "
                        f"to app '{a.client_id}'.", st)
    scope = form["scope"]
    if len(scope) > 1024 or " " in scope.strip() or \
            not scope.endswith("/.default") or \
            not scope.startswith("https://"):
        raise aad_error(400, "invalid_scope", 70011,
                        f"The provided request must include a 'scope' input "
                        f"parameter. The provided value for the input "
                        f"parameter 'scope' is not valid. The scope "
                        f"{scope[:100]} is not valid.", st)
    aud = scope[:-len("/.default")].rstrip("/")
    now = time.time()
    with st.lock:
        n = st.next_seq()
        claims = {"aud": aud, "iss": f"https://sts.windows.net/{a.tenant}/",
                  "iat": int(now), "nbf": int(now),
                  "exp": int(now) + a.token_ttl, "appid": a.client_id,
                  "tid": a.tenant, "oid": det_uuid("oid", a.client_id)}
        tok = (b64url(b'{"typ":"JWT","alg":"RS256"}') + "." +
               b64url(json.dumps(claims).encode()) + "." +
               b64url(hashlib.sha256(f"sig:{n}".encode()).digest()))
        st.keep_token(tok, (now + a.token_ttl, aud), now, MAX_TOKENS)
    return 200, {"token_type": "Bearer", "expires_in": a.token_ttl,
                 "ext_expires_in": a.token_ttl, "access_token": tok}, \
        {"Cache-Control": "no-store, no-cache", "Pragma": "no-cache"}


# --- virtual machines ---------------------------------------------------------------

def vm_key(sub, rg, name):
    return (sub.lower(), rg.lower(), name.lower())


def not_found(rg, name):
    return aerr(404, "ResourceNotFound",
                f"The Resource 'Microsoft.Compute/virtualMachines/"
                f"{name[:80]}' under resource group '{rg[:90]}' was not "
                "found. For more details please go to "
                "https://aka.ms/ARMResourceNotFoundFix")


def async_headers(st, vm, op, monitor=False):
    h = {"Azure-AsyncOperation": op_url(st, vm, op),
         "Retry-After": str(st.args.retry_after)}
    if monitor:
        h["Location"] = op_url(st, vm, op, monitor=True)
    return h


def new_op(st, vm, api, now, t_done, result="Succeeded", error=None):
    n = st.next_seq()
    op = Op(id=det_uuid("op", n), t0=now, t_done=t_done, result=result,
            error=error, api_version=api, sub=vm.sub.lower())
    st.add_op(op)
    return op


def put_vm(st, h, api, query, body, sub, rg, name):
    if not VM_NAME_RE.match(name):
        with st.lock:
            st.stats["refused"] += 1
        raise aerr(400, "InvalidResourceName",
                   f"Resource name {name[:80]} is invalid. The name can be "
                   "up to 64 characters long. It can contain only letters, "
                   "numbers, periods, underscores and hyphens, begin with a "
                   "letter or number, and end with a letter, number or "
                   "underscore.")
    try:
        want = validate_put(json.loads(body or b"null"), name)
    except (ValueError, RecursionError):
        with st.lock:
            st.stats["refused"] += 1
        raise aerr(400, "InvalidRequestContent",
                   "The request content was invalid and could not be "
                   "deserialized.")
    except ApiError:
        with st.lock:
            st.stats["refused"] += 1
        raise
    now = time.time()
    key = vm_key(sub, rg, name)
    with st.lock:
        st.advance(now)
        vm = st.vms.get(key)
        if vm is not None:
            if vm.deleting is not None:
                st.stats["refused"] += 1
                raise aerr(409, "OperationNotAllowed",
                           f"Operation 'PUT' is not allowed on VM "
                           f"'{vm.name}' since the VM is marked for "
                           "deletion. You can only retry the Delete "
                           "operation (or wait for an ongoing one to "
                           "complete).")
            if vm.location != want["location"]:
                st.stats["refused"] += 1
                raise aerr(409, "InvalidResourceLocation",
                           f"The resource '{vm.name}' already exists in "
                           f"location '{vm.location}' in resource group "
                           f"'{vm.rg}'. A resource with the same name cannot "
                           f"be created in location '{want['location']}'. "
                           "Please select a new resource name.")
            # PUT is idempotent by name: the same VM, no second one.
            st.stats["deduplicated"] += 1
            op = vm.create_op
            if op.id not in st.ops:
                op = new_op(st, vm, api, now, now)
            return 200, render_vm(vm, now), async_headers(st, vm, op)
        f = st.faults
        size, loc = want["size"], want["location"]
        zone = want["zones"][0] if want["zones"] else ""
        rid = (f"/subscriptions/{sub}/resourceGroups/{rg}/providers/"
               f"Microsoft.Compute/virtualMachines/{name}")
        if size in f.quota:
            st.stats["refused"] += 1
            raise quota_refusal(size, want["spot"], loc)
        if size in [c for c in f.capacity if is_shape(c)]:
            st.stats["refused"] += 1
            raise aerr(409, "SkuNotAvailable",
                       f"The requested size for resource '{rid}' is "
                       f"currently not available in location '{loc}' zones "
                       f"'{zone}' for subscription '{sub}'. Please try "
                       "another size or deploy to a different location or "
                       "zones. See https://aka.ms/azureskunotavailable for "
                       "details.")
        if len(st.vms) + len(st.gone) >= MAX_VMS:
            st.stats["refused"] += 1
            raise aerr(409, "OperationNotAllowed",
                       f"fake: over {MAX_VMS} virtual machines")
        places = [p for p in (zone, loc) if p]
        capacity = any(c in places or
                       any(c == f"{p}/{size}" for p in places)
                       for c in f.capacity if not is_shape(c))
        vm_id = st.new_vm_id(name)
        never = not capacity and f.take_never_boot()
        n = st.next_seq()
        vm = Vm(name=name, sub=sub, rg=rg, rid=rid, vm_id=vm_id, seq=n,
                vm_uuid=det_uuid("vm", n), t0=now, location=loc,
                tags=want["tags"], zones=want["zones"], zone=zone, size=size,
                spot=want["spot"], eviction=want["eviction"],
                computer_name=want["computer_name"], script=want["script"],
                props=want["props"], never_boot=never,
                boot_delay_s=f.boot_delay_s)
        done = now + max(st.args.op_seconds, f.pending_s)
        if capacity:
            st.stats["refused"] += 1
            err = {"code": "AllocationFailed",
                   "message": "Allocation failed. We do not have sufficient "
                   "capacity for the requested VM size in this region. Read "
                   "more about improving likelihood of allocation success "
                   "at http://aka.ms/allocation-guidance"}
            vm.create_op = new_op(st, vm, api, now, done, "Failed", err)
        else:
            vm.create_op = new_op(st, vm, api, now, done)
        st.vms[key] = vm
        st.advance(now)
        return 201, render_vm(vm, now), async_headers(st, vm, vm.create_op)


def get_vm(st, h, api, query, body, sub, rg, name):
    expand = query.get("$expand", "")
    if expand and expand not in ("instanceView", "userData"):
        raise aerr(400, "InvalidParameter", f"The value of parameter "
                   f"'$expand' is invalid: {expand[:40]}.", target="$expand")
    return read_vm(st, sub, rg, name,
                   lambda vm, now: render_vm(vm, now,
                                             expand == "instanceView"))


def get_view(st, h, api, query, body, sub, rg, name):
    return read_vm(st, sub, rg, name, instance_view)


def read_vm(st, sub, rg, name, render):
    """A GET of one VM: 200 with render(vm, now), or 404."""
    now = time.time()
    with st.lock:
        st.advance(now)
        vm = st.vms.get(vm_key(sub, rg, name))
        if vm is None:
            raise not_found(rg, name)
        return 200, render(vm, now), None


def delete_vm(st, h, api, query, body, sub, rg, name):
    force = query.get("forceDeletion", "false").lower()
    if force not in ("true", "false"):
        raise aerr(400, "InvalidParameter", "forceDeletion must be true or "
                   "false.", target="forceDeletion")
    now = time.time()
    with st.lock:
        st.advance(now)
        vm = st.vms.get(vm_key(sub, rg, name))
        if vm is None:
            return 204, None, None
        if vm.deleting is None:
            if vm.state == "Creating":
                # A delete preempts the create still running.
                c = vm.create_op
                c.t_done, c.result = now, "Canceled"
                c.error = {"code": "OperationPreempted",
                           "message": "Operation execution has been "
                           "preempted by a more recent operation."}
            vm.deleting = new_op(st, vm, api, now,
                                 now + st.args.op_seconds)
            vm.state = "Deleting"
            vm.power = "stopping" if vm.power == "running" else vm.power
            vm.ended = now
            if vm.started:
                fakecloud.stop_later(st.emu, vm.vm_id)
        return 202, None, async_headers(st, vm, vm.deleting, monitor=True)


def list_vms(st, h, api, query, body, sub, rg=None):
    now = time.time()
    after = None
    tok = query.get("$skiptoken")
    if tok:
        try:
            if len(tok) > 1024:
                raise ValueError("long")
            after = json.loads(base64.urlsafe_b64decode(
                tok + "=" * (-len(tok) % 4)))
            if not isinstance(after, list) or len(after) != 2:
                raise ValueError("shape")
        except (ValueError, binascii.Error):
            raise aerr(400, "InvalidSkipToken",
                       "The provided skip token is invalid.")
    with_view = query.get("statusOnly", "false").lower() == "true"
    with st.lock:
        st.advance(now)
        rows = sorted(((k[1], k[2]), v) for k, v in st.vms.items()
                      if k[0] == sub.lower() and
                      (rg is None or k[1] == rg.lower()))
        if after is not None:
            rows = [r for r in rows if list(r[0]) > after]
        size = st.args.page_size
        out = {"value": [render_vm(v, now, with_view)
                         for _, v in rows[:size]]}
    if len(rows) > size:
        tok = base64.urlsafe_b64encode(json.dumps(
            list(rows[size - 1][0])).encode()).decode().rstrip("=")
        q = urllib.parse.urlencode({"api-version": api, "$skiptoken": tok})
        if with_view:
            q += "&statusOnly=true"
        out["nextLink"] = f"{st.base}{urllib.parse.urlsplit(h.path).path}?{q}"
    return 200, out, None


def get_op(st, h, api, query, body, sub, location, op_id):
    now = time.time()
    with st.lock:
        st.advance(now)
        op = st.ops.get(op_id.lower())
        if op is None or op.sub != sub.lower():
            raise aerr(404, "ResourceNotFound",
                       f"The operation '{op_id[:64]}' was not found.")
        d = render_op(op, now)
    if query.get("monitor") == "true":
        # The Location flavour: 202 while it runs, then the outcome.
        if d["status"] == "InProgress":
            return 202, None, {"Retry-After": str(st.args.retry_after)}
        if d["status"] == "Succeeded":
            return 200, None, None
        return 409 if d["status"] == "Canceled" else 500, \
            {"error": d.get("error", {"code": d["status"]})}, None
    return 200, d, None


# --- Retail Prices --------------------------------------------------------------------

def prices(st, query):
    v = query.get("api-version")
    if v is not None and v not in PRICES_API_VERSIONS:
        raise ApiError(400, {"Error": {
            "Code": "InvalidApiVersion",
            "Message": f"The api-version '{v[:40]}' is invalid. Supported "
                       f"versions: {', '.join(PRICES_API_VERSIONS)}."}})
    ftext = query.get("$filter", "")
    if len(ftext) > MAX_FILTER:
        raise ApiError(400, {"Error": {"Code": "InvalidFilter",
                                       "Message": "The filter is too long."}})
    terms = []
    if ftext.strip():
        try:
            terms = parse_price_filter(ftext)
        except FilterError as e:
            raise ApiError(400, {"Error": {
                "Code": "InvalidFilter",
                "Message": f"Invalid OData filter: {e}"}})
    skip = query.get("$skip", "0")
    if not skip.isdigit() or int(skip) > MAX_PRICES:
        raise ApiError(400, {"Error": {"Code": "InvalidSkip",
                                       "Message": "$skip must be a count."}})
    skip = int(skip)
    # From 2023-01-01-preview on, filter values are case-sensitive.
    rows = [r for r in st.prices
            if price_match(terms, r, v == "2023-01-01-preview")]
    size = st.args.prices_page_size
    page = rows[skip:skip + size]
    nxt = None
    if skip + size < len(rows):
        q = {}
        if v:
            q["api-version"] = v
        if ftext:
            q["$filter"] = ftext
        q["$skip"] = str(skip + size)
        nxt = f"{st.base}/api/retail/prices?" + \
            urllib.parse.urlencode(q, quote_via=urllib.parse.quote)
    return 200, {"BillingCurrency": "USD", "CustomerEntityId": "Default",
                 "CustomerEntityType": "Retail", "Items": page,
                 "NextPageLink": nxt, "Count": len(page)}, None


# --- evictions ---------------------------------------------------------------

def evicted(st, vm):
    """The emulator ended an evicted VM: evictionPolicy Delete removes
    it; Deallocate leaves it Succeeded but PowerState/deallocated."""
    now = time.time()
    with st.lock:
        if vm.gone or vm.deleting is not None:
            return
        vm.ended = now
        st.stats["terminated"] += 1
        if vm.eviction == "Delete":
            st._remove(vm_key(vm.sub, vm.rg, vm.name), vm, now)
        else:
            vm.power = "deallocated"


# --- start-up -----------------------------------------------------------------------

def load_prices(path):
    with open(path) as f:
        data = json.load(f)
    if isinstance(data, dict):
        data = data.get("Items")
    if not isinstance(data, list) or len(data) > MAX_PRICES or \
            not all(isinstance(r, dict) for r in data):
        raise SystemExit(f"azure-fake: {path}: want a JSON list of price "
                         "rows (or {\"Items\": [...]})")
    return data


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    fakecloud.add_server_args(ap)
    ap.add_argument("--tenant", required=True)
    ap.add_argument("--client-id", required=True)
    ap.add_argument("--client-secret", required=True)
    ap.add_argument("--subscription",
                    help="the one subscription served (default: any)")
    ap.add_argument("--token-ttl", type=int, default=3599)
    ap.add_argument("--op-seconds", type=float, default=1.0)
    ap.add_argument("--pending-s", type=float, default=0.0,
                    help="Creating lasts max(op-seconds, this)")
    ap.add_argument("--page-size", type=int, default=50)
    ap.add_argument("--retry-after", type=int, default=1)
    ap.add_argument("--prices", help="JSON list of Retail Prices rows")
    ap.add_argument("--prices-page-size", type=int, default=100)
    args = ap.parse_args()
    fakecloud.check_ranges(ap, args, (
        ("--token-ttl", args.token_ttl, 1, 86400),
        ("--op-seconds", args.op_seconds, 0, 3600),
        ("--pending-s", args.pending_s, 0, 3600),
        ("--page-size", args.page_size, 1, MAX_PAGE),
        ("--retry-after", args.retry_after, 0, 3600),
        ("--prices-page-size", args.prices_page_size, 1, MAX_PAGE)))
    for name, v in (("--tenant", args.tenant),
                    ("--client-id", args.client_id),
                    ("--subscription", args.subscription)):
        if v is not None and not GUIDISH_RE.match(v):
            ap.error(f"{name} must be 1-64 of [A-Za-z0-9-]")

    os.makedirs(args.root, exist_ok=True)
    emu = vmemu.Emulator(args.root, "azure")
    st = State(args, emu)
    if args.prices:
        st.prices = load_prices(args.prices)
    fakecloud.serve(st, Handler, args.port, args.port_file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
