/*
 * Tests for agent/reserve.c: files made ahead of time are moved into
 * place, never over an existing name, never when something else shares
 * them or wrote into them; an empty or unusable reserve falls back to
 * creating; what a previous run left is used again.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/reserve.h"

struct fixture {
  char dir[64];      /* mkdtemp */
  char res[128];     /* dir/reserve */
  char out[128];     /* dir/out: where files are taken to */
  int outfd;
  struct reserve *r;
};

static const atomic_int go = 0;

static int
setup(void **state)
{
  struct fixture *t = calloc(1, sizeof(*t));
  struct err e = {0};

  assert_non_null(t);
  snprintf(t->dir, sizeof(t->dir), "/tmp/tenbin-reserve-XXXXXX");
  assert_non_null(mkdtemp(t->dir));
  snprintf(t->res, sizeof(t->res), "%s/reserve", t->dir);
  snprintf(t->out, sizeof(t->out), "%s/out", t->dir);
  assert_int_equal(mkdir(t->out, 0755), 0);
  t->outfd = open(t->out, O_RDONLY | O_DIRECTORY);
  assert_true(t->outfd >= 0);
  assert_int_equal(reserve_open(t->res, &t->r, &e), 0);
  *state = t;
  return 0;
}

static int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *f)
{
  (void)st;
  (void)f;
  return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static int
teardown(void **state)
{
  struct fixture *t = *state;

  reserve_close(t->r);
  close(t->outfd);
  nftw(t->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  free(t);
  return 0;
}

/* Entries in dir, "." and ".." aside. */
static size_t
entries(const char *dir)
{
  DIR *d = opendir(dir);
  struct dirent *de;
  size_t n = 0;

  assert_non_null(d);
  while ((de = readdir(d)) != NULL)
    n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
  closedir(d);
  return n;
}

static void
fill(struct fixture *t, size_t want)
{
  struct err e = {0};

  assert_int_equal(reserve_fill(t->r, want, &go, &e), 0);
  assert_int_equal(reserve_count(t->r), want);
  assert_int_equal(entries(t->res), want);
}

static ino_t
ino_of(const char *path)
{
  struct stat st;

  assert_int_equal(lstat(path, &st), 0);
  return st.st_ino;
}

static void
test_take_moves_a_reserved_file_into_place(void **state)
{
  struct fixture *t = *state;
  char path[256], back[8] = {0};
  struct stat st;
  struct err e = {0};
  int fd;

  fill(t, 3);
  fd = reserve_take(t->r, t->outfd, "a", &e);
  assert_true(fd >= 0);
  assert_int_equal(reserve_count(t->r), 2);
  assert_int_equal(entries(t->res), 2);
  assert_int_equal(write(fd, "bytes", 5), 5);
  close(fd);
  snprintf(path, sizeof(path), "%s/a", t->out);
  assert_int_equal(lstat(path, &st), 0);
  assert_true(S_ISREG(st.st_mode));
  assert_int_equal(st.st_mode & 07777, 0600);
  assert_int_equal(st.st_nlink, 1);
  fd = open(path, O_RDONLY);
  assert_int_equal(read(fd, back, sizeof(back)), 5);
  close(fd);
  assert_string_equal(back, "bytes");
}

static void
test_take_creates_when_the_reserve_is_empty(void **state)
{
  struct fixture *t = *state;
  char path[256];
  struct stat st;
  struct err e = {0};
  int fd;

  assert_int_equal(reserve_count(t->r), 0);
  fd = reserve_take(t->r, t->outfd, "new", &e);
  assert_true(fd >= 0);
  close(fd);
  snprintf(path, sizeof(path), "%s/new", t->out);
  assert_int_equal(lstat(path, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0600);
  assert_int_equal(st.st_size, 0);
}

static void
test_take_never_replaces_an_existing_name(void **state)
{
  struct fixture *t = *state;
  char path[256];
  struct err e = {0};
  ino_t before;
  int fd;

  snprintf(path, sizeof(path), "%s/x", t->out);
  fd = open(path, O_WRONLY | O_CREAT, 0644);
  assert_int_equal(write(fd, "keep", 4), 4);
  close(fd);
  before = ino_of(path);

  fill(t, 2);
  assert_int_equal(reserve_take(t->r, t->outfd, "x", &e), ERR_CONFLICT);
  assert_non_null(strstr(e.msg, "'x'"));
  assert_int_equal(ino_of(path), before);
  /* the file tried goes back to the reserve */
  assert_int_equal(reserve_count(t->r), 2);
  assert_int_equal(entries(t->res), 2);

  /* and with the reserve empty, the create refuses it the same way */
  fill(t, 2);
  while (reserve_count(t->r) > 0) {
    char name[16];

    snprintf(name, sizeof(name), "f%zu", reserve_count(t->r));
    fd = reserve_take(t->r, t->outfd, name, &e);
    assert_true(fd >= 0);
    close(fd);
  }
  err_clear(&e);
  assert_int_equal(reserve_take(t->r, t->outfd, "x", &e), ERR_CONFLICT);
  assert_int_equal(ino_of(path), before);
}

static void
test_take_skips_files_shared_or_written_behind_its_back(void **state)
{
  struct fixture *t = *state;
  char from[512], to[256], path[256];
  struct err e = {0};
  struct dirent *de;
  struct stat st;
  ino_t shared = 0;
  DIR *d;
  int n = 0, fd;

  fill(t, 2);
  /* one of them hard-linked elsewhere, the other one written into */
  d = opendir(t->res);
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.')
      continue;
    snprintf(from, sizeof(from), "%s/%s", t->res, de->d_name);
    if (n++ == 0) {
      snprintf(to, sizeof(to), "%s/outside", t->dir);
      assert_int_equal(link(from, to), 0);
      shared = ino_of(from);
    } else {
      fd = open(from, O_WRONLY);
      assert_int_equal(write(fd, "x", 1), 1);
      close(fd);
    }
  }
  closedir(d);

  fd = reserve_take(t->r, t->outfd, "b", &e);
  assert_true(fd >= 0);
  close(fd);
  snprintf(path, sizeof(path), "%s/b", t->out);
  assert_int_equal(lstat(path, &st), 0);
  assert_true(st.st_ino != shared);
  assert_int_equal(st.st_size, 0); /* the written one (its number may be
                                      reused once it is gone) */
  /* both dropped from the reserve; the outside link keeps its inode */
  assert_int_equal(reserve_count(t->r), 0);
  assert_int_equal(entries(t->res), 0);
  assert_int_equal(ino_of(to), shared);
}

static void
test_open_takes_up_the_files_a_previous_run_left(void **state)
{
  struct fixture *t = *state;
  char path[256];
  struct err e = {0};
  int fd;

  fill(t, 5);
  /* a name the reserve never makes is left alone */
  snprintf(path, sizeof(path), "%s/notes.txt", t->res);
  fd = open(path, O_WRONLY | O_CREAT, 0644);
  close(fd);
  reserve_close(t->r);
  t->r = NULL;
  assert_int_equal(reserve_open(t->res, &t->r, &e), 0);
  assert_int_equal(reserve_count(t->r), 5);
  /* new files get numbers of their own */
  assert_int_equal(reserve_fill(t->r, 8, &go, &e), 0);
  assert_int_equal(reserve_count(t->r), 8);
  assert_int_equal(entries(t->res), 9);
  assert_int_equal(access(path, F_OK), 0);
}

static void
test_fill_stops_when_asked_and_keeps_at_most_the_maximum(void **state)
{
  struct fixture *t = *state;
  atomic_int stop = 1;
  struct err e = {0};

  assert_int_equal(reserve_fill(t->r, 10, &stop, &e), 0);
  assert_int_equal(reserve_count(t->r), 0);
  assert_int_equal(reserve_fill(t->r, RESERVE_MAX + 100, &go, &e), 0);
  assert_int_equal(reserve_count(t->r), RESERVE_MAX);
  assert_int_equal(entries(t->res), RESERVE_MAX);
  /* already full: nothing more */
  assert_int_equal(reserve_fill(t->r, RESERVE_MAX, &go, &e), 0);
  assert_int_equal(entries(t->res), RESERVE_MAX);
}

static void
test_take_on_another_file_system_creates_instead(void **state)
{
  struct fixture *t = *state;
  char other[] = "/dev/shm/tenbin-reserve-XXXXXX", path[256];
  struct stat a, b;
  struct err e = {0};
  int ofd, fd;

  if (stat("/dev/shm", &b) < 0 || stat(t->res, &a) < 0 ||
      a.st_dev == b.st_dev || mkdtemp(other) == NULL)
    skip();
  ofd = open(other, O_RDONLY | O_DIRECTORY);
  fill(t, 2);
  fd = reserve_take(t->r, ofd, "c", &e);
  assert_true(fd >= 0);
  close(fd);
  snprintf(path, sizeof(path), "%s/c", other);
  assert_int_equal(access(path, F_OK), 0);
  unlink(path);
  /* the reserve kept its files, and is off from now on */
  assert_int_equal(entries(t->res), 2);
  fd = reserve_take(t->r, t->outfd, "d", &e);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(entries(t->res), 2);
  assert_int_equal(reserve_fill(t->r, 5, &go, &e), 0);
  assert_int_equal(entries(t->res), 2);
  close(ofd);
  rmdir(other);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(
        test_take_moves_a_reserved_file_into_place, setup, teardown),
    cmocka_unit_test_setup_teardown(
        test_take_creates_when_the_reserve_is_empty, setup, teardown),
    cmocka_unit_test_setup_teardown(
        test_take_never_replaces_an_existing_name, setup, teardown),
    cmocka_unit_test_setup_teardown(
        test_take_skips_files_shared_or_written_behind_its_back, setup,
        teardown),
    cmocka_unit_test_setup_teardown(
        test_open_takes_up_the_files_a_previous_run_left, setup, teardown),
    cmocka_unit_test_setup_teardown(
        test_fill_stops_when_asked_and_keeps_at_most_the_maximum, setup,
        teardown),
    cmocka_unit_test_setup_teardown(
        test_take_on_another_file_system_creates_instead, setup, teardown),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
