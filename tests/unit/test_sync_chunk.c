/*
 * Tests for sync/chunk.c: segment ends follow the rule written in
 * chunk.h (checked against a byte-at-a-time reference of that rule),
 * depend only on the bytes from the segment's start, never fall before
 * MIN or after MAX, and are pinned for a fixed input: they are part of
 * manifest format 2, so a changed table or rule must fail here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sync/chunk.h"
#include "tests/unit/seeded_bytes.h"

#define MIB ((size_t)1 << 20)
#define BUFLEN ((size_t)64 << 10) /* the least chunk_cut accepts */

/* ---- helpers ---- */

/* An unlinked temporary file holding n bytes of p; its fd. */
static int
file_with(const void *p, size_t n)
{
  char path[] = "/tmp/tenbin-chunk-XXXXXX";
  int fd = mkstemp(path);

  assert_true(fd >= 0);
  assert_int_equal(unlink(path), 0);
  if (n > 0)
    assert_int_equal(pwrite(fd, p, n, 0), (ssize_t)n);
  return fd;
}

/*
 * The rule of chunk.h, written out independently: the gear table is
 * splitmix64 from "tenbin-1"; a segment from s ends at the first e in
 * (s + MIN, s + MAX] where the top CHUNK_BITS bits of the gear hash of
 * the bytes [s + MIN - 64, e) are zero, else s + MAX, else at the end.
 */
static uint64_t ref_gear[256];

static void
ref_init(void)
{
  uint64_t x = 0x74656e62696e2d31ull; /* "tenbin-1" */

  for (int i = 0; i < 256; i++) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    ref_gear[i] = z ^ (z >> 31);
  }
}

static uint64_t
ref_cut(const uint8_t *p, uint64_t size, uint64_t s)
{
  uint64_t limit = size - s > CHUNK_MAX ? s + CHUNK_MAX : size, h = 0;

  if (size - s <= CHUNK_MIN)
    return size;
  for (uint64_t i = s + CHUNK_MIN - CHUNK_WINDOW; i < limit; i++) {
    h = (h << 1) + ref_gear[p[i]];
    if (i >= s + CHUNK_MIN && (h >> (64 - CHUNK_BITS)) == 0)
      return i + 1;
  }
  return limit;
}

/* The segment ends of the whole file at fd (size bytes) into ends; the
 * count. */
static size_t
cut_all(int fd, uint64_t size, uint64_t *ends, size_t cap)
{
  uint8_t *buf = malloc(BUFLEN);
  uint64_t off = 0;
  size_t n = 0;

  assert_non_null(buf);
  while (off < size) {
    uint64_t end = 0;

    assert_int_equal(chunk_cut(fd, off, size, buf, BUFLEN, &end), 0);
    assert_true(end > off && end <= size);
    assert_true(n < cap);
    ends[n++] = end;
    off = end;
  }
  free(buf);
  return n;
}

/* The first candidate in p[0..n) fed from a fresh hash, or 0. */
static size_t
first_candidate(const uint8_t *p, size_t n)
{
  uint64_t h = 0;

  return chunk_scan(&h, p, n);
}

/* ---- the rule ---- */

/*
 * Over 60 MiB of random bytes every end is the reference's, no segment
 * is shorter than MIN (bar the last) or longer than MAX, and the rule
 * was tested where it matters: some segment had a candidate in its
 * first MIN bytes that was passed over.
 */
static void
test_cuts_follow_the_rule_and_stay_within_min_and_max(void **state)
{
  const size_t n = 60 * MIB;
  uint8_t *data = malloc(n);
  uint64_t ends[16], off = 0;
  size_t nends, skipped = 0;
  int fd;

  (void)state;
  assert_non_null(data);
  ref_init();
  fill_random(data, n, 7);
  fd = file_with(data, n);
  nends = cut_all(fd, n, ends, 16);
  assert_true(nends >= 3);
  for (size_t k = 0; k < nends; k++) {
    uint64_t len = ends[k] - off;
    size_t early = first_candidate(data + off, ends[k] - off);

    assert_true(ends[k] == ref_cut(data, n, off));
    assert_true(len <= CHUNK_MAX);
    if (k + 1 < nends)
      assert_true(len > CHUNK_MIN);
    if (early >= CHUNK_WINDOW && early <= CHUNK_MIN)
      skipped++;
    off = ends[k];
  }
  assert_true(ends[nends - 1] == n);
  assert_true(skipped > 0);
  close(fd);
  free(data);
}

/* At the edge: a candidate exactly MIN bytes after a segment's start is
 * passed over; one a byte later is where the segment ends. */
static void
test_a_candidate_at_min_is_passed_over_one_byte_later_cuts(void **state)
{
  const size_t n = 40 * MIB;
  uint8_t *data = malloc(n), *buf = malloc(BUFLEN);
  uint64_t h = 0, end = 0;
  size_t p = 0, hit;
  int fd;

  (void)state;
  assert_non_null(data);
  assert_non_null(buf);
  fill_random(data, n, 5);
  /* a candidate (a cut right after byte p - 1) past MIN + 64 */
  do {
    hit = chunk_scan(&h, data + p, n - p);
    assert_true(hit > 0);
    p += hit;
  } while (p <= CHUNK_MIN + CHUNK_WINDOW);
  fd = file_with(data, n);
  assert_int_equal(chunk_cut(fd, p - CHUNK_MIN - 1, n, buf, BUFLEN, &end),
                   0);
  assert_true(end == p);
  assert_int_equal(chunk_cut(fd, p - CHUNK_MIN, n, buf, BUFLEN, &end), 0);
  assert_true(end > p);
  close(fd);
  free(buf);
  free(data);
}

/* Bytes with no candidate anywhere (a constant) are cut every MAX, and
 * the rest of the file is the last segment. */
static void
test_without_a_candidate_segments_are_max_long(void **state)
{
  const uint64_t size = 2 * CHUNK_MAX + 6 * MIB;
  uint64_t ends[8];
  size_t nends;
  int fd = file_with(NULL, 0);

  (void)state;
  assert_int_equal(ftruncate(fd, (off_t)size), 0); /* all zero bytes */
  nends = cut_all(fd, size, ends, 8);
  assert_int_equal(nends, 3);
  assert_true(ends[0] == CHUNK_MAX);
  assert_true(ends[1] == 2 * CHUNK_MAX);
  assert_true(ends[2] == size);
  close(fd);
}

/* A rest of at most MIN bytes is one segment whatever its content; one
 * byte more may only end at the file's end. */
static void
test_a_rest_of_at_most_min_bytes_is_one_segment(void **state)
{
  const size_t n = CHUNK_MIN + 1;
  uint8_t *data = malloc(n), *buf = malloc(BUFLEN);
  uint64_t end = 0;
  int fd;

  (void)state;
  assert_non_null(data);
  assert_non_null(buf);
  fill_random(data, n, 3);
  fd = file_with(data, n);
  assert_int_equal(chunk_cut(fd, 0, CHUNK_MIN, buf, BUFLEN, &end), 0);
  assert_true(end == CHUNK_MIN);
  assert_int_equal(chunk_cut(fd, 1, n, buf, BUFLEN, &end), 0);
  assert_true(end == n);
  assert_int_equal(chunk_cut(fd, n - 1, n, buf, BUFLEN, &end), 0);
  assert_true(end == n);
  assert_int_equal(chunk_cut(fd, 0, n, buf, BUFLEN, &end), 0);
  assert_true(end == n);
  close(fd);
  free(buf);
  free(data);
}

/*
 * The same bytes behind a prefix of another length are cut at the same
 * places relative to where they start: the ends depend on content, not
 * on file offsets (what lets an insert move only its own segment).
 */
static void
test_the_same_bytes_elsewhere_are_cut_at_the_same_places(void **state)
{
  const size_t n = 48 * MIB, pre = 12345;
  uint8_t *data = malloc(pre + n);
  uint64_t a[16], b[16], off = pre;
  size_t na, nb;
  int fa, fb;
  uint8_t *buf = malloc(BUFLEN);

  (void)state;
  assert_non_null(data);
  assert_non_null(buf);
  fill_random(data, pre, 11);
  fill_random(data + pre, n, 12);
  fa = file_with(data + pre, n);
  fb = file_with(data, pre + n);
  na = cut_all(fa, n, a, 16);
  assert_true(na >= 2);
  nb = 0;
  while (off < pre + n) {
    assert_int_equal(chunk_cut(fb, off, pre + n, buf, BUFLEN, &b[nb]), 0);
    off = b[nb++];
  }
  assert_int_equal(nb, na);
  for (size_t k = 0; k < na; k++)
    assert_true(b[k] - pre == a[k]);
  /* and the buffer's length does not matter either */
  {
    uint8_t *big = malloc(3 * BUFLEN + 17);
    uint64_t end = 0;

    assert_non_null(big);
    assert_int_equal(chunk_cut(fa, 0, n, big, 3 * BUFLEN + 17, &end), 0);
    assert_true(end == a[0]);
    free(big);
  }
  close(fa);
  close(fb);
  free(buf);
  free(data);
}

/* chunk_scan over pieces finds the candidate it finds over the whole,
 * with the same hash after it, and 0 (all consumed) before it. */
static void
test_scan_in_pieces_finds_the_candidate_of_the_whole(void **state)
{
  const size_t n = 40 * MIB;
  static const size_t pieces[] = {1, 7, 4096, 65536 + 3, MIB - 1, 63};
  uint8_t *data = malloc(n);
  uint64_t hw = 0, hp = 0;
  size_t whole, second, at = 0, k = 0;

  (void)state;
  assert_non_null(data);
  ref_init();
  fill_random(data, n, 5);
  whole = chunk_scan(&hw, data, n);
  assert_true(whole > 0);
  /* a candidate is where the gear hash's top bits are zero */
  assert_int_equal(hw >> (64 - CHUNK_BITS), 0);
  for (;;) {
    size_t len = pieces[k++ % (sizeof(pieces) / sizeof(pieces[0]))];
    size_t hit;

    assert_true(at + len <= n);
    hit = chunk_scan(&hp, data + at, len);
    if (hit != 0) {
      assert_true(at + hit == whole);
      break;
    }
    at += len;
    assert_true(at < whole);
  }
  assert_true(hp == hw);
  /* going on from the candidate finds the next one, as from scratch
   * fed with the same 64 bytes of history */
  second = chunk_scan(&hw, data + whole, n - whole);
  assert_true(second > 0);
  {
    uint64_t h = 0;
    size_t from = whole - CHUNK_WINDOW, skip;

    /* only the last 64 bytes count: prime a fresh hash with them */
    for (skip = 0; skip < CHUNK_WINDOW; skip++)
      h = (h << 1) + ref_gear[data[from + skip]];
    assert_true(chunk_scan(&h, data + whole, n - whole) == second);
  }
  /* no candidate: 0, and the hash is that of all the bytes */
  {
    uint64_t h1 = 0, h2 = 0;

    assert_int_equal(chunk_scan(&h1, data, whole - 1), 0);
    for (size_t i = 0; i < whole - 1; i++)
      h2 = (h2 << 1) + ref_gear[data[i]];
    assert_true(h1 == h2);
  }
  free(data);
}

/*
 * Known ends for a fixed input, computed once with this code: they pin
 * the gear table and the rule, which are manifest format 2 (every agent
 * must cut the same bytes the same way, or no segment is ever reused).
 * A change here needs a new manifest format.
 */
static void
test_cut_positions_are_pinned_by_the_format(void **state)
{
  /* computed with sync/chunk.c when format 2 was made; never edit
   * them to make this pass */
  static const uint64_t want[] = {4587239,  8914260,  13332760, 17529551,
                                  23553359, 38189996, 42603308, 54268690,
                                  60176357, 67108864};
  const size_t n = 64 * MIB;
  uint8_t *data = malloc(n);
  uint64_t ends[16];
  size_t nends;
  int fd;

  (void)state;
  assert_non_null(data);
  fill_random(data, n, 2024);
  fd = file_with(data, n);
  nends = cut_all(fd, n, ends, 16);
  assert_int_equal(nends, sizeof(want) / sizeof(want[0]));
  for (size_t k = 0; k < nends; k++)
    assert_true(ends[k] == want[k]);
  /* the first candidate is past MIN: the first cut */
  assert_int_equal(first_candidate(data, n), 4587239);
  close(fd);
  free(data);
}

/* A read error is its errno; a file shorter than the size claimed is
 * -1 (a short read), never an end past the data. */
static void
test_read_errors_are_reported(void **state)
{
  const size_t n = CHUNK_MIN + MIB;
  uint8_t *data = malloc(n), *buf = malloc(BUFLEN);
  uint64_t end = 12345;
  int fd;

  (void)state;
  assert_non_null(data);
  assert_non_null(buf);
  memset(data, 0, n);
  fd = file_with(data, n);
  assert_int_equal(chunk_cut(fd, 0, n + 4 * MIB, buf, BUFLEN, &end), -1);
  assert_true(end == 12345);
  close(fd);
  assert_int_equal(chunk_cut(fd, 0, n, buf, BUFLEN, &end), EBADF);
  free(buf);
  free(data);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_cuts_follow_the_rule_and_stay_within_min_and_max),
    cmocka_unit_test(
        test_a_candidate_at_min_is_passed_over_one_byte_later_cuts),
    cmocka_unit_test(test_without_a_candidate_segments_are_max_long),
    cmocka_unit_test(test_a_rest_of_at_most_min_bytes_is_one_segment),
    cmocka_unit_test(
        test_the_same_bytes_elsewhere_are_cut_at_the_same_places),
    cmocka_unit_test(test_scan_in_pieces_finds_the_candidate_of_the_whole),
    cmocka_unit_test(test_cut_positions_are_pinned_by_the_format),
    cmocka_unit_test(test_read_errors_are_reported),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
