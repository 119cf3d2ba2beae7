/*
 * Tests for sync/path.c: normalization, link targets, dataset names, and
 * opens and mkdirs that neither follow a symlink nor leave their root.
 * The open tests run twice: with openat2 and with the component walk used
 * on kernels without it.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sync/path.h"

/* The test hook of path.c (not in path.h on purpose). */
void syncpath__test_no_openat2(int on);

#define assert_contains(hay, needle)                                       \
  do {                                                                     \
    if (strstr((hay), (needle)) == NULL)                                   \
      fail_msg("'%s' does not contain '%s'", (hay), (needle));             \
  } while (0)

/* ---- normalization ---- */

static void
test_normalize_cleans_good_paths(void **state)
{
  static const struct {
    const char *in, *want;
  } cases[] = {
    {"a", "a"},
    {"a/b", "a/b"},
    {"a//b/./c/", "a/b/c"},
    {"./a", "a"},
    {"a/.", "a"},
    {"a/./././b//", "a/b"},
    {".a/..b/...", ".a/..b/..."},
    {"a b/\xc3\xa9t\xc3\xa9", "a b/\xc3\xa9t\xc3\xa9"},
  };
  char out[SYNCPATH_MAX + 1];
  struct err e;

  (void)state;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    err_clear(&e);
    if (syncpath_normalize(cases[i].in, out, sizeof(out), &e) != 0)
      fail_msg("'%s' refused: %s", cases[i].in, e.msg);
    assert_string_equal(out, cases[i].want);
    assert_true(syncpath_is_normal(out));
  }
}

static void
test_normalize_refuses_bad_paths_naming_them(void **state)
{
  static const struct {
    const char *in, *msg;
  } cases[] = {
    {"", "empty"},
    {".", "empty"},
    {"./", "empty"},
    {"//", "must be relative"},
    {"/a", "must be relative"},
    {"a/../b", "'..'"},
    {"..", "'..'"},
    {"a/..", "'..'"},
    {"../a", "'..'"},
  };
  char out[SYNCPATH_MAX + 1];
  struct err e;

  (void)state;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    err_clear(&e);
    if (syncpath_normalize(cases[i].in, out, sizeof(out), &e) !=
        ERR_INVALID)
      fail_msg("'%s' accepted", cases[i].in);
    assert_contains(e.msg, cases[i].msg);
    if (cases[i].in[0] != '\0')
      assert_contains(e.msg, cases[i].in);
  }
}

static void
test_normalize_enforces_component_and_path_limits(void **state)
{
  char comp[SYNCPATH_NAME_MAX + 2];
  char path[SYNCPATH_MAX + 64];
  char out[SYNCPATH_MAX + 1];
  char small[8];
  struct err e;
  size_t n = 0;

  (void)state;
  /* 255 bytes is fine, 256 is not. */
  memset(comp, 'x', SYNCPATH_NAME_MAX);
  comp[SYNCPATH_NAME_MAX] = '\0';
  assert_int_equal(syncpath_normalize(comp, out, sizeof(out), &e), 0);
  assert_true(syncpath_is_normal(comp));
  comp[SYNCPATH_NAME_MAX] = 'x';
  comp[SYNCPATH_NAME_MAX + 1] = '\0';
  assert_int_equal(syncpath_normalize(comp, out, sizeof(out), &e),
                   ERR_INVALID);
  assert_contains(e.msg, "component is longer than 255 bytes");
  assert_false(syncpath_is_normal(comp));

  /* Exactly SYNCPATH_MAX bytes: components of 200 bytes and a last,
   * shorter one. */
  while (SYNCPATH_MAX - n > 201) {
    memset(path + n, 'a', 200);
    n += 200;
    path[n++] = '/';
  }
  memset(path + n, 'a', SYNCPATH_MAX - n);
  n = SYNCPATH_MAX;
  path[n] = '\0';
  assert_int_equal(strlen(path), SYNCPATH_MAX);
  assert_int_equal(syncpath_normalize(path, out, sizeof(out), &e), 0);
  assert_string_equal(out, path);
  assert_true(syncpath_is_normal(path));
  /* One byte more is too long, even with slack in out. */
  memcpy(path + n, "b", 2);
  assert_int_equal(syncpath_normalize(path, out, sizeof(out), &e),
                   ERR_INVALID);
  assert_contains(e.msg, "longer than 4096 bytes");
  assert_false(syncpath_is_normal(path));
  /* A path that fits the limit but not out. */
  assert_int_equal(syncpath_normalize("abcdefgh", small, sizeof(small),
                                      &e), ERR_INVALID);
  assert_int_equal(syncpath_normalize("abcdefg", small, sizeof(small),
                                      &e), 0);
  assert_string_equal(small, "abcdefg");
}

static void
test_is_normal_accepts_only_normal_form(void **state)
{
  static const char *const good[] = {"a", "a/b", ".a", "a..", "a/.b/c"};
  static const char *const bad[] = {"", "/a", "a/", "a//b", "./a", "a/.",
                                    "..", "a/../b", "."};

  (void)state;
  for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
    if (!syncpath_is_normal(good[i]))
      fail_msg("'%s' not normal", good[i]);
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    if (syncpath_is_normal(bad[i]))
      fail_msg("'%s' normal", bad[i]);
}

static void
test_link_inside_allows_only_leading_dotdot(void **state)
{
  static const struct {
    const char *link, *target;
    int inside;
  } cases[] = {
    {"a/l", "../b", 1},
    {"l", "b", 1},
    {"l", "./b", 1},
    {"l", "b/./c//d", 1},
    {"a/b/l", "../../x", 1},
    {"a/l", "..", 1},     /* the dataset's top itself */
    /* ".." after a name: x may be a link (x -> "."), so refused */
    {"a/l", "x/../../y", 0},
    {"a/b/l", "../x/../y", 0},
    {"l", "../b", 0},
    {"l", "..", 0},
    {"a/b/l", "../../../x", 0},
    {"l", "x/../../y", 0},
    {"l", "/etc/passwd", 0},
    {"a/l", "/a/b", 0},
    {"l", "", 0},
  };

  (void)state;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    if (syncpath_link_inside(cases[i].link, cases[i].target) !=
        cases[i].inside)
      fail_msg("'%s' -> '%s': expected %d", cases[i].link,
               cases[i].target, cases[i].inside);
}

static void
test_valid_name_follows_the_dataset_name_rule(void **state)
{
  char longest[65], too_long[66];

  (void)state;
  assert_true(syncpath_valid_name("imagenet"));
  assert_true(syncpath_valid_name("a"));
  assert_true(syncpath_valid_name("Data-set_1.2"));
  assert_false(syncpath_valid_name(""));
  assert_false(syncpath_valid_name(".hidden"));
  assert_false(syncpath_valid_name("-x"));
  assert_false(syncpath_valid_name("a/b"));
  assert_false(syncpath_valid_name("a b"));
  assert_false(syncpath_valid_name("\xc3\xa9"));
  memset(longest, 'a', 64);
  longest[64] = '\0';
  assert_true(syncpath_valid_name(longest));
  memset(too_long, 'a', 65);
  too_long[65] = '\0';
  assert_false(syncpath_valid_name(too_long));
}

/* ---- opens beneath a root ---- */

struct tree {
  char dir[64];   /* mkdtemp */
  char top[128];  /* dir/top: the root the opens are confined to */
  int topfd;
};

static void
write_file(const char *path, const char *text)
{
  FILE *f = fopen(path, "w");

  assert_non_null(f);
  fputs(text, f);
  assert_int_equal(fclose(f), 0);
}

/*
 * dir/outside/secret        a file outside the root
 * dir/top/d/f               a file
 * dir/top/d/inlink -> f     a link inside
 * dir/top/dirlink -> d      a link to a directory inside
 * dir/top/escape -> ../outside
 * dir/top/abs -> DIR/outside (absolute)
 * dir/top/dangling -> ../outside/new
 */
static int
tree_setup(void **state)
{
  struct tree *t = calloc(1, sizeof(*t));
  char p[256];

  assert_non_null(t);
  snprintf(t->dir, sizeof(t->dir), "/tmp/tenbin-path-XXXXXX");
  assert_non_null(mkdtemp(t->dir));
  snprintf(t->top, sizeof(t->top), "%s/top", t->dir);
  snprintf(p, sizeof(p), "%s/outside", t->dir);
  assert_int_equal(mkdir(p, 0755), 0);
  snprintf(p, sizeof(p), "%s/outside/secret", t->dir);
  write_file(p, "secret");
  assert_int_equal(mkdir(t->top, 0755), 0);
  snprintf(p, sizeof(p), "%s/d", t->top);
  assert_int_equal(mkdir(p, 0755), 0);
  snprintf(p, sizeof(p), "%s/d/f", t->top);
  write_file(p, "inside");
  snprintf(p, sizeof(p), "%s/d/inlink", t->top);
  assert_int_equal(symlink("f", p), 0);
  snprintf(p, sizeof(p), "%s/dirlink", t->top);
  assert_int_equal(symlink("d", p), 0);
  snprintf(p, sizeof(p), "%s/escape", t->top);
  assert_int_equal(symlink("../outside", p), 0);
  snprintf(p, sizeof(p), "%s/abs", t->top);
  {
    char target[128];

    snprintf(target, sizeof(target), "%s/outside", t->dir);
    assert_int_equal(symlink(target, p), 0);
  }
  snprintf(p, sizeof(p), "%s/dangling", t->top);
  assert_int_equal(symlink("../outside/new", p), 0);
  t->topfd = open(t->top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true(t->topfd >= 0);
  *state = t;
  return 0;
}

static int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *f)
{
  (void)st;
  (void)flag;
  (void)f;
  return remove(path);
}

static int
tree_teardown(void **state)
{
  struct tree *t = *state;

  syncpath__test_no_openat2(0);
  close(t->topfd);
  nftw(t->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  free(t);
  return 0;
}

/* Read what fd holds into buf (a short text file). */
static void
assert_fd_reads(int fd, const char *want)
{
  char buf[64];
  ssize_t r = read(fd, buf, sizeof(buf) - 1);

  assert_true(r >= 0);
  buf[r] = '\0';
  assert_string_equal(buf, want);
}

static int
try_open(struct tree *t, const char *rel, int flags, struct err *e)
{
  err_clear(e);
  return syncpath_openat(t->topfd, rel, flags, 0644, e);
}

static void
check_opens(struct tree *t)
{
  char p[256];
  struct stat st;
  struct err e;
  int fd;

  fd = try_open(t, "d/f", O_RDONLY, &e);
  assert_true(fd >= 0);
  assert_fd_reads(fd, "inside");
  /* No descriptor leaks into a child process. */
  assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
  close(fd);
  fd = try_open(t, "d", O_RDONLY | O_DIRECTORY, &e);
  assert_true(fd >= 0);
  close(fd);

  /* A symlink in the middle, even one that points inside. */
  assert_int_equal(try_open(t, "dirlink/f", O_RDONLY, &e), ERR_INVALID);
  assert_contains(e.msg, "dirlink/f");
  assert_contains(e.msg, "symlink");
  assert_int_equal(try_open(t, "escape/secret", O_RDONLY, &e), ERR_INVALID);
  assert_int_equal(try_open(t, "abs/secret", O_RDONLY, &e), ERR_INVALID);
  /* A symlink at the end, whatever the flags. */
  assert_int_equal(try_open(t, "d/inlink", O_RDONLY, &e), ERR_INVALID);
  assert_contains(e.msg, "d/inlink");
  assert_int_equal(try_open(t, "d/inlink", O_RDONLY | O_NOFOLLOW, &e),
                   ERR_INVALID);
  assert_int_equal(try_open(t, "dirlink", O_RDONLY | O_DIRECTORY, &e),
                   ERR_INVALID);
  assert_int_equal(try_open(t, "d/inlink", O_PATH | O_NOFOLLOW, &e),
                   ERR_INVALID);
  assert_int_equal(try_open(t, "escape", O_RDONLY | O_DIRECTORY, &e),
                   ERR_INVALID);
  /* Creating through a dangling link would create outside. */
  assert_int_equal(try_open(t, "dangling", O_WRONLY | O_CREAT, &e),
                   ERR_INVALID);
  snprintf(p, sizeof(p), "%s/outside/new", t->dir);
  assert_int_equal(stat(p, &st), -1);
  /* ".." never gets as far as the kernel. */
  assert_int_equal(try_open(t, "../outside/secret", O_RDONLY, &e),
                   ERR_INVALID);
  assert_contains(e.msg, "not normalized");
  assert_int_equal(try_open(t, "d/../../outside/secret", O_RDONLY, &e),
                   ERR_INVALID);
  assert_int_equal(try_open(t, "/etc/passwd", O_RDONLY, &e), ERR_INVALID);

  assert_int_equal(try_open(t, "d/missing", O_RDONLY, &e), ERR_NOT_FOUND);
  assert_contains(e.msg, "d/missing");
  assert_int_equal(try_open(t, "nope/f", O_RDONLY, &e), ERR_NOT_FOUND);
  /* A file in the middle is an i/o error, not a confinement one. */
  assert_int_equal(try_open(t, "d/f/x", O_RDONLY, &e), ERR_IO);
  assert_int_equal(try_open(t, "d/f", O_RDONLY | O_DIRECTORY, &e), ERR_IO);

  /* Creating a new file inside works, with the mode asked for. */
  fd = try_open(t, "d/new", O_WRONLY | O_CREAT | O_EXCL, &e);
  assert_true(fd >= 0);
  close(fd);
  snprintf(p, sizeof(p), "%s/d/new", t->top);
  assert_int_equal(stat(p, &st), 0);
  assert_true(S_ISREG(st.st_mode));
  assert_int_equal(unlink(p), 0);
}

static void
test_openat_refuses_symlinks_and_escapes(void **state)
{
  check_opens(*state);
}

static void
test_openat_component_walk_refuses_the_same(void **state)
{
  syncpath__test_no_openat2(1);
  check_opens(*state);
}

static void
test_openat_dot_is_the_root_itself(void **state)
{
  struct tree *t = *state;
  struct err e;
  int fd = try_open(t, ".", O_RDONLY | O_DIRECTORY, &e);
  struct stat a, b;

  assert_true(fd >= 0);
  assert_int_equal(fstat(fd, &a), 0);
  assert_int_equal(fstat(t->topfd, &b), 0);
  assert_true(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
  close(fd);
}

static void
check_mkdirs(struct tree *t, const char *base)
{
  char rel[128], p[256];
  struct stat st;
  struct err e;

  snprintf(rel, sizeof(rel), "%s/x/y/z", base);
  assert_int_equal(syncpath_mkdirs(t->topfd, rel, 0755, &e), 0);
  snprintf(p, sizeof(p), "%s/%s", t->top, rel);
  assert_int_equal(stat(p, &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  /* Existing directories are fine. */
  assert_int_equal(syncpath_mkdirs(t->topfd, rel, 0755, &e), 0);
  snprintf(rel, sizeof(rel), "%s/x", base);
  assert_int_equal(syncpath_mkdirs(t->topfd, rel, 0755, &e), 0);

  /* Through a link, even to a directory inside: refused, nothing made. */
  err_clear(&e);
  assert_int_equal(syncpath_mkdirs(t->topfd, "dirlink/sub", 0755, &e),
                   ERR_INVALID);
  assert_contains(e.msg, "dirlink");
  snprintf(p, sizeof(p), "%s/d/sub", t->top);
  assert_int_equal(stat(p, &st), -1);
  assert_int_equal(syncpath_mkdirs(t->topfd, "escape/sub", 0755, &e),
                   ERR_INVALID);
  snprintf(p, sizeof(p), "%s/outside/sub", t->dir);
  assert_int_equal(stat(p, &st), -1);
  /* A link as the last component is not a directory either. */
  assert_int_equal(syncpath_mkdirs(t->topfd, "dirlink", 0755, &e),
                   ERR_INVALID);
  /* A file in the way. */
  assert_int_equal(syncpath_mkdirs(t->topfd, "d/f/sub", 0755, &e), ERR_IO);
  assert_contains(e.msg, "d/f");
  assert_int_equal(syncpath_mkdirs(t->topfd, "../outside/x", 0755, &e),
                   ERR_INVALID);
}

static void
test_mkdirs_creates_inside_and_refuses_links(void **state)
{
  check_mkdirs(*state, "m1");
}

static void
test_mkdirs_with_component_walk(void **state)
{
  syncpath__test_no_openat2(1);
  check_mkdirs(*state, "m2");
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_normalize_cleans_good_paths),
    cmocka_unit_test(test_normalize_refuses_bad_paths_naming_them),
    cmocka_unit_test(test_normalize_enforces_component_and_path_limits),
    cmocka_unit_test(test_is_normal_accepts_only_normal_form),
    cmocka_unit_test(test_link_inside_allows_only_leading_dotdot),
    cmocka_unit_test(test_valid_name_follows_the_dataset_name_rule),
    cmocka_unit_test_setup_teardown(test_openat_refuses_symlinks_and_escapes,
                                    tree_setup, tree_teardown),
    cmocka_unit_test_setup_teardown(
        test_openat_component_walk_refuses_the_same, tree_setup,
        tree_teardown),
    cmocka_unit_test_setup_teardown(test_openat_dot_is_the_root_itself,
                                    tree_setup, tree_teardown),
    cmocka_unit_test_setup_teardown(
        test_mkdirs_creates_inside_and_refuses_links, tree_setup,
        tree_teardown),
    cmocka_unit_test_setup_teardown(test_mkdirs_with_component_walk,
                                    tree_setup, tree_teardown),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
