/*
 * Tests for sync/wire.c: frames round trip with little-endian headers,
 * and a body that lies about its lengths is refused without reading
 * past its end (bodies are allocated to their exact size, so ASan
 * would see an overread).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "sync/wire.h"

/* A heap copy of exactly n bytes, so reading byte n is an ASan error. */
static uint8_t *
exact_copy(const void *p, size_t n)
{
  uint8_t *c = malloc(n > 0 ? n : 1);

  assert_non_null(c);
  if (n > 0)
    memcpy(c, p, n);
  return c;
}

static void
header(uint8_t h[WIRE_HDR_LEN], uint32_t kind, uint32_t file, uint32_t seg,
       uint32_t len)
{
  const uint32_t v[4] = {kind, file, seg, len};

  for (int i = 0; i < 4; i++) {
    h[i * 4] = (uint8_t)v[i];
    h[i * 4 + 1] = (uint8_t)(v[i] >> 8);
    h[i * 4 + 2] = (uint8_t)(v[i] >> 16);
    h[i * 4 + 3] = (uint8_t)(v[i] >> 24);
  }
}

static void
test_frames_round_trip_in_order(void **state)
{
  uint8_t sha[32];
  struct buf b;
  struct wire_frame f;
  struct err e = {0};
  size_t pos = 0;
  uint8_t *body;

  (void)state;
  memset(sha, 0xab, sizeof(sha));
  buf_init(&b, 1 << 20);
  assert_int_equal(wire_put(&b, WIRE_SIG, 7, 0, "signature", 9), 0);
  assert_int_equal(wire_put(&b, WIRE_SIGREF, 8, 0, sha, 32), 0);
  assert_int_equal(wire_put(&b, WIRE_SEG, 4000000, 65535, NULL, 0), 0);
  assert_int_equal(wire_put_header(&b, WIRE_DATA, 1, 2, 3), 0);
  assert_int_equal(buf_add(&b, "xyz", 3), 0);
  assert_int_equal(b.len, 4 * WIRE_HDR_LEN + 9 + 32 + 3);
  body = exact_copy(b.data, b.len);

  assert_int_equal(wire_next(body, b.len, &pos, &f, &e), 1);
  assert_int_equal(f.kind, WIRE_SIG);
  assert_int_equal(f.file, 7);
  assert_int_equal(f.seg, 0);
  assert_int_equal(f.len, 9);
  assert_memory_equal(f.payload, "signature", 9);
  assert_ptr_equal(f.payload, body + WIRE_HDR_LEN);

  assert_int_equal(wire_next(body, b.len, &pos, &f, &e), 1);
  assert_int_equal(f.kind, WIRE_SIGREF);
  assert_int_equal(f.file, 8);
  assert_int_equal(f.len, 32);
  assert_memory_equal(f.payload, sha, 32);

  assert_int_equal(wire_next(body, b.len, &pos, &f, &e), 1);
  assert_int_equal(f.kind, WIRE_SEG);
  assert_int_equal(f.file, 4000000);
  assert_int_equal(f.seg, 65535);
  assert_int_equal(f.len, 0);

  assert_int_equal(wire_next(body, b.len, &pos, &f, &e), 1);
  assert_int_equal(f.kind, WIRE_DATA);
  assert_int_equal(f.file, 1);
  assert_int_equal(f.seg, 2);
  assert_int_equal(f.len, 3);
  assert_memory_equal(f.payload, "xyz", 3);

  assert_int_equal(wire_next(body, b.len, &pos, &f, &e), 0);
  assert_int_equal(pos, b.len);
  /* the clean end stays the clean end */
  assert_int_equal(wire_next(body, b.len, &pos, &f, &e), 0);
  free(body);
  buf_release(&b);
}

static void
test_header_is_little_endian_whatever_the_host(void **state)
{
  static const uint8_t want[WIRE_HDR_LEN] = {
    0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
    0x09, 0x0a, 0x0b, 0x0c, 0x02, 0x00, 0x00, 0x00,
  };
  struct buf b;
  struct wire_frame f;
  struct err e = {0};
  size_t pos = 0;

  (void)state;
  buf_init(&b, 64);
  assert_int_equal(wire_put(&b, 0x04030201, 0x08070605, 0x0c0b0a09, "hi",
                            2), 0);
  assert_int_equal(b.len, WIRE_HDR_LEN + 2);
  assert_memory_equal(b.data, want, WIRE_HDR_LEN);
  /* and a hand-made header reads back the same numbers */
  assert_int_equal(wire_next(b.data, b.len, &pos, &f, &e), 1);
  assert_int_equal(f.kind, 0x04030201);
  assert_int_equal(f.file, 0x08070605);
  assert_int_equal(f.seg, 0x0c0b0a09);
  assert_int_equal(f.len, 2);
  buf_release(&b);
}

static void
test_zero_frames_is_a_clean_end(void **state)
{
  struct wire_frame f;
  struct err e = {0};
  size_t pos = 0;
  uint8_t one = 0;

  (void)state;
  assert_int_equal(wire_next(NULL, 0, &pos, &f, &e), 0);
  assert_int_equal(pos, 0);
  assert_int_equal(wire_next(&one, 0, &pos, &f, &e), 0);
  assert_int_equal(e.code, 0);
}

static void
test_truncated_header_is_invalid_naming_the_offset(void **state)
{
  uint8_t h[WIRE_HDR_LEN * 2];
  struct wire_frame f;
  struct err e = {0};
  size_t pos = 0;
  uint8_t *body;

  (void)state;
  for (size_t n = 1; n < WIRE_HDR_LEN; n++) {
    header(h, WIRE_SEG, 0, 0, 0);
    body = exact_copy(h, n);
    pos = 0;
    assert_int_equal(wire_next(body, n, &pos, &f, &e), ERR_INVALID);
    assert_int_equal(pos, 0);
    assert_non_null(strstr(e.msg, "offset 0"));
    free(body);
  }
  /* one good frame, then 5 bytes of a second header */
  header(h, WIRE_SEG, 1, 2, 0);
  header(h + WIRE_HDR_LEN, WIRE_SEG, 1, 3, 0);
  body = exact_copy(h, WIRE_HDR_LEN + 5);
  pos = 0;
  assert_int_equal(wire_next(body, WIRE_HDR_LEN + 5, &pos, &f, &e), 1);
  assert_int_equal(pos, WIRE_HDR_LEN);
  assert_int_equal(wire_next(body, WIRE_HDR_LEN + 5, &pos, &f, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "offset 16"));
  assert_int_equal(pos, WIRE_HDR_LEN);
  free(body);
}

static void
test_truncated_payload_is_invalid(void **state)
{
  uint8_t h[WIRE_HDR_LEN + 10];
  struct wire_frame f;
  struct err e = {0};
  size_t pos = 0;
  uint8_t *body;

  (void)state;
  header(h, WIRE_DATA, 0, 0, 10);
  memset(h + WIRE_HDR_LEN, 'p', 10);
  body = exact_copy(h, sizeof(h) - 1);
  assert_int_equal(wire_next(body, sizeof(h) - 1, &pos, &f, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "offset 0"));
  assert_int_equal(pos, 0);
  free(body);
  /* with every byte there, the same frame reads */
  body = exact_copy(h, sizeof(h));
  assert_int_equal(wire_next(body, sizeof(h), &pos, &f, &e), 1);
  assert_int_equal(f.len, 10);
  assert_int_equal(pos, sizeof(h));
  free(body);
}

static void
test_huge_length_claims_are_invalid_without_overflow(void **state)
{
  static const uint32_t lens[] = {0xffffffffu, 0xfffffff0u, 0x80000000u,
                                  0xffffffffu - WIRE_HDR_LEN + 1};
  uint8_t h[WIRE_HDR_LEN + 4];
  struct wire_frame f;
  struct err e = {0};
  size_t pos;
  uint8_t *body;

  (void)state;
  for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
    header(h, WIRE_SIG, 0, 0, lens[i]);
    memset(h + WIRE_HDR_LEN, 0, 4);
    body = exact_copy(h, sizeof(h));
    pos = 0;
    assert_int_equal(wire_next(body, sizeof(h), &pos, &f, &e),
                     ERR_INVALID);
    assert_int_equal(pos, 0);
    free(body);
  }
  /* a position past the end (a caller's bug) is refused, not read */
  body = exact_copy(h, sizeof(h));
  pos = SIZE_MAX - 3;
  assert_int_equal(wire_next(body, sizeof(h), &pos, &f, &e), ERR_INVALID);
  pos = sizeof(h) + 1;
  assert_int_equal(wire_next(body, sizeof(h), &pos, &f, &e), ERR_INVALID);
  free(body);
}

static void
test_put_past_the_cap_is_too_large_and_leaves_the_buffer(void **state)
{
  uint8_t payload[64];
  struct buf b;

  (void)state;
  memset(payload, 'q', sizeof(payload));
  buf_init(&b, 2 * WIRE_HDR_LEN + 10);
  assert_int_equal(wire_put(&b, WIRE_DATA, 0, 0, payload, 10), 0);
  assert_int_equal(b.len, WIRE_HDR_LEN + 10);
  /* the header would fit, the payload not: nothing is appended */
  assert_int_equal(wire_put(&b, WIRE_DATA, 0, 1, payload, 1),
                   ERR_TOO_LARGE);
  assert_int_equal(b.len, WIRE_HDR_LEN + 10);
  assert_int_equal(b.data[b.len], '\0');
  /* exactly filling the cap is fine */
  assert_int_equal(wire_put(&b, WIRE_SEG, 0, 1, NULL, 0), 0);
  assert_int_equal(b.len, b.max);
  assert_int_equal(wire_put_header(&b, WIRE_SEG, 0, 2, 0), ERR_TOO_LARGE);
  assert_int_equal(wire_put(&b, WIRE_SEG, 0, 2, NULL, 0), ERR_TOO_LARGE);
  assert_int_equal(b.len, b.max);
  buf_release(&b);
}

/* The u64 of a BLOCKS entry (a basis offset) is little-endian whatever
 * the host, and every bit survives: offsets past 4 GiB included. */
static void
test_le64_round_trips_little_endian(void **state)
{
  static const uint64_t vals[] = {0, 1, 0xff, 0x100000000ull,
                                  (uint64_t)1 << 50, 0x8000000000000001ull,
                                  UINT64_MAX};
  uint8_t p[10];

  (void)state;
  memset(p, 0xee, sizeof(p));
  wire_put_le64(p + 1, 0x0807060504030201ull);
  for (int i = 0; i < 8; i++)
    assert_int_equal(p[1 + i], i + 1);
  /* exactly 8 bytes written */
  assert_int_equal(p[0], 0xee);
  assert_int_equal(p[9], 0xee);
  assert_true(wire_get_le64(p + 1) == 0x0807060504030201ull);
  for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
    wire_put_le64(p, vals[i]);
    assert_true(wire_get_le64(p) == vals[i]);
    assert_int_equal(p[7], (uint8_t)(vals[i] >> 56));
  }
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_frames_round_trip_in_order),
    cmocka_unit_test(test_header_is_little_endian_whatever_the_host),
    cmocka_unit_test(test_le64_round_trips_little_endian),
    cmocka_unit_test(test_zero_frames_is_a_clean_end),
    cmocka_unit_test(test_truncated_header_is_invalid_naming_the_offset),
    cmocka_unit_test(test_truncated_payload_is_invalid),
    cmocka_unit_test(test_huge_length_claims_are_invalid_without_overflow),
    cmocka_unit_test(
        test_put_past_the_cap_is_too_large_and_leaves_the_buffer),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
