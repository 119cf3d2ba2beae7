#!/usr/bin/env bash
# Exactly once against real Slurm: tenbind killed with -9 after Slurm took
# a job but before its id was stored finds the job again by its tag after
# the restart (adopts it, never submits it twice); killed after the job
# was committed `placed` but before anything reached Slurm, it submits the
# job after the restart, once.
. "$(dirname "$0")/lib.sh"
t_slurm_start

# Crash point: Slurm answered the submit, tenbind has not stored the id.
TENBIN_FAULT=slurm-submit-answered t_start --config "$T_DIR/slurm.json"
pid=$T_PID
a=$("$TENBIN" submit --project demo --site onprem --gpus 1 -- sh -c 'sleep 2; echo ran-a')
for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
wait "$pid" 2>/dev/null || true
T_PID=""
t_expect "tenbind died at the crash point" "$(grep -c "fault point 'slurm-submit-answered'" "$T_DIR/tenbind.err")" '^1$'
t_expect "the job was stored without a remote id" \
  "$(sqlite3 "$T_STATE/tenbin.db" "select state || ':' || coalesce(remote_id, '-') from jobs where id = $a")" '^placed:-$'
t_expect "Slurm has it once" "$(t_slurm_tagged onprem "$a")" '^1$'
t_start --config "$T_DIR/slurm.json"
t_expect "after the restart it is adopted and succeeds" "$(t_wait_state "$a" succeeded 60)" '^succeeded$'
t_expect "Slurm still has it exactly once" "$(t_slurm_tagged onprem "$a")" '^1$'
rid=$(curl -fsS "$T_URL/v1/jobs/$a" | jq -r .remote_id)
t_expect "its remote id is that Slurm job" \
  "$(t_slurmrest onprem GET "/job/$rid" | jq -r '.jobs[0].comment')" ":$a\$"
t_expect "its output appears once" "$(grep -c ran-a "$("$TENBIN" --json show "$a" | jq -r .log_path)")" '^1$'
t_stop

# Crash point: placed is committed, nothing sent to Slurm yet.
TENBIN_FAULT=slurm-before-submit t_start --config "$T_DIR/slurm.json"
pid=$T_PID
b=$("$TENBIN" submit --project demo --site onprem -- sh -c 'echo ran-b')
for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
wait "$pid" 2>/dev/null || true
T_PID=""
t_expect "tenbind died before sending" "$(grep -c "fault point 'slurm-before-submit'" "$T_DIR/tenbind.err")" '^1$'
t_expect "Slurm does not have the job" "$(t_slurm_tagged onprem "$b")" '^0$'
t_start --config "$T_DIR/slurm.json"
t_expect "after the restart it is submitted and succeeds" "$(t_wait_state "$b" succeeded 60)" '^succeeded$'
t_expect "Slurm has it exactly once" "$(t_slurm_tagged onprem "$b")" '^1$'
events=$("$TENBIN" --json events "$b" | jq -r '[.events[].to] | join(",")')
t_expect "it went back to the queue once, saying why" "$events" '^queued,placed,queued,placed,submitted,(running,)?succeeded$'
t_stop
t_done
