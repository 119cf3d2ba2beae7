#!/usr/bin/env bash
# A source agent whose published file was swapped, after publishing, for
# a symlink or a fifo fails the pull at once naming the file and the
# change (not "did not verify" after retries), and a fifo pins none of
# its threads: it keeps serving and publishing.
. "$(dirname "$0")/lib.sh"

SRC="$T_DIR/src"
mkdir -p "$SRC/ln" "$SRC/ff"
for d in ln ff; do
  for f in a b c; do head -c 200000 /dev/urandom >"$SRC/$d/$f.bin"; done
done
echo "not part of any dataset" >"$SRC/other"
t_agent_start A "$SRC"
publish() { # publish NAME: prints the version
  t_agent A POST "/v1/datasets/$1/versions" -d "{\"path\":\"$1\"}" |
    cut -d' ' -f2- | jq -r .version
}
VL=$(publish ln)
VF=$(publish ff)

# b.bin becomes a link to a file of the same size outside the dataset.
head -c 200000 /dev/urandom >"$SRC/same-size"
rm "$SRC/ln/b.bin"
ln -s "$SRC/same-size" "$SRC/ln/b.bin"
t_agent_start B "$T_DIR/b"
t_pull B A ln "$VL" >/dev/null
st=$(t_pull_wait B ln "$VL" 30)
t_expect "a file swapped for a symlink fails the pull naming it" "$st" \
  '"state":"failed".*b\.bin.*changed since.*symlink'
[[ $st == *"did not verify"* ]] && t_fail "it says 'did not verify': $st" ||
  t_ok "it does not say 'did not verify'"

# b.bin becomes a fifo: nobody will ever write to it.
rm "$SRC/ff/b.bin"
mkfifo "$SRC/ff/b.bin"
t_agent_start C "$T_DIR/c"
t_pull C A ff "$VF" >/dev/null
st=$(t_pull_wait C ff "$VF" 20)
t_expect "a file swapped for a fifo fails the pull naming it" "$st" \
  '"state":"failed".*b\.bin.*changed since.*not a regular file'
# Nine more pulls of it: before, each pinned a pool thread for good.
for i in $(seq 1 9); do
  t_agent_start "D$i" "$T_DIR/d$i"
  t_pull "D$i" A ff "$VF" >/dev/null
done
for i in $(seq 1 9); do
  st=$(t_pull_wait "D$i" ff "$VF" 20)
  t_expect "pull $i of the fifo fails too" "$st" '"state":"failed"'
done
mkdir -p "$SRC/later" && echo later >"$SRC/later/x"
t_expect "and the source still publishes" \
  "$(t_agent A POST /v1/datasets/later/versions -d '{"path":"later"}')" '^201 '
t_agent_stop A
t_done
