#!/usr/bin/env bash
# The systemd units in dist/systemd pass `systemd-analyze verify` with no
# warning at all: each unit is checked with its /usr/local/bin commands
# pointed at this build's binaries (verify wants them to exist), and any
# output fails the test naming the unit.  The units say what they run:
# tenbind with --config and --state, and a reload by SIGHUP.
. "$(dirname "$0")/lib.sh"
units="$TENBIN_SOURCE_DIR/dist/systemd"

if ! command -v systemd-analyze >/dev/null; then
  # scripts/setup installs systemd; a machine without it cannot check.
  t_fail "systemd-analyze is installed (scripts/setup)"
  t_done
  exit 1
fi

for unit in tenbind.service tenbin-agent.service; do
  sed "s#/usr/local/bin/#$TENBIN_BIN/#g" "$units/$unit" >"$T_DIR/$unit"
  out=$(cd "$T_DIR" && systemd-analyze verify --man=no "./$unit" 2>&1) && rc=0 || rc=$?
  if [ "$rc" -eq 0 ] && [ -z "$out" ]; then
    t_ok "$unit verifies without a warning"
  else
    t_fail "$unit verifies without a warning (rc $rc): $out"
  fi
done

t_expect "tenbind runs with its config and state directory" \
  "$(grep '^ExecStart=' "$units/tenbind.service")" \
  '^ExecStart=/usr/local/bin/tenbind --config /etc/tenbin/tenbind.json --state /var/lib/tenbin$'
t_expect "tenbind reloads on SIGHUP" \
  "$(grep '^ExecReload=' "$units/tenbind.service")" 'kill -HUP \$MAINPID'
for unit in tenbind.service tenbin-agent.service; do
  for want in NoNewPrivileges=yes ProtectSystem=strict ProtectHome=yes \
      PrivateTmp=yes User=tenbin StateDirectory= CapabilityBoundingSet= \
      SystemCallFilter=@system-service; do
    t_expect "$unit sets $want" "$(grep -c "^$want" "$units/$unit")" '^[1-9]'
  done
done
t_done
