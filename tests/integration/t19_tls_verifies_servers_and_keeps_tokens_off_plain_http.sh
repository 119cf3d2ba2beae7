#!/usr/bin/env bash
# TLS: tenbind and tenbin-agent serve HTTPS with a certificate from a CA
# this test makes (openssl CLI).  Every client verifies the server: curl
# and tenbin without the CA are refused and succeed with it; tenbind sees
# an agent only with the CA; agents pull from each other over TLS.  A
# token is never sent in clear to a host that is not loopback: tenbin
# refuses before connecting.  Key and token files others may read are
# refused.
. "$(dirname "$0")/lib.sh"
command -v openssl >/dev/null || { echo "openssl is missing (scripts/setup)" >&2; exit 1; }

# ---- a CA, and a certificate for 127.0.0.1 signed by it ----
pki="$T_DIR/pki"
mkdir -p "$pki"
ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
openssl req -x509 "${ec[@]}" -keyout "$pki/ca.key" -out "$pki/ca.pem" \
  -days 2 -subj /CN=tenbin-test-ca 2>/dev/null
openssl req -x509 "${ec[@]}" -keyout "$pki/other.key" -out "$pki/other.pem" \
  -days 2 -subj /CN=some-other-ca 2>/dev/null
openssl req "${ec[@]}" -keyout "$pki/srv.key" -out "$pki/srv.csr" \
  -subj /CN=127.0.0.1 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$pki/ext"
openssl x509 -req -in "$pki/srv.csr" -CA "$pki/ca.pem" -CAkey "$pki/ca.key" \
  -CAcreateserial -out "$pki/srv.pem" -days 2 -extfile "$pki/ext" 2>/dev/null
chmod 600 "$pki/srv.key"
t_expect "the test CA signed the server certificate" \
  "$(openssl verify -CAfile "$pki/ca.pem" "$pki/srv.pem")" ': OK$'

# ---- tenbind over TLS ----
admin=$("$TENBIND" token create --role admin --state "$T_STATE")
cat >"$T_DIR/config.json" <<EOF
{"auth": {"enabled": true},
 "tls": {"cert_file": "$pki/srv.pem", "key_file": "$pki/srv.key"},
 "sites": [{"name": "local", "kind": "local"}]}
EOF
# t_start_tls CONFIG: start tenbind and set T_URL to its https URL.
t_start_tls() {
  : >"$T_DIR/tenbind.out"
  "$TENBIND" --listen 127.0.0.1:0 --state "$T_STATE" --config "$1" \
    >>"$T_DIR/tenbind.out" 2>>"$T_DIR/tenbind.err" &
  T_PID=$!
  local port=""
  for _ in $(seq 1 300); do
    port=$(sed -n 's|.*listening on https://127.0.0.1:\([0-9]*\).*|\1|p' \
      "$T_DIR/tenbind.out" | tail -n 1)
    [ -n "$port" ] && break
    kill -0 "$T_PID" 2>/dev/null || { cat "$T_DIR/tenbind.err" >&2; return 1; }
    sleep 0.05
  done
  [ -n "$port" ] || { echo "tenbind did not start" >&2; return 1; }
  T_URL="https://127.0.0.1:$port"
  for _ in $(seq 1 100); do
    curl -fsS --cacert "$pki/ca.pem" "$T_URL/healthz" >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  return 1
}
t_start_tls "$T_DIR/config.json"

rc=0
curl -sS -o /dev/null "$T_URL/healthz" 2>"$T_DIR/curl.err" || rc=$?
t_expect "curl without the CA is refused (certificate not trusted)" "$rc" '^60$'
t_expect "curl with the CA is served" \
  "$(curl -sS -o /dev/null -w '%{http_code}' --cacert "$pki/ca.pem" "$T_URL/healthz")" '^200$'
rc=0
curl -sS -o /dev/null --cacert "$pki/other.pem" "$T_URL/healthz" 2>/dev/null || rc=$?
t_expect "curl trusting another CA is refused" "$rc" '^60$'
rc=0
curl -sS -o /dev/null "http://127.0.0.1:${T_URL##*:}/healthz" 2>/dev/null || rc=$?
t_expect "plain http to the TLS port gets no answer" "$rc" '^(52|56)$'

export TENBIN_SERVER="$T_URL" TENBIN_TOKEN="$admin"
rc=0
out=$("$TENBIN" jobs 2>&1) || rc=$?
t_expect "tenbin without the CA is refused" "$rc:$out" '^[1-9][0-9]*:.*(certificate|SSL|issuer)'
rc=0
out=$(TENBIN_CA_FILE="$pki/ca.pem" "$TENBIN" jobs 2>&1) || rc=$?
t_expect "tenbin with TENBIN_CA_FILE is served" "$rc" '^0$'
rc=0
out=$("$TENBIN" jobs --cacert "$pki/ca.pem" 2>&1) || rc=$?
t_expect "tenbin jobs --cacert is served" "$rc" '^0$'
rc=0
out=$("$TENBIN" --cacert "$pki/other.pem" jobs 2>&1) || rc=$?
t_expect "tenbin --cacert of another CA is refused" "$rc:$out" '^[1-9][0-9]*:.*(certificate|SSL|issuer)'

# ---- no token in clear off loopback: refused before any connection ----
for url in http://10.255.255.1:8750 http://tenbind.invalid:8750 \
  "http://127.0.0.1.nip.invalid:8750"; do
  rc=0
  out=$(TENBIN_SERVER=$url timeout 5 "$TENBIN" jobs 2>&1) || rc=$?
  t_expect "tenbin will not send the token in clear to $url" "$rc:$out" \
    '^[12]:.*plain http.*not loopback'
done
rc=0
out=$(TENBIN_SERVER="http://127.0.0.1:9" "$TENBIN" jobs 2>&1) || rc=$?
t_expect "loopback over plain http may carry the token (it gets as far as connecting)" \
  "$out" 'cannot reach tenbind'
t_stop

# ---- secret files others may read are refused ----
chmod 644 "$pki/srv.key"
rc=0
"$TENBIND" --listen 127.0.0.1:0 --state "$T_STATE" --config "$T_DIR/config.json" \
  >"$T_DIR/bad.out" 2>&1 || rc=$?
t_expect "tenbind refuses a TLS key that others may read" \
  "$rc:$(tr '\n' ' ' <"$T_DIR/bad.out")" "^[12]:.*srv.key.*chmod 600"
chmod 600 "$pki/srv.key"
mkdir -p "$T_DIR/x"
head -c 24 /dev/urandom | base64 | tr -d '/+=\n' >"$T_DIR/open.token"
chmod 644 "$T_DIR/open.token"
rc=0
"$TENBIN_BIN/tenbin-agent" --root "$T_DIR/x" --listen 127.0.0.1:0 \
  --token-file "$T_DIR/open.token" >"$T_DIR/bad.out" 2>&1 || rc=$?
t_expect "tenbin-agent refuses a token file that others may read" \
  "$rc:$(tr '\n' ' ' <"$T_DIR/bad.out")" "^2:.*open.token.*chmod 600"

# ---- agents over TLS: tenbind and the peers verify them ----
tls=(--tls-cert "$pki/srv.pem" --tls-key "$pki/srv.key" --ca-file "$pki/ca.pem")
t_agent_start ONPREM "$T_DIR/onprem" "${tls[@]}"
t_agent_start CLOUD "$T_DIR/cloud" "${tls[@]}"
A_ONPREM="https://127.0.0.1:$(cat "$T_DIR/agent-ONPREM.port")"
A_CLOUD="https://127.0.0.1:$(cat "$T_DIR/agent-CLOUD.port")"
t_expect "an agent serves https to a client with the CA" \
  "$(curl -sS --cacert "$pki/ca.pem" "$A_ONPREM/healthz" | jq -r .ok)" '^true$'
# An upload without the token is refused from its headers: the 1 MB body
# announced is never sent, so only such an answer can come back.
t_expect "an agent answers an unauthenticated upload 401 before its body" \
  "$(python3 - "$pki/ca.pem" "${A_ONPREM##*:}" <<'PY' 2>&1
import socket, ssl, sys
ctx = ssl.create_default_context(cafile=sys.argv[1])
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", int(sys.argv[2]))),
                    server_hostname="127.0.0.1")
s.settimeout(20)
s.sendall(b"POST /v1/datasets/x/versions HTTP/1.1\r\nHost: t\r\n"
          b"Content-Length: 1000000\r\n\r\n")
print(s.recv(64).split(b" ")[1].decode())
PY
)" '^401$'
mkdir -p "$T_DIR/onprem/train"
head -c 300000 /dev/urandom >"$T_DIR/onprem/train/a.bin"

# site_config CA_LINE: tenbind's config with both agents on https.
site_config() {
  cat <<EOF
{"auth": {"enabled": true},
 "tls": {"cert_file": "$pki/srv.pem", "key_file": "$pki/srv.key"$1},
 "sites": [
  {"name": "onprem", "kind": "local", "gpus": {"h100": 1},
   "agent": {"url": "$A_ONPREM", "token_file": "$T_DIR/agent-ONPREM.token"}},
  {"name": "cloud", "kind": "local", "gpus": {"h100": 1}, "first_gpu": 1,
   "agent": {"url": "$A_CLOUD", "token_file": "$T_DIR/agent-CLOUD.token"}}],
 "tick_ms": 100}
EOF
}
# agent_state SITE WANT: wait (bounded) until the site's agent is WANT.
agent_state() {
  local st=""
  for _ in $(seq 1 100); do
    st=$(curl -fsS --cacert "$pki/ca.pem" -H "Authorization: Bearer $admin" \
      "$T_URL/v1/sites/$1" | jq -r '.agent_state.state')
    [ "$st" = "$2" ] && break
    sleep 0.1
  done
  echo "$st"
}

site_config "" >"$T_DIR/noca.json"
t_start_tls "$T_DIR/noca.json"
t_expect "tenbind without the CA does not trust the agent" \
  "$(agent_state onprem down)" '^down$'
t_expect "and says it is the certificate" \
  "$(curl -fsS --cacert "$pki/ca.pem" -H "Authorization: Bearer $admin" \
    "$T_URL/v1/sites/onprem" | jq -r .agent_state.error)" '(certificate|SSL|issuer)'
t_stop

site_config ", \"ca_file\": \"$pki/ca.pem\"" >"$T_DIR/ca.json"
t_start_tls "$T_DIR/ca.json"
t_expect "tenbind with the CA sees the agent up" "$(agent_state onprem up)" '^up$'
H=(--cacert "$pki/ca.pem" -H "Authorization: Bearer $admin" -H 'Content-Type: application/json')
curl -fsS "${H[@]}" -d '{"name":"train","source_site":"onprem","path":"train"}' \
  "$T_URL/v1/datasets" >/dev/null
curl -fsS "${H[@]}" -X POST "$T_URL/v1/datasets/train/versions" >/dev/null
curl -fsS "${H[@]}" -d '{"site":"cloud"}' "$T_URL/v1/datasets/train/replicas" >/dev/null
state=""
for _ in $(seq 1 300); do
  state=$(curl -fsS "${H[@]}" "$T_URL/v1/datasets/train" |
    jq -r '.replicas[] | select(.site=="cloud") | .state')
  [ "$state" = complete ] && break
  sleep 0.1
done
t_expect "one agent pulls from the other over TLS" "$state" '^complete$'
got=$(find "$T_DIR/cloud" -name a.bin -path '*train*' | head -n 1)
t_expect "the replica holds the same bytes" \
  "$(cmp "$T_DIR/onprem/train/a.bin" "$got" && echo same)" '^same$'
t_stop
t_done
