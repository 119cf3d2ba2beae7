/*
 * util/proc: finding a program on a PATH and reading what it prints,
 * with the limits on time and size a broken helper needs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "util/proc.h"

static void
test_find_walks_the_path_in_order(void **state)
{
  char out[256];

  (void)state;
  assert_int_equal(proc_find("/nonexistent::/bin:/usr/bin", "sh", out,
                             sizeof(out)), 0);
  assert_string_equal(out, "/bin/sh");
  assert_int_equal(proc_find("/nonexistent", "sh", out, sizeof(out)), -1);
  assert_int_equal(proc_find("", "sh", out, sizeof(out)), -1);
  /* No room for the path: not found rather than cut. */
  assert_int_equal(proc_find("/bin", "sh", out, 5), -1);
}

static void
test_capture_returns_what_the_program_printed(void **state)
{
  char *const argv[] = {"sh", "-c", "echo hello; echo oops >&2", NULL};
  struct err e = {0};
  char *out = NULL;

  (void)state;
  assert_int_equal(proc_capture("/bin/sh", argv, NULL, 10000, 1024, &out,
                                &e), 0);
  assert_string_equal(out, "hello\n");
  free(out);
}

static void
test_capture_passes_the_environment_given(void **state)
{
  char *const argv[] = {"sh", "-c", "echo \"$ONLY\"", NULL};
  char *const envp[] = {"ONLY=this", NULL};
  struct err e = {0};
  char *out = NULL;

  (void)state;
  assert_int_equal(proc_capture("/bin/sh", argv, envp, 10000, 1024, &out,
                                &e), 0);
  assert_string_equal(out, "this\n");
  free(out);
}

static void
test_a_failing_program_is_an_error_with_its_status(void **state)
{
  char *const argv[] = {"sh", "-c", "echo partial; exit 3", NULL};
  struct err e = {0};
  char *out = NULL;

  (void)state;
  assert_int_equal(proc_capture("/bin/sh", argv, NULL, 10000, 1024, &out,
                                &e), ERR_IO);
  assert_null(out);
  assert_non_null(strstr(e.msg, "failed with status 3"));
}

static void
test_too_much_output_kills_the_program(void **state)
{
  char *const argv[] = {"sh", "-c", "yes x", NULL};
  struct err e = {0};
  char *out = NULL;

  (void)state;
  assert_int_equal(proc_capture("/bin/sh", argv, NULL, 10000, 4096, &out,
                                &e), ERR_TOO_LARGE);
  assert_null(out);
  assert_non_null(strstr(e.msg, "printed more than 4096 bytes"));
}

static void
test_a_program_that_hangs_is_killed_at_the_deadline(void **state)
{
  char *const argv[] = {"sh", "-c", "exec sleep 60", NULL};
  struct err e = {0};
  char *out = NULL;

  (void)state;
  assert_int_equal(proc_capture("/bin/sh", argv, NULL, 100, 1024, &out, &e),
                   ERR_TIMEOUT);
  assert_null(out);
}

static void
test_a_missing_program_cannot_run(void **state)
{
  char *const argv[] = {"nope", NULL};
  struct err e = {0};
  char *out = NULL;

  (void)state;
  assert_int_equal(proc_capture("/nonexistent/nope", argv, NULL, 1000, 1024,
                                &out, &e), ERR_IO);
  assert_non_null(strstr(e.msg, "cannot run '/nonexistent/nope'"));
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_find_walks_the_path_in_order),
      cmocka_unit_test(test_capture_returns_what_the_program_printed),
      cmocka_unit_test(test_capture_passes_the_environment_given),
      cmocka_unit_test(test_a_failing_program_is_an_error_with_its_status),
      cmocka_unit_test(test_too_much_output_kills_the_program),
      cmocka_unit_test(test_a_program_that_hangs_is_killed_at_the_deadline),
      cmocka_unit_test(test_a_missing_program_cannot_run),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
