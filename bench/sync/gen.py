#!/usr/bin/env python3
"""Data for bench/sync/run: random files and their changes, reproducible
from a seed (python3 standard library only).

  gen.py big FILE MIB SEED            FILE: MIB MiB of random bytes
  gen.py rewrite FILE BLOCK FRAC SEED rewrite round(FRAC x blocks) distinct
                                      BLOCK-byte blocks of FILE in place with
                                      random bytes; prints "BYTES BLOCKS"
  gen.py insert SRC DST OFFSET LEN SEED
                                      DST = SRC with LEN random bytes inserted
                                      at OFFSET; prints LEN
  gen.py tree ROOT DIRS PER KIB SEED  ROOT/dNNN/fNNNNN: DIRS x PER files of
                                      KIB KiB, random, mtime one day ago
  gen.py mutate ROOT UNDO SEED KIB MOD_KIB N_MOD N_ADD N_DEL N_REN
                                      change the tree in place (below);
                                      what undoes it goes to UNDO/
  gen.py undo ROOT UNDO               back to the tree before `mutate`

mutate: N_MOD files get MOD_KIB KiB at a random offset rewritten with
random bytes (as a new file: the old inode moves to UNDO, so hard links
to it elsewhere keep the old content), N_ADD new files of KIB KiB appear
in random directories, N_DEL files are deleted (moved to UNDO) and N_REN
files move to another directory under the same name.  Nothing is ever
written into an existing inode: a hard-linked copy of the tree made
before stays as it was.  The same SEED gives the same changes (mtimes
aside: changed files get the current time).
"""
import json
import os
import random
import shutil
import subprocess
import sys
import time

CHUNK = 8 << 20


def rand_stream(rng, n, out):
    """Write n random bytes from rng to the open binary file out."""
    while n > 0:
        k = min(n, CHUNK)
        out.write(rng.randbytes(k))
        n -= k


def cmd_big(path, mib, seed):
    n = int(mib) << 20
    # AES-CTR from openssl is ~10x faster than Python's generator; the
    # key is derived from the seed, so the file is reproducible either way.
    key = "%032x" % (int(seed) * 2654435761 % (1 << 128) | 1)
    if shutil.which("openssl"):
        with open(path, "wb") as out, open(os.devnull, "rb") as null:
            p = subprocess.Popen(
                ["openssl", "enc", "-aes-128-ctr", "-nosalt", "-K", key,
                 "-iv", "0" * 32, "-in", "/dev/zero"],
                stdin=null, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            left = n
            while left > 0:
                b = p.stdout.read(min(left, CHUNK))
                if not b:
                    break
                out.write(b)
                left -= len(b)
            p.kill()
            p.wait()
        if os.path.getsize(path) == n:
            return
    with open(path, "wb") as out:
        rand_stream(random.Random(int(seed)), n, out)


def cmd_rewrite(path, block, frac, seed):
    block = int(block)
    size = os.path.getsize(path)
    nblocks = size // block
    k = max(1, round(nblocks * float(frac)))
    rng = random.Random(int(seed))
    picked = sorted(rng.sample(range(nblocks), k))
    with open(path, "r+b") as f:
        for i in picked:
            f.seek(i * block)
            f.write(rng.randbytes(block))
    print(k * block, k)


def cmd_insert(src, dst, offset, length, seed):
    offset, length = int(offset), int(length)
    rng = random.Random(int(seed))
    with open(src, "rb") as i, open(dst, "wb") as o:
        left = offset
        while left > 0:
            b = i.read(min(left, CHUNK))
            if not b:
                sys.exit("insert: offset past the end of " + src)
            o.write(b)
            left -= len(b)
        rand_stream(rng, length, o)
        shutil.copyfileobj(i, o, CHUNK)
    print(length)


def cmd_tree(root, dirs, per, kib, seed):
    rng = random.Random(int(seed))
    size = int(kib) << 10
    old = time.time_ns() - 86400 * 10**9
    n = 0
    for d in range(int(dirs)):
        dp = os.path.join(root, "d%03d" % d)
        os.makedirs(dp)
        for _ in range(int(per)):
            fp = os.path.join(dp, "f%05d" % n)
            with open(fp, "wb") as f:
                f.write(rng.randbytes(size))
            os.utime(fp, ns=(old, old))
            n += 1
    print(n)


def tree_files(root):
    out = []
    for d in sorted(os.listdir(root)):
        dp = os.path.join(root, d)
        if os.path.isdir(dp):
            out.extend(d + "/" + f for f in sorted(os.listdir(dp)))
    return out


def cmd_mutate(root, undo, seed, kib, mod_kib, n_mod, n_add, n_del, n_ren):
    rng = random.Random(int(seed))
    size = int(kib) << 10
    mod = int(mod_kib) << 10
    n_mod, n_add, n_del, n_ren = map(int, (n_mod, n_add, n_del, n_ren))
    files = tree_files(root)
    dirs = sorted({f.split("/")[0] for f in files})
    picked = rng.sample(files, n_mod + n_del + n_ren)
    os.makedirs(undo)
    journal = []
    changed = 0
    for i, rel in enumerate(picked[:n_mod]):
        p = os.path.join(root, rel)
        keep = os.path.join(undo, "m%06d" % i)
        os.rename(p, keep)
        with open(keep, "rb") as f:
            data = bytearray(f.read())
        m = min(mod, len(data))
        off = rng.randrange(0, len(data) - m + 1)
        data[off:off + m] = rng.randbytes(m)
        with open(p, "wb") as f:
            f.write(data)
        journal.append(["mod", rel, keep])
        changed += m
    for i, rel in enumerate(picked[n_mod:n_mod + n_del]):
        keep = os.path.join(undo, "d%06d" % i)
        os.rename(os.path.join(root, rel), keep)
        journal.append(["del", rel, keep])
    for rel in picked[n_mod + n_del:]:
        d, name = rel.split("/")
        to = rng.choice([x for x in dirs if x != d] or [d]) + "/" + name
        os.rename(os.path.join(root, rel), os.path.join(root, to))
        journal.append(["ren", rel, to])
    for i in range(n_add):
        rel = rng.choice(dirs) + "/n%05d" % i
        with open(os.path.join(root, rel), "wb") as f:
            f.write(rng.randbytes(size))
        journal.append(["add", rel, None])
        changed += size
    with open(os.path.join(undo, "journal"), "w") as f:
        json.dump(journal, f)
    print(changed)


def cmd_undo(root, undo):
    with open(os.path.join(undo, "journal")) as f:
        journal = json.load(f)
    for op, rel, arg in reversed(journal):
        p = os.path.join(root, rel)
        if op == "add":
            os.unlink(p)
        elif op == "ren":
            os.rename(os.path.join(root, arg), p)
        elif op == "del":
            os.rename(arg, p)
        elif op == "mod":
            os.unlink(p)
            os.rename(arg, p)
    shutil.rmtree(undo)


CMDS = {"big": (cmd_big, 3), "rewrite": (cmd_rewrite, 4),
        "insert": (cmd_insert, 5), "tree": (cmd_tree, 5),
        "mutate": (cmd_mutate, 9), "undo": (cmd_undo, 2)}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in CMDS or \
            len(sys.argv) - 2 != CMDS[sys.argv[1]][1]:
        sys.exit(__doc__)
    CMDS[sys.argv[1]][0](*sys.argv[2:])
