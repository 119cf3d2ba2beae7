#!/usr/bin/env bash
# Faults during replication, each with real agents: a source killed and
# restarted mid-transfer, a destination killed and restarted (files and
# segments already verified are not sent again; also while it builds a
# version from the previous one's prestaged tree), answers corrupted on
# the way (retried, never published), a file size limit at the
# destination (clear error, the previous version still served), a link
# the destination cannot make (failed, never published), a
# source file changed after publishing (named), and a hostile manifest.
. "$(dirname "$0")/lib.sh"

SRC="$T_DIR/src"
mkdir -p "$SRC/ds"
# big.bin sorts first, so its segments go first (cut by content: each
# from 4 to 16 MiB, the last one shorter).
head -c $((34 * 1048576)) /dev/urandom >"$SRC/ds/big.bin"
for i in $(seq -w 1 20); do
  head -c 1048576 /dev/urandom >"$SRC/ds/f$i.bin"
done
TOTAL=$((54 * 1048576))

t_agent_start A "$SRC"
out=$(t_agent A POST /v1/datasets/ds/versions -d '{"path":"ds"}')
V=$(printf '%s' "${out#* }" | jq -r .version)
t_expect "the source publishes the dataset" "$out" '^201 '

same_tree() { # same_tree DIR DESCRIPTION
  if diff -r "$SRC/ds" "$1" >/dev/null 2>&1; then t_ok "$2"; else
    t_fail "$2: $(diff -r "$SRC/ds" "$1" 2>&1 | head -3)"; fi
}
status_of() { t_agent "$1" GET "/v1/datasets/ds/pulls/$V" | cut -d' ' -f2-; }
wait_done_bytes() { # wait_done_bytes AGENT BYTES: until bytes_done >= BYTES
  for _ in $(seq 1 600); do
    d=$(status_of "$1" | jq -r '.bytes_done // 0')
    [ "$d" -ge "$2" ] && { echo "$d"; return 0; }
    sleep 0.05
  done
  echo "$d"
  return 1
}

# ---- the source dies mid-transfer and comes back ----
t_agent_start B "$T_DIR/b" --parallel 1
t_pull B A ds "$V" ',"bwlimit":8388608' >/dev/null
done_at_kill=$(wait_done_bytes B $((20 * 1048576)))
t_agent_kill A
sleep 0.5
t_expect "the destination keeps the pull running while the source is away" \
  "$(status_of B)" '"state":"running"'
t_agent_start A "$SRC"
st=$(t_pull_wait B ds "$V" 120)
t_expect "the pull completes after the source restarts" "$st" \
  '"state":"complete"'
same_tree "$T_DIR/b/.tenbin/data/ds/$V" "the replica is identical after the source restart"
served=$(curl -fsS "$AGENT_URL_A/healthz" | jq -r .served_bytes)
# At most the batch in flight at the kill (8 MiB of segments, or one
# segment of at most 16 MiB) is sent again; everything verified before
# it is not.
if [ "$served" -le $((TOTAL - done_at_kill + 16 * 1048576)) ]; then
  t_ok "the restarted source sent $served bytes, not the $done_at_kill verified before"
else
  t_fail "the restarted source sent $served bytes; $done_at_kill were verified before"
fi

# ---- the destination dies mid-transfer; a new PUT resumes it ----
t_agent_start C "$T_DIR/c" --parallel 1
t_pull C A ds "$V" ',"bwlimit":8388608' >/dev/null
wait_done_bytes C $((20 * 1048576)) >/dev/null
t_agent_kill C
t_expect "a killed destination publishes nothing" \
  "$(ls "$T_DIR/c/.tenbin/data/ds" 2>/dev/null | wc -l)" '^0$'
t_agent_start C "$T_DIR/c" --parallel 1
t_pull C A ds "$V" >/dev/null
st=$(t_pull_wait C ds "$V" 120)
t_expect "the resumed pull completes" "$st" '"state":"complete"'
same_tree "$T_DIR/c/.tenbin/data/ds/$V" "the resumed replica is identical"
wire=$(printf '%s' "$st" | jq -r .bytes_wire)
# 20 MiB were verified at the kill: at least big.bin's first segment (4
# MiB or more) is not sent again.
if [ "$wire" -le $((TOTAL - 4 * 1048576)) ]; then
  t_ok "the resumed pull skipped verified segments ($wire bytes on the wire)"
else
  t_fail "the resumed pull moved $wire bytes; the first segment was verified"
fi

# ---- the destination dies mid-pull of a version started from the
# previous version's prestaged tree (docs/SYNC.md "Prestaging") ----
mkdir -p "$SRC/pre"
head -c $((12 * 1048576)) /dev/urandom >"$SRC/pre/big.bin"
for i in $(seq -w 1 40); do head -c 65536 /dev/urandom >"$SRC/pre/s$i.bin"; done
out=$(t_agent A POST /v1/datasets/pre/versions -d '{"path":"pre"}')
P1=$(printf '%s' "${out#* }" | jq -r .version)
t_pull C A pre "$P1" >/dev/null
t_expect "the first version of another dataset arrives" \
  "$(t_pull_wait C pre "$P1")" '"state":"complete"'
for _ in $(seq 1 100); do
  [ "$(curl -fsS "$AGENT_URL_C/healthz" | jq -r .background)" = 0 ] && break
  sleep 0.1
done
cp -a "$T_DIR/c/.tenbin/data/pre/$P1" "$T_DIR/pre-v1"
stat -c '%n %a %Y %i' "$T_DIR/c/.tenbin/data/pre/$P1"/* >"$T_DIR/pre-v1.stat"
# the new version: 6 MiB of big.bin and 10 small files rewritten, one
# small file renamed, one removed, a mode changed
head -c $((6 * 1048576)) /dev/urandom |
  dd of="$SRC/pre/big.bin" bs=1M seek=3 conv=notrunc status=none
for i in $(seq -w 1 10); do head -c 65536 /dev/urandom >"$SRC/pre/s$i.bin"; done
mv "$SRC/pre/s20.bin" "$SRC/pre/moved.bin"
rm "$SRC/pre/s21.bin"
chmod 0600 "$SRC/pre/s22.bin"
out=$(t_agent A POST /v1/datasets/pre/versions -d '{"path":"pre"}')
P2=$(printf '%s' "${out#* }" | jq -r .version)
# At 1 MiB/s the ~6.7 MB of changes take ~6 s to arrive (bytes_wire
# grows only as batches end): kill half a second after the plan.
t_pull C A pre "$P2" ',"bwlimit":1048576' >/dev/null
for _ in $(seq 1 200); do
  grep -q "pull pre@${P2:0:12}: " "$T_DIR/agent-C.log" && break
  sleep 0.05
done
sleep 0.5
t_agent_kill C
t_expect "the killed pull had started from the prestaged tree" \
  "$(grep "pull pre@${P2:0:12}: " "$T_DIR/agent-C.log")" \
  ' [1-9][0-9]* kept from the prestaged tree'
t_expect "killed mid-pull from a prestaged tree, it publishes nothing" \
  "$(ls "$T_DIR/c/.tenbin/data/pre" | grep -c "$P2")" '^0$'
t_agent_start C "$T_DIR/c" --parallel 1
t_pull C A pre "$P2" >/dev/null
st=$(t_pull_wait C pre "$P2" 120)
t_expect "the pull resumed after the kill completes" "$st" '"state":"complete"'
if diff -r "$SRC/pre" "$T_DIR/c/.tenbin/data/pre/$P2" >/dev/null 2>&1 &&
   [ "$(stat -c %a "$T_DIR/c/.tenbin/data/pre/$P2/s22.bin")" = 600 ]; then
  t_ok "the version resumed over a prestaged tree is exact, modes included"
else
  t_fail "the resumed version differs: $(diff -r "$SRC/pre" "$T_DIR/c/.tenbin/data/pre/$P2" 2>&1 | head -3)"
fi
if diff -r "$T_DIR/pre-v1" "$T_DIR/c/.tenbin/data/pre/$P1" >/dev/null 2>&1 &&
   stat -c '%n %a %Y %i' "$T_DIR/c/.tenbin/data/pre/$P1"/* | cmp -s - "$T_DIR/pre-v1.stat"; then
  t_ok "the previous version is untouched: content, modes, mtimes, inodes"
else
  t_fail "the previous version changed under the killed pull"
fi

# ---- answers corrupted on the way ----
t_agent_stop A
TENBIN_FAULT=corrupt-answers t_agent_start A "$SRC"
t_agent_start D "$T_DIR/d"
t_pull D A ds "$V" >/dev/null
st=$(t_pull_wait D ds "$V" 120)
t_expect "corrupted answers are retried and the pull completes" "$st" \
  '"state":"complete".*"retries":[1-9]'
same_tree "$T_DIR/d/.tenbin/data/ds/$V" "what was published after corruption is intact"
# Attempts are counted per segment: every segment's first answer damaged
# (big.bin's several among them) still completes, each retried once.
t_agent_stop A
TENBIN_FAULT=corrupt-each-segment-once t_agent_start A "$SRC"
t_agent_start H2 "$T_DIR/h2"
t_pull H2 A ds "$V" >/dev/null
st=$(t_pull_wait H2 ds "$V" 120)
nseg=$(t_agent A GET "/v1/datasets/ds/versions/$V/manifest" |
  sed 's/^[0-9]* //' | jq '[.entries[] | select(.type == "file" and .size > 0) |
    ((.segments // [0]) | length)] | add')
if printf '%s' "$st" | grep -q '"state":"complete"' &&
   [ "$(printf '%s' "$st" | jq -r .retries)" -ge "$nseg" ] && [ "$nseg" -gt 3 ]; then
  t_ok "a damaged first answer for each of $nseg segments is retried per segment and completes"
else
  t_fail "per-segment attempts: $nseg segments, $(printf '%s' "$st" | head -c 300)"
fi
same_tree "$T_DIR/h2/.tenbin/data/ds/$V" "what was published after a damaged answer per segment is intact"
t_agent_stop H2
t_agent_stop A
TENBIN_FAULT=corrupt-all-answers t_agent_start A "$SRC"
t_agent_start E "$T_DIR/e"
t_pull E A ds "$V" >/dev/null
st=$(t_pull_wait E ds "$V" 120)
t_expect "answers that never verify fail the pull naming the file" "$st" \
  '"state":"failed".*did not verify after 3 attempts'
t_expect "a version that did not verify is never published" \
  "$(ls "$T_DIR/e/.tenbin/data/ds" 2>/dev/null | wc -l)" '^0$'
t_agent_stop A
t_agent_start A "$SRC"

# ---- a file size limit at the destination ----
mkdir -p "$SRC/small"
head -c 100000 /dev/urandom >"$SRC/small/s.bin"
out=$(t_agent A POST /v1/datasets/small/versions -d '{"path":"small"}')
VS=$(printf '%s' "${out#* }" | jq -r .version)
T_AGENT_PREFIX="prlimit --fsize=$((8 * 1048576)) --" t_agent_start F "$T_DIR/f"
t_pull F A small "$VS" >/dev/null
t_expect "a small version fits under the limit" "$(t_pull_wait F small "$VS")" \
  '"state":"complete"'
t_pull F A ds "$V" >/dev/null
st=$(t_pull_wait F ds "$V" 120)
t_expect "the file size limit fails the pull with a clear error" "$st" \
  '"state":"failed".*big\.bin.*file too large'
t_expect "the earlier version is still held and served" \
  "$(t_agent F GET "/v1/datasets/small/versions/$VS/manifest")" '^200 '
if cmp -s "$SRC/small/s.bin" "$T_DIR/f/.tenbin/data/small/$VS/s.bin"; then
  t_ok "the earlier version's files are untouched"
else
  t_fail "the earlier version's files changed"
fi

# ---- a link that cannot be made at the destination ----
# A failing symlinkat (ENOSPC here, through the test build's fault
# switch) fails the pull naming the link; no replica lacking it is ever
# published.
mkdir -p "$SRC/lnk/sub"
printf 'linked\n' >"$SRC/lnk/sub/f.txt"
ln -s sub/f.txt "$SRC/lnk/to-f"
out=$(t_agent A POST /v1/datasets/lnk/versions -d '{"path":"lnk"}')
VK=$(printf '%s' "${out#* }" | jq -r .version)
TENBIN_FAULT=symlink-enospc t_agent_start SY "$T_DIR/sy"
t_pull SY A lnk "$VK" >/dev/null
t_expect "a link that cannot be made fails the pull naming it" \
  "$(t_pull_wait SY lnk "$VK")" \
  '"state":"failed".*to-f.*No space left on device'
t_expect "a replica without its link is never published" \
  "$(ls "$T_DIR/sy/.tenbin/data/lnk" 2>/dev/null | wc -l)" '^0$'
t_agent_stop SY

# ---- a source file changed after publishing ----
mkdir -p "$SRC/chg"
head -c 200000 /dev/urandom >"$SRC/chg/x.bin"
head -c 200000 /dev/urandom >"$SRC/chg/y.bin"
out=$(t_agent A POST /v1/datasets/chg/versions -d '{"path":"chg"}')
VC=$(printf '%s' "${out#* }" | jq -r .version)
printf 'changed!' | dd of="$SRC/chg/y.bin" bs=1 seek=1000 conv=notrunc status=none
t_agent_start G "$T_DIR/g"
t_pull G A chg "$VC" >/dev/null
st=$(t_pull_wait G chg "$VC")
t_expect "a file changed after publish fails the replica naming it" "$st" \
  "\"state\":\"failed\".*y\\.bin.*changed since"

# ---- a large file changed after publishing, inside a block sent ----
# The rewritten MiB of a 24 MiB file goes as a delta whose blocks the
# source reads and checks against their published fingerprints; a byte
# changed there after publishing is named, never sent.
mkdir -p "$SRC/lchg"
head -c $((24 << 20)) /dev/urandom >"$SRC/lchg/l.bin"
out=$(t_agent A POST /v1/datasets/lchg/versions -d '{"path":"lchg"}')
VL1=$(printf '%s' "${out#* }" | jq -r .version)
t_agent_start L "$T_DIR/l"
t_pull L A lchg "$VL1" >/dev/null
t_expect "the large file's first version is replicated" \
  "$(t_pull_wait L lchg "$VL1")" '"state":"complete"'
head -c $((1 << 20)) /dev/urandom |
  dd of="$SRC/lchg/l.bin" bs=1M seek=10 conv=notrunc status=none
out=$(t_agent A POST /v1/datasets/lchg/versions -d '{"path":"lchg"}')
VL2=$(printf '%s' "${out#* }" | jq -r .version)
printf 'changed!' |
  dd of="$SRC/lchg/l.bin" bs=1 seek=$(((10 << 20) + 4096)) conv=notrunc \
    status=none
t_pull L A lchg "$VL2" >/dev/null
t_expect "a large file changed after publish in a delta'd block fails, named" \
  "$(t_pull_wait L lchg "$VL2")" '"state":"failed".*l\.bin.*changed since'

# ---- an agent that cannot listen says so and exits, leaking nothing ----
mkdir -p "$T_DIR/busy"
rc=0
out=$("$TENBIN_BIN/tenbin-agent" --root "$T_DIR/busy" \
  --listen "127.0.0.1:$(cat "$T_DIR/agent-A.port")" \
  --token-file "$T_DIR/agent-A.token" 2>&1) || rc=$?
t_expect "an agent whose port is taken exits 1" "$rc" '^1$'
t_expect "an agent whose port is taken says it cannot listen there" \
  "$out" "cannot listen on '127\\.0\\.0\\.1' port"
if printf '%s' "$out" | grep -q LeakSanitizer; then
  t_fail "an agent that failed to start leaked (ASan): $out"
else
  t_ok "an agent that failed to start leaked nothing"
fi

# ---- a damaged old replica: its segments are not copied blindly ----
# A segment equal to the old version's is copied locally and checked
# against the XXH3-128 recorded when the old one was verified; a byte
# flipped since then in the old replica is caught and that segment is
# fetched from the source instead.
t_agent_start H "$T_DIR/h"
t_pull H A ds "$V" >/dev/null
t_expect "the replica to damage is complete" "$(t_pull_wait H ds "$V")" \
  '"state":"complete"'
for _ in $(seq 1 200); do
  ls "$T_DIR"/h/.tenbin/sigs/*.xxh >/dev/null 2>&1 && break
  sleep 0.05
done
t_expect "the pull recorded the received file's XXH3 fingerprints" \
  "$(ls "$T_DIR"/h/.tenbin/sigs/ | grep -c '\.xxh$')" '^[1-9]'
old="$T_DIR/h/.tenbin/data/ds/$V/big.bin"
chmod u+w "$old"
printf 'X' | dd of="$old" bs=1 seek=$((5 * 1048576 + 7)) conv=notrunc status=none
printf 'new tail' | dd of="$SRC/ds/big.bin" bs=1 seek=$((33 * 1048576)) \
  conv=notrunc status=none
out=$(t_agent A POST /v1/datasets/ds/versions -d '{"path":"ds"}')
V2=$(printf '%s' "${out#* }" | jq -r .version)
t_pull H A ds "$V2" >/dev/null
st=$(t_pull_wait H ds "$V2")
t_expect "the pull over a damaged old replica completes" "$st" \
  '"state":"complete"'
same_tree "$T_DIR/h/.tenbin/data/ds/$V2" \
  "the new replica has the source's bytes, not the damaged ones"
wire=$(printf '%s' "$st" | jq -r .bytes_wire)
if [ "$wire" -ge $((4 * 1048576)) ]; then
  t_ok "the damaged segment crossed the network again ($wire bytes)"
else
  t_fail "only $wire bytes crossed: the damaged segment was copied"
fi

# ---- shifted data: segments found again by their content ----
# 1,000,003 bytes inserted at 5 MiB + 777 of a 60 MiB file shift the rest
# by an amount that is not whole MiB.  Segments are cut by content, so
# those after the insert are cut where they were: the publish reuses
# their SHA-256 and the destination copies them from its old replica
# (checked by fingerprint); only the segment with the insert crosses as
# a delta.  Seeded bytes, so the segment layout is the same every run.
mkdir -p "$SRC/shift"
python3 -c "
import random, sys
open(sys.argv[1], 'wb').write(random.Random(14).randbytes(60 * 1048576))" \
  "$SRC/shift/f.bin"
out=$(t_agent A POST /v1/datasets/shift/versions -d '{"path":"shift"}')
SV1=$(printf '%s' "${out#* }" | jq -r .version)
t_agent_start I "$T_DIR/i" --parallel 1
t_pull I A shift "$SV1" >/dev/null
t_expect "the unshifted version is pulled" "$(t_pull_wait I shift "$SV1")" \
  '"state":"complete"'
for _ in $(seq 1 200); do
  ls "$T_DIR"/i/.tenbin/sigs/*.xxh >/dev/null 2>&1 && break
  sleep 0.05
done
python3 -c "
import random, sys
p = sys.argv[1]
d = open(p, 'rb').read()
at = 5 * 1048576 + 777
open(p + '.new', 'wb').write(d[:at] + random.Random(15).randbytes(1000003) +
                             d[at:])" "$SRC/shift/f.bin"
mv "$SRC/shift/f.bin.new" "$SRC/shift/f.bin"
out=$(t_agent A POST /v1/datasets/shift/versions -d '{"path":"shift"}')
SV2=$(printf '%s' "${out#* }" | jq -r .version)
t_expect "publishing the shifted file reuses the segments after the insert" \
  "$out" '"segments_reused":[1-9]'
t_pull I A shift "$SV2" >/dev/null
st=$(t_pull_wait I shift "$SV2")
t_expect "the shifted version is pulled" "$st" '"state":"complete"'
if cmp -s "$SRC/shift/f.bin" "$T_DIR/i/.tenbin/data/shift/$SV2/f.bin"; then
  t_ok "the shifted replica is exact"
else
  t_fail "the shifted replica differs from the source"
fi
# The segment with the insert goes with a signature of the old range it
# replaced (finer than the whole file's): the manifest, that signature
# and the delta fit in 1.05 x the inserted bytes.
wire=$(printf '%s' "$st" | jq -r .bytes_wire)
if [ "$wire" -le 1050003 ]; then
  t_ok "a 1,000,003-byte insert moved $wire bytes of a 61 MB file"
else
  t_fail "a 1,000,003-byte insert moved $wire bytes, more than 1.05 x"
fi

# ---- a hostile source: its manifest climbs out of the tree ----
hostile() { # hostile JSON-ENTRIES: serve that manifest; prints its version
  local m='{"entries":'"$1"',"format":2}'
  mkdir -p "$T_DIR/evil"
  printf '%s' "$m" >"$T_DIR/evil/manifest"
  printf '%s' "$m" | sha256sum | cut -d' ' -f1
}
cat >"$T_DIR/evil.py" <<'EOF'
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = open(sys.argv[1], 'rb').read()
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
s = http.server.HTTPServer(('127.0.0.1', 0), H)
open(sys.argv[2], 'w').write(str(s.server_address[1]))
s.serve_forever()
EOF
mkdir -p "$T_DIR/evil"
python3 "$T_DIR/evil.py" "$T_DIR/evil/manifest" "$T_DIR/evil.port" &
T_AGENT_PIDS+=("$!")
for _ in $(seq 1 100); do [ -s "$T_DIR/evil.port" ] && break; sleep 0.05; done
EVIL="http://127.0.0.1:$(cat "$T_DIR/evil.port")"
evil_pull() { # evil_pull VERSION: pull from the hostile source, final status
  t_agent G PUT "/v1/datasets/evil/pulls/$1" \
    -d "{\"source\":{\"url\":\"$EVIL\",\"token\":\"x\"}}" >/dev/null
  t_pull_wait G evil "$1"
}
h=$(printf '%064d' 0)
VE=$(hostile '[{"mode":420,"mtime_ns":0,"path":"../evil","sha256":"'"$h"'","size":1,"type":"file"}]')
t_expect "a manifest entry with .. fails the pull naming it" \
  "$(evil_pull "$VE")" '"state":"failed".*manifest.*\.\./evil'
VE=$(hostile '[{"mode":420,"mtime_ns":0,"path":"/etc/passwd","sha256":"'"$h"'","size":1,"type":"file"}]')
t_expect "an absolute manifest path fails the pull" \
  "$(evil_pull "$VE")" '"state":"failed".*manifest.*/etc/passwd'
VE=$(hostile '[{"mode":420,"mtime_ns":0,"path":"a","sha256":"'"$h"'","size":1152921504606846976,"type":"file"}]')
t_expect "a huge file size in a manifest fails the pull" \
  "$(evil_pull "$VE")" '"state":"failed".*manifest.*size'
VE=$(hostile '[{"path":"l","target":"../../etc","type":"link"}]')
t_expect "a link out of the tree in a manifest fails the pull" \
  "$(evil_pull "$VE")" '"state":"failed".*manifest.*l'
t_expect "nothing of the hostile versions was written outside the store" \
  "$(ls "$T_DIR/g/.tenbin/.." | grep -c evil || true)" '^0$'

t_done
