/*
 * Tests for agent/watch.c: a real inotify instance on a temporary tree,
 * built by a real scan.  The changes a watch reports, handed to
 * manifest_scan_changes, give what a full scan gives; what a watch
 * cannot describe (a directory renamed, an overflowed queue, changes
 * taken by a publish that then failed) makes the next take refuse.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "sync/manifest.h"
#include "agent/watch.h"
#include "util/alloc.h"

struct fx {
  char dir[64];
  int rootfd;
  uv_loop_t loop;
  struct watch *w;
  struct manifest m;
  struct manifest_checks c;
};

static int
fx_setup(void **state)
{
  struct fx *f = xcalloc(1, sizeof(*f));

  umask(022);
  snprintf(f->dir, sizeof(f->dir), "/tmp/tenbin-watch-XXXXXX");
  assert_non_null(mkdtemp(f->dir));
  f->rootfd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true(f->rootfd >= 0);
  assert_int_equal(uv_loop_init(&f->loop), 0);
  manifest_init(&f->m);
  manifest_checks_init(&f->c);
  *state = f;
  return 0;
}

static int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *w)
{
  (void)st;
  (void)flag;
  (void)w;
  return remove(path);
}

static int
fx_teardown(void **state)
{
  struct fx *f = *state;

  if (f->w != NULL)
    watch_close(f->w, NULL, NULL);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&f->loop), 0);
  manifest_release(&f->m);
  manifest_checks_release(&f->c);
  close(f->rootfd);
  nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  free(f);
  return 0;
}

static void
put(const struct fx *f, const char *rel, const char *text)
{
  char p[512];
  int fd;

  snprintf(p, sizeof(p), "%s/%s", f->dir, rel);
  if (text == NULL) {
    assert_int_equal(mkdir(p, 0755), 0);
    return;
  }
  fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  assert_int_equal(close(fd), 0);
}

static void
at(const struct fx *f, const char *rel, char *out, size_t outlen)
{
  snprintf(out, outlen, "%s/%s", f->dir, rel);
}

/* ds/a, ds/b, ds/d/c, ds/d/e/f; scanned whole, watched from the scan. */
static void
start(struct fx *f, const char *rel)
{
  struct watch_build *b = watch_build_new("test", strcmp(rel, ".") == 0);
  struct err e;

  assert_non_null(b);
  assert_int_equal(manifest_scan(f->rootfd, rel, NULL, NULL,
                                 watch_build_hook(b), &f->m, &f->c, NULL,
                                 &e),
                   0);
  f->w = watch_start(&f->loop, b);
  assert_non_null(f->w);
}

static void
make_tree(const struct fx *f)
{
  put(f, "ds", NULL);
  put(f, "ds/a", "a");
  put(f, "ds/b", "b");
  put(f, "ds/d", NULL);
  put(f, "ds/d/c", "c");
  put(f, "ds/d/e", NULL);
  put(f, "ds/d/e/f", "f");
}

static void
assert_change(const struct watch_changes *ch, size_t i, const char *path,
              unsigned flags)
{
  assert_true(i < ch->n);
  assert_string_equal(ch->v[i].path, path);
  assert_int_equal(ch->v[i].flags, flags);
}

/* Scan f's changes into its manifest, extending the watch, and check
 * the result against a full scan. */
static void
scan_changes_matches_full(struct fx *f, const struct watch_changes *ch)
{
  struct watch_build *b = watch_extend(f->w);
  struct manifest inc, full;
  struct manifest_checks inc_c, full_c;
  char *t1 = NULL, *t2 = NULL;
  char id1[MANIFEST_ID_HEX + 1], id2[MANIFEST_ID_HEX + 1];
  size_t l1, l2;
  struct err e;

  manifest_init(&inc);
  manifest_init(&full);
  manifest_checks_init(&inc_c);
  manifest_checks_init(&full_c);
  assert_int_equal(manifest_scan_changes(f->rootfd, "ds", &f->m, &f->c,
                                         ch->v, ch->n, watch_build_hook(b),
                                         &inc, &inc_c, NULL, &e),
                   0);
  /* Events of the directories it added, read before it ends, wait. */
  uv_run(&f->loop, UV_RUN_NOWAIT);
  watch_extended(f->w, b);
  assert_int_equal(manifest_scan(f->rootfd, "ds", NULL, NULL, NULL, &full,
                                 &full_c, NULL, &e),
                   0);
  assert_int_equal(manifest_encode(&inc, &t1, &l1, id1, &e), 0);
  assert_int_equal(manifest_encode(&full, &t2, &l2, id2, &e), 0);
  assert_string_equal(id1, id2);
  free(t1);
  free(t2);
  manifest_release(&f->m);
  manifest_checks_release(&f->c);
  f->m = inc;
  f->c = inc_c;
  manifest_release(&full);
  manifest_checks_release(&full_c);
}

/*
 * A write and a chmod are the entry; a create and a delete name the path
 * in its directory (a file created and written is both); a directory made and filled is one change, listed
 * whole by the next scan, which watches it from then on: a write there
 * afterwards is reported too, even when its event is read before the
 * scan that added the directory has ended.
 */
static void
test_watch_reports_what_changed_and_watches_new_directories(void **state)
{
  struct fx *f = *state;
  struct watch_changes ch;
  char p[512];

  make_tree(f);
  start(f, "ds");
  put(f, "ds/a", "a again");
  put(f, "ds/n", "new");
  at(f, "ds/b", p, sizeof(p));
  assert_int_equal(unlink(p), 0);
  at(f, "ds/d", p, sizeof(p));
  assert_int_equal(chmod(p, 0700), 0);
  put(f, "ds/d/e/g", NULL);
  put(f, "ds/d/e/g/h", "h");
  assert_int_equal(watch_take(f->w, &ch), 0);
  assert_int_equal(ch.n, 5);
  assert_change(&ch, 0, "a", MANIFEST_CHANGED_ENTRY);
  assert_change(&ch, 1, "b", MANIFEST_CHANGED_TREE);
  assert_change(&ch, 2, "d", MANIFEST_CHANGED_ENTRY);
  assert_change(&ch, 3, "d/e/g", MANIFEST_CHANGED_TREE);
  assert_change(&ch, 4, "n", MANIFEST_CHANGED_TREE | MANIFEST_CHANGED_ENTRY);
  scan_changes_matches_full(f, &ch);
  watch_changes_release(&ch);

  put(f, "ds/d/e/g/h", "h again");
  assert_int_equal(watch_take(f->w, &ch), 0);
  assert_int_equal(ch.n, 1);
  assert_change(&ch, 0, "d/e/g/h", MANIFEST_CHANGED_ENTRY);
  watch_changes_release(&ch);

  /* Written while the scan that adds g2 runs: read, kept, then noted. */
  put(f, "ds/g2", NULL);
  assert_int_equal(watch_take(f->w, &ch), 0);
  {
    struct watch_build *b = watch_extend(f->w);
    struct manifest m2;
    struct manifest_checks c2;
    struct err e;

    manifest_init(&m2);
    manifest_checks_init(&c2);
    assert_int_equal(manifest_scan_changes(f->rootfd, "ds", &f->m, &f->c,
                                           ch.v, ch.n, watch_build_hook(b),
                                           &m2, &c2, NULL, &e),
                     0);
    put(f, "ds/g2/late", "late");
    uv_run(&f->loop, UV_RUN_NOWAIT);
    watch_extended(f->w, b);
    manifest_release(&m2);
    manifest_checks_release(&c2);
  }
  watch_changes_release(&ch);
  assert_int_equal(watch_take(f->w, &ch), 0);
  assert_int_equal(ch.n, 1);
  assert_change(&ch, 0, "g2/late",
                MANIFEST_CHANGED_TREE | MANIFEST_CHANGED_ENTRY);
  watch_changes_release(&ch);
}

/* Every path beneath a renamed directory moves: the watch is lost, and
 * the next publish scans the whole tree. */
static void
test_watch_is_lost_when_a_directory_is_renamed(void **state)
{
  struct fx *f = *state;
  struct watch_changes ch;
  char p[512], q[512];

  make_tree(f);
  start(f, "ds");
  at(f, "ds/d", p, sizeof(p));
  at(f, "ds/d2", q, sizeof(q));
  assert_int_equal(rename(p, q), 0);
  assert_int_equal(watch_take(f->w, &ch), ERR_CONFLICT);
  assert_int_equal(ch.n, 0);
  put(f, "ds/a", "still lost");
  assert_int_equal(watch_take(f->w, &ch), ERR_CONFLICT);
}

/* More events than the kernel queues between two reads: lost. */
static void
test_watch_is_lost_when_the_event_queue_overflows(void **state)
{
  struct fx *f = *state;
  struct watch_changes ch;
  long max = 16384;
  FILE *fp = fopen("/proc/sys/fs/inotify/max_queued_events", "r");
  char rel[64];

  if (fp != NULL) {
    assert_int_equal(fscanf(fp, "%ld", &max), 1);
    fclose(fp);
  }
  if (max > 200000)
    skip();
  make_tree(f);
  start(f, "ds");
  for (long i = 0; i <= max; i++) {
    snprintf(rel, sizeof(rel), "ds/d/x%ld", i);
    put(f, rel, "");
  }
  assert_int_equal(watch_take(f->w, &ch), ERR_CONFLICT);
}

/* A publish that took the changes and failed leaves none to take: the
 * next scan is whole. */
static void
test_watch_is_lost_when_a_publish_fails_after_taking(void **state)
{
  struct fx *f = *state;
  struct watch_changes ch;

  make_tree(f);
  start(f, "ds");
  put(f, "ds/a", "changed");
  assert_int_equal(watch_take(f->w, &ch), 0);
  assert_int_equal(ch.n, 1);
  watch_changes_release(&ch);
  watch_build_free(watch_extend(f->w));
  assert_int_equal(watch_take(f->w, &ch), ERR_CONFLICT);
}

/* A draft of the next publish peeks: it gets the changes after the seq
 * it last reached, a path changed again among them, and the publish's
 * take still gets every change. */
static void
test_watch_peek_gives_changes_after_a_seq_and_leaves_them_for_the_take(
    void **state)
{
  struct fx *f = *state;
  struct watch_changes ch;
  uint64_t s1, s2, s3;

  make_tree(f);
  start(f, "ds");
  put(f, "ds/a", "a again");
  assert_int_equal(watch_peek(f->w, 0, &ch, &s1), 0);
  assert_int_equal(ch.n, 1);
  assert_change(&ch, 0, "a", MANIFEST_CHANGED_ENTRY);
  assert_true(s1 > 0);
  assert_int_equal(watch_seq(f->w), s1);
  watch_changes_release(&ch);

  assert_int_equal(watch_peek(f->w, s1, &ch, &s2), 0);
  assert_int_equal(ch.n, 0);
  assert_int_equal(s2, s1);
  watch_changes_release(&ch);

  put(f, "ds/d/c", "c again");
  put(f, "ds/a", "a a third time");
  assert_int_equal(watch_peek(f->w, s1, &ch, &s3), 0);
  assert_true(s3 > s1);
  assert_int_equal(ch.n, 2);
  assert_change(&ch, 0, "a", MANIFEST_CHANGED_ENTRY);
  assert_change(&ch, 1, "d/c", MANIFEST_CHANGED_ENTRY);
  watch_changes_release(&ch);

  assert_int_equal(watch_take(f->w, &ch), 0);
  assert_int_equal(ch.n, 2);
  watch_changes_release(&ch);
  /* The seq goes on counting after a take. */
  put(f, "ds/b", "b again");
  assert_int_equal(watch_peek(f->w, s3, &ch, &s2), 0);
  assert_int_equal(ch.n, 1);
  assert_change(&ch, 0, "b", MANIFEST_CHANGED_ENTRY);
  watch_changes_release(&ch);
}

static void
count_quiet(void *arg)
{
  (*(int *)arg)++;
}

/* The quiet callback comes once after a burst of changes, not per
 * change, and again only after another change; a lost watch has none. */
static void
test_watch_calls_back_once_a_burst_of_changes_has_gone_quiet(void **state)
{
  struct fx *f = *state;
  int quiet = 0;
  char rel[64];

  make_tree(f);
  start(f, "ds");
  watch_on_quiet(f->w, 30, count_quiet, &quiet);
  for (int i = 0; i < 20; i++) {
    snprintf(rel, sizeof(rel), "ds/x%d", i);
    put(f, rel, "x");
  }
  while (quiet == 0)
    uv_run(&f->loop, UV_RUN_ONCE);
  assert_int_equal(quiet, 1);
  /* Nothing armed now: the loop has only the idle poll left. */
  usleep(100 * 1000);
  uv_run(&f->loop, UV_RUN_NOWAIT);
  assert_int_equal(quiet, 1);

  put(f, "ds/a", "again");
  while (quiet == 1)
    uv_run(&f->loop, UV_RUN_ONCE);
  assert_int_equal(quiet, 2);

  watch_lose(f->w, "test");
  put(f, "ds/b", "after the loss");
  usleep(100 * 1000);
  uv_run(&f->loop, UV_RUN_NOWAIT);
  uv_run(&f->loop, UV_RUN_NOWAIT);
  assert_int_equal(quiet, 2);
}

/* The agent's store at the top of its root is not the dataset's. */
static void
test_watch_of_the_root_ignores_the_store(void **state)
{
  struct fx *f = *state;
  struct watch_changes ch;

  make_tree(f);
  start(f, ".");
  put(f, ".tenbin", NULL);
  put(f, ".tenbin/state", "x");
  put(f, "top", "t");
  assert_int_equal(watch_take(f->w, &ch), 0);
  assert_int_equal(ch.n, 1);
  assert_change(&ch, 0, "top", MANIFEST_CHANGED_TREE | MANIFEST_CHANGED_ENTRY);
  watch_changes_release(&ch);
}

int
main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
  const struct CMUnitTest tests[] = {
    T(test_watch_reports_what_changed_and_watches_new_directories),
    T(test_watch_is_lost_when_a_directory_is_renamed),
    T(test_watch_is_lost_when_the_event_queue_overflows),
    T(test_watch_is_lost_when_a_publish_fails_after_taking),
    T(test_watch_of_the_root_ignores_the_store),
    T(test_watch_peek_gives_changes_after_a_seq_and_leaves_them_for_the_take),
    T(test_watch_calls_back_once_a_burst_of_changes_has_gone_quiet),
  };
#undef T

  return cmocka_run_group_tests(tests, NULL, NULL);
}
