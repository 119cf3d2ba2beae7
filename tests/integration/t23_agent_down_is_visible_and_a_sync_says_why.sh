#!/usr/bin/env bash
# With a site's tenbin-agent down, tenbin says so: `tenbin sites`, `tenbin
# site show` and /metrics show the agent's state per site (the site
# itself still runs jobs), a waiting `dataset sync` prints the last error
# and the next try, `--timeout` gives up with a non-zero exit, and once
# the agent is back the same sync completes.
. "$(dirname "$0")/lib.sh"

t_agent_start ONPREM "$T_DIR/onprem"
t_agent_start CLOUD "$T_DIR/cloud"
mkdir -p "$T_DIR/onprem/train"
head -c 200000 /dev/urandom >"$T_DIR/onprem/train/a.bin"
cat >"$T_DIR/config.json" <<EOF2
{"sites": [
  {"name": "onprem", "kind": "local", "gpus": {"h100": 1},
   "agent": {"url": "$AGENT_URL_ONPREM", "token_file": "$T_DIR/agent-ONPREM.token"}},
  {"name": "cloud", "kind": "local", "gpus": {"h100": 1}, "first_gpu": 1,
   "agent": {"url": "$AGENT_URL_CLOUD", "token_file": "$T_DIR/agent-CLOUD.token"}},
  {"name": "bare", "kind": "local", "gpus": {}}
 ]}
EOF2
t_start --config "$T_DIR/config.json"

# t_agent_state SITE STATE [seconds]: wait until the site's agent is STATE.
t_agent_state() {
  local st=""
  for _ in $(seq 1 $((${3:-20} * 10))); do
    st=$(curl -fsS "$T_URL/v1/sites/$1" | jq -r '.agent_state.state')
    [ "$st" = "$2" ] && break
    sleep 0.1
  done
  echo "$st"
}

t_expect "an agent that answers is up" "$(t_agent_state cloud up)" '^up$'
t_expect "a site without an agent has no agent state" \
  "$(curl -fsS "$T_URL/v1/sites/bare" | jq -c .agent_state)" '^null$'
"$TENBIN" dataset add train --site onprem --path train >/dev/null
"$TENBIN" dataset publish train >/dev/null

t_agent_stop CLOUD
t_expect "with nothing to pull, a stopped agent shows down" \
  "$(t_agent_state cloud down)" '^down$'
site=$(curl -fsS "$T_URL/v1/sites/cloud")
t_expect "the site itself stays reachable: it still runs jobs" \
  "$(printf '%s' "$site" | jq -r .reachable)" '^true$'
t_expect "the agent's state says why and since when" \
  "$(printf '%s' "$site" | jq -r '[.agent_state.error, .agent_state.since] | join(" | ")')" \
  "${AGENT_URL_CLOUD}.* \\| 20[0-9-]+T"
t_expect "tenbin sites shows the agent down beside a reachable site" \
  "$("$TENBIN" sites | grep '^cloud')" 'reachable +down'
t_expect "tenbin sites shows the other agent up" \
  "$("$TENBIN" sites | grep '^onprem')" 'reachable +up'
t_expect "tenbin site show gives the agent's state with the reason" \
  "$("$TENBIN" site show cloud)" "agent state: +down since .*${AGENT_URL_CLOUD}"
metrics=$(curl -fsS "$T_URL/metrics")
t_expect "/metrics has tenbin_agent_up 0 for the site whose agent is down" \
  "$metrics" 'tenbin_agent_up\{site="cloud"\} 0'
t_expect "/metrics has tenbin_agent_up 1 for the other" \
  "$metrics" 'tenbin_agent_up\{site="onprem"\} 1'

# A sync to it waits, saying why and when it tries next, then gives up.
rc=0
out=$("$TENBIN" dataset sync train --site cloud --timeout 4 2>&1) || rc=$?
t_expect "a sync past --timeout exits non-zero" "$rc" '^1$'
t_expect "the waiting sync prints the last error and the next try" "$out" \
  "waiting: .*${AGENT_URL_CLOUD}.*; next try in [0-9]+s"
t_expect "giving up says the copy goes on and what it was doing" "$out" \
  'not complete after --timeout \(pending: .*\); the copy goes on'
rep=$(curl -fsS "$T_URL/v1/datasets/train" | jq -c '.replicas[] | select(.site=="cloud")')
t_expect "the replica is pending with the error and the next try" \
  "$(printf '%s' "$rep" | jq -r '[.state, (.error != null), (.next_try != null)] | join(",")')" \
  '^pending,true,true$'
rc=0
"$TENBIN" dataset sync train --site cloud --timeout x >/dev/null 2>&1 || rc=$?
t_expect "a --timeout that is not a time is a usage error" "$rc" '^2$'

# Back: the agent is up again and the same sync completes.
t_agent_start CLOUD "$T_DIR/cloud"
rc=0
out=$("$TENBIN" dataset sync train --site cloud --timeout 120 2>&1) || rc=$?
t_expect "once the agent is back the sync completes" "$rc" '^0$'
t_expect "... saying so" "$out" 'at cloud: complete'
t_expect "a waiting line is printed once per try, not once per poll" \
  "$(printf '%s\n' "$out" | grep -c 'waiting:' || true)" '^[1-4]$'
t_expect "and the agent shows up again" "$(t_agent_state cloud up)" '^up$'

t_stop
t_done
