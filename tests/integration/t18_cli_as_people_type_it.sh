#!/usr/bin/env bash
# The CLI as git/gh/kubectl and Slurm users type it, through the real CLI
# against a real tenbind with one local site: global options after the
# command (but never after 'submit ... --' or after sbatch's script), and
# 'tenbin sbatch' with sbatch's own options overriding the script.
. "$(dirname "$0")/lib.sh"
t_start

# ---- global options after the command ----

id=$("$TENBIN" submit --project demo -- sh -c 'echo hi')
t_wait_state "$id" succeeded >/dev/null || true
# No $TENBIN_SERVER: only the --server after the command finds tenbind.
out=$(TENBIN_SERVER= "$TENBIN" jobs --json --server "$T_URL")
t_expect "jobs --json --server URL lists the job as JSON" \
  "$(jq -r '.jobs[0].id' <<<"$out")" "^$id\$"
t_expect "show ID --json prints the job's JSON" \
  "$("$TENBIN" show "$id" --json | jq -r .state)" '^succeeded$'
t_expect "--server=URL after the command works too" \
  "$(TENBIN_SERVER= "$TENBIN" show "$id" "--server=$T_URL" --json | jq -r .id)" "^$id\$"
# After '--' every word is the command's, even one spelled like an option.
out=$("$TENBIN" submit --project demo --json -- echo --json --server nowhere)
id=$(jq -r .id <<<"$out")
t_expect "submit ... --json -- CMD prints JSON" "$id" '^[0-9]+$'
t_wait_state "$id" succeeded >/dev/null || true
t_expect "the words after -- reach the command verbatim" \
  "$("$TENBIN" logs "$id")" '^--json --server nowhere$'

# ---- tenbin sbatch ----

cat >"$T_DIR/train.sh" <<'SH'
#!/bin/sh
#SBATCH -A scriptproj
#SBATCH --time=0:10:00
#SBATCH -p cpu
#SBATCH --mem=4G
echo "project $TENBIN_PROJECT"
echo "the last line"
SH
id=$("$TENBIN" sbatch -A vision -t 5 -p gpu "$T_DIR/train.sh" 2>"$T_DIR/sbatch.err")
t_expect "sbatch with options prints the job id" "$id" '^[0-9]+$'
err=$(cat "$T_DIR/sbatch.err")
job=$(curl -fsS "$T_URL/v1/jobs/$id")
t_expect "-A on the command line is the project, over #SBATCH -A" \
  "$(jq -r .project <<<"$job")" '^vision$'
t_expect "-t on the command line beats #SBATCH --time" \
  "$(jq -r .spec.time_limit <<<"$job")" '^00:05:00$'
t_expect "-p on the command line replaces #SBATCH -p for Slurm" \
  "$(jq -c .spec.sbatch_extra <<<"$job")" '^\["--mem=4G","--partition=gpu"\]$'
t_expect "a script without --job-name is named after its file" \
  "$(jq -r .name <<<"$job")" '^train\.sh$'
t_expect "the kept #SBATCH directive is named in a warning" "$err" \
  'warning: #SBATCH --mem=4G is not interpreted'
t_expect "the kept command-line option is named in a warning" "$err" \
  'warning: option --partition=gpu is not interpreted'
t_expect "each warning is printed once" \
  "$(grep -c 'mem=4G' <<<"$err")" '^1$'
if grep -q 'partition=cpu' <<<"$err"; then
  t_fail "no warning names the overridden #SBATCH -p"
else
  t_ok "no warning names the overridden #SBATCH -p"
fi
t_wait_state "$id" succeeded >/dev/null || true
t_expect "the job ran in the project given by -A" \
  "$("$TENBIN" logs "$id")" 'project vision'
show=$("$TENBIN" show "$id")
t_expect "show says where the script is" "$show" 'script: +7 lines, below'
t_expect "show prints the whole script, not its first line" "$show" 'the last line'

# A failed submission still tells what is not interpreted.
rc=0
"$TENBIN" sbatch --site nosuch --mem=1G "$T_DIR/train.sh" >"$T_DIR/out" 2>"$T_DIR/fail.err" || rc=$?
t_expect "sbatch to an unknown site fails" "$rc" '^1$'
t_expect "the warnings are printed although the submit failed" \
  "$(cat "$T_DIR/fail.err")" 'warning: option --mem=1G is not interpreted'
t_expect "the failure is reported" "$(cat "$T_DIR/fail.err")" 'nosuch'

# Words after the script are the script's: never an option, never global.
rc=0
"$TENBIN" sbatch "$T_DIR/train.sh" --json >"$T_DIR/out" 2>"$T_DIR/args.err" || rc=$?
t_expect "an argument after the script is a usage error" "$rc" '^2$'
t_expect "it says why" "$(cat "$T_DIR/args.err")" "unexpected argument '--json' after the script"

t_stop
t_done
