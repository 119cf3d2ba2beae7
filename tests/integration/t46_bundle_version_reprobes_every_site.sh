#!/usr/bin/env bash
# The software bundle is a dataset like any other: tenbin-probe and a
# VERSION file published at the reference site.  Each new version is
# replicated (by the probe job's staging, through the sites' real agents)
# to every site named for probing, and probes them on its own: both sites
# then report the bundle's version in their fingerprint, and the probe ran
# from the replica.  A second version probes both again.
. "$(dirname "$0")/lib.sh"

t_agent_start ONPREM "$T_DIR/onprem"
t_agent_start CLOUD "$T_DIR/cloud"
mkdir -p "$T_DIR/onprem/bundle/bin"
cp "$TENBIN_BIN/tenbin-probe" "$T_DIR/onprem/bundle/bin/"
echo "nccl-bundle r1" >"$T_DIR/onprem/bundle/VERSION"
cat >"$T_DIR/config.json" <<EOF
{"sites": [
  {"name": "onprem", "kind": "local", "gpus": {"h100": 2},
   "agent": {"url": "$AGENT_URL_ONPREM", "token_file": "$T_DIR/agent-ONPREM.token"}},
  {"name": "cloud", "kind": "local", "gpus": {"h100": 2}, "first_gpu": 2,
   "agent": {"url": "$AGENT_URL_CLOUD", "token_file": "$T_DIR/agent-CLOUD.token"}}
 ],
 "baseline": {"reference": "onprem", "bundle": "nccl-bundle",
              "probe": "bin/tenbin-probe", "every_s": 0,
              "sites": ["onprem", "cloud"]},
 "tick_ms": 100}
EOF
t_start --config "$T_DIR/config.json"
t_expect "the bundle is registered as a dataset" \
  "$(t_http POST /v1/datasets -d '{"name":"nccl-bundle","source_site":"onprem","path":"bundle"}')" '^201 '
"$TENBIN" dataset publish nccl-bundle >/dev/null
v1=$(curl -fsS "$T_URL/v1/datasets/nccl-bundle" | jq -r '.latest')

# probed_with SITE: "STATE WHY BUNDLE" of the site's newest probe.
probed_with() {
  curl -fsS "$T_URL/v1/sites/$1/baseline" |
    jq -r '.latest_probe | "\(.state) \(.why) \(.bundle)"'
}
wait_probed() { # SITE VERSION: until its newest probe with it is done
  for _ in $(seq 1 300); do
    [ "$(probed_with "$1")" = "done bundle nccl-bundle@$2" ] && return 0
    sleep 0.2
  done
  return 1
}
wait_probed onprem "$v1"
wait_probed cloud "$v1"
t_expect "a published bundle probes the reference on its own" "$(probed_with onprem)" \
  "^done bundle nccl-bundle@$v1\$"
t_expect "and the other site named for probing" "$(probed_with cloud)" \
  "^done bundle nccl-bundle@$v1\$"
t_expect "whose probe job staged the bundle first" \
  "$(curl -fsS "$T_URL/v1/datasets/nccl-bundle" | jq -r '.replicas[] | select(.site=="cloud") | .state + " " + .version')" \
  "^complete $v1\$"
view=$(curl -fsS "$T_URL/v1/sites/cloud/baseline")
t_expect "the probe ran from the replica and read its VERSION" \
  "$(jq -r '.result.fingerprint.bundle.version' <<<"$view")" '^nccl-bundle r1$'
t_expect "the site is at the baseline, bundle included" \
  "$(jq -r '.status' <<<"$view") $(jq -r '.diff.fingerprint[] | select(.key=="bundle.version") | .differs' <<<"$view")" \
  '^at_baseline false$'

echo "nccl-bundle r2" >"$T_DIR/onprem/bundle/VERSION"
"$TENBIN" dataset publish nccl-bundle >/dev/null
v2=$(curl -fsS "$T_URL/v1/datasets/nccl-bundle" | jq -r '.latest')
t_expect "the bundle has a new version" "$([ "$v2" != "$v1" ] && echo "$v2")" '^[0-9a-f]{64}$'
wait_probed onprem "$v2"
wait_probed cloud "$v2"
t_expect "a new bundle version probes every site again" \
  "$(probed_with onprem) / $(probed_with cloud)" \
  "^done bundle nccl-bundle@$v2 / done bundle nccl-bundle@$v2\$"
t_expect "and both report it" \
  "$(for s in onprem cloud; do curl -fsS "$T_URL/v1/sites/$s/baseline" | jq -r .result.fingerprint.bundle.version; done | tr '\n' ',')" \
  '^nccl-bundle r2,nccl-bundle r2,$'
t_expect "four probes in all, none twice" \
  "$(sqlite3 "$T_STATE/tenbin.db" "select count(*) || ' ' || count(distinct site || bundle) from probes")" '^4 4$'
t_stop
t_done
