#!/usr/bin/env bash
# Jobs outlive tenbind: a clean stop or a kill -9 leaves them running, a
# restart re-attaches to them and records their true end; a job whose
# process vanished while tenbind was down ends lost.
. "$(dirname "$0")/lib.sh"
t_start

id=$("$TENBIN" submit --project demo -- sh -c 'sleep 2; echo survived; exit 4')
t_wait_state "$id" running >/dev/null
t_stop
t_expect "the job keeps running while tenbind is stopped" "$(ls "$T_STATE/jobs/$id")" 'lock'
t_start
state=$(t_wait_state "$id" failed 30) || true
t_expect "after a clean restart the job ends with its true state" "$state" '^failed$'
t_expect "and its true exit code" "$(curl -fsS "$T_URL/v1/jobs/$id" | jq -r .exit_code)" '^4$'
t_expect "and its output" "$("$TENBIN" logs "$id")" 'survived'

id=$("$TENBIN" submit --project demo -- sh -c 'sleep 2; echo after-crash')
t_wait_state "$id" running >/dev/null
t_crash
t_start
state=$(t_wait_state "$id" succeeded 30) || true
t_expect "after kill -9 and restart the job ends succeeded" "$state" '^succeeded$'
runs=$(grep -c after-crash "$T_STATE/jobs/$id/output.log" || true)
t_expect "it ran exactly once" "$runs" '^1$'

id=$("$TENBIN" submit --project demo -- sleep 300)
t_wait_state "$id" running >/dev/null
t_crash
# The shim dies while tenbind is down, before it can record anything;
# its job follows it (parent-death signal).  Killing the job first would
# let the shim record the job's death, a true end rather than a vanishing.
# "running" is recorded once the shim is spawned, which may be before it
# has written shim.pid or forked the job: wait for both.
shim= job=
for _ in $(seq 1 100); do
  shim=$(cut -d' ' -f1 "$T_STATE/jobs/$id/shim.pid" 2>/dev/null || true)
  [ -n "$shim" ] && job=$(pgrep -P "$shim" || true)
  [ -n "$job" ] && break
  sleep 0.05
done
t_expect "the shim recorded itself and forked the job" "$shim:$job" '^[0-9]+:[0-9]+$'
[ -n "$shim" ] && kill -KILL "$shim"
for _ in $(seq 1 50); do
  [ -n "$job" ] && kill -0 "$job" 2>/dev/null || break
  sleep 0.1
done
t_start
state=$(t_wait_state "$id" lost 30) || true
t_expect "a job that vanished while tenbind was down ends lost" "$state" '^lost$'

events=$("$TENBIN" --json events "$id" | jq -r '[.events[].to] | join(",")')
t_expect "every transition is in the job's events" "$events" '^queued,placed,submitted,running,lost$'
t_stop
t_done
