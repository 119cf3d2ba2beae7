#!/usr/bin/env bash
# The user story of the foundation issue, through the real CLI against a
# real tenbind on its embedded default (one local site): submit, list,
# show, logs, follow, cancel, sbatch, workloads, sites.
. "$(dirname "$0")/lib.sh"
t_start

id=$("$TENBIN" submit --gpus 0 --project demo -- sh -c 'echo hello')
t_expect "submit prints the job id" "$id" '^[0-9]+$'
state=$(t_wait_state "$id" succeeded) || true
t_expect "the job ends succeeded" "$state" '^succeeded$'
t_expect "tenbin jobs lists it" "$("$TENBIN" jobs)" "^ *$id +.*succeeded"
show=$("$TENBIN" show "$id")
t_expect "tenbin show gives the state" "$show" 'succeeded'
t_expect "tenbin show gives the site" "$show" 'local'
t_expect "tenbin show gives the exit code" "$show" '[Ee]xit[^0-9]*0'
t_expect "tenbin logs prints the output" "$("$TENBIN" logs "$id")" '^hello$'
t_expect "--json gives the server's JSON" "$("$TENBIN" --json show "$id" | jq -r .state)" '^succeeded$'

# A failing job keeps its exit code.
id=$("$TENBIN" submit --project demo -- sh -c 'exit 3')
state=$(t_wait_state "$id" failed) || true
t_expect "a job exiting 3 ends failed" "$state" '^failed$'
t_expect "its exit code is 3" "$(curl -fsS "$T_URL/v1/jobs/$id" | jq -r .exit_code)" '^3$'

# Follow a running job's log to its end.
id=$("$TENBIN" submit --project demo -- sh -c 'for i in 1 2 3; do echo line$i; sleep 0.3; done')
out=$(timeout 30 "$TENBIN" logs -f "$id")
t_expect "logs -f follows the job to its end" "$out" 'line1.*line2.*line3|line3'
t_expect "logs -f saw every line" "$(printf '%s\n' "$out" | wc -l | tr -d ' ')" '^3$'

# Cancel a running job: its whole process group goes.
id=$("$TENBIN" submit --project demo -- sh -c 'sleep 300 & echo $! > child.pid; wait')
t_wait_state "$id" running >/dev/null
for _ in $(seq 1 50); do [ -s "$T_STATE/jobs/$id/child.pid" ] && break; sleep 0.1; done
child=$(cat "$T_STATE/jobs/$id/child.pid")
"$TENBIN" cancel "$id" >/dev/null
state=$(t_wait_state "$id" cancelled) || true
t_expect "cancel ends the job cancelled" "$state" '^cancelled$'
sleep 0.2
if kill -0 "$child" 2>/dev/null; then
  t_fail "the job's child process is gone after cancel"
  kill "$child" 2>/dev/null || true
else
  t_ok "the job's child process is gone after cancel"
fi
t_expect "cancelling again is fine" "$("$TENBIN" cancel "$id" 2>&1; echo rc=$?)" 'rc=0'

# sbatch: directives honoured, unknown ones kept and named in a warning.
cat >"$T_DIR/job.sh" <<'SH'
#!/bin/sh
#SBATCH --job-name=hello-sbatch
#SBATCH -A research
#SBATCH --time=0:10:00
#SBATCH --partition=gpu
#SBATCH --output=out-%j.txt
echo "from sbatch $TENBIN_PROJECT"
SH
id=$("$TENBIN" sbatch "$T_DIR/job.sh" 2>"$T_DIR/sbatch.err")
t_expect "sbatch prints the job id" "$id" '^[0-9]+$'
t_expect "sbatch warns about the uninterpreted directive" "$(cat "$T_DIR/sbatch.err")" 'partition'
state=$(t_wait_state "$id" succeeded) || true
t_expect "the sbatch job succeeds" "$state" '^succeeded$'
job=$(curl -fsS "$T_URL/v1/jobs/$id")
t_expect "--job-name sets the name" "$(jq -r .name <<<"$job")" '^hello-sbatch$'
t_expect "-A sets the project" "$(jq -r .project <<<"$job")" '^research$'
t_expect "--partition is kept for Slurm sites" "$(jq -c .spec.sbatch_extra <<<"$job")" 'partition=gpu'
t_expect "--output with %j is honoured" "$(jq -r .log_path <<<"$job")" "out-$id.txt\$"
t_expect "the job ran with its project" "$("$TENBIN" logs "$id")" 'from sbatch research'

# Workloads: add a template and run it with a parameter.
cat >"$T_DIR/wl.json" <<'JSON'
{"name": "greet", "description": "says hello", "gpus": 0,
 "time_limit": "00:05:00", "project": "demo",
 "command": ["echo", "greetings", "{who}"],
 "params": {"who": {"default": "world"}}}
JSON
t_expect "workload add creates it" "$("$TENBIN" workload add "$T_DIR/wl.json")" 'created|greet'
t_expect "tenbin workloads lists it" "$("$TENBIN" workloads)" 'greet.*says hello'
# A parameter lands in its argument verbatim: no shell sees it.
id=$("$TENBIN" submit --workload greet --param 'who=tenbin; "q" $HOME')
t_wait_state "$id" succeeded >/dev/null || true
t_expect "the workload job ran with the parameter, verbatim" "$("$TENBIN" logs "$id")" '^greetings tenbin; "q" \$HOME$'
id=$("$TENBIN" submit --workload greet)
t_wait_state "$id" succeeded >/dev/null || true
t_expect "a parameter default applies" "$("$TENBIN" logs "$id")" '^greetings world$'

# A script template: the parameter reaches the script through the
# environment, so no quoting context lets it run as code (harmless
# payloads that would print INJECTED if they ran).
cat >"$T_DIR/wl2.json" <<'JSON'
{"name": "say", "project": "demo",
 "script": "#!/bin/sh\necho \"double: {msg}\"\necho 'single: {msg}'\n",
 "params": {"msg": {"required": true}}}
JSON
"$TENBIN" workload add "$T_DIR/wl2.json" >/dev/null
payload="\$(echo INJECTED)'; echo INJECTED; '\"; echo INJECTED; \""
id=$("$TENBIN" submit --workload say --param "msg=$payload")
t_wait_state "$id" succeeded >/dev/null || true
out=$("$TENBIN" logs "$id")
t_expect "a script parameter is printed verbatim" "$(head -n 1 <<<"$out")" "^double: \\\$\(echo INJECTED\)'; echo INJECTED; '\"; echo INJECTED; \"\$"
if grep -qx INJECTED <<<"$out"; then
  t_fail "a script parameter never runs as code"
else
  t_ok "a script parameter never runs as code"
fi

t_expect "tenbin sites shows the local site" "$("$TENBIN" sites)" 'local +local'
t_expect "tenbin events shows the transitions" "$("$TENBIN" events "$id")" 'running.*succeeded|succeeded'

t_stop
t_done
