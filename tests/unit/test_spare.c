/*
 * Tests for util/spare.c: freed large blocks come back, within the bound,
 * resized rather than hoarded, and go away when idle or disabled.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "util/spare.h"

#define MIB ((size_t)1 << 20)

static int
teardown(void **state)
{
  (void)state;
  spare_enable(0);
  return 0;
}

static void
test_disabled_cache_keeps_nothing(void **state)
{
  size_t got = 0;
  void *p;

  (void)state;
  spare_enable(0);
  p = spare_alloc(2 * MIB, &got);
  assert_true(got >= 2 * MIB);
  memset(p, 1, got);
  spare_free(p);
  assert_int_equal(spare_bytes(), 0);
}

static void
test_freed_large_block_is_handed_out_again(void **state)
{
  size_t got = 0;
  char *p, *q;

  (void)state;
  spare_enable(64 * MIB);
  p = spare_alloc(4 * MIB, &got);
  memset(p, 7, 4 * MIB);
  spare_free(p);
  assert_int_equal(spare_bytes(), got);
  q = spare_alloc(3 * MIB, NULL);
  assert_ptr_equal(q, p);
  assert_int_equal(q[4 * MIB - 1], 7); /* the same pages, not new ones */
  assert_int_equal(spare_bytes(), 0);
  spare_free(q);
}

static void
test_small_blocks_are_never_kept(void **state)
{
  (void)state;
  spare_enable(64 * MIB);
  spare_free(malloc(SPARE_MIN / 2));
  spare_free(spare_alloc(100, NULL));
  spare_free(NULL);
  assert_int_equal(spare_bytes(), 0);
}

static void
test_blocks_past_the_bound_are_freed_not_kept(void **state)
{
  void *v[4];

  (void)state;
  spare_enable(5 * MIB);
  for (int i = 0; i < 4; i++)
    v[i] = spare_alloc(2 * MIB, NULL);
  for (int i = 0; i < 4; i++)
    spare_free(v[i]);
  /* two of a bit over 2 MiB fit under 5 MiB, a third would not */
  assert_true(spare_bytes() >= 4 * MIB);
  assert_true(spare_bytes() <= 5 * MIB);
}

static void
test_kept_block_of_another_size_is_resized_not_hoarded(void **state)
{
  size_t got = 0;
  char *p, *q;

  (void)state;
  spare_enable(64 * MIB);
  p = spare_alloc(2 * MIB, NULL);
  memset(p, 3, 2 * MIB);
  spare_free(p);
  /* too small for 16 MiB: realloc'd to it, contents kept */
  q = spare_alloc(16 * MIB, &got);
  assert_true(got >= 16 * MIB);
  assert_int_equal(spare_bytes(), 0);
  assert_int_equal(q[2 * MIB - 1], 3);
  spare_free(q);
  /* far too big for 1 MiB: shrunk to it */
  q = spare_alloc(MIB, &got);
  assert_true(got >= MIB);
  assert_true(got <= 2 * MIB + SPARE_MIN);
  assert_int_equal(spare_bytes(), 0);
  spare_free(q);
}

static void
test_trim_frees_blocks_idle_longer_than_asked(void **state)
{
  (void)state;
  spare_enable(64 * MIB);
  spare_free(spare_alloc(2 * MIB, NULL));
  spare_trim(60 * 1000, 0);
  assert_true(spare_bytes() >= 2 * MIB); /* kept just now */
  spare_trim(0, 0);
  assert_int_equal(spare_bytes(), 0);
  spare_free(spare_alloc(2 * MIB, NULL));
  spare_enable(0); /* disabling gives them back too */
  assert_int_equal(spare_bytes(), 0);
}

static void
test_trim_keeps_the_newest_blocks_up_to_the_floor(void **state)
{
  char *old, *mid, *newest;
  size_t got_old, got_mid, got_new;

  (void)state;
  spare_enable(64 * MIB);
  old = spare_alloc(3 * MIB, &got_old);
  mid = spare_alloc(5 * MIB, &got_mid);
  newest = spare_alloc(2 * MIB, &got_new);
  memset(newest, 9, 2 * MIB);
  spare_free(old);
  spare_free(mid);
  spare_free(newest);
  assert_int_equal(spare_bytes(), got_old + got_mid + got_new);
  /* idle, all three; the floor holds the newest and the one before */
  spare_trim(0, got_new + got_mid);
  assert_int_equal(spare_bytes(), got_new + got_mid);
  /* a floor smaller than the newest block keeps none */
  spare_trim(0, got_new - 1);
  assert_int_equal(spare_bytes(), 0);
  /* blocks not idle yet stay whatever the floor */
  spare_free(spare_alloc(2 * MIB, NULL));
  spare_trim(60 * 1000, 0);
  assert_true(spare_bytes() >= 2 * MIB);
}

static void
test_buf_first_large_size_is_exact_and_released_into_the_cache(void **state)
{
  struct buf b;

  (void)state;
  spare_enable(64 * MIB);
  buf_init(&b, 64 * MIB);
  assert_int_equal(buf_grow(&b, 3 * MIB), 0);
  assert_true(b.cap >= 3 * MIB + 1);
  assert_true(b.cap < 4 * MIB);
  assert_string_equal(buf_str(&b), "");
  assert_int_equal(buf_add(&b, "abc", 3), 0);
  assert_string_equal(buf_str(&b), "abc");
  assert_int_equal(buf_grow(&b, 65 * MIB), ERR_TOO_LARGE);
  buf_release(&b);
  assert_true(spare_bytes() >= 3 * MIB);
  assert_int_equal(buf_grow(&b, 3 * MIB), 0);
  assert_int_equal(spare_bytes(), 0); /* the kept block again */
  buf_release(&b);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_disabled_cache_keeps_nothing, teardown),
      cmocka_unit_test_teardown(test_freed_large_block_is_handed_out_again,
                                teardown),
      cmocka_unit_test_teardown(test_small_blocks_are_never_kept, teardown),
      cmocka_unit_test_teardown(
          test_trim_keeps_the_newest_blocks_up_to_the_floor, teardown),
      cmocka_unit_test_teardown(
          test_blocks_past_the_bound_are_freed_not_kept, teardown),
      cmocka_unit_test_teardown(
          test_kept_block_of_another_size_is_resized_not_hoarded, teardown),
      cmocka_unit_test_teardown(
          test_trim_frees_blocks_idle_longer_than_asked, teardown),
      cmocka_unit_test_teardown(
          test_buf_first_large_size_is_exact_and_released_into_the_cache,
          teardown),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
