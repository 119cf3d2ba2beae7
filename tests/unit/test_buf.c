/*
 * Tests for util/buf.c: the capped buffer keeps its cap, stays unchanged
 * when an append would pass it, and hands its contents over cleanly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "util/buf.h"

static void
test_new_buffer_is_empty_string(void **state)
{
  struct buf b;

  (void)state;
  buf_init(&b, 16);
  assert_int_equal(b.len, 0);
  assert_string_equal(buf_str(&b), "");
  buf_release(&b);
}

static void
test_add_appends_and_keeps_a_terminating_nul(void **state)
{
  struct buf b;

  (void)state;
  buf_init(&b, 64);
  assert_int_equal(buf_add(&b, "abc", 3), 0);
  assert_int_equal(buf_adds(&b, "def"), 0);
  assert_int_equal(buf_addf(&b, "-%d-%s", 42, "x"), 0);
  assert_int_equal(b.len, 11);
  assert_string_equal(buf_str(&b), "abcdef-42-x");
  assert_int_equal(b.data[b.len], '\0');
  buf_release(&b);
}

static void
test_binary_data_with_nul_bytes_is_counted(void **state)
{
  struct buf b;

  (void)state;
  buf_init(&b, 64);
  assert_int_equal(buf_add(&b, "a\0b", 3), 0);
  assert_int_equal(b.len, 3);
  assert_memory_equal(b.data, "a\0b", 4);
  buf_release(&b);
}

static void
test_filling_exactly_to_the_cap_is_allowed(void **state)
{
  struct buf b;

  (void)state;
  buf_init(&b, 8);
  assert_int_equal(buf_adds(&b, "12345678"), 0);
  assert_int_equal(b.len, 8);
  assert_int_equal(buf_add(&b, "", 0), 0);
  buf_release(&b);
}

static void
test_add_past_the_cap_fails_and_leaves_the_buffer_unchanged(void **state)
{
  struct buf b;

  (void)state;
  buf_init(&b, 8);
  assert_int_equal(buf_adds(&b, "12345"), 0);
  assert_int_equal(buf_adds(&b, "6789"), ERR_TOO_LARGE);
  assert_int_equal(b.len, 5);
  assert_string_equal(buf_str(&b), "12345");
  assert_int_equal(buf_add(&b, "x", (size_t)-1), ERR_TOO_LARGE);
  assert_int_equal(b.len, 5);
  assert_string_equal(buf_str(&b), "12345");
  buf_release(&b);
}

static void
test_addf_past_the_cap_fails_and_leaves_the_buffer_unchanged(void **state)
{
  struct buf b;

  (void)state;
  buf_init(&b, 8);
  assert_int_equal(buf_addf(&b, "%s", "abc"), 0);
  assert_int_equal(buf_addf(&b, "%d", 123456), ERR_TOO_LARGE);
  assert_int_equal(b.len, 3);
  assert_string_equal(buf_str(&b), "abc");
  buf_release(&b);
}

static void
test_first_add_past_the_cap_leaves_nothing_allocated(void **state)
{
  struct buf b;

  (void)state;
  buf_init(&b, 2);
  assert_int_equal(buf_adds(&b, "abc"), ERR_TOO_LARGE);
  assert_null(b.data);
  assert_string_equal(buf_str(&b), "");
  buf_release(&b);
}

static void
test_buffer_grows_over_many_appends(void **state)
{
  struct buf b;
  int i;

  (void)state;
  buf_init(&b, 1 << 20);
  for (i = 0; i < 10000; i++)
    assert_int_equal(buf_adds(&b, "0123456789"), 0);
  assert_int_equal(b.len, 100000);
  assert_true(b.cap > b.len);
  assert_memory_equal(b.data + 99990, "0123456789", 11);
  buf_release(&b);
}

static void
test_take_hands_over_the_contents_and_resets(void **state)
{
  struct buf b;
  size_t len = 0;
  char *s;

  (void)state;
  buf_init(&b, 64);
  assert_int_equal(buf_adds(&b, "hello"), 0);
  s = buf_take(&b, &len);
  assert_string_equal(s, "hello");
  assert_int_equal(len, 5);
  assert_null(b.data);
  assert_int_equal(b.len, 0);
  assert_int_equal(b.cap, 0);
  /* The cap survives, and the buffer is usable again. */
  assert_int_equal(buf_adds(&b, "again"), 0);
  assert_string_equal(buf_str(&b), "again");
  free(s);
  buf_release(&b);
}

static void
test_take_of_an_empty_buffer_gives_an_empty_string(void **state)
{
  struct buf b;
  char *s;

  (void)state;
  buf_init(&b, 64);
  s = buf_take(&b, NULL);
  assert_non_null(s);
  assert_string_equal(s, "");
  free(s);
}

static void
test_reset_empties_but_keeps_the_allocation(void **state)
{
  struct buf b;
  char *data;

  (void)state;
  buf_init(&b, 64);
  assert_int_equal(buf_adds(&b, "content"), 0);
  data = b.data;
  buf_reset(&b);
  assert_int_equal(b.len, 0);
  assert_string_equal(buf_str(&b), "");
  assert_ptr_equal(b.data, data);
  assert_int_equal(buf_adds(&b, "new"), 0);
  assert_string_equal(buf_str(&b), "new");
  buf_release(&b);
}

static void
test_reset_of_a_fresh_buffer_is_harmless(void **state)
{
  struct buf b;

  (void)state;
  buf_init(&b, 64);
  buf_reset(&b);
  assert_null(b.data);
  buf_release(&b);
}

static void
test_release_is_null_safe_and_leaves_a_reusable_buffer(void **state)
{
  struct buf b;

  (void)state;
  buf_release(NULL);
  buf_init(&b, 4);
  assert_int_equal(buf_adds(&b, "abcd"), 0);
  buf_release(&b);
  assert_null(b.data);
  assert_int_equal(b.len, 0);
  assert_int_equal(buf_adds(&b, "wxyz"), 0);
  assert_int_equal(buf_adds(&b, "!"), ERR_TOO_LARGE);
  buf_release(&b);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_new_buffer_is_empty_string),
    cmocka_unit_test(test_add_appends_and_keeps_a_terminating_nul),
    cmocka_unit_test(test_binary_data_with_nul_bytes_is_counted),
    cmocka_unit_test(test_filling_exactly_to_the_cap_is_allowed),
    cmocka_unit_test(
        test_add_past_the_cap_fails_and_leaves_the_buffer_unchanged),
    cmocka_unit_test(
        test_addf_past_the_cap_fails_and_leaves_the_buffer_unchanged),
    cmocka_unit_test(test_first_add_past_the_cap_leaves_nothing_allocated),
    cmocka_unit_test(test_buffer_grows_over_many_appends),
    cmocka_unit_test(test_take_hands_over_the_contents_and_resets),
    cmocka_unit_test(test_take_of_an_empty_buffer_gives_an_empty_string),
    cmocka_unit_test(test_reset_empties_but_keeps_the_allocation),
    cmocka_unit_test(test_reset_of_a_fresh_buffer_is_harmless),
    cmocka_unit_test(
        test_release_is_null_safe_and_leaves_a_reusable_buffer),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
