/*
 * Tests for util/strv.c: NULL-terminated string vectors, where a NULL
 * vector is an empty one and every string is a copy the vector owns.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>

#include "util/strv.h"

static void
test_strv_push_dup_len_and_free(void **state)
{
  char **v = NULL;
  char **copy;
  char arg[8] = "abc";

  (void)state;
  assert_int_equal(strv_len(NULL), 0);
  assert_null(strv_dup(NULL));
  strv_free(NULL);
  strv_push(&v, arg);
  arg[0] = 'X'; /* push copied it */
  strv_push(&v, "def");
  assert_int_equal(strv_len(v), 2);
  assert_string_equal(v[0], "abc");
  assert_null(v[2]);
  copy = strv_dup(v);
  assert_true(copy != v && copy[0] != v[0]);
  assert_string_equal(copy[1], "def");
  assert_null(copy[2]);
  strv_free(v);
  strv_free(copy);
}

static void
test_contains_compares_whole_strings_and_takes_null(void **state)
{
  char **v = NULL;

  (void)state;
  assert_false(strv_contains(NULL, "a"));
  strv_push(&v, "abc");
  strv_push(&v, "");
  assert_true(strv_contains(v, "abc"));
  assert_true(strv_contains(v, ""));
  assert_false(strv_contains(v, "ab"));
  assert_false(strv_contains(v, "abcd"));
  strv_free(v);
}

static void
test_an_empty_vector_copies_to_an_empty_vector(void **state)
{
  char **empty = calloc(1, sizeof(*empty));
  char **copy;

  (void)state;
  assert_non_null(empty);
  copy = strv_dup(empty);
  assert_non_null(copy); /* empty, not absent */
  assert_null(copy[0]);
  assert_int_equal(strv_len(copy), 0);
  strv_free(copy);
  strv_free(empty);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_strv_push_dup_len_and_free),
    cmocka_unit_test(test_contains_compares_whole_strings_and_takes_null),
    cmocka_unit_test(test_an_empty_vector_copies_to_an_empty_vector),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
