#!/usr/bin/env bash
# No test installs packages: scripts/test installs everything first, and
# the scripts tests call (scripts/setup, scripts/slurm-testbed start) fail
# naming what is missing instead of running apt-get mid-run, where another
# apt-get on the machine makes it fail on the dpkg lock.  And
# `slurm-testbed install --with-accounting` installs the accounting
# packages (it used to take the mode of the state dir, not its flag).
#
# dpkg-query and apt-get are stand-ins on PATH: the first reports the
# packages in $FAKE_MISSING as not installed (the others as the real one
# does), the second only records its arguments.  No real apt-get runs.
. "$(dirname "$0")/lib.sh"
src=$TENBIN_SOURCE_DIR
fake=$T_DIR/fakebin
mkdir -p "$fake"
cat >"$fake/dpkg-query" <<'SH'
#!/bin/sh
for last; do :; done
case " $FAKE_MISSING " in *" $last "*) exit 1 ;; esac
exec /usr/bin/dpkg-query "$@"
SH
cat >"$fake/apt-get" <<SH
#!/bin/sh
echo "apt-get \$*" >>"$T_DIR/apt-get.calls"
SH
chmod 755 "$fake/dpkg-query" "$fake/apt-get"
: >"$T_DIR/apt-get.calls"
export PATH=$fake:$PATH
# A state dir of this test's own: nothing here may touch the default one.
export SLURM_TESTBED_DIR=$T_DIR/testbed

t_expect "every integration test runs with TENBIN_NO_INSTALL=1" "$TENBIN_NO_INSTALL" '^1$'

pk=$("$src/scripts/slurm-testbed" packages --with-accounting | tr '\n' ' ')
t_expect "the accounting mode needs slurmdbd and MariaDB" "$pk" 'slurmdbd .*mariadb-server'
pk=$("$src/scripts/slurm-testbed" packages | tr '\n' ' ')
t_expect "the default mode does not" "$(grep -cE 'slurmdbd|mariadb' <<<"$pk" || true)" '^0$'

# install --with-accounting in a fresh state dir (no recorded mode).
rc=0
out=$(FAKE_MISSING="slurmdbd mariadb-server" TENBIN_NO_INSTALL=0 \
  "$src/scripts/slurm-testbed" install --with-accounting 2>&1) || rc=$?
t_expect "install --with-accounting succeeds" "$rc" '^0$'
t_expect "and installs slurmdbd and mariadb-server" "$(cat "$T_DIR/apt-get.calls")" \
  'install .*slurmdbd mariadb-server'
t_expect "it made no state dir" "$(ls -d "$SLURM_TESTBED_DIR" 2>&1)" 'No such file'
: >"$T_DIR/apt-get.calls"

# start, as the Slurm tests call it, with a package missing.
rc=0
out=$(FAKE_MISSING="slurmdbd" "$src/scripts/slurm-testbed" start --with-accounting 2>&1) || rc=$?
t_expect "start with a package missing fails" "$rc" '^1$'
t_expect "naming it and how to install it" "$out" \
  'missing Debian packages: slurmdbd .*scripts/slurm-testbed install --with-accounting'
t_expect "without running apt-get" "$(wc -l <"$T_DIR/apt-get.calls")" '^0$'
t_expect "or starting anything" "$("$src/scripts/slurm-testbed" status 2>&1 || true)" '^not started|^not running'

rc=0
out=$(FAKE_MISSING="libcmocka-dev" "$src/scripts/setup" 2>&1) || rc=$?
t_expect "scripts/setup with a package missing fails" "$rc" '^1$'
t_expect "naming it" "$out" 'missing Debian packages: libcmocka-dev'
t_expect "without running apt-get" "$(wc -l <"$T_DIR/apt-get.calls")" '^0$'

t_done
