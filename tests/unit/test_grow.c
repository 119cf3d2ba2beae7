/*
 * Tests for util/grow.h: GROW makes room for at least n elements, keeps
 * what was there, doubles so that appends are amortised, and aborts
 * rather than wrap when the byte count would not fit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/grow.h"

static void
test_first_grow_allocates_at_least_the_minimum(void **state)
{
  int *v = NULL;
  size_t cap = 0;

  (void)state;
  GROW(v, 1, cap);
  assert_non_null(v);
  assert_int_equal(cap, GROW_MIN);
  GROW(v, 3 * GROW_MIN + 1, cap);
  assert_true(cap >= 3 * GROW_MIN + 1);
  free(v);
}

static void
test_grow_within_the_capacity_changes_nothing(void **state)
{
  int *v = NULL;
  int *before;
  size_t cap = 0;

  (void)state;
  GROW(v, 5, cap);
  before = v;
  GROW(v, GROW_MIN, cap);
  GROW(v, 0, cap);
  assert_ptr_equal(v, before);
  assert_int_equal(cap, GROW_MIN);
  free(v);
}

static void
test_appends_keep_their_values_and_double(void **state)
{
  int64_t *v = NULL;
  size_t cap = 0;
  size_t n = 0;
  unsigned grows = 0;
  size_t last = 0;
  size_t i;

  (void)state;
  for (i = 0; i < 10000; i++) {
    GROW(v, n + 1, cap);
    if (cap != last) {
      assert_true(last == 0 || cap == 2 * last);
      grows++;
      last = cap;
    }
    v[n++] = (int64_t)i * 3;
  }
  for (i = 0; i < n; i++)
    assert_int_equal(v[i], (int64_t)i * 3);
  /* 8, 16, ... 16384: twelve allocations for ten thousand appends. */
  assert_int_equal(grows, 12);
  free(v);
}

static void
test_a_count_whose_bytes_overflow_aborts(void **state)
{
  int status = 0;
  pid_t pid;

  (void)state;
  pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int64_t *v = NULL;
    size_t cap = 0;

    /* Keep the child's abort quiet in the test log. */
    if (freopen("/dev/null", "w", stderr) == NULL)
      _exit(2);
    /* n * 8 bytes wraps to 8: a grow that multiplied without checking
     * would hand back a tiny array. */
    GROW(v, SIZE_MAX / sizeof(*v) + 2, cap);
    _exit(v != NULL ? 0 : 1);
  }
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFSIGNALED(status));
  assert_int_equal(WTERMSIG(status), SIGABRT);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_first_grow_allocates_at_least_the_minimum),
    cmocka_unit_test(test_grow_within_the_capacity_changes_nothing),
    cmocka_unit_test(test_appends_keep_their_values_and_double),
    cmocka_unit_test(test_a_count_whose_bytes_overflow_aborts),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
