#!/usr/bin/env bash
# The dashboard at /ui/ in a real browser: Debian's Chromium, headless,
# driven by playwright-core (tests/browser/dashboard.mjs) against a real
# tenbind with auth on and real jobs.  It loads every page, clicks from
# the jobs list to a job and watches its log grow, cancels a job as an
# admin, finds the cost page's totals equal to `tenbin report`'s, shows
# a job whose name, command and log are HTML as text with no script run,
# and shows a viewer the API's 403 when it tries to cancel.  The sites
# page shows each site's NCCL baseline, and the datasets page a dataset
# replicated between two real agents.  Screenshots
# of every page go to $TENBIN_ARTIFACTS (default: artifacts/ui/ in the
# build directory).
. "$(dirname "$0")/lib.sh"

# Not a skip: scripts/setup installs both, and a dashboard left untested
# would pass in silence.
command -v node >/dev/null || { t_fail "node is installed (run scripts/setup)"; t_done; exit 1; }
[ -x /usr/bin/chromium ] || { t_fail "/usr/bin/chromium is installed (run scripts/setup)"; t_done; exit 1; }
[ -d "$TENBIN_SOURCE_DIR/ui/node_modules/playwright-core" ] ||
  { t_fail "ui/node_modules has playwright-core (run scripts/setup: it runs npm ci in ui/)"; t_done; exit 1; }
ARTIFACTS=${TENBIN_ARTIFACTS:-$TENBIN_BIN/../artifacts/ui}
mkdir -p "$ARTIFACTS"

# Two agents, for a dataset replicated from onprem to cloud.
t_agent_start ONPREM "$T_DIR/onprem"
t_agent_start CLOUD "$T_DIR/cloud"
mkdir -p "$T_DIR/onprem/train"
head -c 300000 /dev/urandom >"$T_DIR/onprem/train/shard.bin"
cat >"$T_DIR/config.json" <<JSON
{"auth": {"enabled": true},
 "projects": ["vision", "nlp"],
 "sites": [
  {"name": "onprem", "kind": "local", "gpus": {"h100": 2},
   "agent": {"url": "$AGENT_URL_ONPREM", "token_file": "$T_DIR/agent-ONPREM.token"},
   "cost": {"owned": {"capex_per_node": 350000, "nodes": 12, "years": 4,
            "support_per_year": 0.10, "power_kw_busy": 7.0,
            "power_kw_idle": 2.0, "pue": 1.4, "dollars_per_kwh": 0.09,
            "staff_per_year": 40000}}},
  {"name": "cloud", "kind": "local", "gpus": {"h100": 4}, "first_gpu": 2,
   "agent": {"url": "$AGENT_URL_CLOUD", "token_file": "$T_DIR/agent-CLOUD.token"},
   "cost": {"rented": {"per_gpu_hour": {"h100": 6.88},
            "min_billed_seconds": 60, "egress_per_gb": 0.09}}},
  {"name": "lab", "kind": "local", "gpus": {"a10g": 1}, "first_gpu": 6,
   "job_env": {"NCCL_ALGO": "Ring"}}],
 "baseline": {"reference": "onprem", "project": "vision", "every_s": 0,
              "sites": []}}
JSON
admin=$("$TENBIND" token create --role admin --name ops --state "$T_STATE")
viewer=$("$TENBIND" token create --role viewer --name watcher --state "$T_STATE")
export TENBIN_TOKEN=$admin
t_start --config "$T_DIR/config.json"

"$TENBIN" dataset add train --site onprem --path train --project vision >/dev/null
"$TENBIN" dataset publish train >/dev/null
"$TENBIN" dataset sync train --site cloud >/dev/null
# The sites page shows each site's baseline: the reference at it, lab
# drifted (its jobs get NCCL_ALGO), cloud never probed.
"$TENBIN" baseline run onprem --wait >/dev/null
"$TENBIN" baseline run lab --wait >/dev/null
submit() { "$TENBIN" submit "$@"; }
# Money: a GPU job on the owned site and one on the rented site, ended
# before the page is read, so the ledger stands still while it is
# compared.
paid1=$(submit --project vision --site onprem --gpus 1 --name owned -- sleep 1)
paid2=$(submit --project nlp --site cloud --gpus 1 --name rented -- sleep 1)
"$TENBIN" budget set nlp --monthly 100 --hard >/dev/null
# The lab's one GPU is held (unpriced: hours, no money), so the next job
# for it waits with a predicted start and a reason.
submit --project vision --site lab --gpus 1 --time 30 --name blocker -- sleep 600 >/dev/null
queued=$(submit --project vision --site lab --gpus 1 --time 10 --name waits -- true)
follow=$(submit --project vision --site onprem --gpus 0 --name ticker -- \
  sh -c 'i=0; while [ $i -lt 3000 ]; do i=$((i+1)); echo "tick $i"; sleep 0.3; done')
victim=$(submit --project nlp --site onprem --gpus 0 --name victim -- sleep 600)
xss_name='<img src=x onerror=window.__xss=1>'
xss=$(submit --project nlp --site onprem --gpus 0 --name "$xss_name" -- \
  sh -c 'echo "<script>window.__xss=2</script>"; echo "<img src=x onerror=window.__xss=3>"; sleep 600')
t_expect "the paid jobs end" "$(t_wait_state "$paid1" succeeded 30) $(t_wait_state "$paid2" succeeded 30)" '^succeeded succeeded$'
for id in "$follow" "$victim" "$xss"; do
  t_wait_state "$id" running 30 >/dev/null || t_fail "job $id runs"
done
t_expect "a job waits for the lab" "$(t_wait_state "$queued" queued 10)" '^queued$'
report=$("$TENBIN" --json report --by project,site,gpu-type,day)
t_expect "the report has money in it" "$(jq -r '.total.billed_micro > 0 and .total.sunk_micro > 0' <<<"$report")" '^true$'

# The page itself needs no token; its headers are the same everywhere.
t_expect "GET /ui redirects to /ui/" "$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' "$T_URL/ui")" "^308 $T_URL/ui/\$"
h=$(curl -s -D - -o /dev/null "$T_URL/ui/app.js")
t_expect "app.js is JavaScript" "$h" 'Content-Type: text/javascript'
t_expect "with the CSP" "$h" "Content-Security-Policy: default-src 'none'; script-src 'self'"
t_expect "and nosniff" "$h" 'X-Content-Type-Options: nosniff'
t_expect "an unknown file is a JSON 404" "$(t_http GET /ui/nope.js)" '^404 .*NOT_FOUND'
t_expect "no path escapes the assets" "$(t_http GET /ui/..%2fREADME.md)" '^404 '

out=$(TENBIN_URL=$T_URL ADMIN_TOKEN=$admin VIEWER_TOKEN=$viewer \
  FOLLOW_ID=$follow VICTIM_ID=$victim XSS_ID=$xss XSS_NAME=$xss_name \
  QUEUED_ID=$queued REPORT_JSON=$report ARTIFACTS=$ARTIFACTS \
  TENBIN_SOURCE_DIR=$TENBIN_SOURCE_DIR \
  timeout 300 node "$TENBIN_SOURCE_DIR/tests/browser/dashboard.mjs" 2>&1) && rc=0 || rc=$?
while IFS= read -r line; do
  case $line in
    "ok - "*) t_ok "browser: ${line#ok - }" ;;
    "FAIL - "*) t_fail "browser: ${line#FAIL - }" ;;
    *) printf '%s\n' "$line" >&2 ;;
  esac
done <<<"$out"
[ "$rc" -eq 0 ] && t_ok "the browser script ran to its end" || t_fail "the browser script exited $rc"

# What the browser did, as the API sees it.
t_expect "the cancelled job is cancelled" "$(t_wait_state "$victim" cancelled 10)" '^cancelled$'
t_expect "the viewer's cancel left the job running" "$(t_wait_state "$follow" running 5)" '^running$'
for p in login jobs job job-xss sites datasets cost; do
  [ -s "$ARTIFACTS/$p.png" ] && t_ok "screenshot $p.png written" || t_fail "screenshot $p.png written"
done
t_stop
t_done
