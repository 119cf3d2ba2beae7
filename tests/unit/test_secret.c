/*
 * Tests for util/secret.c: token files private to their owner, read
 * without blocking, and which hosts count as loopback.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/secret.h"

struct fx {
  char dir[64];
  char path[96];
};

static int
setup(void **state)
{
  struct fx *f = calloc(1, sizeof(*f));

  snprintf(f->dir, sizeof(f->dir), "/tmp/tenbin-secret-XXXXXX");
  if (mkdtemp(f->dir) == NULL)
    return -1;
  snprintf(f->path, sizeof(f->path), "%s/token", f->dir);
  *state = f;
  return 0;
}

static int
teardown(void **state)
{
  struct fx *f = *state;

  unlink(f->path);
  rmdir(f->dir);
  free(f);
  return 0;
}

static void
write_mode(const char *path, const char *text, mode_t mode)
{
  FILE *fp = fopen(path, "w");

  assert_non_null(fp);
  fputs(text, fp);
  assert_int_equal(fclose(fp), 0);
  assert_int_equal(chmod(path, mode), 0);
}

static void
test_private_file_gives_its_first_line_trimmed(void **state)
{
  struct fx *f = *state;
  struct err e = {0};
  char *s = NULL;
  size_t len = 0;

  write_mode(f->path, "s3cret \t\r\nsecond line\n", 0600);
  assert_int_equal(secret_read_file(f->path, SECRET_FIRST_LINE, &s, &len,
                                    &e), 0);
  assert_string_equal(s, "s3cret");
  assert_int_equal(len, 6);
  secret_free(s);
  /* Without the flag, the whole file (a PEM key). */
  assert_int_equal(secret_read_file(f->path, 0, &s, &len, &e), 0);
  assert_int_equal(len, strlen("s3cret \t\r\nsecond line\n"));
  secret_free(s);
  secret_free(NULL);
}

static void
test_file_group_or_others_may_read_or_write_is_refused(void **state)
{
  struct fx *f = *state;
  static const mode_t modes[] = {0640, 0604, 0620, 0602, 0644};
  struct err e = {0};
  char *s = NULL;
  size_t i;

  for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
    write_mode(f->path, "tok\n", modes[i]);
    assert_int_equal(secret_read_file(f->path, SECRET_FIRST_LINE, &s, NULL,
                                      &e), ERR_FORBIDDEN);
    assert_null(s);
    assert_non_null(strstr(e.msg, f->path));
    assert_non_null(strstr(e.msg, "chmod 600"));
  }
}

static void
test_missing_empty_and_fifo_are_refused_without_blocking(void **state)
{
  struct fx *f = *state;
  struct err e = {0};
  char *s = NULL;

  assert_int_equal(secret_read_file(f->path, 0, &s, NULL, &e),
                   ERR_NOT_FOUND);
  assert_non_null(strstr(e.msg, "cannot open"));
  write_mode(f->path, "\n  \n", 0600);
  assert_int_equal(secret_read_file(f->path, SECRET_FIRST_LINE, &s, NULL,
                                    &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "holds no token"));
  unlink(f->path);
  /* A fifo with no writer would block an open() for good. */
  assert_int_equal(mkfifo(f->path, 0600), 0);
  assert_int_equal(secret_read_file(f->path, 0, &s, NULL, &e), ERR_INVALID);
  assert_null(s);
}

static void
test_only_loopback_hosts_are_loopback(void **state)
{
  (void)state;
  assert_true(secret_host_is_loopback("127.0.0.1"));
  assert_true(secret_host_is_loopback("127.255.0.9"));
  assert_true(secret_host_is_loopback("[::1]"));
  assert_true(secret_host_is_loopback("::1"));
  assert_true(secret_host_is_loopback("[::ffff:127.0.0.1]"));
  assert_true(secret_host_is_loopback("LocalHost"));
  assert_false(secret_host_is_loopback("10.0.0.1"));
  assert_false(secret_host_is_loopback("128.0.0.1"));
  assert_false(secret_host_is_loopback("[2001:db8::1]"));
  assert_false(secret_host_is_loopback("127.0.0.1.example.com"));
  assert_false(secret_host_is_loopback("localhost.example.com"));
  assert_false(secret_host_is_loopback("[::1"));
  assert_false(secret_host_is_loopback(""));
  assert_false(secret_host_is_loopback(NULL));
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_private_file_gives_its_first_line_trimmed),
      T(test_file_group_or_others_may_read_or_write_is_refused),
      T(test_missing_empty_and_fifo_are_refused_without_blocking),
      cmocka_unit_test(test_only_loopback_hosts_are_loopback),
  };
#undef T

  return cmocka_run_group_tests(tests, NULL, NULL);
}
