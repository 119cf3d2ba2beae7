/*
 * Tests for util/mapread.c: every byte of the range handed over in
 * order, in chunks from its start, through a mapping or a buffer; a
 * short file, a file that shrinks while mapped and a failing callback
 * each end the walk with an error, and SIGBUS outside a guarded read
 * still reaches the handler that was there before.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/mapread.h"

#define MIB ((size_t)1 << 20)

struct seen {
  int fd;           /* the file, for the callback that truncates it */
  uint8_t *data;    /* what was handed over, in order */
  size_t len, calls, shrink_at, fail_at;
  size_t sizes[128]; /* each call's n */
};

static int
take(void *arg, const uint8_t *p, size_t n)
{
  struct seen *s = arg;
  volatile uint8_t sink = 0;

  if (s->calls < 128)
    s->sizes[s->calls] = n;
  s->calls++;
  if (s->calls == s->fail_at)
    return ERR_INVALID;
  if (s->calls == s->shrink_at)
    assert_int_equal(ftruncate(s->fd, 0), 0);
  /* touch every page: a page gone with the truncation raises SIGBUS */
  for (size_t i = 0; i < n; i += 4096)
    sink ^= p[i];
  (void)sink;
  memcpy(s->data + s->len, p, n);
  s->len += n;
  return 0;
}

static int
file_of(size_t n, uint8_t **content)
{
  char path[] = "/tmp/tenbin-test-mapread.XXXXXX";
  uint8_t *p = malloc(n > 0 ? n : 1);
  int fd = mkstemp(path);

  assert_true(fd >= 0);
  assert_int_equal(unlink(path), 0);
  for (size_t i = 0; i < n; i++)
    p[i] = (uint8_t)((i * 2654435761u) >> 13);
  if (n > 0)
    assert_int_equal(pwrite(fd, p, n, 0), (ssize_t)n);
  *content = p;
  return fd;
}

/* Long ranges (mapped, past one 64 MiB window) and short ones (copied),
 * at offsets that are not page aligned: the same bytes, in chunks of
 * MAPREAD_CHUNK from off, the last shorter. */
static void
test_every_byte_in_order_in_chunks_from_off(void **state)
{
  const size_t n = 70 * MIB + 12345;
  const uint64_t cases[][2] = {
      {4097, 70 * MIB}, {0, n}, {100, 200 * 1024}, {n - 10, 10}, {5, 0}};
  uint8_t *content;
  int fd = file_of(n, &content);
  struct seen s = {.fd = fd};
  struct err e = {0};

  (void)state;
  s.data = malloc(n);
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    uint64_t off = cases[c][0], len = cases[c][1];

    s.len = s.calls = 0;
    assert_int_equal(mapread(fd, off, len, take, &s, &e), 0);
    assert_int_equal(s.len, len);
    assert_memory_equal(s.data, content + off, len);
    assert_int_equal(s.calls, (len + MAPREAD_CHUNK - 1) / MAPREAD_CHUNK);
    for (size_t i = 0; i + 1 < s.calls; i++)
      assert_int_equal(s.sizes[i], MAPREAD_CHUNK);
  }
  free(s.data);
  free(content);
  close(fd);
}

static void
test_a_short_file_or_a_failing_callback_ends_the_walk(void **state)
{
  uint8_t *content;
  int fd = file_of(3 * MIB, &content);
  struct seen s = {.fd = fd, .fail_at = 2};
  struct err e = {0};

  (void)state;
  s.data = malloc(3 * MIB);
  assert_int_equal(mapread(fd, MIB, 2 * MIB + 1, take, &s, &e),
                   ERR_CONFLICT);
  assert_non_null(strstr(e.msg, "fewer than"));
  assert_int_equal(s.calls, 0);
  assert_int_equal(mapread(fd, 0, 3 * MIB, take, &s, &e), ERR_INVALID);
  assert_int_equal(s.calls, 2);
  free(s.data);
  free(content);
  close(fd);
}

/* The file cut to nothing in the middle of a mapped read: the next page
 * touched raises SIGBUS, which the guard turns into ERR_CONFLICT; the process
 * and the thread go on, and a second read works as before. */
static void
test_a_file_that_shrinks_while_mapped_is_an_error_not_a_crash(void **state)
{
  uint8_t *content;
  int fd = file_of(8 * MIB, &content);
  struct seen s = {.fd = fd, .shrink_at = 2};
  struct err e = {0};

  (void)state;
  s.data = malloc(8 * MIB);
  assert_int_equal(mapread(fd, 0, 8 * MIB, take, &s, &e), ERR_CONFLICT);
  assert_non_null(strstr(e.msg, "shrank"));
  assert_int_equal(s.calls, 2);
  assert_int_equal(pwrite(fd, content, 8 * MIB, 0), (ssize_t)(8 * MIB));
  s.shrink_at = 0;
  s.len = s.calls = 0;
  assert_int_equal(mapread(fd, 0, 8 * MIB, take, &s, &e), 0);
  assert_memory_equal(s.data, content, 8 * MIB);
  free(s.data);
  free(content);
  close(fd);
}

/* ---- SIGBUS outside a guarded read ---- */

static sigjmp_buf test_jb;
static volatile sig_atomic_t test_handler_ran;

static void
test_handler(int sig)
{
  (void)sig;
  test_handler_ran = 1;
  siglongjmp(test_jb, 1);
}

/* A handler installed first (here over the test framework's, which it
 * puts back after the test) is called for SIGBUS outside a guarded read
 * once mapread has put its own in place. */
static void
test_sigbus_outside_a_guarded_read_reaches_the_handler_before(void **state)
{
  uint8_t *content;
  int fd = file_of(MIB, &content);
  struct seen s = {.fd = fd};
  struct err e = {0};
  struct sigaction sa;
  volatile uint8_t *m;

  (void)state;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = test_handler;
  sigemptyset(&sa.sa_mask);
  assert_int_equal(sigaction(SIGBUS, &sa, NULL), 0);
  s.data = malloc(MIB);
  /* mapread's handler is in place after a mapped read */
  assert_int_equal(mapread(fd, 0, MIB, take, &s, &e), 0);
  m = mmap(NULL, MIB, PROT_READ, MAP_SHARED, fd, 0);
  assert_true(m != MAP_FAILED);
  assert_int_equal(ftruncate(fd, 0), 0);
  if (sigsetjmp(test_jb, 1) == 0)
    (void)m[MIB / 2];
  assert_int_equal(test_handler_ran, 1);
  munmap((void *)m, MIB);
  free(s.data);
  free(content);
  close(fd);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_byte_in_order_in_chunks_from_off),
      cmocka_unit_test(test_a_short_file_or_a_failing_callback_ends_the_walk),
      cmocka_unit_test(
          test_a_file_that_shrinks_while_mapped_is_an_error_not_a_crash),
      cmocka_unit_test(
          test_sigbus_outside_a_guarded_read_reaches_the_handler_before),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
