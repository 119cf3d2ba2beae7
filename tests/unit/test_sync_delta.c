/*
 * Tests for sync/delta.c: block lengths, segment deltas that patch back
 * to the exact file with little data, corrupt input that fails cleanly,
 * and the write errors an operator must be told about in words.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <librsync.h>
#include <openssl/evp.h>
#include <xxhash.h>

#include "sync/chunk.h"
#include "sync/delta.h"
#include "sync/manifest.h"
#include "tests/unit/seeded_bytes.h"

#define MIB ((size_t)1 << 20)
#define KIB ((size_t)1 << 10)
#define SEG_MAX ((size_t)MANIFEST_SEG_MAX)

static char tmpdir[64];
static int nfiles;
/* Segments the last round_trip cut the new file into. */
static size_t rt_segs;

/* ---- helpers ---- */

/* A new file in the test's directory holding n bytes of p; its fd. */
static int
file_with(const void *p, size_t n)
{
  char path[128];
  int fd;

  snprintf(path, sizeof(path), "%s/f%d", tmpdir, nfiles++);
  fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  assert_true(fd >= 0);
  assert_int_equal(unlink(path), 0);
  if (n > 0)
    assert_int_equal(pwrite(fd, p, n, 0), (ssize_t)n);
  return fd;
}

static void
sha256_of(const void *p, size_t n, uint8_t out[32])
{
  unsigned int len = 0;

  assert_int_equal(EVP_Digest(p, n, out, &len, EVP_sha256(), NULL), 1);
  assert_int_equal(len, 32);
}

static uint8_t *
read_all(int fd, size_t n)
{
  uint8_t *p = malloc(n + 1);

  assert_non_null(p);
  assert_int_equal(pread(fd, p, n, 0), (ssize_t)n);
  return p;
}

/* Patch delta d against basis_fd into a new file (its fd), and check
 * that it made exactly want (n bytes), by SHA-256 and byte for byte. */
static int
patch_checked(int basis_fd, const struct buf *d, const uint8_t *want,
              size_t n)
{
  int out = file_with(NULL, 0);
  uint8_t sha[32], expect[32], *got;
  struct err e = {0};

  assert_int_equal(delta_patch(basis_fd, d->data, d->len, out, 0, n, sha,
                               NULL, &e), 0);
  sha256_of(want, n, expect);
  assert_memory_equal(sha, expect, 32);
  got = read_all(out, n);
  assert_memory_equal(got, want, n);
  free(got);
  return out;
}

static struct delta_sig *
load_sig_of(int fd, uint64_t size, size_t *sig_len)
{
  struct buf sig;
  struct delta_sig *ds = NULL;
  struct err e = {0};

  buf_init(&sig, 64 * MIB);
  assert_int_equal(delta_signature(fd, size, &sig, &e), 0);
  if (sig_len != NULL)
    *sig_len = sig.len;
  assert_int_equal(delta_sig_load(sig.data, sig.len, &ds, &e), 0);
  assert_non_null(ds);
  buf_release(&sig);
  return ds;
}

/*
 * Walk the commands of a librsync delta (magic, then LITERAL / COPY /
 * END; opcodes from librsync's prototab) and report the output offset
 * of the first literal longer than 64 KiB (librsync itself flushes
 * misses every 64 KiB, so only delta.c's fallback writes longer ones),
 * or UINT64_MAX; *longest gets the longest literal.
 */
static uint64_t
first_long_literal(const uint8_t *d, size_t len, uint64_t *longest)
{
  uint64_t outpos = 0, first = UINT64_MAX;
  size_t i = 4;

  *longest = 0;
  assert_true(len >= 5);
  assert_memory_equal(d, "\x72\x73\x02\x36", 4);
  for (;;) {
    uint8_t op;
    uint64_t a = 0, b = 0;
    size_t na = 0, nb = 0;

    assert_true(i < len);
    op = d[i++];
    if (op == 0)
      break;
    if (op <= 0x40) {
      b = op;
    } else if (op <= 0x44) {
      nb = (size_t)1 << (op - 0x41);
    } else {
      assert_true(op <= 0x54);
      na = (size_t)1 << ((op - 0x45) / 4);
      nb = (size_t)1 << ((op - 0x45) % 4);
    }
    assert_true(len - i >= na + nb);
    for (size_t k = 0; k < na; k++)
      a = a << 8 | d[i++];
    for (size_t k = 0; k < nb; k++)
      b = b << 8 | d[i++];
    if (op <= 0x44) {
      assert_true(len - i >= b);
      i += (size_t)b;
      if (b > *longest)
        *longest = b;
      if (b > 64 * KIB && first == UINT64_MAX)
        first = outpos;
    }
    outpos += b;
  }
  assert_int_equal(i, len);
  return first;
}

/*
 * Delta every segment of new (nlen bytes in new_fd, cut by content as a
 * publish cuts it, so segments start at any offset) against the basis'
 * signature, patch each into a fresh file at its offset, and check the
 * file, each segment's SHA-256 and its fingerprints (counted from the
 * segment's start).  Returns the delta bytes in total, and the longest
 * literal command in *max_literal (when not NULL).
 */
static size_t
round_trip(int basis_fd, uint64_t blen, const uint8_t *new, size_t nlen,
           uint64_t *max_literal)
{
  struct delta_sig *ds = load_sig_of(basis_fd, blen, NULL);
  int new_fd = file_with(new, nlen);
  int out_fd = file_with(NULL, 0);
  struct buf d;
  struct err e = {0};
  size_t total = 0, len;
  uint8_t *got, *cutbuf = malloc(MIB);

  assert_non_null(cutbuf);
  rt_segs = 0;
  buf_init(&d, SEG_MAX + MIB);
  for (size_t off = 0; off < nlen || off == 0; off += len) {
    uint8_t xxh[16], pfp[SEG_MAX / MIB][16], sha[32], want[32];
    uint64_t longest, end = 0;

    if (nlen > 0)
      assert_int_equal(chunk_cut(new_fd, off, nlen, cutbuf, MIB, &end), 0);
    len = (size_t)end - off;
    rt_segs++;

    buf_reset(&d);
    assert_int_equal(delta_compute(ds, new_fd, off, len, &d, xxh, NULL, &e), 0);
    total += d.len;
    if (max_literal != NULL) {
      (void)first_long_literal((uint8_t *)d.data, d.len, &longest);
      if (longest > *max_literal)
        *max_literal = longest;
    }
    assert_int_equal(delta_patch(basis_fd, d.data, d.len, out_fd, off, len,
                                 sha, pfp, &e), 0);
    sha256_of(new + off, len, want);
    assert_memory_equal(sha, want, 32);
    /* the patch fingerprints each MiB it writes */
    for (size_t b = 0; b * MIB < len; b++) {
      XXH128_canonical_t c;
      size_t bl = len - b * MIB < MIB ? len - b * MIB : MIB;

      XXH128_canonicalFromHash(&c, XXH3_128bits(new + off + b * MIB, bl));
      assert_memory_equal(pfp[b], c.digest, 16);
    }
    if (nlen == 0)
      break;
  }
  got = read_all(out_fd, nlen);
  assert_memory_equal(got, new, nlen);
  free(got);
  free(cutbuf);
  buf_release(&d);
  delta_sig_free(ds);
  close(new_fd);
  close(out_fd);
  return total;
}

/* ---- block lengths ---- */

static void
test_block_len_is_a_power_of_two_near_sqrt_within_a_segment(
    void **state)
{
  static const struct {
    uint64_t size;
    size_t want;
  } table[] = {
    {0, 2 * KIB},
    {1, 2 * KIB},
    {64 * KIB, 2 * KIB},
    {4 * MIB, 2 * KIB},             /* sqrt is exactly 2 KiB */
    {4 * MIB + 1, 4 * KIB},         /* round up */
    {(uint64_t)2 << 30, 64 * KIB},  /* sqrt 46341 */
    {(uint64_t)1 << 40, 1 * MIB},
    {(uint64_t)1 << 50, 1 * MIB},
    {UINT64_MAX, 1 * MIB},
  };

  (void)state;
  for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
    assert_int_equal(delta_block_len(table[i].size), table[i].want);
  for (uint64_t size = 1; size != 0 && size < ((uint64_t)1 << 62);
       size = size * 3 + 7) {
    size_t bl = delta_block_len(size);

    assert_true(bl >= 2 * KIB && bl <= MIB);
    assert_int_equal(bl & (bl - 1), 0);
    /* a block of context before a segment stays inside the segment
     * before it */
    assert_true(bl <= MANIFEST_SEG_MIN);
    /* nearest power of two at or above sqrt(size), within the range */
    assert_true(bl == MIB || (uint64_t)bl * bl >= size);
    assert_true(bl == 2 * KIB || (uint64_t)(bl / 2) * (bl / 2) < size);
  }
}

/* ---- round trips ---- */

static void
test_segment_deltas_of_a_few_changed_blocks_patch_back_small(void **state)
{
  const size_t n = 40 * MIB, region = 64 * KIB;
  const size_t at[] = {5 * MIB + 123, 17 * MIB, 33 * MIB + 4097};
  uint8_t *basis = malloc(n), *new = malloc(n);
  size_t total, changed = 0;
  uint64_t longest = 0;
  int bfd;

  (void)state;
  fill_random(basis, n, 1);
  memcpy(new, basis, n);
  for (size_t i = 0; i < 3; i++) {
    fill_random(new + at[i], region, 100 + i);
    changed += region;
  }
  bfd = file_with(basis, n);
  total = round_trip(bfd, n, new, n, &longest);
  /* A literal-only answer would be 40 MiB; rewriting a region costs it
   * plus at most a block on each side, and the rest is COPY commands. */
  assert_true(total < 2 * changed + 64 * KIB);
  assert_true(total >= changed);
  assert_true(longest <= 64 * KIB); /* no literal fallback */
  close(bfd);
  free(basis);
  free(new);
}

/*
 * A segment that replaced one old range, with an insert in it, is delta'd
 * against a signature of that range alone (finer blocks than the whole
 * file's, so less literal data), and the delta, rebased by the range's
 * offset, patches against the whole old file.
 */
static void
test_a_range_signature_rebased_patches_against_the_whole_basis(
    void **state)
{
  const size_t n = 24 * MIB, roff = 8 * MIB + 4093, rlen = 8 * MIB;
  const size_t ins = 1000003, at = 3 * MIB + 77;
  const size_t nlen = rlen + ins;
  uint8_t *basis = malloc(n), *new = malloc(nlen);
  struct buf sig, whole, d;
  struct delta_sig *ds = NULL;
  struct err e = {0};
  uint8_t xxh[16], sha[32], want[32];
  uint64_t longest = 0;
  int bfd, nfd, out;

  (void)state;
  fill_random(basis, n, 11);
  /* the new segment: the old range with bytes inserted in it */
  memcpy(new, basis + roff, at);
  fill_random(new + at, ins, 12);
  memcpy(new + at + ins, basis + roff + at, rlen - at);
  bfd = file_with(basis, n);
  nfd = file_with(new, nlen);
  buf_init(&sig, 64 * MIB);
  buf_init(&whole, 64 * MIB);
  assert_int_equal(delta_signature_range(bfd, roff, rlen, &sig, &e), 0);
  assert_int_equal(delta_signature(bfd, n, &whole, &e), 0);
  /* a third of the file, in blocks half the size */
  assert_true(sig.len < whole.len);
  assert_int_equal(delta_sig_load(sig.data, sig.len, &ds, &e), 0);
  buf_init(&d, 64 * MIB);
  assert_int_equal(delta_compute(ds, nfd, 0, nlen, &d, xxh, NULL, &e), 0);
  /* The literal is the insert and at most a few of the range's fine
   * blocks around it (the whole file's are 8 KiB). */
  (void)first_long_literal((const uint8_t *)d.data, d.len, &longest);
  assert_true(d.len < ins + 16 * KIB);
  assert_int_equal(delta_rebase(&d, 0, roff, &e), 0);
  out = patch_checked(bfd, &d, new, nlen);
  sha256_of(new, nlen, want);
  /* Without the rebase the COPYs address the start of the file: wrong
   * bytes, caught by the hash. */
  buf_reset(&d);
  assert_int_equal(delta_compute(ds, nfd, 0, nlen, &d, xxh, NULL, &e), 0);
  assert_int_equal(delta_patch(bfd, d.data, d.len, out, 0, nlen, sha, NULL,
                               &e), 0);
  assert_memory_not_equal(sha, want, 32);
  delta_sig_free(ds);
  buf_release(&sig);
  buf_release(&whole);
  buf_release(&d);
  close(out);
  close(nfd);
  close(bfd);
  free(basis);
  free(new);
}

static void
test_data_shifted_by_an_insert_still_gives_small_deltas(void **state)
{
  const size_t n = 20 * MIB, ins = MIB, mid = 9 * MIB + 77;
  uint8_t *basis = malloc(n), *new = malloc(n + ins);
  size_t total, bl = delta_block_len(n);
  uint64_t longest = 0;
  int bfd;

  (void)state;
  fill_random(basis, n, 2);
  memcpy(new, basis, mid);
  fill_random(new + mid, ins, 3);
  memcpy(new + mid + ins, basis + mid, n - mid);
  bfd = file_with(basis, n);
  /* 21 MiB cut by content: the second segment starts at an offset of
   * the basis that is not on its block grid, so this also proves COPYs
   * across the whole basis from a segment that starts anywhere. */
  total = round_trip(bfd, n, new, n + ins, &longest);
  assert_true(rt_segs >= 2);
  assert_true(total >= ins);
  assert_true(total < ins + 4 * bl + 64 * KIB);
  assert_true(longest <= 64 * KIB);
  close(bfd);
  free(basis);
  free(new);
}

/*
 * Shifted by an amount that is not a multiple of the block length, every
 * later segment starts inside a shifted copy of a basis block; with one
 * block of context before each segment none of that goes literally (it
 * cost up to a block per segment before).
 */
static void
test_segments_of_data_shifted_by_any_amount_match_from_their_first_byte(
    void **state)
{
  const size_t n = 64 * MIB, ins = 1000, at = 5 * MIB + 77;
  uint8_t *basis = malloc(n), *new = malloc(n + ins);
  size_t total, bl = delta_block_len(n);
  int bfd;

  (void)state;
  fill_random(basis, n, 30);
  memcpy(new, basis, at);
  fill_random(new + at, ins, 31);
  memcpy(new + at + ins, basis + at, n - at);
  bfd = file_with(basis, n);
  total = round_trip(bfd, n, new, n + ins, NULL);
  /* the insert, the block it cuts, and commands: several segments
   * follow, each starting at an arbitrary offset */
  assert_true(rt_segs >= 3);
  assert_true(total < ins + bl + 2 * KIB);
  close(bfd);
  free(basis);
  free(new);
}

/*
 * Where nothing matches, librsync would crawl byte by byte; a window of
 * pure literal output ends its job and the rest goes as big literal
 * commands.  After that, the next range with the same signature probes
 * a shorter window, and a range that matches resets it.
 */
static void
test_unrelated_data_falls_back_to_literal_after_a_probe_window(
    void **state)
{
  const size_t bn = MIB, n = 3 * 12 * MIB;
  uint8_t *basis = malloc(bn), *new = malloc(n), xxh[16], sha[32];
  uint64_t at, longest;
  int bfd, nfd, out;
  struct delta_sig *ds;
  struct buf d;
  struct err e = {0};

  (void)state;
  fill_random(basis, bn, 20);
  fill_random(new, n, 21);
  memcpy(new + 12 * MIB, basis, bn); /* the second range matches */
  bfd = file_with(basis, bn);
  nfd = file_with(new, n);
  out = file_with(NULL, 0);
  ds = load_sig_of(bfd, bn, NULL);
  buf_init(&d, 13 * MIB);
  for (int round = 0; round < 4; round++) {
    /* ranges: unrelated, unrelated, basis first, unrelated */
    uint64_t off = round == 0 ? 0 : round == 2 ? 12 * MIB : 24 * MIB;
    uint64_t len = round == 2 ? bn : 12 * MIB;
    uint8_t want[32];

    if (round == 1)
      off = 13 * MIB;
    if (round == 3)
      off = 24 * MIB;
    buf_reset(&d);
    assert_int_equal(delta_compute(ds, nfd, off, len, &d, xxh, NULL, &e), 0);
    at = first_long_literal((uint8_t *)d.data, d.len, &longest);
    if (round == 0 || round == 3) {
      assert_true(at >= 4 * MIB && at <= 6 * MIB);
    } else if (round == 1) {
      assert_true(at >= MIB && at <= 3 * MIB);
    } else {
      assert_true(at == UINT64_MAX);
      assert_true(d.len < 4 * KIB);
    }
    assert_int_equal(delta_patch(bfd, d.data, d.len, out, 0, len, sha, NULL, &e),
                     0);
    sha256_of(new + off, len, want);
    assert_memory_equal(sha, want, 32);
  }
  buf_release(&d);
  delta_sig_free(ds);
  close(bfd);
  close(nfd);
  close(out);
  free(basis);
  free(new);
}

static void
test_new_file_of_zero_bytes_and_empty_basis_round_trip(void **state)
{
  uint8_t data[5000];
  int empty = file_with(NULL, 0);
  int bfd;

  (void)state;
  fill_random(data, sizeof(data), 4);
  assert_true(round_trip(empty, 0, data, sizeof(data), NULL) >
              sizeof(data));
  bfd = file_with(data, sizeof(data));
  (void)round_trip(bfd, sizeof(data), data, 0, NULL);
  close(bfd);
  close(empty);
}

/* A delta against an empty basis is all literal: it patches without any
 * basis, and one that copies cannot. */
static void
test_literal_delta_patches_without_a_basis_and_copies_need_one(
    void **state)
{
  const size_t n = 3 * MIB + 5;
  uint8_t *data = malloc(n), *got;
  uint8_t xxh[16], sha[32], want[32];
  int empty = file_with(NULL, 0), src, out;
  struct delta_sig *ds = load_sig_of(empty, 0, NULL);
  struct buf d;
  struct err e = {0};

  (void)state;
  fill_random(data, n, 5);
  src = file_with(data, n);
  out = file_with(NULL, 0);
  buf_init(&d, n + MIB);
  assert_int_equal(delta_compute(ds, src, 0, n, &d, xxh, NULL, &e), 0);
  assert_int_equal(delta_patch(-1, d.data, d.len, out, 0, n, sha, NULL, &e), 0);
  sha256_of(data, n, want);
  assert_memory_equal(sha, want, 32);
  got = read_all(out, n);
  assert_memory_equal(got, data, n);
  free(got);
  delta_sig_free(ds);

  /* against itself the delta is COPY commands: no basis, no patch */
  ds = load_sig_of(src, n, NULL);
  buf_reset(&d);
  assert_int_equal(delta_compute(ds, src, 0, n, &d, xxh, NULL, &e), 0);
  assert_true(d.len < 4 * KIB);
  assert_int_equal(delta_patch(-1, d.data, d.len, out, 0, n, sha, NULL, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "basis"));
  delta_sig_free(ds);
  buf_release(&d);
  close(empty);
  close(src);
  close(out);
  free(data);
}

/* ---- corrupt input ---- */

static void
test_corrupt_or_truncated_delta_fails_or_mismatches_never_crashes(
    void **state)
{
  const size_t n = 256 * KIB;
  uint8_t *basis = malloc(n), *new = malloc(n), *bad;
  uint8_t xxh[16], sha[32], want[32];
  int bfd, nfd, out;
  struct delta_sig *ds;
  struct buf d;
  struct err e = {0};
  size_t invalid = 0, mismatched = 0;

  (void)state;
  fill_random(basis, n, 6);
  memcpy(new, basis, n);
  fill_random(new + 100 * KIB, 3000, 7);
  bfd = file_with(basis, n);
  nfd = file_with(new, n);
  out = file_with(NULL, 0);
  ds = load_sig_of(bfd, n, NULL);
  buf_init(&d, n + MIB);
  assert_int_equal(delta_compute(ds, nfd, 0, n, &d, xxh, NULL, &e), 0);
  sha256_of(new, n, want);
  bad = malloc(d.len);

  /* every truncation is caught by librsync's framing */
  for (size_t cut = 0; cut < d.len; cut += 1 + cut / 64) {
    memcpy(bad, d.data, cut);
    assert_int_equal(delta_patch(bfd, bad, cut, out, 0, n, sha, NULL, &e),
                     ERR_INVALID);
  }
  /* a flipped byte is either refused or makes other bytes */
  for (size_t i = 0; i < d.len; i += 1 + i / 32) {
    int rc;

    memcpy(bad, d.data, d.len);
    bad[i] ^= (uint8_t)(0x5a + i);
    rc = delta_patch(bfd, bad, d.len, out, 0, n, sha, NULL, &e);
    if (rc == ERR_INVALID) {
      invalid++;
    } else {
      assert_int_equal(rc, 0);
      assert_memory_not_equal(sha, want, 32);
      mismatched++;
    }
  }
  /* both outcomes happen: headers and commands, and literal bytes */
  assert_true(invalid > 0);
  assert_true(mismatched > 0);
  /* trailing bytes after the END command are corrupt too */
  bad = realloc(bad, d.len + 1);
  memcpy(bad, d.data, d.len);
  bad[d.len] = 0;
  assert_int_equal(delta_patch(bfd, bad, d.len + 1, out, 0, n, sha, NULL, &e),
                   ERR_INVALID);
  /* and the intact delta still patches */
  assert_int_equal(delta_patch(bfd, d.data, d.len, out, 0, n, sha, NULL, &e), 0);
  assert_memory_equal(sha, want, 32);
  free(bad);
  buf_release(&d);
  delta_sig_free(ds);
  close(bfd);
  close(nfd);
  close(out);
  free(basis);
  free(new);
}

static void
test_copy_past_the_end_of_a_shorter_basis_is_invalid(void **state)
{
  const size_t n = 512 * KIB;
  uint8_t *data = malloc(n), xxh[16], sha[32];
  int full, half, out;
  struct delta_sig *ds;
  struct buf d;
  struct err e = {0};

  (void)state;
  fill_random(data, n, 8);
  full = file_with(data, n);
  half = file_with(data, n / 2);
  out = file_with(NULL, 0);
  ds = load_sig_of(full, n, NULL);
  buf_init(&d, n + MIB);
  assert_int_equal(delta_compute(ds, full, 0, n, &d, xxh, NULL, &e), 0);
  assert_int_equal(delta_patch(half, d.data, d.len, out, 0, n, sha, NULL, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "past the basis"));
  buf_release(&d);
  delta_sig_free(ds);
  close(full);
  close(half);
  close(out);
  free(data);
}

static void
test_patch_of_the_wrong_expected_length_is_invalid(void **state)
{
  const size_t n = 300 * KIB;
  uint8_t *data = malloc(n), xxh[16], sha[32];
  int fd, out;
  struct delta_sig *ds;
  struct buf d;
  struct err e = {0};
  struct stat st;

  (void)state;
  fill_random(data, n, 9);
  fd = file_with(data, n);
  out = file_with(NULL, 0);
  ds = load_sig_of(fd, n, NULL);
  buf_init(&d, n + MIB);
  assert_int_equal(delta_compute(ds, fd, 0, n, &d, xxh, NULL, &e), 0);
  assert_int_equal(delta_patch(fd, d.data, d.len, out, 0, n - 1, sha, NULL, &e),
                   ERR_INVALID);
  assert_int_equal(delta_patch(fd, d.data, d.len, out, 0, 0, sha, NULL, &e),
                   ERR_INVALID);
  /* too much output is refused before it is written, not after */
  assert_int_equal(fstat(out, &st), 0);
  assert_int_equal(st.st_size, 0);
  assert_int_equal(delta_patch(fd, d.data, d.len, out, 0, n + 1, sha, NULL, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "expected"));
  assert_int_equal(delta_patch(fd, d.data, d.len, out, 0, n, sha, NULL, &e), 0);
  buf_release(&d);
  delta_sig_free(ds);
  close(fd);
  close(out);
  free(data);
}

static void
test_signature_garbage_is_invalid(void **state)
{
  uint8_t data[64 * KIB], junk[4096];
  /* magic, block length, strong length (big-endian), then blocks */
  static const uint8_t hdrs[][12] = {
    {0x72, 0x73, 0x01, 0x99, 0, 0, 8, 0, 0, 0, 0, 8},       /* magic */
    {0x72, 0x73, 0x01, 0x36, 0, 0, 0, 0, 0, 0, 0, 8},       /* block 0 */
    {0x72, 0x73, 0x01, 0x36, 0x80, 0, 0, 0, 0, 0, 0, 8},    /* block<0 */
    {0x72, 0x73, 0x01, 0x36, 0, 0x20, 0, 0, 0, 0, 0, 8},    /* 2 MiB */
    {0x72, 0x73, 0x01, 0x36, 0, 0, 8, 0, 0, 0, 0, 0},       /* strong 0 */
    {0x72, 0x73, 0x01, 0x46, 0, 0, 8, 0, 0, 0, 0, 17},      /* md4 17 */
    {0x72, 0x73, 0x01, 0x47, 0, 0, 8, 0, 0, 0, 0, 33},      /* b2 33 */
    {0x72, 0x73, 0x01, 0x37, 0, 0, 8, 0, 0xff, 0, 0, 8},    /* huge */
  };
  struct delta_sig *ds = (struct delta_sig *)junk;
  struct buf sig;
  struct err e = {0};
  int fd;

  (void)state;
  fill_random(junk, sizeof(junk), 10);
  assert_int_equal(delta_sig_load(junk, sizeof(junk), &ds, &e),
                   ERR_INVALID);
  assert_null(ds);
  assert_int_equal(delta_sig_load(junk, 0, &ds, &e), ERR_INVALID);
  for (size_t i = 0; i < sizeof(hdrs) / sizeof(hdrs[0]); i++) {
    memcpy(junk, hdrs[i], 12);
    assert_int_equal(delta_sig_load(junk, 12 + 2 * 12, &ds, &e),
                     ERR_INVALID);
  }

  /* a real signature loads; cut inside a block or header, it does not */
  fill_random(data, sizeof(data), 11);
  fd = file_with(data, sizeof(data));
  buf_init(&sig, MIB);
  assert_int_equal(delta_signature(fd, sizeof(data), &sig, &e), 0);
  assert_true(sig.len > 12);
  assert_int_equal(delta_sig_load(sig.data, sig.len, &ds, &e), 0);
  delta_sig_free(ds);
  assert_int_equal(delta_sig_load(sig.data, 12, &ds, &e), 0);
  delta_sig_free(ds);
  assert_int_equal(delta_sig_load(sig.data, sig.len - 1, &ds, &e),
                   ERR_INVALID);
  assert_int_equal(delta_sig_load(sig.data, 11, &ds, &e), ERR_INVALID);
  assert_int_equal(delta_sig_load(sig.data, 4, &ds, &e), ERR_INVALID);
  delta_sig_free(NULL);
  buf_release(&sig);
  close(fd);
}

/* ---- hashes, bounds and file offsets ---- */

/* Over a range that partly matches and over one that is all literal
 * (where librsync leaves input behind when its output fills). */
static void
test_delta_compute_and_read_give_the_xxh3_of_the_range(void **state)
{
  const size_t n = 5 * MIB;
  const uint64_t off = MIB + 3, len = 3 * MIB + 11;
  uint8_t *data = malloc(n), x1[16], x2[16];
  XXH128_canonical_t c;
  int fd, empty;
  struct delta_sig *ds[2];
  struct buf d;
  struct err e = {0};

  (void)state;
  fill_random(data, n, 12);
  fd = file_with(data, n);
  empty = file_with(NULL, 0);
  ds[0] = load_sig_of(fd, n / 2, NULL);
  ds[1] = load_sig_of(empty, 0, NULL);
  buf_init(&d, 2 * n);
  XXH128_canonicalFromHash(&c, XXH3_128bits(data + off, len));
  for (int i = 0; i < 2; i++) {
    buf_reset(&d);
    assert_int_equal(delta_compute(ds[i], fd, off, len, &d, x1, NULL, &e), 0);
    assert_memory_equal(x1, c.digest, 16);
    delta_sig_free(ds[i]);
  }
  buf_reset(&d);
  assert_int_equal(delta_read(fd, off, len, &d, x2, NULL, &e), 0);
  assert_memory_equal(x2, c.digest, 16);
  /* the literal read is the bytes themselves */
  assert_int_equal(d.len, len);
  assert_memory_equal(d.data, data + off, len);
  buf_release(&d);
  close(fd);
  close(empty);
  free(data);
}

static void
test_short_file_is_io_error_and_small_cap_too_large_buffer_kept(
    void **state)
{
  const size_t n = 2 * MIB;
  uint8_t *data = malloc(n), xxh[16], sha[32];
  int fd, empty;
  struct delta_sig *ds;
  struct buf d;
  struct err e = {0};

  (void)state;
  fill_random(data, n, 13);
  fd = file_with(data, n);
  empty = file_with(NULL, 0);
  ds = load_sig_of(empty, 0, NULL);
  buf_init(&d, 64 * KIB);
  assert_int_equal(buf_add(&d, "keep", 4), 0);

  assert_int_equal(delta_compute(ds, fd, n - 10, 11, &d, xxh, NULL, &e),
                   ERR_IO);
  assert_int_equal(delta_read(fd, n, 1, &d, xxh, NULL, &e), ERR_IO);
  assert_int_equal(delta_hash_range(fd, 1, n, sha, NULL, &e), ERR_IO);
  assert_int_equal(delta_signature(fd, n + 1, &d, &e), ERR_IO);
  /* a literal delta of 1 MiB does not fit in 64 KiB */
  assert_int_equal(delta_compute(ds, fd, 0, MIB, &d, xxh, NULL, &e),
                   ERR_TOO_LARGE);
  assert_int_equal(delta_read(fd, 0, MIB, &d, xxh, NULL, &e), ERR_TOO_LARGE);
  assert_int_equal(d.len, 4);
  assert_string_equal(d.data, "keep");
  buf_release(&d);
  delta_sig_free(ds);
  close(fd);
  close(empty);
  free(data);
}

static void
test_hash_range_matches_an_independent_sha256(void **state)
{
  const size_t n = 3 * MIB + 1;
  uint8_t *data = malloc(n), sha[32], want[32];
  struct err e = {0};
  int fd;

  (void)state;
  fill_random(data, n, 14);
  fd = file_with(data, n);
  assert_int_equal(delta_hash_range(fd, 7, n - 7, sha, NULL, &e), 0);
  sha256_of(data + 7, n - 7, want);
  assert_memory_equal(sha, want, 32);
  assert_int_equal(delta_hash_range(fd, n, 0, sha, NULL, &e), 0);
  sha256_of(data, 0, want);
  assert_memory_equal(sha, want, 32);
  close(fd);
  free(data);
}

static void
fp_of(const uint8_t *p, size_t len, uint8_t out[16])
{
  XXH128_canonical_t c;

  XXH128_canonicalFromHash(&c, XXH3_128bits(p, len));
  memcpy(out, c.digest, 16);
}

/*
 * Blocks the destination's fingerprints locate in the basis (at the
 * same offset or moved) become COPY commands without being read (the
 * source's bytes there are even made different, and the patch still
 * gives the basis' bytes); changed blocks are delta'd and checked
 * against their published fingerprints, and a block changed since
 * publishing is ERR_CONFLICT naming it, out untouched.
 */
static void
test_blocks_delta_copies_found_blocks_unread_and_checks_the_rest(
    void **state)
{
  const size_t n = 6 * MIB + 100;
  const uint64_t R = DELTA_READ;
  uint8_t *basis = malloc(n), *new = malloc(n), *got = malloc(n);
  uint8_t fp[7][16], sha[32], want[32];
  /* block 4 of the new file is block 1 of the basis (moved) */
  uint64_t from[7] = {0, MIB, R, 3 * MIB, MIB, R, R};
  struct delta_sig *ds;
  struct buf d;
  struct err e = {0};
  uint64_t bad = 99;
  int bfd, nfd, out;

  (void)state;
  fill_random(basis, n, 21);
  memcpy(new, basis, n);
  fill_random(new + 2 * MIB + 5, 1000, 22); /* block 2: a small edit */
  fill_random(new + 5 * MIB, MIB, 23);      /* block 5: all new */
  memcpy(new + 4 * MIB, basis + MIB, MIB);  /* block 4: moved */
  for (size_t i = 0; i < 7; i++)
    fp_of(new + i * MIB, i < 6 ? MIB : 100, fp[i]);
  bfd = file_with(basis, n);
  ds = load_sig_of(bfd, n, NULL);
  buf_init(&d, 4 * MIB);
  assert_int_equal(buf_add(&d, "keep", 4), 0);

  /* what the source reads: block 0 differs, but same[0] says it is not
   * to be read */
  new[10] ^= 1;
  nfd = file_with(new, n);
  new[10] ^= 1;
  assert_int_equal(delta_compute_blocks(ds, nfd, 0, n, from, fp, &d, &bad,
                                        &e), 0);
  /* the edit goes as a delta, the new MiB as literal, the rest as COPYs */
  assert_true(d.len - 4 < MIB + 64 * KIB);
  out = file_with(NULL, 0);
  assert_int_equal(delta_patch(bfd, d.data + 4, d.len - 4, out, 0, n, sha,
                               NULL, &e), 0);
  sha256_of(new, n, want);
  assert_memory_equal(sha, want, 32);
  assert_int_equal(pread(out, got, n, 0), (ssize_t)n);
  assert_memory_equal(got, new, n);

  /* block 5 changed since it was published */
  fill_random(fp[5], 16, 24);
  d.len = 4;
  assert_int_equal(delta_compute_blocks(ds, nfd, 0, n, from, fp, &d, &bad,
                                        &e), ERR_CONFLICT);
  assert_int_equal(bad, 5);
  assert_int_equal(d.len, 4);
  assert_memory_equal(d.data, "keep", 4);
  buf_release(&d);
  delta_sig_free(ds);
  close(bfd);
  close(nfd);
  close(out);
  free(got);
  free(new);
  free(basis);
}

/* A local segment copy writes the old file's bytes at in_off to out_off
 * (a segment found again where an insert moved it) and sums them
 * (SHA-256, and XXH3-128 per MiB from the range's start, the last block
 * short); with sha NULL only the fingerprints are computed; an old file
 * shorter than the segment fails verification (ERR_INVALID), not I/O,
 * and writes nothing. */
static void
test_copy_writes_where_asked_and_sums_short_old_file_is_invalid(
    void **state)
{
  const size_t n = 3 * MIB + 5;
  const uint64_t in_off = MIB + 1, out_off = 3, len = 2 * MIB + 4;
  uint8_t *data = malloc(n), *got = malloc(n), sha[32], want[32];
  uint8_t fp[4][16], fp2[4][16];
  XXH128_canonical_t c[3];
  struct stat st;
  struct err e = {0};
  int in, out;

  (void)state;
  fill_random(data, n, 15);
  in = file_with(data, n);
  out = file_with(NULL, 0);
  memset(fp, 0, sizeof(fp));
  assert_int_equal(delta_copy(in, in_off, out, out_off, len, sha, fp, &e),
                   0);
  sha256_of(data + in_off, len, want);
  assert_memory_equal(sha, want, 32);
  XXH128_canonicalFromHash(&c[0], XXH3_128bits(data + in_off, MIB));
  XXH128_canonicalFromHash(&c[1], XXH3_128bits(data + in_off + MIB, MIB));
  XXH128_canonicalFromHash(&c[2], XXH3_128bits(data + in_off + 2 * MIB, 4));
  assert_memory_equal(fp[0], c[0].digest, 16);
  assert_memory_equal(fp[1], c[1].digest, 16);
  assert_memory_equal(fp[2], c[2].digest, 16);
  /* exactly one entry per block: the fourth is untouched */
  assert_memory_equal(fp[3], (uint8_t[16]){0}, 16);
  assert_int_equal(pread(out, got, n, 0), (ssize_t)(out_off + len));
  assert_memory_equal(got + out_off, data + in_off, len);
  memset(sha, 0xee, sizeof(sha));
  assert_int_equal(delta_copy(in, in_off, out, out_off, len, NULL, fp2, &e),
                   0);
  assert_memory_equal(fp2, fp, 3 * 16);
  /* at the same offset too (a segment that did not move) */
  assert_int_equal(delta_copy(in, 7, out, 7, MIB, sha, NULL, &e), 0);
  sha256_of(data + 7, MIB, want);
  assert_memory_equal(sha, want, 32);
  assert_int_equal(pread(out, got, MIB, 7), (ssize_t)MIB);
  assert_memory_equal(got, data + 7, MIB);
  /* the old file is a byte short of in_off + len: nothing written */
  assert_int_equal(fstat(out, &st), 0);
  assert_int_equal(delta_copy(in, n - 4, out, (uint64_t)st.st_size + 10, 5,
                              sha, fp, &e), ERR_INVALID);
  assert_non_null(strstr(err_msg(&e), "fewer than"));
  {
    struct stat after;

    assert_int_equal(fstat(out, &after), 0);
    assert_int_equal(after.st_size, st.st_size);
  }
  close(in);
  close(out);
  free(got);
  free(data);
}

static void
test_calls_never_move_the_file_offset(void **state)
{
  const size_t n = MIB;
  uint8_t *data = malloc(n), xxh[16], sha[32];
  int fd, out;
  struct delta_sig *ds;
  struct buf d;
  struct err e = {0};

  (void)state;
  fill_random(data, n, 15);
  fd = file_with(data, n);
  out = file_with(NULL, 0);
  assert_int_equal(lseek(fd, 12345, SEEK_SET), 12345);
  assert_int_equal(lseek(out, 777, SEEK_SET), 777);
  ds = load_sig_of(fd, n, NULL);
  buf_init(&d, 2 * n);
  assert_int_equal(delta_compute(ds, fd, 0, n, &d, xxh, NULL, &e), 0);
  assert_int_equal(delta_patch(fd, d.data, d.len, out, 0, n, sha, NULL, &e), 0);
  assert_int_equal(delta_write(out, n, data, 100, sha, NULL, &e), 0);
  assert_int_equal(delta_hash_range(out, 0, n, sha, NULL, &e), 0);
  assert_int_equal(lseek(fd, 0, SEEK_CUR), 12345);
  assert_int_equal(lseek(out, 0, SEEK_CUR), 777);
  buf_release(&d);
  delta_sig_free(ds);
  close(fd);
  close(out);
  free(data);
}

/* Two threads, each with its own loaded signature, on the same fds. */
struct worker {
  struct delta_sig *ds;
  int basis, src, out;
  uint64_t off, len;
  uint8_t sha[32];
  int rc;
};

static void *
worker_run(void *arg)
{
  struct worker *w = arg;
  struct buf d;
  struct err e = {0};
  uint8_t xxh[16];

  buf_init(&d, SEG_MAX + MIB);
  w->rc = delta_compute(w->ds, w->src, w->off, w->len, &d, xxh, NULL, &e);
  if (w->rc == 0)
    w->rc = delta_patch(w->basis, d.data, d.len, w->out, w->off, w->len,
                        w->sha, NULL, &e);
  buf_release(&d);
  return NULL;
}

static void
test_segments_patch_in_parallel_threads_on_shared_fds(void **state)
{
  const size_t n = 6 * MIB;
  uint8_t *basis = malloc(n), *new = malloc(n), *got, want[32];
  struct worker w[2];
  pthread_t t[2];
  int bfd, nfd, out;

  (void)state;
  fill_random(basis, n, 16);
  memcpy(new, basis, n);
  fill_random(new + MIB, 1000, 17);
  fill_random(new + 4 * MIB, 1000, 18);
  bfd = file_with(basis, n);
  nfd = file_with(new, n);
  out = file_with(NULL, 0);
  for (int i = 0; i < 2; i++) {
    w[i] = (struct worker){load_sig_of(bfd, n, NULL), bfd, nfd, out,
                           (uint64_t)i * (n / 2), n / 2, {0}, -1};
    assert_int_equal(pthread_create(&t[i], NULL, worker_run, &w[i]), 0);
  }
  for (int i = 0; i < 2; i++) {
    assert_int_equal(pthread_join(t[i], NULL), 0);
    assert_int_equal(w[i].rc, 0);
    sha256_of(new + w[i].off, w[i].len, want);
    assert_memory_equal(w[i].sha, want, 32);
    delta_sig_free(w[i].ds);
  }
  got = read_all(out, n);
  assert_memory_equal(got, new, n);
  free(got);
  close(bfd);
  close(nfd);
  close(out);
  free(basis);
  free(new);
}

/* ---- write errors ---- */

static void
test_write_to_a_full_device_names_no_space(void **state)
{
  uint8_t data[4096], sha[32];
  struct err e = {0};
  int fd = open("/dev/full", O_WRONLY | O_CLOEXEC);

  (void)state;
  if (fd < 0)
    skip();
  memset(data, 7, sizeof(data));
  assert_int_equal(delta_write(fd, 0, data, sizeof(data), sha, NULL, &e),
                   ERR_IO);
  assert_string_equal(e.msg, "no space left on device");
  close(fd);
}

/*
 * Past RLIMIT_FSIZE, with SIGXFSZ ignored as the agent does, a write
 * fails with EFBIG; both write paths must name it.  In a child, so the
 * limit and the signal disposition stay there.
 */
static int
efbig_child(void)
{
  const size_t n = 256 * KIB;
  uint8_t *data = malloc(n), xxh[16], sha[32];
  struct rlimit rl = {128 * KIB, 128 * KIB};
  struct delta_sig *ds;
  struct buf d;
  struct err e = {0};
  int fd, out, empty;

  fill_random(data, n, 19);
  fd = file_with(data, n);
  empty = file_with(NULL, 0);
  out = file_with(NULL, 0);
  ds = load_sig_of(empty, 0, NULL);
  buf_init(&d, n + MIB);
  if (delta_compute(ds, fd, 0, n, &d, xxh, NULL, &e) != 0)
    return 10;
  signal(SIGXFSZ, SIG_IGN);
  if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
    return 11;
  if (delta_write(out, 0, data, n, sha, NULL, &e) != ERR_IO ||
      strcmp(e.msg, "file too large (file size limit)") != 0)
    return 12;
  if (delta_patch(-1, d.data, d.len, out, 64 * KIB, n, sha, NULL, &e) != ERR_IO ||
      strcmp(e.msg, "file too large (file size limit)") != 0)
    return 13;
  /* below the limit, writing still works */
  if (delta_write(out, 0, data, 1000, sha, NULL, &e) != 0)
    return 14;
  buf_release(&d);
  delta_sig_free(ds);
  free(data);
  return 0;
}

static void
test_write_past_the_file_size_limit_names_it(void **state)
{
  pid_t pid;
  int status = 0;

  (void)state;
  pid = fork();
  assert_true(pid >= 0);
  if (pid == 0)
    _exit(efbig_child());
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- sparse files ---- */

/* Bytes of fd on disk. */
static uint64_t
disk_bytes(int fd)
{
  struct stat st;

  assert_int_equal(fstat(fd, &st), 0);
  return (uint64_t)st.st_blocks * 512;
}

/* n bytes of zeros but for three runs of data, one unaligned, and a
 * zero tail: 1 MiB + 1 byte of data in all. */
static uint8_t *
mostly_zeros(size_t n)
{
  uint8_t *p = calloc(1, n);

  assert_non_null(p);
  fill_random(p + 4 * MIB, 512 * KIB, 41);
  fill_random(p + 9 * MIB + 100, 512 * KIB, 42);
  p[n - MIB] = 1;
  return p;
}

/*
 * Every destination write (literal data, a patch, a local copy) leaves
 * the blocks of zeros as holes: a sparse file stays sparse at a replica,
 * its size and bytes exact, its SHA-256 that of the bytes.
 */
static void
test_writes_leave_blocks_of_zeros_as_holes_with_exact_bytes(void **state)
{
  const size_t n = 32 * MIB;
  uint8_t *data = mostly_zeros(n), *got, xxh[16], sha[32], want[32];
  int empty = file_with(NULL, 0), src = file_with(data, n);
  int w = file_with(NULL, 0), pt = file_with(NULL, 0), cp = file_with(NULL, 0);
  int outs[3] = {w, pt, cp};
  struct delta_sig *ds = load_sig_of(empty, 0, NULL);
  struct buf d;
  struct err e = {0};
  struct stat st;

  (void)state;
  sha256_of(data, n, want);
  buf_init(&d, n + MIB);
  assert_int_equal(delta_compute(ds, src, 0, n, &d, xxh, NULL, &e), 0);
  assert_int_equal(delta_write(w, 0, data, n, sha, NULL, &e), 0);
  assert_memory_equal(sha, want, 32);
  assert_int_equal(delta_patch(-1, d.data, d.len, pt, 0, n, sha, NULL, &e),
                   0);
  assert_memory_equal(sha, want, 32);
  assert_int_equal(delta_copy(w, 0, cp, 0, n, sha, NULL, &e), 0);
  assert_memory_equal(sha, want, 32);
  for (size_t i = 0; i < 3; i++) {
    assert_int_equal(fstat(outs[i], &st), 0);
    assert_int_equal(st.st_size, (off_t)n);
    /* the data and a few blocks around it, not the 32 MiB */
    assert_true(disk_bytes(outs[i]) < 2 * MIB);
    got = read_all(outs[i], n);
    assert_memory_equal(got, data, n);
    free(got);
  }
  buf_release(&d);
  delta_sig_free(ds);
  for (size_t i = 0; i < 3; i++)
    close(outs[i]);
  close(src);
  close(empty);
  free(data);
}

/* A part file is reused by a retried pull: zeros written where an
 * earlier attempt left bytes read back as zeros (a punched hole), and a
 * write that ends in zeros past the end still makes its full length. */
static void
test_zeros_over_an_earlier_attempts_bytes_read_back_as_zeros(void **state)
{
  const size_t n = 4 * MIB;
  uint8_t *old = malloc(n), *zeros = calloc(1, n), *got, sha[32];
  int fd;
  struct err e = {0};
  struct stat st;

  (void)state;
  fill_random(old, n, 43);
  fd = file_with(old, n);
  assert_int_equal(delta_write(fd, 100, zeros, n - 200, sha, NULL, &e), 0);
  got = read_all(fd, n);
  assert_memory_equal(got, old, 100);
  assert_memory_equal(got + 100, zeros, n - 200);
  assert_memory_equal(got + n - 100, old + n - 100, 100);
  assert_true(disk_bytes(fd) < 64 * KIB);
  free(got);
  assert_int_equal(delta_write(fd, n, zeros, 10000, sha, NULL, &e), 0);
  assert_int_equal(fstat(fd, &st), 0);
  assert_int_equal(st.st_size, (off_t)(n + 10000));
  close(fd);
  free(zeros);
  free(old);
}

/* Literal bytes in a delta (magic, then commands: 1-64 immediate
 * lengths, LITERAL_N1..N8, COPY_N{1,2,4,8}_N{1,2,4,8}; librsync's
 * prototab). */
static size_t
literal_bytes(const uint8_t *d, size_t len)
{
  size_t i = 4, lit = 0;

  while (i < len && d[i] != 0) {
    uint8_t op = d[i];

    if (op <= 64) {
      lit += op;
      i += 1 + op;
    } else if (op >= 0x41 && op <= 0x44) {
      unsigned w = 1u << (op - 0x41);
      uint64_t n = 0;

      for (unsigned k = 0; k < w; k++)
        n = n << 8 | d[i + 1 + k];
      lit += n;
      i += 1 + w + n;
    } else {
      assert_true(op >= 0x45 && op <= 0x54);
      i += 1 + (1u << ((op - 0x45) / 4)) + (1u << ((op - 0x45) % 4));
    }
  }
  assert_int_equal(i + 1, len); /* ends with END */
  return lit;
}

/*
 * Case a of bench/sync in small: a segment that starts at an odd offset
 * (its fingerprint blocks count from there) and a file-aligned MiB
 * rewritten in it, straddling two of those blocks; then the same with
 * no block placed at all (the segment's start moved with a cut).  The
 * unplaced blocks are compared in place, their partial signature blocks
 * at the ends go through librsync: exactly the rewritten MiB is literal,
 * a block that changed after publishing is still named, and an empty
 * basis (a signature of no blocks) gets it all as literal.
 */
static void
test_straddled_blocks_of_an_in_place_rewrite_send_just_the_rewrite(
    void **state)
{
  const size_t n = 16 * MIB, off = 3 * MIB + 12345, len = 8 * MIB;
  const uint64_t R = DELTA_READ;
  uint8_t *basis = malloc(n), *new = malloc(n), fp[8][16];
  uint64_t from[8], bad = 99, longest = 0;
  struct delta_sig *ds;
  struct buf d;
  struct err e = {0};
  int bfd, nfd;

  (void)state;
  fill_random(basis, n, 51);
  memcpy(new, basis, n);
  fill_random(new + 6 * MIB, MIB, 52);
  for (size_t i = 0; i < 8; i++)
    fp_of(new + off + i * MIB, MIB, fp[i]);
  bfd = file_with(basis, n);
  nfd = file_with(new, n);
  ds = load_sig_of(bfd, n, NULL);
  buf_init(&d, 16 * MIB);
  for (int placed = 1; placed >= 0; placed--) {
    for (size_t i = 0; i < 8; i++)
      from[i] = !placed || i == 2 || i == 3 ? R : off + i * MIB;
    buf_reset(&d);
    assert_int_equal(delta_compute_blocks(ds, nfd, off, len, from, fp, &d,
                                          &bad, &e), 0);
    assert_int_equal(literal_bytes((const uint8_t *)d.data, d.len), MIB);
    /* compared in place, not searched: librsync writes no literal
     * longer than 64 KiB, an in-place run goes as one */
    (void)first_long_literal((const uint8_t *)d.data, d.len, &longest);
    assert_true(longest > 64 * KIB);
    close(patch_checked(bfd, &d, new + off, len));
  }
  /* a byte of block 3 changed after publishing */
  new[6 * MIB + 500000] ^= 1;
  assert_int_equal(pwrite(nfd, new + 6 * MIB + 500000, 1, 6 * MIB + 500000),
                   1);
  buf_reset(&d);
  assert_int_equal(delta_compute_blocks(ds, nfd, off, len, from, fp, &d,
                                        &bad, &e), ERR_CONFLICT);
  assert_int_equal(bad, 3);
  /* against an empty basis (a signature of no blocks), all literal */
  new[6 * MIB + 500000] ^= 1;
  assert_int_equal(pwrite(nfd, new + 6 * MIB + 500000, 1, 6 * MIB + 500000),
                   1);
  delta_sig_free(ds);
  close(bfd);
  bfd = file_with(NULL, 0);
  ds = load_sig_of(bfd, 0, NULL);
  buf_reset(&d);
  assert_int_equal(delta_compute_blocks(ds, nfd, off, len, from, fp, &d,
                                        &bad, &e), 0);
  assert_int_equal(literal_bytes((const uint8_t *)d.data, d.len), len);
  close(patch_checked(bfd, &d, new + off, len));
  buf_release(&d);
  delta_sig_free(ds);
  close(bfd);
  close(nfd);
  free(new);
  free(basis);
}

/*
 * A run compared in place reads the signature blocks it overlaps whole,
 * also past its ends: a byte changed there (outside the segment) is no
 * conflict, and the part inside still patches to the published bytes;
 * a byte changed inside the run's first partial block is ERR_CONFLICT
 * naming block 0; data moved by a few bytes (nothing equal in place)
 * still goes through librsync, as a small delta; and a run that ends at
 * the file's end, past the basis' last whole block, patches too.
 */
static void
test_in_place_runs_check_their_own_bytes_and_search_moved_data(
    void **state)
{
  const size_t n = 16 * MIB, off = 3 * MIB + 12345, len = 4 * MIB;
  const size_t tail = 2 * MIB + 777, n2 = n + 777;
  const uint64_t R = DELTA_READ;
  uint64_t from[4] = {R, R, R, R}, bad = 99;
  uint8_t *basis = malloc(n2), *new = malloc(n2), fp[4][16];
  struct delta_sig *ds;
  struct buf d;
  struct err e = {0};
  int bfd, nfd;

  (void)state;
  fill_random(basis, n2, 61);
  memcpy(new, basis, n2);
  fill_random(new + 4 * MIB, 100 * KIB, 62);
  for (size_t i = 0; i < 4; i++)
    fp_of(new + off + i * MIB, MIB, fp[i]);
  bfd = file_with(basis, n);
  ds = load_sig_of(bfd, n, NULL);
  buf_init(&d, 16 * MIB);

  /* changed just before the run, in the block it starts in */
  new[off - 10] ^= 1;
  nfd = file_with(new, n);
  assert_int_equal(delta_compute_blocks(ds, nfd, off, len, from, fp, &d,
                                        &bad, &e), 0);
  assert_true(literal_bytes((const uint8_t *)d.data, d.len) < 200 * KIB);
  close(patch_checked(bfd, &d, new + off, len));
  close(nfd);
  new[off - 10] ^= 1;

  /* changed inside the run's first partial block */
  new[off + 10] ^= 1;
  nfd = file_with(new, n);
  buf_reset(&d);
  assert_int_equal(delta_compute_blocks(ds, nfd, off, len, from, fp, &d,
                                        &bad, &e), ERR_CONFLICT);
  assert_int_equal(bad, 0);
  assert_int_equal(d.len, 0);
  close(nfd);
  new[off + 10] ^= 1;

  /* the run's bytes are the basis' moved by 1000: found by searching */
  memcpy(new + off, basis + off + 1000, len);
  for (size_t i = 0; i < 4; i++)
    fp_of(new + off + i * MIB, MIB, fp[i]);
  nfd = file_with(new, n);
  buf_reset(&d);
  assert_int_equal(delta_compute_blocks(ds, nfd, off, len, from, fp, &d,
                                        &bad, &e), 0);
  assert_true(literal_bytes((const uint8_t *)d.data, d.len) < 64 * KIB);
  close(patch_checked(bfd, &d, new + off, len));
  close(nfd);

  /* a run to the end of a file longer than the basis */
  memcpy(new, basis, n2);
  fill_random(new + n2 - tail + 5000, 3000, 63);
  for (size_t i = 0; i < 3; i++)
    fp_of(new + n2 - tail + i * MIB, i < 2 ? MIB : 777, fp[i]);
  nfd = file_with(new, n2);
  buf_reset(&d);
  assert_int_equal(delta_compute_blocks(ds, nfd, n2 - tail, tail, from, fp,
                                        &d, &bad, &e), 0);
  assert_true(literal_bytes((const uint8_t *)d.data, d.len) < 64 * KIB);
  close(patch_checked(bfd, &d, new + n2 - tail, tail));
  close(nfd);

  buf_release(&d);
  delta_sig_free(ds);
  close(bfd);
  free(new);
  free(basis);
}

/* ---- setup ---- */

static int
setup(void **state)
{
  (void)state;
  snprintf(tmpdir, sizeof(tmpdir), "/tmp/tenbin-delta-XXXXXX");
  return mkdtemp(tmpdir) == NULL ? -1 : 0;
}

static int
teardown(void **state)
{
  (void)state;
  return rmdir(tmpdir);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(
        test_block_len_is_a_power_of_two_near_sqrt_within_a_segment),
    cmocka_unit_test(
        test_segment_deltas_of_a_few_changed_blocks_patch_back_small),
    cmocka_unit_test(test_data_shifted_by_an_insert_still_gives_small_deltas),
    cmocka_unit_test(
        test_a_range_signature_rebased_patches_against_the_whole_basis),
    cmocka_unit_test(
        test_segments_of_data_shifted_by_any_amount_match_from_their_first_byte),
    cmocka_unit_test(
        test_unrelated_data_falls_back_to_literal_after_a_probe_window),
    cmocka_unit_test(
        test_new_file_of_zero_bytes_and_empty_basis_round_trip),
    cmocka_unit_test(
        test_literal_delta_patches_without_a_basis_and_copies_need_one),
    cmocka_unit_test(
        test_copy_writes_where_asked_and_sums_short_old_file_is_invalid),
    cmocka_unit_test(
        test_blocks_delta_copies_found_blocks_unread_and_checks_the_rest),
    cmocka_unit_test(
        test_corrupt_or_truncated_delta_fails_or_mismatches_never_crashes),
    cmocka_unit_test(test_copy_past_the_end_of_a_shorter_basis_is_invalid),
    cmocka_unit_test(test_patch_of_the_wrong_expected_length_is_invalid),
    cmocka_unit_test(test_signature_garbage_is_invalid),
    cmocka_unit_test(test_delta_compute_and_read_give_the_xxh3_of_the_range),
    cmocka_unit_test(
        test_short_file_is_io_error_and_small_cap_too_large_buffer_kept),
    cmocka_unit_test(test_hash_range_matches_an_independent_sha256),
    cmocka_unit_test(test_calls_never_move_the_file_offset),
    cmocka_unit_test(test_segments_patch_in_parallel_threads_on_shared_fds),
    cmocka_unit_test(test_write_to_a_full_device_names_no_space),
    cmocka_unit_test(test_write_past_the_file_size_limit_names_it),
    cmocka_unit_test(
        test_writes_leave_blocks_of_zeros_as_holes_with_exact_bytes),
    cmocka_unit_test(
        test_zeros_over_an_earlier_attempts_bytes_read_back_as_zeros),
    cmocka_unit_test(
        test_in_place_runs_check_their_own_bytes_and_search_moved_data),
    cmocka_unit_test(
        test_straddled_blocks_of_an_in_place_rewrite_send_just_the_rewrite),
  };

  /* corrupt deltas make librsync log to stderr; the tests check the
   * errors themselves */
  rs_trace_set_level(RS_LOG_EMERG);
  return cmocka_run_group_tests(tests, setup, teardown);
}
