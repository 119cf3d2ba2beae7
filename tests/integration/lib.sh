# Shared helpers for the integration tests: start a real tenbind (the
# sanitizer build ctest points TENBIN_BIN at) on 127.0.0.1 with a state
# directory of its own, talk to it with the real CLI and curl, and stop
# exactly the processes the test started.
set -euo pipefail

: "${TENBIN_BIN:?TENBIN_BIN must point at the bin directory of a build}"
: "${TENBIN_SOURCE_DIR:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
TENBIND="$TENBIN_BIN/tenbind"
TENBIN="$TENBIN_BIN/tenbin"
T_NAME=$(basename "$0" .sh)
T_DIR=$(mktemp -d "/tmp/tenbin-$T_NAME.XXXXXX")
T_STATE="$T_DIR/state"
T_PID=""
T_URL=""
T_FAILS=0
T_CHECKS=0
export TENBIN_SERVER=""
unset TENBIN_TOKEN
# A test never installs packages (an install mid-run races the package
# manager's lock): scripts/setup and scripts/slurm-testbed fail instead,
# naming what is missing.  scripts/test installs everything first.
export TENBIN_NO_INSTALL=1

# LeakSanitizer reports at exit; a shutdown by signal must stay clean too.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}

t_cleanup() {
  local rc=$?
  if [ -n "$T_PID" ] && kill -0 "$T_PID" 2>/dev/null; then
    kill -TERM "$T_PID" 2>/dev/null || true
    wait "$T_PID" 2>/dev/null || true
  fi
  # Jobs of the local site run in sessions of their own: end the shims
  # this test's state directory launched, by their recorded pids.
  for f in "$T_STATE"/jobs/*/shim.pid; do
    [ -f "$f" ] || continue
    pid=$(cut -d' ' -f1 "$f" 2>/dev/null || true)
    [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null || true
  done
  t_slurm_stop
  for pid in "${T_AGENT_PIDS[@]}" "${T_BG_PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [ "$rc" -eq 0 ] && [ "$T_FAILS" -eq 0 ]; then
    rm -rf "$T_DIR"
  else
    echo "kept $T_DIR for inspection" >&2
  fi
}
trap t_cleanup EXIT

# Start tenbind: t_start [tenbind args...].  Waits for /healthz.
t_start() {
  : >"$T_DIR/tenbind.out"
  "$TENBIND" --listen 127.0.0.1:0 --state "$T_STATE" "$@" \
    >>"$T_DIR/tenbind.out" 2>>"$T_DIR/tenbind.err" &
  T_PID=$!
  local port=""
  for _ in $(seq 1 300); do
    port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$T_DIR/tenbind.out" | tail -n 1)
    [ -n "$port" ] && break
    if ! kill -0 "$T_PID" 2>/dev/null; then
      echo "tenbind exited at start:" >&2
      cat "$T_DIR/tenbind.err" >&2
      return 1
    fi
    sleep 0.05
  done
  [ -n "$port" ] || { echo "tenbind did not start" >&2; return 1; }
  T_URL="http://127.0.0.1:$port"
  export TENBIN_SERVER="$T_URL"
  for _ in $(seq 1 100); do
    curl -fsS "$T_URL/healthz" >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "tenbind does not answer /healthz" >&2
  return 1
}

# Stop tenbind with SIGTERM and require a clean exit (sanitizers included).
t_stop() {
  kill -TERM "$T_PID"
  local rc=0
  wait "$T_PID" || rc=$?
  T_PID=""
  if [ "$rc" -ne 0 ]; then
    echo "tenbind exited with $rc on SIGTERM:" >&2
    tail -n 50 "$T_DIR/tenbind.err" >&2
    return 1
  fi
}

# Kill tenbind with SIGKILL (crash).
t_crash() {
  kill -KILL "$T_PID"
  wait "$T_PID" 2>/dev/null || true
  T_PID=""
}

# t_http METHOD PATH [curl args...]: prints "STATUS BODY" (body on one line).
t_http() {
  local method=$1 path=$2
  shift 2
  curl -sS -o "$T_DIR/body" -w '%{http_code}' -X "$method" "$T_URL$path" "$@" >"$T_DIR/status"
  printf '%s %s\n' "$(cat "$T_DIR/status")" "$(tr '\n' ' ' <"$T_DIR/body")"
}

t_ok() {
  T_CHECKS=$((T_CHECKS + 1))
  echo "ok - $1"
}

t_fail() {
  T_CHECKS=$((T_CHECKS + 1))
  T_FAILS=$((T_FAILS + 1))
  echo "FAIL - $1" >&2
}

# t_expect DESCRIPTION ACTUAL PATTERN (extended regex)
t_expect() {
  if printf '%s' "$2" | grep -Eq -- "$3"; then
    t_ok "$1"
  else
    t_fail "$1: got '$2', wanted /$3/"
  fi
}

# t_wait_state ID STATE-REGEX [seconds]: poll until the job's state matches
# (as $TENBIN_TOKEN, when set).
t_wait_state() {
  local id=$1 want=$2 secs=${3:-30} state="" auth=()
  [ -z "${TENBIN_TOKEN:-}" ] || auth=(-H "Authorization: Bearer $TENBIN_TOKEN")
  for _ in $(seq 1 $((secs * 10))); do
    state=$(curl -fsS "${auth[@]}" "$T_URL/v1/jobs/$id" | jq -r .state)
    if printf '%s' "$state" | grep -Eq "^($want)\$"; then
      echo "$state"
      return 0
    fi
    sleep 0.1
  done
  echo "$state"
  return 1
}

t_done() {
  local log
  for log in "$T_DIR/tenbind.err" "$T_DIR"/agent-*.log; do
    [ -s "$log" ] || continue
    if grep -q "ERROR: AddressSanitizer\|runtime error:\|LeakSanitizer" "$log"; then
      t_fail "$(basename "$log") is clean under the sanitizers"
      grep -A20 "Sanitizer\|runtime error" "$log" >&2 | head -60
    fi
  done
  echo "$((T_CHECKS - T_FAILS)) passed, $T_FAILS failed"
  [ "$T_FAILS" -eq 0 ]
}

# ---- dataset agents ----

# t_agent_start NAME ROOT [tenbin-agent args...]: start an agent serving
# ROOT with a token of its own ($T_DIR/agent-NAME.token).  Sets
# AGENT_URL_NAME, AGENT_TOKEN_NAME and AGENT_PID_NAME.  A restart of NAME
# listens on the port it had, as a restarted site's agent would.
# T_AGENT_PREFIX (words) runs before it, e.g. "prlimit --fsize=N --".
T_AGENT_PIDS=()
t_agent_start() {
  local name=$1 root=$2
  shift 2
  local tok="$T_DIR/agent-$name.token" portf="$T_DIR/agent-$name.port"
  local port=0
  mkdir -p "$root"
  [ -f "$tok" ] || head -c 24 /dev/urandom | base64 | tr -d '/+=\n' >"$tok"
  chmod 600 "$tok" # token files must be private (util/secret.h)
  [ -s "$portf" ] && port=$(cat "$portf")
  rm -f "$portf"
  # shellcheck disable=SC2086 # the prefix is words on purpose
  ${T_AGENT_PREFIX:-} "$TENBIN_BIN/tenbin-agent" --root "$root" \
    --listen "127.0.0.1:$port" \
    --token-file "$tok" --port-file "$portf" "$@" \
    >>"$T_DIR/agent-$name.log" 2>&1 &
  local pid=$!
  T_AGENT_PIDS+=("$pid")
  for _ in $(seq 1 200); do
    [ -s "$portf" ] && break
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "agent $name exited at start:" >&2
      tail -n 20 "$T_DIR/agent-$name.log" >&2
      return 1
    fi
    sleep 0.05
  done
  [ -s "$portf" ] || { echo "agent $name did not start" >&2; return 1; }
  printf -v "AGENT_PID_$name" '%s' "$pid"
  printf -v "AGENT_URL_$name" 'http://127.0.0.1:%s' "$(cat "$portf")"
  printf -v "AGENT_TOKEN_$name" '%s' "$(cat "$tok")"
}

# t_agent_stop NAME: SIGTERM, and require a clean exit.
t_agent_stop() {
  local pidvar="AGENT_PID_$1" rc=0
  kill -TERM "${!pidvar}"
  wait "${!pidvar}" || rc=$?
  [ "$rc" -eq 0 ] || { echo "agent $1 exited with $rc" >&2; return 1; }
}

# t_agent_kill NAME: SIGKILL (a crash).
t_agent_kill() {
  local pidvar="AGENT_PID_$1"
  kill -KILL "${!pidvar}"
  wait "${!pidvar}" 2>/dev/null || true
}

# t_agent NAME METHOD PATH [curl args...]: "STATUS BODY" from agent NAME.
t_agent() {
  local urlvar="AGENT_URL_$1" tokvar="AGENT_TOKEN_$1" method=$2 path=$3
  shift 3
  curl -sS -o "$T_DIR/body" -w '%{http_code}' -X "$method" \
    -H "Authorization: Bearer ${!tokvar}" "${!urlvar}$path" "$@" >"$T_DIR/status"
  printf '%s %s\n' "$(cat "$T_DIR/status")" "$(tr '\n\0' '  ' <"$T_DIR/body")"
}

# t_pull DST SRC NAME VERSION [extra JSON fields]: start the pull of
# NAME@VERSION by agent DST from agent SRC; prints "STATUS BODY".
t_pull() {
  local dst=$1 src=$2 name=$3 v=$4 extra=${5:-}
  local urlvar="AGENT_URL_$src" tokvar="AGENT_TOKEN_$src"
  t_agent "$dst" PUT "/v1/datasets/$name/pulls/$v" \
    -d "{\"source\":{\"url\":\"${!urlvar}\",\"token\":\"${!tokvar}\"}$extra}"
}

# t_pull_wait DST NAME VERSION [seconds]: the pull status once it is no
# longer running (JSON on one line).
t_pull_wait() {
  local dst=$1 name=$2 v=$3 secs=${4:-60} out
  out=$(t_agent "$dst" GET "/v1/datasets/$name/pulls/$v?wait_ms=$((secs * 1000))")
  printf '%s\n' "${out#* }"
}

# ---- Slurm sites ----

# t_slurm_start [slurm-testbed start args...]: start a testbed of this
# test's own (stopped at exit) and write $T_DIR/slurm.json, a tenbind
# config with its clusters as sites (polled every 200 ms).
T_TB=""
t_slurm_start() {
  # Slurm's daemons run as other users: the testbed lives outside the
  # test's private (0700) directory.
  T_TB=$(mktemp -d "/tmp/tenbin-tb.XXXXXX")
  chmod 755 "$T_TB"
  "$TENBIN_SOURCE_DIR/scripts/slurm-testbed" start --dir "$T_TB" "$@" \
    >"$T_DIR/sites.json" 2>"$T_DIR/testbed.err" || {
    cat "$T_DIR/testbed.err" >&2
    return 1
  }
  jq --arg tb "$T_TB" \
    '{sites: [.[] | . + {poll_ms: 200, workdir: ($tb + "/" + .name + "/jobs")}]}' \
    "$T_DIR/sites.json" >"$T_DIR/slurm.json"
  # shellcheck disable=SC1090
  . <("$TENBIN_SOURCE_DIR/scripts/slurm-testbed" env --dir "$T_TB")
}

t_slurm_stop() {
  [ -n "$T_TB" ] || return 0
  "$TENBIN_SOURCE_DIR/scripts/slurm-testbed" stop --dir "$T_TB" >/dev/null 2>&1 || true
  if [ "$T_FAILS" -eq 0 ]; then
    rm -rf "$T_TB"
  else
    echo "kept $T_TB (Slurm logs) for inspection" >&2
  fi
  T_TB=""
}

# t_slurmrest CLUSTER METHOD PATH [curl args]: slurmrestd's answer body.
t_slurmrest() {
  local c=${1^^} method=$2 path=$3
  shift 3
  local url token
  url=$(eval echo "\$${c}_REST_URL")
  token=$(eval echo "\$${c}_JWT")
  curl -sS -X "$method" -H "X-SLURM-USER-NAME: $SLURM_TESTBED_USER" \
    -H "X-SLURM-USER-TOKEN: $token" "$url/slurm/v0.0.38$path" "$@"
}

# t_slurm_tagged CLUSTER ID: how many Slurm jobs carry tenbin job ID's tag.
t_slurm_tagged() {
  t_slurmrest "$1" GET /jobs |
    jq --arg id "$2" '[.jobs[] | select(.comment | test("^tenbin:[0-9a-f]+:" + $id + "$"))] | length'
}

# ---- clouds ----

# Background helpers (moto, the fakes) this test started, ended at exit
# by their PIDs, after tenbind.
T_BG_PIDS=()

t_free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# t_moto_start: moto_server on a port of its own checking real SigV4
# signatures, with an IAM user allowed ec2:*.  Sets MOTO_URL, AWS_AK and
# AWS_SK (that user's key).
t_moto_start() {
  local moto aws port key
  moto=$(command -v moto_server || echo "$TENBIN_SOURCE_DIR/var/py/bin/moto_server")
  aws=$(command -v aws || echo "$TENBIN_SOURCE_DIR/var/py/bin/aws")
  [ -x "$moto" ] && [ -x "$aws" ] || { echo "moto_server and aws are needed: run scripts/setup" >&2; return 1; }
  port=$(t_free_port)
  # The first 4 requests go unchecked: the readiness probe below, the
  # IAM user, its key and its policy.
  INITIAL_NO_AUTH_ACTION_COUNT=4 "$moto" -H 127.0.0.1 -p "$port" >"$T_DIR/moto.log" 2>&1 &
  T_BG_PIDS+=($!)
  MOTO_URL="http://127.0.0.1:$port"
  for _ in $(seq 1 100); do
    curl -s -o /dev/null "$MOTO_URL/" && break
    sleep 0.1
  done
  local A=(env AWS_ACCESS_KEY_ID=setup AWS_SECRET_ACCESS_KEY=setup AWS_DEFAULT_REGION=us-east-1 "$aws" --endpoint-url "$MOTO_URL")
  "${A[@]}" iam create-user --user-name tenbin >/dev/null
  key=$("${A[@]}" iam create-access-key --user-name tenbin)
  "${A[@]}" iam put-user-policy --user-name tenbin --policy-name ec2 \
    --policy-document '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"ec2:*","Resource":"*"}]}'
  AWS_AK=$(jq -r .AccessKey.AccessKeyId <<<"$key")
  AWS_SK=$(jq -r .AccessKey.SecretAccessKey <<<"$key")
}

# t_fake_start NAME FAKE.py [args...]: a fake of tests/fakes with its VMs
# in $T_DIR/vms, its log in $T_DIR/NAME.log, ended at exit.  Waits for
# its port and sets FRONT_URL (for t_fake) to its URL.
t_fake_start() {
  local name=$1 fake=$2
  shift 2
  rm -f "$T_DIR/$name.port"
  python3 "$TENBIN_SOURCE_DIR/tests/fakes/$fake" --root "$T_DIR/vms" \
    --port-file "$T_DIR/$name.port" "$@" >"$T_DIR/$name.log" 2>&1 &
  T_BG_PIDS+=($!)
  for _ in $(seq 1 100); do
    [ -s "$T_DIR/$name.port" ] && break
    sleep 0.1
  done
  [ -s "$T_DIR/$name.port" ] || { echo "${fake%.py} did not start:" >&2; cat "$T_DIR/$name.log" >&2; return 1; }
  FRONT_URL="http://127.0.0.1:$(cat "$T_DIR/$name.port")"
}

# t_aws_front_start [aws_front.py args...]: our EC2 front (ClientToken
# dedup, faults, the VM emulator) before moto, signing its own calls
# with moto's key.  Sets AWS_URL (and FRONT_URL, for t_fake); VMs live
# in $T_DIR/vms.
t_aws_front_start() {
  t_fake_start front aws_front.py --moto "$MOTO_URL" \
    --access-key "$AWS_AK" --secret-key "$AWS_SK" "$@"
  AWS_URL=$FRONT_URL
}

# t_aws_credentials: moto's key (t_moto_start) as the profile "tenbin"
# of $T_DIR/aws-credentials, a private file.
t_aws_credentials() {
  (umask 077 && printf '[tenbin]\naws_access_key_id = %s\naws_secret_access_key = %s\n' \
    "$AWS_AK" "$AWS_SK" >"$T_DIR/aws-credentials")
}

# t_aws_start [aws_front.py args...]: moto, our EC2 front before it and
# the credentials file of moto's key: what an aws site of t_aws_site_json
# needs.
t_aws_start() {
  t_moto_start
  t_aws_front_start "$@"
  t_aws_credentials
}

# t_fake POST|GET PATH [JSON]: a fake cloud's control endpoint.
t_fake() {
  if [ $# -ge 3 ]; then
    curl -fsS -X "$1" -H 'Content-Type: application/json' -d "$3" "$FRONT_URL$2"
  else
    curl -fsS -X "$1" "$FRONT_URL$2"
  fi
}

# t_gcp_fake_start [gce_fake.py args...]: our Compute Engine fake (token
# endpoint checking the JWT's signature, requestId dedup, faults, the VM
# emulator).  Sets GCE_URL (and FRONT_URL, for t_fake) and GCP_KEY, a
# copy of the test service account whose token_uri is the fake's; VMs
# live in $T_DIR/vms.
t_gcp_fake_start() {
  local sa="$TENBIN_SOURCE_DIR/tests/data/gcp/service-account.json"
  t_fake_start gce gce_fake.py --service-account "$sa" "$@"
  GCE_URL=$FRONT_URL
  GCP_KEY="$T_DIR/gcp-key.json"
  (umask 077 && jq --arg u "$GCE_URL/token" '.token_uri = $u' "$sa" >"$GCP_KEY")
}

# t_azure_fake_start [azure_fake.py args...]: our Azure fake (Entra's
# client-credentials token endpoint, ARM's virtualMachines with their
# async operations, faults, the VM emulator).  Sets AZURE_URL (and
# FRONT_URL, for t_fake), AZ_TENANT, AZ_CLIENT, AZ_SUB and AZ_SECRET_FILE
# (the client secret, mode 0600); VMs live in $T_DIR/vms.
t_azure_fake_start() {
  local secret
  AZ_TENANT=72f988bf-86f1-41af-91ab-2d7cd011db47
  AZ_CLIENT=11111111-2222-4333-8444-555555555555
  AZ_SUB=0b1f6471-1bf0-4dda-aec3-111111111111
  AZ_SECRET_FILE="$T_DIR/azure-secret"
  secret="s3cret~$(head -c 12 /dev/urandom | base64 | tr -d '/+=\n')"
  (umask 077 && printf '%s\n' "$secret" >"$AZ_SECRET_FILE")
  t_fake_start azure azure_fake.py --tenant "$AZ_TENANT" \
    --client-id "$AZ_CLIENT" --client-secret "$secret" \
    --subscription "$AZ_SUB" "$@"
  AZURE_URL=$FRONT_URL
}

# ---- cloud sites ----

# The fields of a site that point it at the fake its t_*_start started
# (its kind, endpoints, credentials, an image), as members of a JSON
# object for a config's heredoc:
#   {"name": "aws", $(t_aws_site_json), "zones": [...], ...}
t_aws_site_json() {
  printf '"kind": "aws", "region": "us-east-1", "endpoint": "%s", "credentials": {"file": "%s", "profile": "tenbin"}, "image": "ami-12c6146b"' \
    "$AWS_URL" "$T_DIR/aws-credentials"
}
t_gcp_site_json() {
  printf '"kind": "gcp", "project": "demo-proj", "region": "us-central1", "endpoint": "%s/compute/v1", "credentials_file": "%s", "image": "projects/debian-cloud/global/images/family/debian-12"' \
    "$GCE_URL" "$GCP_KEY"
}
t_azure_site_json() {
  printf '"kind": "azure", "subscription": "%s", "resource_group": "rg-gpu", "location": "eastus", "endpoint": "%s", "login_endpoint": "%s", "credentials": {"tenant": "%s", "client_id": "%s", "client_secret_file": "%s"}, "image": "microsoft-dsvm:ubuntu-hpc:2204:latest", "subnet_id": "/subscriptions/%s/resourceGroups/rg-gpu/providers/Microsoft.Network/virtualNetworks/vnet/subnets/default", "admin_user": "tenbin"' \
    "$AZ_SUB" "$AZURE_URL" "$AZURE_URL" "$AZ_TENANT" "$AZ_CLIENT" "$AZ_SECRET_FILE" "$AZ_SUB"
}
# t_node_agent_json PORT: a cloud site's node_agent member: this build's
# tenbin-agent, dialing tenbind on 127.0.0.1:PORT.
t_node_agent_json() {
  printf '"node_agent": {"path": "%s/tenbin-agent", "server": "http://127.0.0.1:%s"}' \
    "$TENBIN_BIN" "$1"
}

# t_crashed: wait (15 s at most) for tenbind to kill itself at the fault
# point TENBIN_FAULT armed.  One still running fails the test (a build
# without TENBIN_FAULTS?) and is killed.
t_crashed() {
  for _ in $(seq 1 300); do
    kill -0 "$T_PID" 2>/dev/null || break
    sleep 0.05
  done
  if kill -0 "$T_PID" 2>/dev/null; then
    t_fail "tenbind did not stop at its fault point (built without TENBIN_FAULTS?)"
    kill -KILL "$T_PID"
  fi
  wait "$T_PID" 2>/dev/null || true
  T_PID=""
}

# t_node_of_job ID: the number of the node a cloud site ran job ID on.
t_node_of_job() {
  curl -fsS "$T_URL/v1/jobs/$1" | jq -r '.remote_id // "" | sub("^node-"; "")'
}

# t_vms_of_node NODE: the fake's VMs tagged with node NODE (a JSON array).
t_vms_of_node() {
  t_fake GET /_fake/vms | jq --arg n "$1" '[.[] | select(.node == $n)]'
}

# t_wait_vm_state VM STATE-REGEX [seconds]: poll (20 s unless told) until
# the fake's VM (its id) is in a state matching; prints the state.
t_wait_vm_state() {
  local vm=$1 want=$2 secs=${3:-20} state=""
  for _ in $(seq 1 $((secs * 5))); do
    state=$(t_fake GET /_fake/vms | jq -r --arg v "$vm" '.[] | select(.id == $v) | .state')
    printf '%s' "$state" | grep -Eq "^($want)\$" && break
    sleep 0.2
  done
  echo "$state"
}

# t_vms_left ENDED [seconds]: wait (30 s unless told) until every VM the
# fake lists is in a state matching the regex ENDED; prints how many are
# not.
t_vms_left() {
  local ended="^(${1})\$" secs=${2:-30} left=""
  for _ in $(seq 1 $((secs * 5))); do
    left=$(t_fake GET /_fake/vms | jq --arg e "$ended" '[.[] | select(.state | test($e) | not)] | length')
    [ "$left" = 0 ] && break
    sleep 0.2
  done
  echo "$left"
}

# t_nodes_left SITE [seconds]: wait (30 s unless told; 0: look once) until
# every node of SITE has ended; prints how many have not.
t_nodes_left() {
  local site=$1 tries=$((${2:-30} * 5)) left="" i
  for ((i = 0; ; i++)); do
    left=$(curl -fsS "$T_URL/v1/sites/$site" | jq '[.nodes[] | select(.state != "ended")] | length')
    [ "$left" = 0 ] || [ "$i" -ge "$tries" ] && break
    sleep 0.2
  done
  echo "$left"
}

# t_hello KIND: a 1-GPU h100 job, which only the site of KIND can run,
# saying on which VM and GPU it ran; it must reach the site and succeed.
# Sets T_JOB to its id.
t_hello() {
  T_JOB=$("$TENBIN" submit --gpus 1 --gpu-type h100 --name hello -- \
    sh -c 'echo "hello from $TENBIN_VM_ID at site $TENBIN_SITE"; echo "gpus $CUDA_VISIBLE_DEVICES"')
  t_expect "the job goes to the $1 site, the only one with h100s" \
    "$(t_wait_state "$T_JOB" 'submitted|running|succeeded' 30)" 'submitted|running|succeeded'
  t_expect "it runs on the VM and succeeds" "$(t_wait_state "$T_JOB" succeeded 60)" '^succeeded$'
}

# t_expect_hello_output VM SITE: T_JOB's output came back, from VM (its
# emulator id), which gave it one GPU and told it its site's name.
t_expect_hello_output() {
  t_expect "its output came back through the node agent" \
    "$("$TENBIN" logs "$T_JOB")" "hello from $1 at site $2\$"
  t_expect "the job had one GPU of the node" "$("$TENBIN" logs "$T_JOB")" 'gpus 0$'
}

# t_expect_idled_out SITE SECONDS: the first node of SITE ends (within
# 20 s) for being idle SECONDS s, its launch and end recorded.  The
# autoscaler keeps an idle node no longer than the boot it saves is
# worth: with the emulator's boots of a second, the config's wait value
# must be high (1000) for SECONDS to be what ends it.
t_expect_idled_out() {
  local site=$1 idle=$2 state="" node
  for _ in $(seq 1 100); do
    state=$(curl -fsS "$T_URL/v1/sites/$site" | jq -r '.nodes[0].state')
    [ "$state" = ended ] && break
    sleep 0.2
  done
  t_expect "the idle node ends" "$state" '^ended$'
  node=$(curl -fsS "$T_URL/v1/sites/$site" | jq -c '.nodes[0]')
  t_expect "the autoscaler released it, idle for $idle s or more" \
    "$(jq -r .reason <<<"$node")" \
    '^released by the autoscaler: release node [0-9]+ \(idle [0-9]+ s'
  [[ "$(jq -r .reason <<<"$node")" =~ \(idle\ ([0-9]+)\ s ]] &&
    [ "${BASH_REMATCH[1]}" -ge "$idle" ] ||
    t_fail "it was idle for less than $idle s"
  t_expect "its launch and end are recorded" \
    "$(jq -r '[.launched != null, .ended != null, .uptime_s >= 0] | all' <<<"$node")" '^true$'
}

# t_expect_vm_billed_whole LABEL JOB NODE SINCE: a slurm site's cloud
# block billed node NODE (an ended VM of 8 GPUs that ran job JOB, of 2
# GPUs) whole: the job's hold and the node's idle pieces add up to the
# VM's uptime x 8, and the idle pieces since SINCE (ms: tenbind's start,
# when the site's price came into force) are billed to (idle) at $6.88
# a GPU-hour.  Slurm's times and the VM's are cut at the same instants,
# a few ms apart per piece, and Slurm's start, a whole second, may fall
# before the job's submission, where its hold begins: up to a second of
# the job's GPUs is then billed to no one.
t_expect_vm_billed_whole() {
  t_expect "$1the job's hold and the idle pieces add up to the VM's uptime x 8 GPUs" \
    "$(python3 - "$T_STATE/tenbin.db" "$2" "$3" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
job, node = int(sys.argv[2]), int(sys.argv[3])
launched, ended, gpus = db.execute("select launched_ms, ended_ms, gpus from nodes where id = ?", (node,)).fetchone()
hold = db.execute("select min(from_ms), max(to_ms), sum((to_ms - from_ms) * gpus) from usage where job_id = ?", (job,)).fetchone()
idle = db.execute("select count(*), sum((to_ms - from_ms) * gpus) from usage where job_id = ? and project = '(idle)' and site = 'elastic'", (-node,)).fetchone()
up = (ended - launched) * gpus
ok = hold[0] >= launched and hold[1] <= ended and idle[0] >= 2
print("ok" if ok and abs(hold[2] + idle[1] - up) <= 8 * 5 * idle[0] + 2 * 1000 else
      f"hold {hold} + idle {idle} of {up} GPU-ms ({launched}..{ended})")
PY
)" '^ok$'
  t_expect "$1the idle pieces are billed to (idle) at the rented price" \
    "$(python3 - "$T_STATE/tenbin.db" "$3" "$4" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("select billed_ms, gpus, billed_micro from usage where job_id = ? and project = '(idle)' and from_ms >= ?", (-int(sys.argv[2]), int(sys.argv[3]))).fetchall()
bad = [r for r in rows if r[2] != 6880000 * r[1] * r[0] // 3600000]
print("ok" if rows and not bad else f"{len(rows)} pieces, at another price: {bad}")
PY
)" '^ok$'
}

# t_expect_vm_processes_end VM: within 5 s no process of VM (its
# emulator id) runs.
t_expect_vm_processes_end() {
  for _ in $(seq 1 50); do
    pgrep -f "TENBIN_VM_ID=$1" >/dev/null || break
    sleep 0.1
  done
  if pgrep -f "TENBIN_VM_ID=$1" >/dev/null; then
    t_fail "a process of the VM still runs"
  else
    t_ok "no process of the VM is left"
  fi
}

# t_node_token VM: the node token in the user data of VM (its emulator
# id); nothing if it has none.
t_node_token() {
  sed -n "s/^TENBIN_NODE_TOKEN='\(.*\)'$/\1/p" "$T_DIR/vms/$1/user-data" 2>/dev/null || true
}

# t_expect_node_tokens_refused TOKEN: /v1/nodes/heartbeat refuses a
# forged node token, TOKEN (an ended node's; skipped when empty) and no
# token at all.
t_expect_node_tokens_refused() {
  t_expect "a forged node token gets 401" \
    "$(t_http POST /v1/nodes/heartbeat -H 'Authorization: Bearer tbnode_forged' -d '{}')" '^401 '
  if [ -n "$1" ]; then
    t_expect "the ended node's own token gets 401" \
      "$(t_http POST /v1/nodes/heartbeat -H "Authorization: Bearer $1" -d '{}')" '^401 .*has ended'
  fi
  t_expect "an API token's place is no node token's: no token, 401" \
    "$(t_http POST /v1/nodes/heartbeat -d '{}')" '^401 '
}
