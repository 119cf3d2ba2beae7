#!/usr/bin/env bash
# Operator comforts of the CLI against a real tenbind (auth on): the bash
# completion script 'tenbin completion bash' prints, sourced in a real
# bash, completes commands, options, job ids and site names from the
# server (and nothing, quietly, without a token or a server); the zsh
# script is well formed; tables show times in the local time zone and
# durations for people, --json the server's ISO UTC.
. "$(dirname "$0")/lib.sh"
cat >"$T_DIR/config.json" <<'JSON'
{"auth": {"enabled": true},
 "sites": [{"name": "local", "kind": "local"}]}
JSON
admin=$("$TENBIND" token create --role admin --name ops --state "$T_STATE")
t_start --config "$T_DIR/config.json"
export TENBIN_TOKEN=$admin

done_id=$("$TENBIN" submit --project demo -- sh -c 'sleep 1')
t_wait_state "$done_id" succeeded >/dev/null || true
run_id=$("$TENBIN" submit --project demo -- sleep 300)
t_wait_state "$run_id" running >/dev/null || true

"$TENBIN" completion bash >"$T_DIR/tenbin.bash"
"$TENBIN" completion zsh >"$T_DIR/tenbin.zsh"

# t_complete LINE: what the script completes LINE (typed up to its end)
# to, one reply a line, in a bash that sourced it as a user's would.
t_complete() {
  TB_LINE=$1 bash --norc --noprofile -c '
    source "$1" || exit 1
    COMP_LINE=$TB_LINE
    COMP_POINT=${#COMP_LINE}
    read -ra COMP_WORDS <<<"$COMP_LINE"
    [[ $COMP_LINE == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    _tenbin
    printf "%s\n" "${COMPREPLY[@]}"' t_complete "$T_DIR/tenbin.bash"
}
oneline() { tr '\n' ' ' | sed 's/ *$//'; }

t_expect "the bash script is valid bash" "$(bash -n "$T_DIR/tenbin.bash" 2>&1; echo rc=$?)" '^rc=0$'
t_expect "the script registers itself for tenbin" "$(tail -n 1 "$T_DIR/tenbin.bash")" '^complete -F _tenbin tenbin$'
t_expect "tenbin can<TAB> completes to cancel" "$(t_complete "$TENBIN can" | oneline)" '^cancel$'
t_expect "tenbin sub<TAB> completes to submit" "$(t_complete "$TENBIN sub" | oneline)" '^submit$'
show=$(t_complete "$TENBIN show ")
t_expect "tenbin show <TAB> offers the running job first" "$(head -n 1 <<<"$show")" "^$run_id\$"
t_expect "tenbin show <TAB> offers the finished job too" "$show" "^$done_id\$"
t_expect "tenbin cancel <TAB> offers job ids" "$(t_complete "$TENBIN cancel " | head -n 1)" "^$run_id\$"
t_expect "tenbin logs -f <TAB> offers job ids" "$(t_complete "$TENBIN logs -f " | head -n 1)" "^$run_id\$"
t_expect "tenbin submit --si<TAB> completes to --site" "$(t_complete "$TENBIN submit --si" | oneline)" '^--site$'
t_expect "tenbin submit --site <TAB> offers the site names" "$(t_complete "$TENBIN submit --site " | oneline)" '^local$'
t_expect "tenbin submit --site=lo<TAB> completes the value" "$(t_complete "$TENBIN submit --site=lo" | oneline)" '^local$'
t_expect "tenbin site <TAB> offers its subcommand" "$(t_complete "$TENBIN site " | oneline)" '^show$'
t_expect "tenbin site show <TAB> offers the site names" "$(t_complete "$TENBIN site show " | oneline)" '^local$'
t_expect "tenbin dataset <TAB> offers the subcommands" "$(t_complete "$TENBIN dataset " | oneline)" '^add publish sync ls show$'
t_expect "tenbin jobs --state <TAB> offers the states" "$(t_complete "$TENBIN jobs --state q" | oneline)" '^queued$'
t_expect "tenbin jobs --<TAB> offers jobs' options and the global ones" \
  "$(t_complete "$TENBIN jobs --" | oneline)" '^--state --project --site --limit --all --help --server --token --cacert --json$'
t_expect "tenbin jobs --project <TAB> offers the projects" "$(t_complete "$TENBIN jobs --project " | oneline)" '^demo$'
t_expect "a word after submit's command is left to the shell" "$(t_complete "$TENBIN submit -- sl" | oneline; echo end)" '^end$'
t_expect "--server and --token typed reach the server's values" \
  "$(TENBIN_SERVER= TENBIN_TOKEN= t_complete "$TENBIN --server $T_URL --token $admin show " | head -n 1)" "^$run_id\$"
t_expect "without a token the values are nothing, quietly" \
  "$(TENBIN_TOKEN= t_complete "$TENBIN show " 2>&1; echo "end")" '^end$'
t_expect "__complete says nothing when tenbind says 401" \
  "$(TENBIN_TOKEN= "$TENBIN" __complete jobs 2>&1; echo "rc=$?")" '^rc=0$'
t_expect "__complete says nothing when no tenbind answers" \
  "$(TENBIN_SERVER=http://127.0.0.1:9 "$TENBIN" __complete sites 2>&1; echo "rc=$?")" '^rc=0$'
t_expect "__complete sites prints one name a line" "$("$TENBIN" __complete sites)" '^local$'

# zsh is not installed by a test: check the script where it is.
if command -v zsh >/dev/null 2>&1; then
  t_expect "the zsh script is valid zsh" "$(zsh -n "$T_DIR/tenbin.zsh" 2>&1; echo rc=$?)" '^rc=0$'
else
  t_expect "the zsh script is a #compdef function" "$(head -n 1 "$T_DIR/tenbin.zsh")" '^#compdef tenbin$'
  t_expect "the zsh script registers itself" "$(cat "$T_DIR/tenbin.zsh")" 'compdef _tenbin tenbin'
  t_expect "the zsh script adds with compadd" "$(cat "$T_DIR/tenbin.zsh")" 'compadd -V tenbin-jobs'
fi
t_expect "both scripts list the same commands" \
  "$(grep '^_tenbin_commands=' "$T_DIR/tenbin.zsh")" "^$(grep '^_tenbin_commands=' "$T_DIR/tenbin.bash")\$"
t_expect "completion fish is a usage error" "$("$TENBIN" completion fish 2>&1 | oneline; echo " rc=${PIPESTATUS[0]}")" "shell 'fish'.* rc=2$"

# ---- times in the local zone, durations for people ----

# The "created" time of 'tenbin show' as seconds since the epoch, read as
# UTC: under TZ=Asia/Tokyo it reads 9 hours later than under TZ=UTC.
created_at() {
  sed -n 's/^created: *\([0-9-]* [0-9:]*\) (.* ago)$/\1/p' <<<"$1"
}
tokyo=$(TZ=Asia/Tokyo "$TENBIN" show "$done_id")
utc=$(TZ=UTC "$TENBIN" show "$done_id")
t_expect "show prints created as a local date and time" "$tokyo" '^created: +[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} \([0-9]+[smhd]( [0-9]+[smh])? ago\)'
t_expect "Asia/Tokyo's is 9 h after UTC's" \
  "$(( $(date -u -d "$(created_at "$tokyo")" +%s) - $(date -u -d "$(created_at "$utc")" +%s) ))" '^32400$'
iso=$("$TENBIN" --json show "$done_id" | jq -r .created_at)
t_expect "--json keeps the server's ISO UTC" "$iso" '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z$'
t_expect "TZ=UTC shows that instant" "$(created_at "$utc")" "^$(sed 's/T/ /; s/\..*//; s/Z$//' <<<"$iso")\$"
t_expect "show gives the elapsed time for people" "$(grep '^elapsed' <<<"$utc")" '^elapsed: +[0-9]+s$'
ev=$(TZ=Asia/Tokyo "$TENBIN" events "$done_id")
t_expect "events are in local time, not ISO" "$(sed -n 2p <<<"$ev")" '^ *[0-9]+ +[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} '
t_expect "tenbin jobs gives ages for people" "$("$TENBIN" jobs | grep "^ *$run_id ")" 'running .* [0-9]+[sm]( [0-9]+s)? '

"$TENBIN" cancel "$run_id" >/dev/null
t_wait_state "$run_id" cancelled >/dev/null || true
t_stop
t_done
