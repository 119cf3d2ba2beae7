/*
 * Tests for sync/manifest.c, manifest_scan.c and manifest_large.c:
 * scanning a real tree (and only its changes, against a full scan) (hashes checked against SHA-256 and XXH3 computed here, large
 * files' segments against chunk_cut), the canonical JSON and its id,
 * strict decoding of everything a peer could get wrong, hash reuse
 * (segments found again after an insert), manifest deltas (the exact
 * text rebuilt, malformed or foreign ones refused), and the checks file.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>
#include <xxhash.h>

#include "sync/chunk.h"
#include "sync/manifest.h"
#include "sync/path.h"
#include "util/alloc.h"
#include "util/hash.h"
#include "tests/unit/seeded_bytes.h"

#define assert_contains(hay, needle)                                       \
  do {                                                                     \
    if (strstr((hay), (needle)) == NULL)                                   \
      fail_msg("'%s' does not contain '%s'", (hay), (needle));             \
  } while (0)

#define MIB ((uint64_t)1 << 20)
#define SEG_MIN MANIFEST_SEG_MIN
#define SEG_MAX MANIFEST_SEG_MAX

/* ---- a temporary tree ---- */

struct fx {
  char dir[64]; /* mkdtemp: the agent's root */
  int rootfd;
};

static int
fx_setup(void **state)
{
  struct fx *f = xcalloc(1, sizeof(*f));

  /* Modes in the expectations assume the usual umask. */
  umask(022);
  snprintf(f->dir, sizeof(f->dir), "/tmp/tenbin-manifest-XXXXXX");
  assert_non_null(mkdtemp(f->dir));
  f->rootfd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true(f->rootfd >= 0);
  *state = f;
  return 0;
}

static int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *w)
{
  (void)st;
  (void)flag;
  (void)w;
  return remove(path);
}

static int
fx_teardown(void **state)
{
  struct fx *f = *state;

  close(f->rootfd);
  nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  free(f);
  return 0;
}

static void
fx_path(const struct fx *f, const char *rel, char *out, size_t outlen)
{
  snprintf(out, outlen, "%s/%s", f->dir, rel);
}

static void
put_file(const struct fx *f, const char *rel, const void *data, size_t len)
{
  char p[512];
  int fd;

  fx_path(f, rel, p, sizeof(p));
  fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, data, len), (ssize_t)len);
  assert_int_equal(close(fd), 0);
}

static void
put_dir(const struct fx *f, const char *rel)
{
  char p[512];

  fx_path(f, rel, p, sizeof(p));
  assert_int_equal(mkdir(p, 0755), 0);
}

static void
put_link(const struct fx *f, const char *rel, const char *target)
{
  char p[512];

  fx_path(f, rel, p, sizeof(p));
  assert_int_equal(symlink(target, p), 0);
}

static void
sha256_bin(const void *data, size_t len, uint8_t out[32])
{
  unsigned int n = 0;

  EVP_Digest(data, len, out, &n, EVP_sha256(), NULL);
  assert_int_equal(n, 32);
}

static void
bin_hex(const uint8_t in[32], char out[65])
{
  for (int i = 0; i < 32; i++)
    snprintf(out + 2 * i, 3, "%02x", in[i]);
}

static void
assert_sha_of(const uint8_t got[32], const void *data, size_t len)
{
  char want[65], have[65];

  hash_sha256_hex(data, len, want);
  bin_hex(got, have);
  assert_string_equal(have, want);
}

static void
assert_xxh_of(const uint8_t got[16], const void *data, size_t len)
{
  XXH128_canonical_t c;

  XXH128_canonicalFromHash(&c, XXH3_128bits(data, len));
  assert_memory_equal(got, c.digest, 16);
}

/* Segment k of large file entry e: one XXH3-128 per MiB block of its
 * bytes (data, len), counted from the segment's start, in ck->fp from
 * manifest_seg_fp(e, k); the segment's check is the XXH3-128 of
 * those. */
static void
assert_seg_check_of(const struct manifest_check *ck,
                    const struct manifest_entry *e, uint32_t k,
                    const unsigned char *data, size_t len)
{
  size_t b0 = (size_t)manifest_seg_fp(e, k), nb = (len + MIB - 1) >> 20;
  uint8_t fps[SEG_MAX >> 20][16];

  assert_non_null(ck->fp);
  assert_true(nb <= SEG_MAX >> 20);
  assert_true(b0 + nb == manifest_seg_fp(e, k + 1));
  assert_true(b0 + nb <= ck->nfp);
  for (size_t i = 0; i < nb; i++) {
    size_t bl = len - (i << 20) < MIB ? len - (i << 20) : MIB;
    XXH128_canonical_t c;

    XXH128_canonicalFromHash(&c, XXH3_128bits(data + (i << 20), bl));
    memcpy(fps[i], c.digest, 16);
    assert_memory_equal(ck->fp[b0 + i], fps[i], 16);
  }
  assert_xxh_of(ck->xxh[k], fps, nb * 16);
}

/* The segment ends of the file rel as chunk_cut gives them (tested on
 * its own in test_sync_chunk.c), independently of the scan; the count. */
static uint32_t
cut_file(const struct fx *f, const char *rel, uint64_t size, uint64_t *ends,
         uint32_t cap)
{
  char p[512];
  uint8_t *buf = xmalloc(MIB);
  uint64_t off = 0;
  uint32_t n = 0;
  int fd;

  fx_path(f, rel, p, sizeof(p));
  fd = open(p, O_RDONLY | O_CLOEXEC);
  assert_true(fd >= 0);
  while (off < size) {
    assert_true(n < cap);
    assert_int_equal(chunk_cut(fd, off, size, buf, MIB, &ends[n]), 0);
    off = ends[n++];
  }
  close(fd);
  free(buf);
  return n;
}

/*
 * The entry and checks of the large file rel (data, size) are what its
 * content says: segments where chunk_cut ends them, each with its own
 * SHA-256, fingerprints and check, and sha256 the SHA-256 of the
 * segment hashes.  Its segment count.
 */
static uint32_t
assert_large_entry(const struct fx *f, const char *rel,
                   const struct manifest_entry *me,
                   const struct manifest_check *ck,
                   const unsigned char *data, size_t size)
{
  uint64_t ends[64], off = 0;
  uint32_t n = cut_file(f, rel, size, ends, 64);
  uint8_t (*segs)[32] = xcalloc(n, 32), root[32];

  assert_true(n >= 2);
  assert_int_equal(me->size, size);
  assert_int_equal(me->nsegs, n);
  assert_non_null(me->segs);
  assert_int_equal(ck->nsegs, n);
  for (uint32_t k = 0; k < n; k++) {
    uint64_t o, len;

    manifest_seg_range(me, k, &o, &len);
    assert_true(o == off && o + len == ends[k]);
    assert_true(len <= SEG_MAX);
    if (k + 1 < n)
      assert_true(len > SEG_MIN);
    sha256_bin(data + off, (size_t)len, segs[k]);
    assert_memory_equal(me->segs[k], segs[k], 32);
    assert_ptr_equal(manifest_seg_sha(me, k), me->segs[k]);
    assert_seg_check_of(ck, me, k, data + off, (size_t)len);
    off = ends[k];
  }
  sha256_bin(segs, (size_t)n * 32, root);
  assert_memory_equal(me->sha256, root, 32);
  assert_true(ck->nfp == manifest_seg_fp(me, n));
  free(segs);
  return n;
}

static int
scan(const struct fx *f, const char *rel, const struct manifest *prev,
     const struct manifest_checks *prev_c, struct manifest *m,
     struct manifest_checks *c, struct manifest_scan_stats *st,
     struct err *e)
{
  err_clear(e);
  return manifest_scan(f->rootfd, rel, prev, prev_c, NULL, m, c, st, e);
}

static void
encode_id(const struct manifest *m, char id[MANIFEST_ID_HEX + 1])
{
  char *text = NULL;
  size_t len;
  struct err e;

  if (manifest_encode(m, &text, &len, id, &e) != 0)
    fail_msg("encode: %s", e.msg);
  free(text);
}

/*
 * ds/a.txt "hello", ds/empty, ds/dir/, ds/dir-x "x" (between "dir" and
 * "dir/..." in strcmp order), ds/dir/link -> ../a.txt,
 * ds/dir/sub/deep.bin (3000 bytes), ds/dir/sub/up -> ../..
 */
static unsigned char deep[3000];

static void
make_small_tree(const struct fx *f)
{
  for (size_t i = 0; i < sizeof(deep); i++)
    deep[i] = (unsigned char)(i * 7 + 3);
  put_dir(f, "ds");
  put_file(f, "ds/a.txt", "hello", 5);
  put_file(f, "ds/empty", "", 0);
  put_dir(f, "ds/dir");
  put_file(f, "ds/dir-x", "x", 1);
  put_link(f, "ds/dir/link", "../a.txt");
  put_dir(f, "ds/dir/sub");
  put_file(f, "ds/dir/sub/deep.bin", deep, sizeof(deep));
  put_link(f, "ds/dir/sub/up", "../..");
}

/* ---- segments ---- */

/* A file of one segment is its whole range; set_segments lays out the
 * offsets of listed lengths and where each segment's fingerprint blocks
 * start (counted per segment, so a short last block of one segment does
 * not shift the next one's); a deep copy keeps them. */
static void
test_segments_give_ranges_and_per_segment_fingerprint_blocks(void **state)
{
  const uint64_t lens[3] = {SEG_MIN + 5, SEG_MAX, 3};
  struct manifest_entry e;
  struct manifest m, cp;
  uint64_t off, len;

  (void)state;
  memset(&e, 0, sizeof(e));
  e.type = MANIFEST_FILE;
  e.nsegs = 1;
  e.size = 5 * MIB + 1;
  manifest_seg_range(&e, 0, &off, &len);
  assert_true(off == 0 && len == 5 * MIB + 1);
  assert_int_equal(manifest_seg_fp(&e, 0), 0);
  assert_int_equal(manifest_seg_fp(&e, 1), 6);
  e.size = 0;
  manifest_seg_range(&e, 0, &off, &len);
  assert_true(off == 0 && len == 0);
  assert_int_equal(manifest_seg_fp(&e, 1), 0);
  assert_int_equal(manifest_nfp(0), 0);
  assert_int_equal(manifest_nfp(1), 1);
  assert_int_equal(manifest_nfp(MIB), 1);
  assert_int_equal(manifest_nfp(MIB + 1), 2);

  e.size = lens[0] + lens[1] + lens[2];
  manifest_set_segments(&e, lens, 2); /* replaced below: nothing leaks */
  manifest_set_segments(&e, lens, 3);
  assert_int_equal(e.nsegs, 3);
  manifest_seg_range(&e, 0, &off, &len);
  assert_true(off == 0 && len == SEG_MIN + 5);
  manifest_seg_range(&e, 1, &off, &len);
  assert_true(off == SEG_MIN + 5 && len == SEG_MAX);
  manifest_seg_range(&e, 2, &off, &len);
  assert_true(off == SEG_MIN + 5 + SEG_MAX && len == 3);
  assert_true(e.segoff[3] == e.size);
  /* 4 MiB + 5 is 5 blocks, the last of 5 bytes; 16 MiB is 16 */
  assert_int_equal(manifest_seg_fp(&e, 0), 0);
  assert_int_equal(manifest_seg_fp(&e, 1), 5);
  assert_int_equal(manifest_seg_fp(&e, 2), 21);
  assert_int_equal(manifest_seg_fp(&e, 3), 22);
  /* one more than ceil(size / MiB): blocks restart at each segment */
  assert_int_equal(manifest_nfp(e.size), 21);

  manifest_init(&m);
  m.v = xcalloc(1, sizeof(*m.v));
  m.n = m.cap = 1;
  m.v[0] = e;
  m.v[0].path = xstrdup("f");
  m.v[0].segs = xcalloc(3, 32);
  manifest_copy(&cp, &m);
  assert_ptr_not_equal(cp.v[0].segoff, m.v[0].segoff);
  assert_ptr_not_equal(cp.v[0].segfp, m.v[0].segfp);
  assert_memory_equal(cp.v[0].segoff, e.segoff, 4 * sizeof(uint64_t));
  assert_memory_equal(cp.v[0].segfp, e.segfp, 4 * sizeof(uint64_t));
  manifest_release(&m); /* frees e's arrays too */
  manifest_release(&cp);
}

/* ---- scanning ---- */

static void
test_scan_lists_sorted_entries_with_their_hashes(void **state)
{
  struct fx *f = *state;
  struct manifest m;
  struct manifest_checks c;
  struct manifest_scan_stats st;
  struct err e;
  static const char *const order[] = {
    "a.txt", "dir", "dir-x", "dir/link", "dir/sub", "dir/sub/deep.bin",
    "dir/sub/up", "empty"};
  const struct manifest_entry *me;
  char p[512];

  make_small_tree(f);
  fx_path(f, "ds/a.txt", p, sizeof(p));
  assert_int_equal(chmod(p, 0640), 0);
  manifest_init(&m);
  manifest_checks_init(&c);
  if (scan(f, "ds", NULL, NULL, &m, &c, &st, &e) != 0)
    fail_msg("scan: %s", e.msg);
  assert_int_equal(m.n, 8);
  assert_int_equal(c.n, 8);
  for (size_t i = 0; i < m.n; i++)
    assert_string_equal(m.v[i].path, order[i]);
  assert_int_equal(m.files, 4);
  assert_int_equal(m.dirs, 2);
  assert_int_equal(m.links, 2);
  assert_int_equal(m.bytes, 5 + 0 + 1 + sizeof(deep));
  assert_int_equal(st.files_hashed, 4);
  assert_int_equal(st.files_reused, 0);
  assert_int_equal(st.bytes_hashed, 5 + 1 + sizeof(deep));

  me = &m.v[0];
  assert_int_equal(me->type, MANIFEST_FILE);
  assert_int_equal(me->mode, 0640);
  assert_int_equal(me->size, 5);
  assert_int_equal(me->nsegs, 1);
  assert_null(me->segs);
  assert_sha_of(me->sha256, "hello", 5);
  assert_ptr_equal(manifest_seg_sha(me, 0), me->sha256);
  assert_null(manifest_seg_sha(me, 1));
  assert_int_equal(c.v[0].nsegs, 1);
  assert_xxh_of(c.v[0].xxh[0], "hello", 5);
  {
    struct stat sb;

    assert_int_equal(stat(p, &sb), 0);
    assert_true(c.v[0].ino == (uint64_t)sb.st_ino);
    assert_true(c.v[0].size == 5);
    assert_true(me->mtime_ns == (int64_t)sb.st_mtim.tv_sec * 1000000000 +
                                    sb.st_mtim.tv_nsec);
  }
  me = &m.v[1];
  assert_int_equal(me->type, MANIFEST_DIR);
  assert_int_equal(me->mode, 0755);
  assert_null(c.v[1].xxh);
  me = &m.v[3];
  assert_int_equal(me->type, MANIFEST_LINK);
  assert_string_equal(me->target, "../a.txt");
  assert_int_equal(me->mode, 0);
  me = &m.v[5];
  assert_sha_of(me->sha256, deep, sizeof(deep));
  assert_xxh_of(c.v[5].xxh[0], deep, sizeof(deep));
  assert_string_equal(m.v[6].target, "../..");
  /* An empty file has one segment: the hashes of empty input. */
  me = &m.v[7];
  assert_int_equal(me->size, 0);
  assert_int_equal(me->nsegs, 1);
  assert_sha_of(me->sha256, "", 0);
  assert_xxh_of(c.v[7].xxh[0], "", 0);

  assert_int_equal(manifest_find(&m, "dir/sub"), 4);
  assert_int_equal(manifest_find(&m, "a.txt"), 0);
  assert_int_equal(manifest_find(&m, "empty"), 7);
  assert_int_equal(manifest_find(&m, "dir/su"), -1);
  assert_int_equal(manifest_find(&m, "zzz"), -1);
  manifest_release(&m);
  manifest_checks_release(&c);
}

static void
test_scan_cuts_a_large_file_by_content_into_two_level_segments(void **state)
{
  struct fx *f = *state;
  size_t size = (size_t)(40 * MIB) + 123;
  unsigned char *data = xmalloc(size);
  struct manifest m;
  struct manifest_checks c;
  struct manifest_scan_stats st = {0};
  struct err e;
  const struct manifest_entry *me;
  uint32_t n;
  char p[512];

  fill_random(data, size, 1);
  put_dir(f, "big");
  put_file(f, "big/f.bin", data, size);
  manifest_init(&m);
  manifest_checks_init(&c);
  if (scan(f, "big", NULL, NULL, &m, &c, &st, &e) != 0)
    fail_msg("scan: %s", e.msg);
  assert_int_equal(m.n, 1);
  me = &m.v[0];
  n = assert_large_entry(f, "big/f.bin", me, &c.v[0], data, size);
  assert_int_equal(st.files_hashed, 1);
  assert_int_equal(st.segments_reused, 0);

  /* The fingerprints survive a save and load of the checks. */
  fx_path(f, "big.idx", p, sizeof(p));
  if (manifest_checks_save(&c, p, &e) != 0)
    fail_msg("save: %s", e.msg);
  {
    struct manifest_checks back;

    manifest_checks_init(&back);
    if (manifest_checks_load(p, &m, &back, &e) != 0)
      fail_msg("load: %s", e.msg);
    assert_int_equal(back.v[0].nsegs, n);
    assert_int_equal(back.v[0].nfp, c.v[0].nfp);
    assert_memory_equal(back.v[0].fp, c.v[0].fp, (size_t)c.v[0].nfp * 16);
    assert_memory_equal(back.v[0].xxh, c.v[0].xxh, (size_t)n * 16);
    manifest_checks_release(&back);
  }
  /* Checks that do not fit the manifest's segments are refused: another
   * count of segments, the same count with another count of blocks, or
   * an entry that is not a file. */
  {
    struct manifest other;
    struct manifest_checks back;
    uint64_t *lens = xmalloc(((size_t)n + 1) * sizeof(*lens));
    uint64_t total = manifest_seg_fp(me, n);
    int64_t d;

    for (uint32_t k = 0; k < n; k++)
      lens[k] = me->segoff[k + 1] - me->segoff[k];
    manifest_checks_init(&back);
    manifest_copy(&other, &m);
    lens[n] = 1;
    lens[n - 1] -= 1;
    manifest_set_segments(&other.v[0], lens, n + 1);
    err_clear(&e);
    assert_int_equal(manifest_checks_load(p, &other, &back, &e),
                     ERR_INVALID);
    assert_contains(e.msg, "do not fit the manifest");
    assert_int_equal(back.n, 0);
    lens[n - 1] += 1;
    for (d = 1; d < (int64_t)MIB; d++) {
      lens[0] += 1;
      lens[1] -= 1;
      manifest_set_segments(&other.v[0], lens, n);
      if (manifest_seg_fp(&other.v[0], n) != total)
        break;
    }
    assert_true(d < (int64_t)MIB);
    err_clear(&e);
    assert_int_equal(manifest_checks_load(p, &other, &back, &e),
                     ERR_INVALID);
    assert_contains(e.msg, "do not fit the manifest");
    other.v[0].type = MANIFEST_DIR;
    assert_int_equal(manifest_checks_load(p, &other, &back, &e),
                     ERR_INVALID);
    free(lens);
    manifest_release(&other);
  }

  /* The two-level hash and the lengths survive the trip through JSON,
   * written as jansson writes them. */
  {
    struct manifest back;
    char *text = NULL, *whole;
    size_t len;
    char id[MANIFEST_ID_HEX + 1];
    json_t *v;

    manifest_init(&back);
    assert_int_equal(manifest_encode(&m, &text, &len, id, &e), 0);
    assert_non_null(strstr(text, "\"seglens\":["));
    assert_non_null(strstr(text, "],\"segments\":[\""));
    v = json_loadb(text, len, 0, NULL);
    assert_non_null(v);
    whole = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(whole, text);
    free(whole);
    json_decref(v);
    if (manifest_decode(text, len, &back, &e) != 0)
      fail_msg("decode: %s", e.msg);
    assert_int_equal(back.v[0].nsegs, n);
    assert_memory_equal(back.v[0].segs, me->segs, (size_t)n * 32);
    assert_memory_equal(back.v[0].segoff, me->segoff,
                        ((size_t)n + 1) * sizeof(uint64_t));
    assert_memory_equal(back.v[0].segfp, me->segfp,
                        ((size_t)n + 1) * sizeof(uint64_t));
    manifest_release(&back);
    free(text);
  }

  /* One byte changes in segment 1, in its first 2 MiB (before MIN, so no
   * end moves):
   * a rescan keeps every other segment's SHA-256 (its fingerprints are
   * unchanged) and hashes segment 1 anew. */
  {
    struct manifest m2;
    struct manifest_checks c2;
    struct manifest_scan_stats st2 = {0};

    data[me->segoff[1] + 2 * MIB + 5] ^= 0xff;
    put_file(f, "big/f.bin", data, size);
    manifest_init(&m2);
    manifest_checks_init(&c2);
    if (scan(f, "big", &m, &c, &m2, &c2, &st2, &e) != 0)
      fail_msg("rescan: %s", e.msg);
    assert_int_equal(st2.files_hashed, 1);
    assert_int_equal(st2.segments_reused, n - 1);
    assert_int_equal(assert_large_entry(f, "big/f.bin", &m2.v[0], &c2.v[0],
                                        data, size), n);
    for (uint32_t k = 0; k < n; k++)
      if (k != 1)
        assert_memory_equal(m2.v[0].segs[k], me->segs[k], 32);
    assert_memory_not_equal(m2.v[0].segs[1], me->segs[1], 32);
    manifest_release(&m2);
    manifest_checks_release(&c2);
  }
  /* A copy (the served cache's, made at publish) is deep and equal. */
  {
    struct manifest cp;
    struct manifest_checks cc;
    char id[MANIFEST_ID_HEX + 1], cid[MANIFEST_ID_HEX + 1];

    manifest_copy(&cp, &m);
    manifest_checks_copy(&cc, &c);
    encode_id(&m, id);
    encode_id(&cp, cid);
    assert_string_equal(id, cid);
    assert_ptr_not_equal(cp.v[0].path, m.v[0].path);
    assert_ptr_not_equal(cp.v[0].segs, m.v[0].segs);
    assert_ptr_not_equal(cp.v[0].segoff, m.v[0].segoff);
    assert_ptr_not_equal(cp.v[0].segfp, m.v[0].segfp);
    assert_memory_equal(cp.v[0].segfp, m.v[0].segfp,
                        ((size_t)n + 1) * sizeof(uint64_t));
    assert_int_equal(cc.n, c.n);
    assert_int_equal(cc.v[0].nfp, c.v[0].nfp);
    assert_ptr_not_equal(cc.v[0].fp, c.v[0].fp);
    assert_memory_equal(cc.v[0].fp, c.v[0].fp, (size_t)c.v[0].nfp * 16);
    assert_memory_equal(cc.v[0].xxh, c.v[0].xxh, (size_t)c.v[0].nsegs * 16);
    manifest_release(&cp);
    manifest_checks_release(&cc);
  }
  free(data);
  manifest_release(&m);
  manifest_checks_release(&c);
}

/* The manifest and checks of two scans are the same, byte for byte. */
/* The three scans (and their checks) of a rescan test. */
static void
init_scans(struct manifest *m1, struct manifest *m2, struct manifest *m3,
           struct manifest_checks *c1, struct manifest_checks *c2,
           struct manifest_checks *c3)
{
  manifest_init(m1);
  manifest_init(m2);
  manifest_init(m3);
  manifest_checks_init(c1);
  manifest_checks_init(c2);
  manifest_checks_init(c3);
}

static void
release_scans(struct manifest *m1, struct manifest *m2, struct manifest *m3,
              struct manifest_checks *c1, struct manifest_checks *c2,
              struct manifest_checks *c3)
{
  manifest_release(m1);
  manifest_release(m2);
  manifest_release(m3);
  manifest_checks_release(c1);
  manifest_checks_release(c2);
  manifest_checks_release(c3);
}

static void
assert_same_scan(const struct manifest *a, const struct manifest_checks *ca,
                 const struct manifest *b, const struct manifest_checks *cb)
{
  char ida[MANIFEST_ID_HEX + 1], idb[MANIFEST_ID_HEX + 1];

  encode_id(a, ida);
  encode_id(b, idb);
  assert_string_equal(ida, idb);
  assert_int_equal(ca->n, cb->n);
  for (size_t i = 0; i < ca->n; i++) {
    assert_int_equal(ca->v[i].nsegs, cb->v[i].nsegs);
    assert_int_equal(ca->v[i].nfp, cb->v[i].nfp);
    if (ca->v[i].xxh != NULL)
      assert_memory_equal(ca->v[i].xxh, cb->v[i].xxh,
                          (size_t)ca->v[i].nsegs * 16);
    if (ca->v[i].fp != NULL)
      assert_memory_equal(ca->v[i].fp, cb->v[i].fp,
                          (size_t)ca->v[i].nfp * 16);
  }
}

/*
 * The point of cutting by content: 1000 bytes inserted in the middle of
 * a large file move only the boundaries next to them.  A rescan with the
 * previous publish finds the segments before and after the insert again
 * (those after at new offsets) and keeps their SHA-256, hashing only
 * the segment of the insert; and what it keeps is right: a scan from
 * scratch gives the same manifest and checks.
 */
/*
 * A first publish cuts regions of the file on every core and joins their
 * chains: the segments are exactly those of one chain of cuts from the
 * start, whether the chains meet (random data) or never do (zeros: no
 * candidates, every cut at MAX from a start that is no cut).
 */
static void
test_first_publish_cut_in_regions_gives_the_one_chain_segments(void **state)
{
  struct fx *f = *state;
  size_t size = (size_t)(100 * MIB) + 12345;
  unsigned char *data = xmalloc(size);
  struct manifest m;
  struct manifest_checks c;
  struct manifest_scan_stats st = {0};
  struct err e;

  fill_random(data, size, 7);
  put_dir(f, "reg");
  put_file(f, "reg/random.bin", data, size);
  manifest_init(&m);
  manifest_checks_init(&c);
  if (scan(f, "reg", NULL, NULL, &m, &c, &st, &e) != 0)
    fail_msg("scan: %s", e.msg);
  assert_int_equal(m.n, 1);
  assert_large_entry(f, "reg/random.bin", &m.v[0], &c.v[0], data, size);
  /* most of the file came from the regions' chains */
  assert_true(st.segments_cut_ahead * 2 > m.v[0].nsegs);

  memset(data, 0, size);
  put_file(f, "reg/random.bin", data, size);
  memset(&st, 0, sizeof(st));
  if (scan(f, "reg", NULL, NULL, &m, &c, &st, &e) != 0)
    fail_msg("scan: %s", e.msg);
  assert_large_entry(f, "reg/random.bin", &m.v[0], &c.v[0], data, size);
  manifest_release(&m);
  manifest_checks_release(&c);
  free(data);
}

static void
test_rescan_after_an_insert_reuses_the_segments_it_shifted(void **state)
{
  struct fx *f = *state;
  const size_t size = (size_t)(60 * MIB) + 777, ins = 1000;
  const size_t at = size / 2 + 333;
  unsigned char *data = xmalloc(size + ins);
  struct manifest m1, m2, m3;
  struct manifest_checks c1, c2, c3;
  struct manifest_scan_stats st = {0};
  uint32_t n1, n2, k0 = 0, after, same = 0;
  struct err e;

  fill_random(data, size, 42);
  put_dir(f, "big");
  put_file(f, "big/f.bin", data, size);
  manifest_init(&m1);
  manifest_checks_init(&c1);
  if (scan(f, "big", NULL, NULL, &m1, &c1, NULL, &e) != 0)
    fail_msg("scan: %s", e.msg);
  n1 = assert_large_entry(f, "big/f.bin", &m1.v[0], &c1.v[0], data, size);
  while (m1.v[0].segoff[k0 + 1] <= at)
    k0++;
  /* old segments wholly after the insert: this input has some */
  after = n1 - k0 - 1;
  assert_true(after >= 2);

  memmove(data + at + ins, data + at, size - at);
  fill_random(data + at, ins, 43);
  put_file(f, "big/f.bin", data, size + ins);
  manifest_init(&m2);
  manifest_checks_init(&c2);
  if (scan(f, "big", &m1, &c1, &m2, &c2, &st, &e) != 0)
    fail_msg("rescan: %s", e.msg);
  n2 = assert_large_entry(f, "big/f.bin", &m2.v[0], &c2.v[0], data,
                          size + ins);
  assert_int_equal(st.files_hashed, 1);
  /* the segments before the insert, and all but at most one after it
   * (the insert could make or remove a candidate near the end of its
   * own segment, and the next end is then found afresh) ... */
  assert_true(st.segments_reused >= k0 + after - 1);
  /* ... and for this input every segment but its own: the insert lies
   * in the first 4 MiB of its segment, and no candidate sits in the 1000
   * bytes it pulls into the part that is scanned, so that segment's end
   * moves with its content */
  assert_true(at - m1.v[0].segoff[k0] < SEG_MIN - CHUNK_WINDOW);
  assert_int_equal(n2, n1);
  assert_int_equal(st.segments_reused, n1 - 1);
  for (uint32_t k = 0; k < k0; k++)
    assert_memory_equal(m2.v[0].segs[k], m1.v[0].segs[k], 32);
  while (same < after && same < n2 &&
         memcmp(m2.v[0].segs[n2 - 1 - same], m1.v[0].segs[n1 - 1 - same],
                32) == 0)
    same++;
  assert_true(same >= after - 1);
  for (uint32_t j = 0; j < same; j++) {
    uint64_t o1, l1, o2, l2;

    manifest_seg_range(&m1.v[0], n1 - 1 - j, &o1, &l1);
    manifest_seg_range(&m2.v[0], n2 - 1 - j, &o2, &l2);
    assert_true(l1 == l2 && o2 == o1 + ins);
    assert_memory_equal(c2.v[0].xxh[n2 - 1 - j], c1.v[0].xxh[n1 - 1 - j],
                        16);
  }
  /* the insert's own segment is new */
  assert_memory_not_equal(m2.v[0].segs[k0], m1.v[0].segs[k0], 32);

  /* What was kept is what a scan from scratch computes. */
  manifest_init(&m3);
  manifest_checks_init(&c3);
  if (scan(f, "big", NULL, NULL, &m3, &c3, NULL, &e) != 0)
    fail_msg("scan: %s", e.msg);
  assert_same_scan(&m2, &c2, &m3, &c3);
  free(data);
  release_scans(&m1, &m2, &m3, &c1, &c2, &c3);
}

/* A large file touched (new mtime, same bytes) is read again, every
 * segment is found where it was and keeps its SHA-256; with its identity
 * unchanged after that, nothing is read at all. */
static void
test_rescan_of_a_touched_large_file_reuses_every_segment(void **state)
{
  struct fx *f = *state;
  const size_t size = (size_t)(40 * MIB) + 5;
  unsigned char *data = xmalloc(size);
  struct manifest m1, m2, m3;
  struct manifest_checks c1, c2, c3;
  struct manifest_scan_stats st = {0};
  struct timespec ts[2] = {{2000000000, 7}, {2000000000, 7}};
  char p[512];
  uint32_t n;
  struct err e;

  fill_random(data, size, 9);
  put_dir(f, "big");
  put_file(f, "big/f.bin", data, size);
  init_scans(&m1, &m2, &m3, &c1, &c2, &c3);
  assert_int_equal(scan(f, "big", NULL, NULL, &m1, &c1, NULL, &e), 0);
  n = assert_large_entry(f, "big/f.bin", &m1.v[0], &c1.v[0], data, size);

  fx_path(f, "big/f.bin", p, sizeof(p));
  assert_int_equal(utimensat(AT_FDCWD, p, ts, 0), 0);
  if (scan(f, "big", &m1, &c1, &m2, &c2, &st, &e) != 0)
    fail_msg("rescan: %s", e.msg);
  assert_int_equal(st.files_hashed, 1);
  assert_int_equal(st.files_reused, 0);
  assert_int_equal(st.segments_reused, n);
  assert_true(m2.v[0].mtime_ns == 2000000000000000007LL);
  assert_true(c2.v[0].mtime_ns == 2000000000000000007LL);
  m2.v[0].mtime_ns = m1.v[0].mtime_ns; /* the only difference */
  assert_same_scan(&m1, &c1, &m2, &c2);
  m2.v[0].mtime_ns = 2000000000000000007LL;

  memset(&st, 0xff, sizeof(st));
  if (scan(f, "big", &m2, &c2, &m3, &c3, &st, &e) != 0)
    fail_msg("rescan: %s", e.msg);
  assert_int_equal(st.files_reused, 1);
  assert_int_equal(st.files_hashed, 0);
  assert_int_equal(st.bytes_hashed, 0);
  assert_int_equal(st.segments_reused, 0);
  assert_same_scan(&m2, &c2, &m3, &c3);
  free(data);
  release_scans(&m1, &m2, &m3, &c1, &c2, &c3);
}

/* Directories are listed by several threads; the entries still come
 * out complete, sorted and hashed, whatever thread listed them. */
static void
test_scan_of_many_directories_is_complete_and_sorted(void **state)
{
  struct fx *f = *state;
  struct manifest m, m2;
  struct manifest_checks c, c2;
  struct manifest_scan_stats st = {0};
  char rel[64], body[64], id[MANIFEST_ID_HEX + 1], id2[MANIFEST_ID_HEX + 1];
  struct err e;

  put_dir(f, "many");
  for (int d = 0; d < 40; d++) {
    snprintf(rel, sizeof(rel), "many/d%02d", d);
    put_dir(f, rel);
    snprintf(rel, sizeof(rel), "many/d%02d/sub", d);
    put_dir(f, rel);
    for (int i = 0; i < 25; i++) {
      snprintf(rel, sizeof(rel), "many/d%02d%s/f%02d", d, i % 2 ? "/sub" : "",
               i);
      snprintf(body, sizeof(body), "file %d of %d", i, d);
      put_file(f, rel, body, strlen(body));
    }
  }
  manifest_init(&m);
  manifest_checks_init(&c);
  if (scan(f, "many", NULL, NULL, &m, &c, &st, &e) != 0)
    fail_msg("scan: %s", e.msg);
  assert_int_equal(m.n, 40 * 2 + 40 * 25);
  assert_int_equal(m.files, 1000);
  assert_int_equal(st.files_hashed, 1000);
  for (size_t i = 1; i < m.n; i++)
    assert_true(strcmp(m.v[i - 1].path, m.v[i].path) < 0);
  {
    ssize_t k = manifest_find(&m, "d17/sub/f03");
    uint8_t want[32];

    assert_true(k >= 0);
    snprintf(body, sizeof(body), "file %d of %d", 3, 17);
    sha256_bin(body, strlen(body), want);
    assert_memory_equal(m.v[k].sha256, want, 32);
  }
  /* A rescan reuses every hash and gives the same version. */
  manifest_init(&m2);
  manifest_checks_init(&c2);
  memset(&st, 0, sizeof(st));
  if (scan(f, "many", &m, &c, &m2, &c2, &st, &e) != 0)
    fail_msg("rescan: %s", e.msg);
  assert_int_equal(st.files_reused, 1000);
  encode_id(&m, id);
  encode_id(&m2, id2);
  assert_string_equal(id, id2);
  manifest_release(&m);
  manifest_checks_release(&c);
  manifest_release(&m2);
  manifest_checks_release(&c2);
}

static void
test_same_tree_gives_same_id_and_one_byte_changes_it(void **state)
{
  struct fx *f = *state;
  struct manifest m1, m2, m3;
  struct manifest_checks c;
  char id1[MANIFEST_ID_HEX + 1], id2[MANIFEST_ID_HEX + 1];
  char id3[MANIFEST_ID_HEX + 1];
  unsigned char changed[sizeof(deep)];
  struct err e;

  make_small_tree(f);
  manifest_init(&m1);
  manifest_init(&m2);
  manifest_init(&m3);
  manifest_checks_init(&c);
  assert_int_equal(scan(f, "ds", NULL, NULL, &m1, &c, NULL, &e), 0);
  assert_int_equal(scan(f, "ds", NULL, NULL, &m2, &c, NULL, &e), 0);
  encode_id(&m1, id1);
  encode_id(&m2, id2);
  assert_string_equal(id1, id2);

  memcpy(changed, deep, sizeof(deep));
  changed[1234] ^= 1;
  put_file(f, "ds/dir/sub/deep.bin", changed, sizeof(changed));
  assert_int_equal(scan(f, "ds", NULL, NULL, &m3, &c, NULL, &e), 0);
  encode_id(&m3, id3);
  assert_string_not_equal(id1, id3);
  assert_sha_of(m3.v[5].sha256, changed, sizeof(changed));
  manifest_release(&m1);
  manifest_release(&m2);
  manifest_release(&m3);
  manifest_checks_release(&c);
}

static void
test_rescan_reuses_hashes_of_unchanged_files(void **state)
{
  struct fx *f = *state;
  struct manifest m1, m2, m3;
  struct manifest_checks c1, c2, c3;
  struct manifest_scan_stats st;
  char id1[MANIFEST_ID_HEX + 1], id2[MANIFEST_ID_HEX + 1];
  struct timespec ts[2] = {{1000000000, 5}, {1000000000, 5}};
  char p[512];
  struct err e;

  make_small_tree(f);
  init_scans(&m1, &m2, &m3, &c1, &c2, &c3);
  assert_int_equal(scan(f, "ds", NULL, NULL, &m1, &c1, &st, &e), 0);
  assert_int_equal(st.files_hashed, 4);

  assert_int_equal(scan(f, "ds", &m1, &c1, &m2, &c2, &st, &e), 0);
  assert_int_equal(st.files_hashed, 0);
  assert_int_equal(st.bytes_hashed, 0);
  assert_int_equal(st.files_reused, 4);
  encode_id(&m1, id1);
  encode_id(&m2, id2);
  assert_string_equal(id1, id2);
  assert_memory_equal(c2.v[5].xxh[0], c1.v[5].xxh[0], 16);

  /* A new mtime (same content) is a new identity: read again. */
  fx_path(f, "ds/dir/sub/deep.bin", p, sizeof(p));
  assert_int_equal(utimensat(AT_FDCWD, p, ts, 0), 0);
  assert_int_equal(scan(f, "ds", &m2, &c2, &m3, &c3, &st, &e), 0);
  assert_int_equal(st.files_hashed, 1);
  assert_int_equal(st.files_reused, 3);
  assert_int_equal(st.bytes_hashed, sizeof(deep));
  assert_int_equal(m3.v[5].mtime_ns, 1000000000000000005LL);
  assert_memory_equal(m3.v[5].sha256, m1.v[5].sha256, 32);
  /* ... but its XXH3-128 is the one recorded: no SHA-256 again. */
  assert_int_equal(st.segments_reused, 1);
  release_scans(&m1, &m2, &m3, &c1, &c2, &c3);
}

static void
test_rescan_of_moved_files_keeps_hashes_only_for_the_same_content(
    void **state)
{
  struct fx *f = *state;
  struct manifest m1, m2, m3;
  struct manifest_checks c1, c2, c3;
  struct manifest_scan_stats st;
  struct timespec keep[2];
  struct stat sb;
  char from[512], to[512], to2[512];
  ssize_t j;
  struct err e;
  int fd;

  make_small_tree(f);
  init_scans(&m1, &m2, &m3, &c1, &c2, &c3);
  assert_int_equal(scan(f, "ds", NULL, NULL, &m1, &c1, &st, &e), 0);

  /* Moved (a rename changes the ctime): found by inode, its XXH3-128
   * matches, so its SHA-256 is kept. */
  fx_path(f, "ds/dir/sub/deep.bin", from, sizeof(from));
  fx_path(f, "ds/moved.bin", to, sizeof(to));
  assert_int_equal(rename(from, to), 0);
  assert_int_equal(scan(f, "ds", &m1, &c1, &m2, &c2, &st, &e), 0);
  assert_int_equal(st.files_hashed, 1);
  assert_int_equal(st.segments_reused, 1);
  j = manifest_find(&m2, "moved.bin");
  assert_true(j >= 0);
  assert_sha_of(m2.v[j].sha256, deep, sizeof(deep));

  /* Changed in place with its mtime put back, then moved: the same
   * inode, size and mtime, other bytes, so hashed again. */
  assert_int_equal(stat(to, &sb), 0);
  keep[0] = sb.st_atim;
  keep[1] = sb.st_mtim;
  fd = open(to, O_WRONLY | O_CLOEXEC);
  assert_true(fd >= 0);
  deep[100] ^= 0xff;
  assert_int_equal(pwrite(fd, deep + 100, 1, 100), 1);
  assert_int_equal(close(fd), 0);
  assert_int_equal(utimensat(AT_FDCWD, to, keep, 0), 0);
  fx_path(f, "ds/moved2.bin", to2, sizeof(to2));
  assert_int_equal(rename(to, to2), 0);
  assert_int_equal(scan(f, "ds", &m2, &c2, &m3, &c3, &st, &e), 0);
  assert_int_equal(st.files_hashed, 1);
  assert_int_equal(st.segments_reused, 0);
  j = manifest_find(&m3, "moved2.bin");
  assert_true(j >= 0);
  assert_sha_of(m3.v[j].sha256, deep, sizeof(deep));
  release_scans(&m1, &m2, &m3, &c1, &c2, &c3);
}

static void
test_scan_refuses_a_link_pointing_outside(void **state)
{
  struct fx *f = *state;
  struct manifest m;
  struct manifest_checks c;
  struct err e;

  make_small_tree(f);
  put_link(f, "ds/dir/out", "../../a.txt");
  manifest_init(&m);
  manifest_checks_init(&c);
  assert_int_equal(scan(f, "ds", NULL, NULL, &m, &c, NULL, &e),
                   ERR_INVALID);
  assert_contains(e.msg, "dir/out");
  assert_contains(e.msg, "outside");
  assert_int_equal(m.n, 0);
  assert_int_equal(c.n, 0);
}

static void
test_scan_refuses_an_absolute_link(void **state)
{
  struct fx *f = *state;
  struct manifest m;
  struct manifest_checks c;
  struct err e;

  put_dir(f, "ds");
  put_link(f, "ds/abs", "/etc");
  manifest_init(&m);
  manifest_checks_init(&c);
  assert_int_equal(scan(f, "ds", NULL, NULL, &m, &c, NULL, &e),
                   ERR_INVALID);
  assert_contains(e.msg, "'abs'");
}

static void
test_scan_refuses_a_fifo_naming_it(void **state)
{
  struct fx *f = *state;
  struct manifest m;
  struct manifest_checks c;
  struct err e;
  char p[512];

  make_small_tree(f);
  fx_path(f, "ds/dir/sub/pipe", p, sizeof(p));
  assert_int_equal(mkfifo(p, 0644), 0);
  manifest_init(&m);
  manifest_checks_init(&c);
  assert_int_equal(scan(f, "ds", NULL, NULL, &m, &c, NULL, &e),
                   ERR_INVALID);
  assert_contains(e.msg, "'dir/sub/pipe' is a fifo");
}

static void
test_scan_refuses_a_name_that_is_not_utf8(void **state)
{
  struct fx *f = *state;
  struct manifest m;
  struct manifest_checks c;
  struct err e;

  put_dir(f, "ds");
  put_file(f, "ds/bad\xff", "x", 1);
  manifest_init(&m);
  manifest_checks_init(&c);
  assert_int_equal(scan(f, "ds", NULL, NULL, &m, &c, NULL, &e),
                   ERR_INVALID);
  assert_contains(e.msg, "bad\\xff");
  assert_contains(e.msg, "UTF-8");
}

static void
test_scan_refuses_a_dataset_dir_that_is_a_symlink(void **state)
{
  struct fx *f = *state;
  struct manifest m;
  struct manifest_checks c;
  struct err e;

  make_small_tree(f);
  put_link(f, "via", "ds");
  manifest_init(&m);
  manifest_checks_init(&c);
  assert_int_equal(scan(f, "via", NULL, NULL, &m, &c, NULL, &e),
                   ERR_INVALID);
  assert_int_equal(scan(f, "nothere", NULL, NULL, &m, &c, NULL, &e),
                   ERR_NOT_FOUND);
}

static void
test_scan_of_the_root_skips_the_store(void **state)
{
  struct fx *f = *state;
  struct manifest m;
  struct manifest_checks c;
  struct err e;

  put_dir(f, ".tenbin");
  put_file(f, ".tenbin/state", "s", 1);
  put_file(f, "top.txt", "t", 1);
  put_dir(f, "sub");
  put_dir(f, "sub/.tenbin"); /* only the top-level one is the store */
  manifest_init(&m);
  manifest_checks_init(&c);
  if (scan(f, ".", NULL, NULL, &m, &c, NULL, &e) != 0)
    fail_msg("scan: %s", e.msg);
  assert_int_equal(m.n, 3);
  assert_string_equal(m.v[0].path, "sub");
  assert_string_equal(m.v[1].path, "sub/.tenbin");
  assert_string_equal(m.v[2].path, "top.txt");
  manifest_release(&m);
  manifest_checks_release(&c);

  /* Below the root, a top-level ".tenbin" would make a manifest that
   * no agent accepts: refused. */
  put_dir(f, "ds");
  put_dir(f, "ds/.tenbin");
  assert_int_equal(scan(f, "ds", NULL, NULL, &m, &c, NULL, &e),
                   ERR_INVALID);
  assert_contains(e.msg, ".tenbin");
}

/* ---- canonical JSON ---- */

/* ---- scanning only what changed ---- */

/* The changes a watch would report, unsorted, with duplicates. */
struct changes {
  struct manifest_change v[256];
  char paths[256][64];
  size_t n;
};

/* path under the fixture's root; changes are relative to "ds". */
static void
note(struct changes *ch, const char *path, unsigned flags)
{
  assert_true(ch->n < 256);
  if (strncmp(path, "ds/", 3) == 0)
    path += 3;
  snprintf(ch->paths[ch->n], sizeof(ch->paths[ch->n]), "%s", path);
  ch->v[ch->n].path = ch->paths[ch->n];
  ch->v[ch->n++].flags = flags;
}

static int
change_cmp(const void *a, const void *b)
{
  return strcmp(((const struct manifest_change *)a)->path,
                ((const struct manifest_change *)b)->path);
}

/* Sorted, one per path, flags joined (as agent/watch.c hands them). */
static void
changes_sort(struct changes *ch)
{
  size_t k = 0;

  qsort(ch->v, ch->n, sizeof(ch->v[0]), change_cmp);
  for (size_t i = 0; i < ch->n; i++) {
    if (k > 0 && strcmp(ch->v[k - 1].path, ch->v[i].path) == 0)
      ch->v[k - 1].flags |= ch->v[i].flags;
    else
      ch->v[k++] = ch->v[i];
  }
  ch->n = k;
}

static int
scan_changes(const struct fx *f, const struct manifest *prev,
             const struct manifest_checks *prev_c, struct changes *ch,
             struct manifest *m, struct manifest_checks *c,
             struct manifest_scan_stats *st, struct err *e)
{
  changes_sort(ch);
  err_clear(e);
  return manifest_scan_changes(f->rootfd, "ds", prev, prev_c, ch->v, ch->n,
                               NULL, m, c, st, e);
}

static uint64_t rnd_state;

static unsigned
rnd(unsigned n)
{
  rnd_state ^= rnd_state << 13;
  rnd_state ^= rnd_state >> 7;
  rnd_state ^= rnd_state << 17;
  return (unsigned)(rnd_state % n);
}

static int
exists(const struct fx *f, const char *rel, mode_t type)
{
  char p[512];
  struct stat st;

  fx_path(f, rel, p, sizeof(p));
  return lstat(p, &st) == 0 && (type == 0 || (st.st_mode & S_IFMT) == type);
}

static void
rm_tree(const struct fx *f, const char *rel, struct changes *ch)
{
  char p[512];

  fx_path(f, rel, p, sizeof(p));
  assert_int_equal(nftw(p, rm_entry, 16, FTW_DEPTH | FTW_PHYS), 0);
  note(ch, rel, MANIFEST_CHANGED_TREE);
}

/* One random change of the kinds a dataset sees, noted as inotify
 * reports it: a write or chmod is the entry; a create, delete or rename
 * names the path in its directory. */
static void
mutate(const struct fx *f, struct changes *ch, unsigned round)
{
  char a[48], b[64], p[512], q[512];
  char data[96];
  unsigned d = rnd(4), i = rnd(6);

  snprintf(a, sizeof(a), "ds/d%u/f%u", d, i);
  snprintf(data, sizeof(data), "round %u file %u of d%u %.*s", round, i, d,
           (int)rnd(40), "0123456789012345678901234567890123456789");
  switch (rnd(9)) {
  case 0: /* rewrite or create */
    if (!exists(f, a, S_IFREG) && exists(f, a, 0))
      return;
    if (!exists(f, a, 0) &&
        (snprintf(b, sizeof(b), "ds/d%u", d), !exists(f, b, S_IFDIR)))
      return;
    note(ch, a, exists(f, a, 0) ? MANIFEST_CHANGED_ENTRY
                                : MANIFEST_CHANGED_TREE);
    put_file(f, a, data, strlen(data));
    return;
  case 1: /* chmod a file or a directory */
    if (!exists(f, a, S_IFREG))
      snprintf(a, sizeof(a), "ds/d%u", d);
    if (!exists(f, a, S_IFREG) && !exists(f, a, S_IFDIR))
      return;
    fx_path(f, a, p, sizeof(p));
    assert_int_equal(chmod(p, exists(f, a, S_IFDIR) ? 0700 + rnd(2) * 055
                                                    : 0600 + rnd(2) * 044),
                     0);
    note(ch, a, MANIFEST_CHANGED_ENTRY);
    return;
  case 2: /* delete a file */
    if (!exists(f, a, S_IFREG))
      return;
    fx_path(f, a, p, sizeof(p));
    assert_int_equal(unlink(p), 0);
    note(ch, a, MANIFEST_CHANGED_TREE);
    return;
  case 3: /* rename a file, maybe over another, maybe to another dir */
    snprintf(b, sizeof(b), "ds/d%u/f%u", rnd(4), rnd(8));
    if (!exists(f, a, S_IFREG) || exists(f, b, S_IFDIR) ||
        strcmp(a, b) == 0)
      return;
    snprintf(data, sizeof(data), "%.*s", (int)(strrchr(b, '/') - b), b);
    if (!exists(f, data, S_IFDIR))
      return;
    fx_path(f, a, p, sizeof(p));
    fx_path(f, b, q, sizeof(q));
    assert_int_equal(rename(p, q), 0);
    note(ch, a, MANIFEST_CHANGED_TREE);
    note(ch, b, MANIFEST_CHANGED_TREE);
    return;
  case 4: /* a new directory, filled before anyone could watch it */
    snprintf(a, sizeof(a), "ds/d%u", d);
    if (exists(f, a, 0))
      return;
    put_dir(f, a);
    snprintf(b, sizeof(b), "ds/d%u/f1", d);
    put_file(f, b, data, strlen(data));
    snprintf(b, sizeof(b), "ds/d%u/sub", d);
    put_dir(f, b);
    snprintf(b, sizeof(b), "ds/d%u/sub/deep", d);
    put_file(f, b, "deep", 4);
    note(ch, a, MANIFEST_CHANGED_TREE);
    return;
  case 5: /* a directory deleted with what is in it */
    snprintf(a, sizeof(a), "ds/d%u", d);
    if (d == 0 || !exists(f, a, S_IFDIR))
      return;
    rm_tree(f, a, ch);
    return;
  case 6: /* a file replaced by a directory, or the other way */
    if (exists(f, a, S_IFREG)) {
      fx_path(f, a, p, sizeof(p));
      assert_int_equal(unlink(p), 0);
      put_dir(f, a);
      snprintf(b, sizeof(b), "%s/in", a);
      put_file(f, b, "in", 2);
    } else if (exists(f, a, S_IFDIR)) {
      rm_tree(f, a, ch);
      put_file(f, a, data, strlen(data));
    } else {
      return;
    }
    note(ch, a, MANIFEST_CHANGED_TREE);
    return;
  case 7: /* a link to a file beside it */
    if (exists(f, a, 0) ||
        (snprintf(b, sizeof(b), "ds/d%u", d), !exists(f, b, S_IFDIR)))
      return;
    put_link(f, a, "f0");
    note(ch, a, MANIFEST_CHANGED_TREE);
    return;
  default: /* a touch: new times, same bytes */
    if (!exists(f, a, S_IFREG))
      return;
    fx_path(f, a, p, sizeof(p));
    assert_int_equal(utimensat(AT_FDCWD, p, NULL, 0), 0);
    note(ch, a, MANIFEST_CHANGED_ENTRY);
    return;
  }
}

/*
 * Given every change a watch reports, looking at those paths alone gives
 * what a scan of the whole tree gives: the same manifest (id) and the
 * same checks and stat identities, round after round of random creates,
 * writes, chmods, deletes, renames, new and deleted directories, files
 * and directories replacing each other, links and touches.
 */
static void
test_scan_of_changes_matches_a_full_scan(void **state)
{
  struct fx *f = *state;
  struct manifest prev, inc, full;
  struct manifest_checks prev_c, inc_c, full_c;
  struct manifest_scan_stats st;
  struct changes ch;
  char rel[64];
  struct err e;

  rnd_state = 0x9e3779b97f4a7c15ull;
  put_dir(f, "ds");
  for (unsigned d = 0; d < 3; d++) {
    snprintf(rel, sizeof(rel), "ds/d%u", d);
    put_dir(f, rel);
    for (unsigned i = 0; i < 4; i++) {
      snprintf(rel, sizeof(rel), "ds/d%u/f%u", d, i);
      put_file(f, rel, rel, strlen(rel));
    }
  }
  init_scans(&prev, &inc, &full, &prev_c, &inc_c, &full_c);
  assert_int_equal(scan(f, "ds", NULL, NULL, &prev, &prev_c, NULL, &e), 0);
  for (unsigned round = 0; round < 200; round++) {
    ch.n = 0;
    for (unsigned k = 1 + rnd(4); k > 0; k--) {
      size_t before = ch.n;

      /* Most picks do not apply (no such file); try until one does. */
      for (int tries = 0; ch.n == before && tries < 50; tries++)
        mutate(f, &ch, round);
    }
    if (scan_changes(f, &prev, &prev_c, &ch, &inc, &inc_c, &st, &e) != 0)
      fail_msg("round %u: %s", round, e.msg);
    assert_int_equal(scan(f, "ds", &prev, &prev_c, &full, &full_c, NULL, &e),
                     0);
    assert_same_scan(&inc, &inc_c, &full, &full_c);
    for (size_t i = 0; i < inc.n; i++) {
      assert_int_equal(inc_c.v[i].ino, full_c.v[i].ino);
      assert_int_equal(inc_c.v[i].size, full_c.v[i].size);
      assert_int_equal(inc_c.v[i].mtime_ns, full_c.v[i].mtime_ns);
      assert_int_equal(inc_c.v[i].ctime_ns, full_c.v[i].ctime_ns);
    }
    assert_int_equal(inc.files, full.files);
    assert_int_equal(inc.dirs, full.dirs);
    assert_int_equal(inc.links, full.links);
    assert_int_equal(inc.bytes, full.bytes);
    assert_int_equal(st.files_hashed + st.files_reused, inc.files);
    manifest_release(&prev);
    manifest_checks_release(&prev_c);
    prev = inc;
    prev_c = inc_c;
    manifest_init(&inc);
    manifest_checks_init(&inc_c);
  }
  release_scans(&prev, &inc, &full, &prev_c, &inc_c, &full_c);
}

/* A chmod of a directory is its own entry: nothing beneath it is listed
 * or read again. */
static void
test_scan_of_a_directory_chmod_reads_nothing_beneath(void **state)
{
  struct fx *f = *state;
  struct manifest m1, m2, unused;
  struct manifest_checks c1, c2, unused_c;
  struct manifest_scan_stats st;
  struct changes ch = {.n = 0};
  char p[512];
  struct err e;
  ssize_t j;

  make_small_tree(f);
  init_scans(&m1, &m2, &unused, &c1, &c2, &unused_c);
  assert_int_equal(scan(f, "ds", NULL, NULL, &m1, &c1, NULL, &e), 0);
  fx_path(f, "ds/dir", p, sizeof(p));
  assert_int_equal(chmod(p, 0711), 0);
  note(&ch, "dir", MANIFEST_CHANGED_ENTRY);
  assert_int_equal(scan_changes(f, &m1, &c1, &ch, &m2, &c2, &st, &e), 0);
  assert_int_equal(st.files_hashed, 0);
  assert_int_equal(st.files_reused, 4);
  assert_int_equal(m2.n, m1.n);
  j = manifest_find(&m2, "dir");
  assert_true(j >= 0);
  assert_int_equal(m2.v[j].mode, 0711);
  release_scans(&m1, &m2, &unused, &c1, &c2, &unused_c);
}

/* An entry whose directory is neither in the last scan nor a change
 * means the list missed something: ERR_CONFLICT, and the caller scans
 * the whole tree.  So does a list out of order. */
static void
test_scan_of_changes_refuses_a_list_that_missed_a_directory(void **state)
{
  struct fx *f = *state;
  struct manifest m1, m2, unused;
  struct manifest_checks c1, c2, unused_c;
  struct changes ch = {.n = 0};
  struct manifest_change backwards[2] = {{"b", MANIFEST_CHANGED_ENTRY},
                                         {"a", MANIFEST_CHANGED_ENTRY}};
  struct err e;

  make_small_tree(f);
  init_scans(&m1, &m2, &unused, &c1, &c2, &unused_c);
  assert_int_equal(scan(f, "ds", NULL, NULL, &m1, &c1, NULL, &e), 0);
  put_dir(f, "ds/new");
  put_file(f, "ds/new/f", "f", 1);
  note(&ch, "new/f", MANIFEST_CHANGED_TREE);
  assert_int_equal(scan_changes(f, &m1, &c1, &ch, &m2, &c2, NULL, &e),
                   ERR_CONFLICT);
  assert_contains(e.msg, "'new/f' found");
  assert_int_equal(m2.n, 0);
  assert_int_equal(manifest_scan_changes(f->rootfd, "ds", &m1, &c1,
                                         backwards, 2, NULL, &m2, &c2, NULL,
                                         &e),
                   ERR_CONFLICT);
  release_scans(&m1, &m2, &unused, &c1, &c2, &unused_c);
}

static void
count_dir(void *arg, int dirfd, const char *path)
{
  (void)path;
  assert_true(dirfd >= 0);
  (*(int *)arg)++;
}

/* The hook sees every directory a scan lists, before it is listed: all
 * of them in a full scan, only the new one in a scan of changes. */
static void
test_scan_hook_sees_each_directory_listed(void **state)
{
  struct fx *f = *state;
  struct manifest m1, m2, unused;
  struct manifest_checks c1, c2, unused_c;
  struct changes ch = {.n = 0};
  int calls = 0;
  struct manifest_dir_hook hook = {count_dir, &calls};
  struct err e;

  make_small_tree(f);
  init_scans(&m1, &m2, &unused, &c1, &c2, &unused_c);
  assert_int_equal(manifest_scan(f->rootfd, "ds", NULL, NULL, &hook, &m1,
                                 &c1, NULL, &e),
                   0);
  assert_int_equal(calls, 3); /* ds, dir, dir/sub */
  calls = 0;
  put_dir(f, "ds/new");
  note(&ch, "new", MANIFEST_CHANGED_TREE);
  note(&ch, "a.txt", MANIFEST_CHANGED_ENTRY);
  changes_sort(&ch);
  assert_int_equal(manifest_scan_changes(f->rootfd, "ds", &m1, &c1, ch.v,
                                         ch.n, &hook, &m2, &c2, NULL, &e),
                   0);
  assert_int_equal(calls, 1);
  assert_true(manifest_find(&m2, "new") >= 0);
  release_scans(&m1, &m2, &unused, &c1, &c2, &unused_c);
}

static void
test_encode_is_jansson_canonical_and_round_trips(void **state)
{
  struct fx *f = *state;
  struct manifest m, back;
  struct manifest_checks c;
  char *text = NULL, *again = NULL, *whole;
  size_t len, len2;
  char id[MANIFEST_ID_HEX + 1], id2[MANIFEST_ID_HEX + 1];
  char want[MANIFEST_ID_HEX + 1];
  json_t *v;
  struct err e;

  make_small_tree(f);
  manifest_init(&m);
  manifest_init(&back);
  manifest_checks_init(&c);
  assert_int_equal(scan(f, "ds", NULL, NULL, &m, &c, NULL, &e), 0);
  assert_int_equal(manifest_encode(&m, &text, &len, id, &e), 0);
  assert_int_equal(strlen(text), len);
  assert_true(strncmp(text, "{\"entries\":[{\"mode\":420,\"mtime_ns\":",
                      35) == 0);
  assert_non_null(strstr(text, "{\"path\":\"dir/link\",\"target\":"
                               "\"../a.txt\",\"type\":\"link\"}"));
  assert_non_null(strstr(text, "{\"mode\":493,\"path\":\"dir\","
                               "\"type\":\"dir\"}"));
  assert_true(len > 13 &&
              strcmp(text + len - 13, "],\"format\":2}") == 0);
  /* The id is the SHA-256 of exactly these bytes. */
  hash_sha256_hex(text, len, want);
  assert_string_equal(id, want);
  /* Byte-identical to jansson dumping the whole document. */
  v = json_loadb(text, len, 0, NULL);
  assert_non_null(v);
  whole = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
  assert_string_equal(whole, text);
  free(whole);
  json_decref(v);

  if (manifest_decode(text, len, &back, &e) != 0)
    fail_msg("decode: %s", e.msg);
  assert_int_equal(back.n, m.n);
  assert_int_equal(back.files, 4);
  assert_int_equal(back.dirs, 2);
  assert_int_equal(back.links, 2);
  assert_int_equal(back.bytes, m.bytes);
  for (size_t i = 0; i < m.n; i++) {
    assert_string_equal(back.v[i].path, m.v[i].path);
    assert_int_equal(back.v[i].type, m.v[i].type);
    assert_int_equal(back.v[i].mode, m.v[i].mode);
    if (m.v[i].type == MANIFEST_FILE) {
      assert_memory_equal(back.v[i].sha256, m.v[i].sha256, 32);
      assert_true(back.v[i].mtime_ns == m.v[i].mtime_ns);
      assert_int_equal(back.v[i].nsegs, 1);
    }
  }
  assert_int_equal(manifest_encode(&back, &again, &len2, id2, &e), 0);
  assert_string_equal(id, id2);
  assert_string_equal(again, text);
  free(text);
  free(again);
  manifest_release(&m);
  manifest_release(&back);
  manifest_checks_release(&c);
}

static void
test_encode_keeps_64_bit_mtimes_as_integers(void **state)
{
  struct manifest m, back;
  char *text = NULL;
  size_t len;
  char id[MANIFEST_ID_HEX + 1];
  struct err e;

  (void)state;
  manifest_init(&m);
  manifest_init(&back);
  m.v = xcalloc(1, sizeof(*m.v));
  m.n = m.cap = 1;
  m.v[0].path = xstrdup("f");
  m.v[0].type = MANIFEST_FILE;
  m.v[0].mode = 0600;
  m.v[0].mtime_ns = INT64_MAX - 1;
  m.v[0].size = 16;
  m.v[0].nsegs = 1;
  assert_int_equal(manifest_encode(&m, &text, &len, id, &e), 0);
  assert_non_null(strstr(text, "\"mtime_ns\":9223372036854775806,"));
  assert_int_equal(manifest_decode(text, len, &back, &e), 0);
  assert_true(back.v[0].mtime_ns == INT64_MAX - 1);
  free(text);
  manifest_release(&m);
  manifest_release(&back);
}

/* ---- decoding what a peer sent ---- */

#define H0 "0000000000000000000000000000000000000000000000000000000000000000"
#define H1 "1111111111111111111111111111111111111111111111111111111111111111"
#define DIR_A "{\"mode\":493,\"path\":\"a\",\"type\":\"dir\"}"
#define FILE_(p, size, sha, extra)                                         \
  "{\"mode\":420,\"mtime_ns\":1,\"path\":\"" p "\",\"sha256\":\"" sha     \
  "\",\"size\":" #size extra ",\"type\":\"file\"}"
#define DOC(entries) "{\"entries\":[" entries "],\"format\":2}"
/* ",seglens,segments" for FILE_'s extra */
#define LISTS(lens, segs) ",\"seglens\":[" lens "],\"segments\":[" segs "]"
#define S2 "\"" H0 "\",\"" H0 "\""

static int
decode(const char *text, struct manifest *m, struct err *e)
{
  err_clear(e);
  return manifest_decode(text, strlen(text), m, e);
}

static void
test_decode_accepts_a_minimal_valid_manifest(void **state)
{
  struct manifest m;
  struct err e;

  (void)state;
  manifest_init(&m);
  assert_int_equal(decode(DOC(""), &m, &e), 0);
  assert_int_equal(m.n, 0);
  if (decode(DOC(DIR_A "," FILE_("a/f", 3, H0, "") ","
                 "{\"path\":\"a/l\",\"target\":\"f\",\"type\":\"link\"}"),
             &m, &e) != 0)
    fail_msg("decode: %s", e.msg);
  assert_int_equal(m.n, 3);
  assert_int_equal(m.v[1].size, 3);
  assert_int_equal(m.files, 1);
  manifest_release(&m);
}

static void
test_decode_rejects_each_bad_case_naming_the_entry(void **state)
{
  static const struct {
    const char *text, *msg;
  } cases[] = {
    {"[]", "not a JSON object"},
    {"{\"entries\":[", "malformed JSON"},
    {"{\"entries\":[],\"format\":1}", "field 'format' must be 2"},
    {"{\"entries\":[]}", "'format'"},
    {"{\"format\":2}", "'entries'"},
    {"{\"entries\":[],\"format\":2,\"x\":1}", "unknown field 'x'"},
    {DOC("1"), "entry 0: not an object"},
    {DOC("{\"type\":\"dir\",\"mode\":1}"), "entry 0: field 'path'"},
    {DOC("{\"path\":\"a\",\"type\":\"fifo\"}"), "entry 0 'a': unknown type"},
    {DOC("{\"mode\":493,\"path\":\"a\",\"type\":\"dir\",\"x\":1}"),
     "entry 0 'a': unknown field 'x'"},
    {DOC("{\"mode\":493,\"path\":\"../a\",\"type\":\"dir\"}"),
     "entry 0 '../a': path escapes"},
    {DOC(DIR_A ",{\"mode\":493,\"path\":\"a/../b\",\"type\":\"dir\"}"),
     "entry 1 'a/../b': path escapes"},
    {DOC("{\"mode\":493,\"path\":\"/a\",\"type\":\"dir\"}"),
     "entry 0 '/a': path is not normalized"},
    {DOC("{\"mode\":493,\"path\":\"a//b\",\"type\":\"dir\"}"),
     "path is not normalized"},
    {DOC("{\"mode\":493,\"path\":\"./a\",\"type\":\"dir\"}"),
     "path is not normalized"},
    {DOC("{\"mode\":493,\"path\":\"\",\"type\":\"dir\"}"),
     "path is not normalized"},
    {DOC("{\"mode\":493,\".tenbin\":1,\"type\":\"dir\"}"),
     "field 'path'"},
    {DOC("{\"mode\":493,\"path\":\".tenbin\",\"type\":\"dir\"}"),
     "'.tenbin': path is inside '.tenbin'"},
    {DOC("{\"mode\":493,\"path\":\"b\",\"type\":\"dir\"}," DIR_A),
     "entry 1 'a': not sorted"},
    {DOC(DIR_A "," DIR_A), "entry 1 'a': duplicate path"},
    {DOC(FILE_("a/f", 3, H0, "")),
     "entry 0 'a/f': parent directory 'a' is not listed"},
    {DOC(FILE_("a", 3, H0, "") "," FILE_("a/f", 3, H0, "")),
     "entry 1 'a/f': parent 'a' is not a directory"},
    {DOC(DIR_A ",{\"mode\":493,\"path\":\"a/b/c\",\"type\":\"dir\"}"),
     "parent directory 'a/b' is not listed"},
    {DOC("{\"mode\":4096,\"path\":\"a\",\"type\":\"dir\"}"),
     "entry 0 'a': field 'mode'"},
    {DOC("{\"path\":\"a\",\"type\":\"dir\"}"), "field 'mode'"},
    {DOC(FILE_("f", 3, "00", "")), "entry 0 'f': field 'sha256'"},
    {DOC(FILE_("f", 3, "000000000000000000000000000000000000000000000000000"
                       "000000000000G", "")), "field 'sha256'"},
    {DOC(FILE_("f", 3, "ABCDEF0000000000000000000000000000000000000000000"
                       "000000000000000", "")), "field 'sha256'"},
    {DOC(FILE_("f", -1, H0, "")), "field 'size'"},
    {DOC(FILE_("f", 1125899906842625, H0, "")), "field 'size'"},
    {DOC(FILE_("f", 1.5, H0, "")), "field 'size'"},
    {DOC("{\"mode\":420,\"path\":\"f\",\"sha256\":\"" H0 "\",\"size\":1,"
         "\"type\":\"file\"}"), "field 'mtime_ns'"},
    /* format 2: a file of more than one segment lists their lengths
     * and hashes; one of at most 16 MiB may list none */
    {DOC(FILE_("f", 16777217, H0, "")),
     "entry 0 'f': fields 'seglens' and 'segments' are required for a "
     "file larger than 16 MiB"},
    {DOC(FILE_("f", 16777217, H0, ",\"segments\":[" S2 "]")),
     "fields 'seglens' and 'segments' must both be arrays"},
    {DOC(FILE_("f", 16777217, H0, ",\"seglens\":[8388608,8388609]")),
     "fields 'seglens' and 'segments' must both be arrays"},
    {DOC(FILE_("f", 16777217, H0, ",\"seglens\":\"x\",\"segments\":["
               S2 "]")), "must both be arrays"},
    {DOC(FILE_("f", 3, H0, ",\"segments\":[\"" H0 "\"]")),
     "must both be arrays"},
    {DOC(FILE_("f", 16777217, H0, LISTS("8388608,8388609", "\"" H0 "\""))),
     "entry 0 'f': 1 segment hashes and 2 lengths"},
    {DOC(FILE_("f", 3, H0, LISTS("3", "\"" H0 "\""))),
     "1 segment hashes and 1 lengths: a file of 3 bytes has from 2"},
    {DOC(FILE_("f", 8388608, H0, LISTS("4194304,4194302,1,1",
                                       S2 "," S2))),
     "4 segment hashes and 4 lengths: a file of 8388608 bytes has from 2 "
     "to 3"},
    {DOC(FILE_("f", 16777217, H0, LISTS("4194303,12582914", S2))),
     "entry 0 'f': segment 0: its length must be an integer from 4 MiB "
     "to 16 MiB within the file"},
    {DOC(FILE_("f", 20971521, H0, LISTS("16777217,4194304", S2))),
     "segment 0: its length must be an integer from 4 MiB to 16 MiB"},
    {DOC(FILE_("f", 20971521, H0, LISTS("4194304,16777217", S2))),
     "segment 1 (the last): its length must be an integer from 1 byte to "
     "16 MiB"},
    {DOC(FILE_("f", 8388608, H0, LISTS("8388608,0", S2))),
     "segment 1 (the last): its length must be an integer from 1 byte"},
    {DOC(FILE_("f", 16777217, H0, LISTS("8388608,8388610", S2))),
     "segment 1 (the last): its length must be an integer from 1 byte to "
     "16 MiB within the file"},
    {DOC(FILE_("f", 16777217, H0, LISTS("8388608,8388608", S2))),
     "the segment lengths add up to 16777216, not the size"},
    {DOC(FILE_("f", 16777217, H0, LISTS("8388608,8388609.0", S2))),
     "segment 1 (the last): its length must be an integer"},
    {DOC(FILE_("f", 16777217, H0, LISTS("\"8388608\",8388609", S2))),
     "segment 0: its length must be an integer"},
    {DOC(FILE_("f", 16777217, H0, LISTS("-8388608,8388609", S2))),
     "segment 0: its length must be an integer"},
    {DOC(FILE_("f", 16777217, H0, LISTS("8388608,8388609",
                                        "\"" H0 "\",\"xx\""))),
     "segment 1 must be 64"},
    {DOC(FILE_("f", 16777217, H0, LISTS("8388608,8388609",
                                        "\"" H0 "\",\"" H1 "\""))),
     "sha256 is not the SHA-256 of the segment hashes"},
    {DOC("{\"path\":\"l\",\"target\":\"../x\",\"type\":\"link\"}"),
     "entry 0 'l': link target '../x' points outside"},
    {DOC("{\"path\":\"l\",\"target\":\"/etc\",\"type\":\"link\"}"),
     "points outside"},
    {DOC(DIR_A ",{\"path\":\"a/l\",\"target\":\"../../x\","
         "\"type\":\"link\"}"), "entry 1 'a/l': link target"},
    {DOC("{\"path\":\"l\",\"target\":\"\",\"type\":\"link\"}"),
     "field 'target'"},
    {DOC("{\"mode\":1,\"path\":\"l\",\"target\":\"x\",\"type\":\"link\"}"),
     "unknown field 'mode' for a link"},
    {DOC("{\"mode\":493,\"path\":\"a\\u0000b\",\"type\":\"dir\"}"),
     "malformed JSON"},
  };
  struct manifest m;
  struct err e;

  (void)state;
  manifest_init(&m);
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    if (decode(cases[i].text, &m, &e) != ERR_INVALID)
      fail_msg("case %zu accepted: %s", i, cases[i].text);
    if (strstr(e.msg, cases[i].msg) == NULL)
      fail_msg("case %zu: '%s' does not contain '%s'", i, e.msg,
               cases[i].msg);
    assert_int_equal(m.n, 0);
    assert_null(m.v);
  }
}

static void
test_decode_errors_stay_valid_utf8_when_cut(void **state)
{
  /* "/" and 150 two-byte characters: quoting the path cut at an odd
   * byte count would end the message inside a character, and a JSON
   * error reply could not carry it. */
  char text[1024], path[400];
  struct manifest m;
  struct err e;
  json_t *s;
  size_t n = 0;

  (void)state;
  path[n++] = '/';
  for (int i = 0; i < 150; i++) {
    path[n++] = '\xc3';
    path[n++] = '\xa9';
  }
  path[n] = '\0';
  snprintf(text, sizeof(text), DOC("{\"mode\":493,\"path\":\"%s\","
                                   "\"type\":\"dir\"}"), path);
  manifest_init(&m);
  assert_int_equal(decode(text, &m, &e), ERR_INVALID);
  assert_contains(e.msg, "entry 0 '/\xc3\xa9");
  s = json_string(e.msg);
  if (s == NULL)
    fail_msg("not valid UTF-8: %s", e.msg);
  json_decref(s);
}

/*
 * Segments of any length the format allows decode to their ranges, and
 * the canonical text (keys sorted: seglens before segments) encodes back
 * to the same bytes: 16 + 16 MiB; 4 MiB and a 1-byte last segment (a
 * file of at most 16 MiB may still have two); and 16 MiB listing none.
 */
static void
test_decode_accepts_the_right_two_level_hash(void **state)
{
  static const struct {
    uint64_t lens[2];
  } cases[] = {{{16 * MIB, 16 * MIB}}, {{SEG_MIN, 1}}};
  uint8_t segs[2][32], root[32];
  char h[2][65], r[65], text[1024];
  struct manifest m;
  struct err e;

  (void)state;
  memset(segs[0], 0xab, 32);
  memset(segs[1], 0x01, 32);
  sha256_bin(segs, sizeof(segs), root);
  bin_hex(segs[0], h[0]);
  bin_hex(segs[1], h[1]);
  bin_hex(root, r);
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const uint64_t *lens = cases[i].lens;
    uint64_t off, len;
    char *again = NULL, id[MANIFEST_ID_HEX + 1];
    size_t alen;

    snprintf(text, sizeof(text),
             DOC("{\"mode\":420,\"mtime_ns\":-5,\"path\":\"f\","
                 "\"seglens\":[%llu,%llu],\"segments\":[\"%s\",\"%s\"],"
                 "\"sha256\":\"%s\",\"size\":%llu,\"type\":\"file\"}"),
             (unsigned long long)lens[0], (unsigned long long)lens[1], h[0],
             h[1], r, (unsigned long long)(lens[0] + lens[1]));
    manifest_init(&m);
    if (decode(text, &m, &e) != 0)
      fail_msg("decode: %s", e.msg);
    assert_int_equal(m.v[0].nsegs, 2);
    assert_true(m.v[0].mtime_ns == -5);
    assert_memory_equal(manifest_seg_sha(&m.v[0], 1), segs[1], 32);
    manifest_seg_range(&m.v[0], 1, &off, &len);
    assert_true(off == lens[0] && len == lens[1]);
    assert_true(manifest_seg_fp(&m.v[0], 1) == manifest_nfp(lens[0]));
    assert_true(manifest_seg_fp(&m.v[0], 2) ==
                manifest_nfp(lens[0]) + manifest_nfp(lens[1]));
    assert_int_equal(manifest_encode(&m, &again, &alen, id, &e), 0);
    assert_string_equal(again, text);
    free(again);
    manifest_release(&m);
  }
  if (decode(DOC(FILE_("f", 16777216, H0, "")), &m, &e) != 0)
    fail_msg("decode: %s", e.msg);
  assert_int_equal(m.v[0].nsegs, 1);
  assert_null(m.v[0].segoff);
  manifest_release(&m);
}

static void
test_decode_enforces_text_and_entry_limits(void **state)
{
  struct manifest m;
  struct err e;
  size_t n = (size_t)MANIFEST_MAX_ENTRIES + 1;
  size_t len = 12 + n * 5 + 12;
  char *text, *p;

  (void)state;
  manifest_init(&m);
  /* The length is refused before a byte of the text is read. */
  err_clear(&e);
  assert_int_equal(manifest_decode("{}", MANIFEST_MAX_TEXT + 1, &m, &e),
                   ERR_INVALID);
  assert_contains(e.msg, "more than the limit");

  /* 4,000,001 nulls: refused at the first, before anything is kept for
   * the rest (entries are decoded and checked one by one). */
  text = xmalloc(len + 1);
  p = text;
  memcpy(p, "{\"entries\":[", 12);
  p += 12;
  for (size_t i = 0; i < n; i++) {
    memcpy(p, i > 0 ? ",null" : "null", i > 0 ? 5 : 4);
    p += i > 0 ? 5 : 4;
  }
  memcpy(p, "],\"format\":2}", 13);
  p += 13;
  *p = '\0';
  err_clear(&e);
  assert_int_equal(manifest_decode(text, (size_t)(p - text), &m, &e),
                   ERR_INVALID);
  assert_contains(e.msg, "entry 0: not an object");
  free(text);

  /* One entry past the limit is refused, naming it. */
  err_clear(&e);
  assert_int_equal(manifest_decode_max(DOC(DIR_A ",{\"mode\":493,\"path\":"
                                           "\"b\",\"type\":\"dir\"}"),
                                       strlen(DOC(DIR_A ",{\"mode\":493,"
                                                  "\"path\":\"b\",\"type\":"
                                                  "\"dir\"}")),
                                       1, &m, &e),
                   ERR_INVALID);
  assert_contains(e.msg, "more than 1 entries, the limit");
  assert_int_equal(m.n, 0);
}

static void
test_decode_of_many_entries_checks_every_parent(void **state)
{
  /* 20,000 entries: 100 dirs of 199 files each; the last one's parent
   * is missing, which a check of only the previous entry would miss. */
  struct buf_like {
    char *p;
    size_t len, cap;
  } b = {NULL, 0, 0};
  struct manifest m;
  struct err e;
  char line[256];

  (void)state;
  b.cap = 4 << 20;
  b.p = xmalloc(b.cap);
  b.len = (size_t)snprintf(b.p, b.cap, "{\"entries\":[");
  for (int d = 0; d < 100; d++) {
    b.len += (size_t)snprintf(b.p + b.len, b.cap - b.len,
                              "%s{\"mode\":493,\"path\":\"d%03d\","
                              "\"type\":\"dir\"}", d > 0 ? "," : "", d);
    for (int i = 0; i < 199; i++) {
      snprintf(line, sizeof(line), ",{\"mode\":420,\"mtime_ns\":1,"
               "\"path\":\"d%03d/f%03d\",\"sha256\":\"%s\",\"size\":1,"
               "\"type\":\"file\"}", d, i, H0);
      b.len += (size_t)snprintf(b.p + b.len, b.cap - b.len, "%s", line);
    }
  }
  snprintf(b.p + b.len, b.cap - b.len, "],\"format\":2}");
  manifest_init(&m);
  if (decode(b.p, &m, &e) != 0)
    fail_msg("decode: %s", e.msg);
  assert_int_equal(m.n, 20000);
  assert_int_equal(m.files, 19900);
  assert_int_equal(manifest_find(&m, "d050/f100"), 50 * 200 + 101);
  manifest_release(&m);

  /* Now move the last file under a directory that is not listed. */
  {
    char *last = strstr(b.p, "d099/f198");

    assert_non_null(last);
    memcpy(last, "d099x/f19", 9);
  }
  assert_int_equal(decode(b.p, &m, &e), ERR_INVALID);
  assert_contains(e.msg, "entry 19999 'd099x/f19': parent directory "
                         "'d099x' is not listed");
  free(b.p);
}

/* ---- deltas ---- */

#define LIT1 FILE_("c", 1, H0, "")

static int
entry_path_cmp(const void *a, const void *b)
{
  return strcmp(((const struct manifest_entry *)a)->path,
                ((const struct manifest_entry *)b)->path);
}

/* Append an entry to m (callers add them in path order). */
static struct manifest_entry *
put_entry(struct manifest *m, const char *path, enum manifest_type type,
          int fill)
{
  struct manifest_entry *me;

  if (m->n == m->cap) {
    m->cap = m->cap ? 2 * m->cap : 16;
    m->v = xrealloc(m->v, m->cap * sizeof(*m->v));
  }
  me = &m->v[m->n++];
  memset(me, 0, sizeof(*me));
  me->path = xstrdup(path);
  me->type = type;
  me->mode = type == MANIFEST_DIR ? 0755 : type == MANIFEST_FILE ? 0644 : 0;
  if (type == MANIFEST_LINK) {
    me->target = xstrdup("f00");
  } else if (type == MANIFEST_FILE) {
    me->size = 100 + (uint64_t)fill;
    me->mtime_ns = 1700000000000000000LL + fill;
    me->nsegs = 1;
    memset(me->sha256, fill, 32);
  }
  return me;
}

/* Entry "big": two segments of SEG_MIN bytes, the second filled with
 * fill. */
static void
put_big(struct manifest *m, int fill)
{
  struct manifest_entry *me = put_entry(m, "big", MANIFEST_FILE, 1);
  uint64_t lens[2] = {SEG_MIN, SEG_MIN};

  me->size = 2 * SEG_MIN;
  manifest_set_segments(me, lens, 2);
  me->segs = xcalloc(2, 32);
  memset(me->segs[0], 0xab, 32);
  memset(me->segs[1], fill, 32);
  sha256_bin(me->segs, 64, me->sha256);
}

/* base: big, five dirs of 40 files, a link; v: one dir's mode changed,
 * a file changed, one deleted, one renamed, a dir of files gone, files
 * added, big's second segment changed. */
static void
two_versions(struct manifest *base, struct manifest *v)
{
  char path[64];

  manifest_init(base);
  manifest_init(v);
  put_big(base, 0x01);
  put_big(v, 0x02);
  for (int d = 0; d < 5; d++) {
    snprintf(path, sizeof(path), "d%d", d);
    put_entry(base, path, MANIFEST_DIR, 0);
    if (d != 2)
      put_entry(v, path, MANIFEST_DIR, 0)->mode = d == 0 ? 0700 : 0755;
    for (int i = 0; i < 40; i++) {
      int fill = d * 40 + i + 2;

      snprintf(path, sizeof(path), "d%d/f%02d", d, i);
      put_entry(base, path, MANIFEST_FILE, fill);
      if (d == 2 || (d == 1 && i == 7))
        continue;               /* deleted */
      if (d == 4 && i == 5)
        snprintf(path, sizeof(path), "d4/g05"); /* renamed */
      put_entry(v, path, MANIFEST_FILE, d == 1 && i == 3 ? 250 : fill);
    }
    if (d == 3) {
      put_entry(v, "d3/new1", MANIFEST_FILE, 251);
      put_entry(v, "d3/new2", MANIFEST_FILE, 252);
    }
    if (d == 0) {
      put_entry(base, "d0/l", MANIFEST_LINK, 0);
      put_entry(v, "d0/l", MANIFEST_LINK, 0);
    }
  }
  /* d4/g05 was added after d4/f39: move it into order. */
  qsort(v->v, v->n, sizeof(*v->v), entry_path_cmp);
  for (size_t i = 0; i < v->n; i++) {
    v->files += v->v[i].type == MANIFEST_FILE;
    v->bytes += v->v[i].size;
  }
}

static void
test_delta_rebuilds_the_version_and_maps_its_kept_entries(void **state)
{
  struct manifest base, v, got;
  char *btext = NULL, *vtext = NULL, *delta = NULL, *text = NULL;
  char bid[MANIFEST_ID_HEX + 1], vid[MANIFEST_ID_HEX + 1];
  size_t blen, vlen, dlen, tlen;
  uint32_t *from = NULL;
  struct err e = {0};
  size_t carried = 0;

  (void)state;
  two_versions(&base, &v);
  assert_int_equal(manifest_encode(&base, &btext, &blen, bid, &e), 0);
  assert_int_equal(manifest_encode(&v, &vtext, &vlen, vid, &e), 0);
  assert_int_equal(manifest_delta_make(&base, bid, &v, MANIFEST_MAX_TEXT,
                                       &delta, &dlen, &e), 0);
  /* Only the changed entries travel as JSON. */
  assert_true(dlen * 4 < vlen);
  manifest_init(&got);
  if (manifest_delta_apply(&base, bid, NULL, 0, delta, dlen,
                           MANIFEST_MAX_ENTRIES, &text, &tlen, &got, &from,
                           &e) != 0)
    fail_msg("apply: %s", e.msg);
  assert_int_equal(tlen, vlen);
  assert_memory_equal(text, vtext, vlen);
  assert_int_equal(got.n, v.n);
  assert_int_equal(got.files, v.files);
  assert_true(got.bytes == v.bytes);
  for (size_t i = 0; i < v.n; i++) {
    ssize_t j = manifest_find(&base, v.v[i].path);

    assert_true(manifest_entry_same(&got.v[i], &v.v[i]));
    if (j >= 0 && manifest_entry_same(&base.v[j], &v.v[i])) {
      assert_int_equal(from[i], (uint32_t)j);
    } else {
      assert_int_equal(from[i], UINT32_MAX);
      carried++;
    }
  }
  /* big, d0 (mode), d1/f03, d3/new1, d3/new2, d4/g05 */
  assert_int_equal(carried, 6);
  free(text);
  free(from);
  manifest_release(&got);

  /* A base decoded from its text lends the kept entries' bytes; the
   * result knows where its entries are, as a decode would, so it can be
   * the next base: back to the first version from it. */
  {
    struct manifest based, vdec, back;
    char *rdelta = NULL, *btext2 = NULL;
    size_t rlen, b2len;
    uint32_t *from2 = NULL;

    manifest_init(&based);
    manifest_init(&vdec);
    manifest_init(&back);
    assert_int_equal(manifest_decode(btext, blen, &based, &e), 0);
    if (manifest_delta_apply(&based, bid, btext, blen, delta, dlen,
                             MANIFEST_MAX_ENTRIES, &text, &tlen, &got, &from,
                             &e) != 0)
      fail_msg("apply: %s", e.msg);
    assert_int_equal(tlen, vlen);
    assert_memory_equal(text, vtext, vlen);
    assert_int_equal(manifest_decode(vtext, vlen, &vdec, &e), 0);
    assert_non_null(got.span);
    assert_memory_equal(got.span, vdec.span, v.n * sizeof(*got.span));
    assert_int_equal(manifest_delta_make(&v, vid, &base, MANIFEST_MAX_TEXT,
                                         &rdelta, &rlen, &e), 0);
    if (manifest_delta_apply(&got, vid, text, tlen, rdelta, rlen,
                             MANIFEST_MAX_ENTRIES, &btext2, &b2len, &back,
                             &from2, &e) != 0)
      fail_msg("apply back: %s", e.msg);
    assert_int_equal(b2len, blen);
    assert_memory_equal(btext2, btext, blen);
    /* A base text that does not hold the spans is refused. */
    manifest_release(&back);
    free(from2);
    from2 = NULL;
    assert_int_equal(manifest_delta_apply(&got, vid, text, tlen / 2, rdelta,
                                          rlen, MANIFEST_MAX_ENTRIES,
                                          &btext2, &b2len, &back, &from2,
                                          &e), ERR_INVALID);
    assert_contains(e.msg, "does not hold its entries");
    free(btext2);
    free(rdelta);
    free(text);
    free(from);
    manifest_release(&got);
    manifest_release(&vdec);
    manifest_release(&based);
  }

  /* Against itself: no entry travels. */
  free(delta);
  assert_int_equal(manifest_delta_make(&v, vid, &v, MANIFEST_MAX_TEXT,
                                       &delta, &dlen, &e), 0);
  assert_null(memchr(delta, '{', dlen));
  if (manifest_delta_apply(&v, vid, NULL, 0, delta, dlen,
                           MANIFEST_MAX_ENTRIES, &text, &tlen, &got, &from,
                           &e) != 0)
    fail_msg("apply: %s", e.msg);
  assert_memory_equal(text, vtext, vlen);
  free(text);
  free(from);
  manifest_release(&got);
  free(delta);
  free(btext);
  free(vtext);
  manifest_release(&base);
  manifest_release(&v);
}

/* tmpl with its "%s" replaced by id and its "%zu" by n. */
static void
fill_delta(char *out, size_t cap, const char *tmpl, const char *id,
           size_t n)
{
  size_t len = 0;

  while (*tmpl != '\0' && len + 80 < cap) {
    if (strncmp(tmpl, "%s", 2) == 0) {
      len += (size_t)snprintf(out + len, cap - len, "%s", id);
      tmpl += 2;
    } else if (strncmp(tmpl, "%zu", 3) == 0) {
      len += (size_t)snprintf(out + len, cap - len, "%zu", n);
      tmpl += 3;
    } else {
      out[len++] = *tmpl++;
    }
  }
  out[len] = '\0';
}

static void
test_delta_apply_refuses_malformed_foreign_and_invalid_deltas(void **state)
{
  static const char *const bad[][2] = {
    {"", "malformed header"},
    {"tenbin-manifest-delta 1 %s\n", "malformed header"},
    {"tenbin-manifest-delta 2 %s 3\nC 3\n", "malformed header"},
    {"tenbin-manifest-delta 1 %s 3\nC 3", "malformed operation"},
    {"tenbin-manifest-delta 1 %s 3\nX 3\n", "malformed operation"},
    {"tenbin-manifest-delta 1 %s 3\nC 03\n", "malformed operation"},
    {"tenbin-manifest-delta 1 %s 3\nC 0\n", "malformed operation"},
    {"tenbin-manifest-delta 1 %s 3\nC -1\n", "malformed operation"},
    {"tenbin-manifest-delta 1 %s 4\nC 4\n", "past the base's 3 entries"},
    {"tenbin-manifest-delta 1 %s 3\nS 2\nC 2\n", "past the base's"},
    {"tenbin-manifest-delta 1 %s 2\nC 3\n", "more than the 2 entries"},
    {"tenbin-manifest-delta 1 %s 3\nC 2\n", "2 entries, not the 3"},
    /* the dir goes, its file stays */
    {"tenbin-manifest-delta 1 %s 2\nS 1\nC 2\n", "parent directory 'a'"},
    {"tenbin-manifest-delta 1 %s 3\nC 3\nN 1 99\n", "malformed operation"},
    {"tenbin-manifest-delta 1 %s 5\nC 3\nN 2 %zu\n" LIT1,
     "a run of 2 entries holds 1"},
    {"tenbin-manifest-delta 1 %s 4\nC 3\nN 1 %zu\n" LIT1 "],\"x\":[" LIT1,
     "unknown field"},
    {"tenbin-manifest-delta 1 %s 4\nN 1 %zu\n" LIT1 "C 3\n", "not sorted"},
  };
  struct manifest base, got;
  char *btext = NULL, bid[MANIFEST_ID_HEX + 1], d[1024];
  char *text = NULL;
  size_t blen, tlen;
  uint32_t *from = NULL;
  struct err e = {0};

  (void)state;
  manifest_init(&base);
  assert_int_equal(decode(DOC(DIR_A "," FILE_("a/f", 1, H0, "") ","
                              FILE_("b", 1, H1, "")), &base, &e), 0);
  assert_int_equal(manifest_encode(&base, &btext, &blen, bid, &e), 0);
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    fill_delta(d, sizeof(d), bad[i][0], bid, strlen(LIT1) +
               (strstr(bad[i][0], "\"x\"") ? strlen("],\"x\":[" LIT1) : 0));
    manifest_init(&got);
    err_clear(&e);
    if (manifest_delta_apply(&base, bid, btext, blen, d, strlen(d),
                             MANIFEST_MAX_ENTRIES, &text, &tlen, &got, &from,
                             &e) != ERR_INVALID)
      fail_msg("case %zu applied", i);
    assert_contains(e.msg, bad[i][1]);
    assert_int_equal(got.n, 0);
  }
  /* Against another base. */
  snprintf(d, sizeof(d), "tenbin-manifest-delta 1 %064d 3\nC 3\n", 7);
  assert_int_equal(manifest_delta_apply(&base, bid, btext, blen, d,
                                        strlen(d), MANIFEST_MAX_ENTRIES,
                                        &text, &tlen, &got, &from, &e),
                   ERR_INVALID);
  assert_contains(e.msg, "against 000000000000, not");
  /* More entries than the caller allows. */
  snprintf(d, sizeof(d), "tenbin-manifest-delta 1 %s 3\nC 3\n", bid);
  assert_int_equal(manifest_delta_apply(&base, bid, btext, blen, d,
                                        strlen(d), 2, &text, &tlen, &got,
                                        &from, &e),
                   ERR_INVALID);
  /* And the same delta within bounds gives the base back. */
  if (manifest_delta_apply(&base, bid, btext, blen, d, strlen(d), 3, &text,
                           &tlen, &got, &from, &e) != 0)
    fail_msg("apply: %s", e.msg);
  assert_int_equal(tlen, blen);
  assert_memory_equal(text, btext, blen);
  free(text);
  free(from);
  manifest_release(&got);
  free(btext);
  manifest_release(&base);
}

/* ---- checks file ---- */

static void
test_checks_save_and_load_round_trip(void **state)
{
  struct fx *f = *state;
  struct manifest m;
  struct manifest_checks c, back;
  char p[512];
  struct stat st;
  struct err e;

  make_small_tree(f);
  manifest_init(&m);
  manifest_checks_init(&c);
  manifest_checks_init(&back);
  assert_int_equal(scan(f, "ds", NULL, NULL, &m, &c, NULL, &e), 0);
  fx_path(f, "v.idx", p, sizeof(p));
  if (manifest_checks_save(&c, p, &e) != 0)
    fail_msg("save: %s", e.msg);
  {
    char tmp[600];

    snprintf(tmp, sizeof(tmp), "%s.tmp", p);
    assert_int_equal(stat(tmp, &st), -1); /* renamed away */
  }
  if (manifest_checks_load(p, &m, &back, &e) != 0)
    fail_msg("load: %s", e.msg);
  assert_int_equal(back.n, c.n);
  for (size_t i = 0; i < c.n; i++) {
    assert_true(back.v[i].dev == c.v[i].dev);
    assert_true(back.v[i].ino == c.v[i].ino);
    assert_true(back.v[i].size == c.v[i].size);
    assert_true(back.v[i].mtime_ns == c.v[i].mtime_ns);
    assert_true(back.v[i].ctime_ns == c.v[i].ctime_ns);
    assert_int_equal(back.v[i].nsegs, c.v[i].xxh ? c.v[i].nsegs : 0);
    if (c.v[i].xxh != NULL)
      assert_memory_equal(back.v[i].xxh, c.v[i].xxh, 16 * c.v[i].nsegs);
    else
      assert_null(back.v[i].xxh);
  }
  /* Loaded checks let a rescan reuse every hash. */
  {
    struct manifest m2;
    struct manifest_checks c2;
    struct manifest_scan_stats sst;

    manifest_init(&m2);
    manifest_checks_init(&c2);
    assert_int_equal(scan(f, "ds", &m, &back, &m2, &c2, &sst, &e), 0);
    assert_int_equal(sst.files_reused, 4);
    assert_int_equal(sst.files_hashed, 0);
    manifest_release(&m2);
    manifest_checks_release(&c2);
  }
  /* The count must agree with the manifest's. */
  {
    struct manifest m9;
    struct manifest_checks c9;

    put_file(f, "ds/zz", "z", 1);
    manifest_init(&m9);
    manifest_checks_init(&c9);
    assert_int_equal(scan(f, "ds", NULL, NULL, &m9, &c9, NULL, &e), 0);
    assert_int_equal(m9.n, 9);
    assert_int_equal(manifest_checks_load(p, &m9, &back, &e), ERR_INVALID);
    assert_contains(e.msg, "8 entries, the manifest has 9");
    assert_int_equal(back.n, 0);
    manifest_release(&m9);
    manifest_checks_release(&c9);
  }
  manifest_release(&m);
  manifest_checks_release(&c);
}

static void
test_checks_load_rejects_truncated_and_foreign_files(void **state)
{
  struct fx *f = *state;
  struct manifest m;
  struct manifest_checks c, back;
  char p[512];
  struct stat st;
  struct err e;

  make_small_tree(f);
  manifest_init(&m);
  manifest_checks_init(&c);
  manifest_checks_init(&back);
  assert_int_equal(scan(f, "ds", NULL, NULL, &m, &c, NULL, &e), 0);
  fx_path(f, "v.idx", p, sizeof(p));
  assert_int_equal(manifest_checks_save(&c, p, &e), 0);
  assert_int_equal(stat(p, &st), 0);
  /* Every shorter length is refused, not read as fewer checks. */
  for (off_t len = st.st_size - 1; len >= 0; len -= 7) {
    assert_int_equal(truncate(p, len), 0);
    err_clear(&e);
    if (manifest_checks_load(p, &m, &back, &e) != ERR_INVALID)
      fail_msg("%lld bytes accepted", (long long)len);
    assert_int_equal(back.n, 0);
  }
  put_file(f, "foreign", "{\"entries\":[],\"format\":2}", 26);
  fx_path(f, "foreign", p, sizeof(p));
  {
    struct manifest empty;

    manifest_init(&empty);
    assert_int_equal(manifest_checks_load(p, &empty, &back, &e),
                     ERR_INVALID);
    assert_contains(e.msg, "not a checks file");
    fx_path(f, "missing", p, sizeof(p));
    assert_int_equal(manifest_checks_load(p, &empty, &back, &e),
                     ERR_NOT_FOUND);
  }
  manifest_release(&m);
  manifest_checks_release(&c);
}

static void
test_checks_load_rejects_a_flipped_byte(void **state)
{
  struct fx *f = *state;
  struct manifest_checks c, back;
  struct manifest m;
  char p[512];
  struct err e;
  int fd;
  unsigned char byte;

  make_small_tree(f);
  manifest_init(&m);
  manifest_checks_init(&c);
  manifest_checks_init(&back);
  assert_int_equal(scan(f, "ds", NULL, NULL, &m, &c, NULL, &e), 0);
  fx_path(f, "v.idx", p, sizeof(p));
  assert_int_equal(manifest_checks_save(&c, p, &e), 0);
  fd = open(p, O_RDWR);
  assert_true(fd >= 0);
  assert_int_equal(pread(fd, &byte, 1, 40), 1);
  byte ^= 0x10;
  assert_int_equal(pwrite(fd, &byte, 1, 40), 1);
  close(fd);
  assert_int_equal(manifest_checks_load(p, &m, &back, &e), ERR_INVALID);
  manifest_release(&m);
  manifest_checks_release(&c);
}

int
main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(
        test_segments_give_ranges_and_per_segment_fingerprint_blocks),
    T(test_scan_lists_sorted_entries_with_their_hashes),
    T(test_scan_cuts_a_large_file_by_content_into_two_level_segments),
    T(test_first_publish_cut_in_regions_gives_the_one_chain_segments),
    T(test_rescan_after_an_insert_reuses_the_segments_it_shifted),
    T(test_rescan_of_a_touched_large_file_reuses_every_segment),
    T(test_scan_of_many_directories_is_complete_and_sorted),
    T(test_same_tree_gives_same_id_and_one_byte_changes_it),
    T(test_rescan_reuses_hashes_of_unchanged_files),
    T(test_rescan_of_moved_files_keeps_hashes_only_for_the_same_content),
    T(test_scan_refuses_a_link_pointing_outside),
    T(test_scan_refuses_an_absolute_link),
    T(test_scan_refuses_a_fifo_naming_it),
    T(test_scan_refuses_a_name_that_is_not_utf8),
    T(test_scan_refuses_a_dataset_dir_that_is_a_symlink),
    T(test_scan_of_the_root_skips_the_store),
    T(test_scan_of_changes_matches_a_full_scan),
    T(test_scan_of_a_directory_chmod_reads_nothing_beneath),
    T(test_scan_of_changes_refuses_a_list_that_missed_a_directory),
    T(test_scan_hook_sees_each_directory_listed),
    T(test_encode_is_jansson_canonical_and_round_trips),
    cmocka_unit_test(test_encode_keeps_64_bit_mtimes_as_integers),
    cmocka_unit_test(test_decode_accepts_a_minimal_valid_manifest),
    cmocka_unit_test(test_decode_rejects_each_bad_case_naming_the_entry),
    cmocka_unit_test(test_decode_errors_stay_valid_utf8_when_cut),
    cmocka_unit_test(test_decode_accepts_the_right_two_level_hash),
    cmocka_unit_test(test_decode_enforces_text_and_entry_limits),
    cmocka_unit_test(test_decode_of_many_entries_checks_every_parent),
    cmocka_unit_test(
        test_delta_rebuilds_the_version_and_maps_its_kept_entries),
    cmocka_unit_test(
        test_delta_apply_refuses_malformed_foreign_and_invalid_deltas),
    T(test_checks_save_and_load_round_trip),
    T(test_checks_load_rejects_truncated_and_foreign_files),
    T(test_checks_load_rejects_a_flipped_byte),
  };
#undef T

  return cmocka_run_group_tests(tests, NULL, NULL);
}
