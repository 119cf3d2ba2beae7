/*
 * Tests for util/fileio.c: atomic writes land whole with their mode,
 * reads are capped, mkdir -p creates what is missing, a directory's
 * sync names the directory it could not sync, a file that is not a
 * regular one is refused without blocking, and a range is read in
 * order, chunk by chunk, with a short file named as changed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fileio.h"

static int
setup(void **state)
{
  char *dir = strdup("/tmp/tenbin-test-fileio.XXXXXX");

  if (dir == NULL || mkdtemp(dir) == NULL)
    return -1;
  *state = dir;
  return 0;
}

static int
teardown(void **state)
{
  char cmd[128];

  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", (char *)*state);
  free(*state);
  return system(cmd) == 0 ? 0 : -1;
}

static void
test_write_atomic_replaces_the_file_with_its_mode_and_leaves_no_temp(
    void **state)
{
  const char *dir = *state;
  char path[256];
  char *text = NULL;
  size_t len = 0;
  struct stat st;
  struct err e = {0};

  snprintf(path, sizeof(path), "%s/f", dir);
  assert_int_equal(file_write_atomic(dir, "f", "old", 3, 0600, &e), 0);
  assert_int_equal(file_write_atomic(dir, "f", "new text", 8, 0750, &e), 0);
  assert_int_equal(file_read(path, 100, &text, &len, &e), 0);
  assert_int_equal(len, 8);
  assert_string_equal(text, "new text");
  free(text);
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0750);
  {
    char cmd[300];

    snprintf(cmd, sizeof(cmd), "test $(ls -A '%s' | wc -l) -eq 1", dir);
    assert_int_equal(system(cmd), 0);
  }
}

static void
test_read_names_missing_and_too_large_files(void **state)
{
  const char *dir = *state;
  char path[256];
  char *text = NULL;
  struct err e = {0};

  snprintf(path, sizeof(path), "%s/none", dir);
  assert_int_equal(file_read(path, 10, &text, NULL, &e), ERR_NOT_FOUND);
  assert_non_null(strstr(e.msg, "none"));
  assert_int_equal(file_write_atomic(dir, "big", "0123456789ab", 12, 0644,
                                     &e), 0);
  snprintf(path, sizeof(path), "%s/big", dir);
  assert_int_equal(file_read(path, 10, &text, NULL, &e), ERR_TOO_LARGE);
  assert_null(text);
}

static void
test_mkdirs_creates_every_missing_level(void **state)
{
  const char *dir = *state;
  char path[256];
  struct stat st;
  struct err e = {0};

  snprintf(path, sizeof(path), "%s/a/b/c", dir);
  assert_int_equal(file_mkdirs(path, 0755, &e), 0);
  assert_int_equal(file_mkdirs(path, 0755, &e), 0);
  assert_int_equal(stat(path, &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  assert_int_equal(file_write_atomic(path, "x", "1", 1, 0644, &e), 0);
  snprintf(path, sizeof(path), "%s/a/b/c/x/y", dir);
  assert_int_equal(file_mkdirs(path, 0755, &e), ERR_IO);
}

static void
test_sync_dir_syncs_a_directory_and_names_one_it_cannot(void **state)
{
  const char *dir = *state;
  char path[256];
  struct err e = {0};

  assert_int_equal(file_sync_dir(dir, &e), 0);
  snprintf(path, sizeof(path), "%s/missing", dir);
  assert_int_equal(file_sync_dir(path, &e), ERR_IO);
  assert_non_null(strstr(e.msg, "missing"));
  assert_int_equal(file_write_atomic(dir, "f", "1", 1, 0644, &e), 0);
  snprintf(path, sizeof(path), "%s/f", dir);
  assert_int_equal(file_sync_dir(path, &e), ERR_IO);
}

/* A fifo where a file was expected fails at once (a blocking open would
 * hold the thread until someone writes to it), and so does a directory;
 * each error names the path and what it is. */
static void
test_open_regular_refuses_a_fifo_and_a_directory_without_blocking(
    void **state)
{
  const char *dir = *state;
  char path[256];
  char *text = NULL;
  struct err e = {0};
  int fd;

  snprintf(path, sizeof(path), "%s/fifo", dir);
  assert_int_equal(mkfifo(path, 0600), 0);
  alarm(10); /* a regression blocks: fail, do not hang */
  assert_int_equal(file_open_regular(path, O_RDONLY, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, path));
  assert_non_null(strstr(e.msg, "is a fifo, not a regular file"));
  err_clear(&e);
  assert_int_equal(file_read(path, 100, &text, NULL, &e), ERR_INVALID);
  assert_null(text);
  assert_non_null(strstr(e.msg, "is a fifo"));
  alarm(0);
  err_clear(&e);
  assert_int_equal(file_open_regular(dir, O_RDONLY, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "is a directory"));
  snprintf(path, sizeof(path), "%s/file", dir);
  assert_int_equal(file_write_atomic(dir, "file", "x", 1, 0600, &e), 0);
  fd = file_open_regular(path, O_RDONLY, &e);
  assert_true(fd >= 0);
  close(fd);
}

/* With O_NOFOLLOW a symlink is refused by name. */
static void
test_open_regular_with_nofollow_refuses_a_symlink(void **state)
{
  const char *dir = *state;
  char path[256];
  char link[256];
  struct err e = {0};

  snprintf(path, sizeof(path), "%s/file", dir);
  snprintf(link, sizeof(link), "%s/link", dir);
  assert_int_equal(file_write_atomic(dir, "file", "x", 1, 0600, &e), 0);
  assert_int_equal(symlink(path, link), 0);
  assert_int_equal(file_open_regular(link, O_RDONLY | O_NOFOLLOW, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "is a symlink"));
}

/* What the chunk walker saw: the bytes, in order, and the chunk sizes. */
struct seen {
  unsigned char bytes[64];
  size_t len;
  size_t chunks[16];
  size_t nchunks;
  int fail_at; /* the chunk whose call fails, or -1 */
};

static int
take(void *arg, const uint8_t *p, size_t n)
{
  struct seen *s = arg;

  if ((int)s->nchunks == s->fail_at)
    return ERR_INTERNAL;
  memcpy(s->bytes + s->len, p, n);
  s->len += n;
  s->chunks[s->nchunks++] = n;
  return 0;
}

static int
open_counting_file(const char *dir, size_t n)
{
  char path[256];
  unsigned char data[64];
  struct err e = {0};

  for (size_t i = 0; i < n; i++)
    data[i] = (unsigned char)i;
  snprintf(path, sizeof(path), "%s/data", dir);
  assert_int_equal(file_write_atomic(dir, "data", data, n, 0600, &e), 0);
  return open(path, O_RDONLY);
}

static void
test_read_chunks_hands_the_range_over_in_order_in_buffer_sized_pieces(
    void **state)
{
  struct seen s = {.fail_at = -1};
  uint8_t buf[8];
  struct err e = {0};
  int fd = open_counting_file(*state, 40);

  assert_true(fd >= 0);
  assert_int_equal(file_read_chunks(fd, 3, 20, buf, sizeof(buf), take, &s,
                                    &e), 0);
  assert_int_equal(s.len, 20);
  for (size_t i = 0; i < 20; i++)
    assert_int_equal(s.bytes[i], 3 + i);
  assert_int_equal(s.nchunks, 3);
  assert_int_equal(s.chunks[0], 8);
  assert_int_equal(s.chunks[2], 4);
  close(fd);
}

static void
test_read_chunks_names_a_file_shorter_than_the_range_as_changed(
    void **state)
{
  struct seen s = {.fail_at = -1};
  uint8_t buf[8];
  struct err e = {0};
  int fd = open_counting_file(*state, 10);

  assert_true(fd >= 0);
  assert_int_equal(file_read_chunks(fd, 4, 20, buf, sizeof(buf), take, &s,
                                    &e), ERR_CONFLICT);
  assert_non_null(strstr(e.msg, "file ends at offset 10"));
  assert_int_equal(s.len, 0); /* the short chunk is never handed over */
  close(fd);
}

static void
test_read_chunks_stops_at_the_callers_error(void **state)
{
  struct seen s = {.fail_at = 1};
  uint8_t buf[8];
  struct err e = {0};
  int fd = open_counting_file(*state, 40);

  assert_true(fd >= 0);
  assert_int_equal(file_read_chunks(fd, 0, 40, buf, sizeof(buf), take, &s,
                                    &e), ERR_INTERNAL);
  assert_int_equal(s.nchunks, 1);
  assert_int_equal(file_read_chunks(-1, 0, 40, buf, sizeof(buf), take, &s,
                                    &e), ERR_IO);
  assert_non_null(strstr(e.msg, "read at offset 0"));
  close(fd);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          test_write_atomic_replaces_the_file_with_its_mode_and_leaves_no_temp,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_read_names_missing_and_too_large_files, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_open_regular_refuses_a_fifo_and_a_directory_without_blocking,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_open_regular_with_nofollow_refuses_a_symlink, setup,
          teardown),
      cmocka_unit_test_setup_teardown(test_mkdirs_creates_every_missing_level,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_sync_dir_syncs_a_directory_and_names_one_it_cannot, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_read_chunks_hands_the_range_over_in_order_in_buffer_sized_pieces,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_read_chunks_names_a_file_shorter_than_the_range_as_changed,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_read_chunks_stops_at_the_callers_error, setup, teardown),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
