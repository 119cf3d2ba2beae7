#!/usr/bin/env bash
# Reject the unbounded or unchecked libc calls STYLE.md rules out (curl's
# checksrc): use snprintf, checked strtol/strtoll, bounded copies.
set -euo pipefail
cd "$(dirname "$0")/.."
hits=$(git ls-files '*.c' '*.h' 2>/dev/null | xargs grep -nE \
  '\b(sprintf|vsprintf|strcpy|strcat|strncat|gets|atoi|atol|atoll|strtok)[[:space:]]*\(' \
  | grep -vE '\b(snprintf|vsnprintf)\(' || true)
if [ -n "$hits" ]; then
  echo "checksrc: banned calls:" >&2
  echo "$hits" >&2
  echo "0 passed, 1 failed"
  exit 1
fi
echo "checksrc: $(git ls-files '*.c' '*.h' | wc -l) files clean"
echo "1 passed, 0 failed"
