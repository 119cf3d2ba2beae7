#!/usr/bin/env bash
# No test installs packages: scripts/test installs everything first, and
# the scripts tests call (scripts/setup, scripts/slurm-testbed start) fail
# naming what is missing instead of installing mid-run, where another
# package manager on the machine makes it fail on the dpkg lock.  And
# `slurm-testbed install --with-accounting` takes its packages from its
# flag (it used to take the mode recorded in the state dir).
#
# This test installs nothing, not even through a stand-in: dpkg-query is
# a stand-in on PATH that reports the packages in $FAKE_MISSING as not
# installed (the others as the real one does), and every script is run
# with TENBIN_NO_INSTALL=1, so a missing package ends it before any
# install.
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
chmod 755 "$fake/dpkg-query"
export PATH=$fake:$PATH
# A state dir of this test's own: nothing here may touch the default one.
export SLURM_TESTBED_DIR=$T_DIR/testbed

t_expect "every integration test runs with TENBIN_NO_INSTALL=1" "$TENBIN_NO_INSTALL" '^1$'
# Whatever lib.sh did, nothing below may install.
export TENBIN_NO_INSTALL=1

pk=$("$src/scripts/slurm-testbed" packages --with-accounting | tr '\n' ' ')
t_expect "the accounting mode needs slurmdbd and MariaDB" "$pk" 'slurmdbd .*mariadb-server'
pk=$("$src/scripts/slurm-testbed" packages | tr '\n' ' ')
t_expect "the default mode does not" "$(grep -cE 'slurmdbd|mariadb' <<<"$pk" || true)" '^0$'

# install and packages take the mode from their flag, not from the mode a
# previous start recorded in the state dir.
mkdir -p "$SLURM_TESTBED_DIR"
echo default >"$SLURM_TESTBED_DIR/mode"
pk=$("$src/scripts/slurm-testbed" packages --with-accounting | tr '\n' ' ')
t_expect "the flag, not the recorded mode, decides the packages" "$pk" \
  'slurmdbd .*mariadb-server'
rc=0
out=$(FAKE_MISSING="slurmdbd mariadb-server" \
  "$src/scripts/slurm-testbed" install --with-accounting 2>&1) || rc=$?
t_expect "install --with-accounting wants slurmdbd and mariadb-server" \
  "$rc:$out" '^1:.*missing Debian packages: slurmdbd mariadb-server'
rm -rf "$SLURM_TESTBED_DIR"

# start, as the Slurm tests call it, with a package missing.
rc=0
out=$(FAKE_MISSING="slurmdbd" "$src/scripts/slurm-testbed" start --with-accounting 2>&1) || rc=$?
t_expect "start with a package missing fails" "$rc" '^1$'
t_expect "naming it and how to install it" "$out" \
  'missing Debian packages: slurmdbd .*scripts/slurm-testbed install --with-accounting'
t_expect "or starting anything" "$("$src/scripts/slurm-testbed" status 2>&1 || true)" '^not started|^not running'

rc=0
out=$(FAKE_MISSING="libcmocka-dev" "$src/scripts/setup" 2>&1) || rc=$?
t_expect "scripts/setup with a package missing fails" "$rc" '^1$'
t_expect "naming it, before installing anything" "$out" \
  'missing Debian packages: libcmocka-dev'

t_done
