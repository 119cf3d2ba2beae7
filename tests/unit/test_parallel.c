/*
 * Tests for util/parallel.c: every task runs once, on threads when they
 * start, and on the calling thread when the system refuses one (a start
 * that refuses, passed in; and pthread_create itself refusing a stack
 * it cannot map).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "util/parallel.h"

#define K 8

struct rec {
  pthread_t caller;
  atomic_uint runs[K];
  int on_caller[K];
  atomic_size_t order; /* how many tasks began before each one */
  size_t began[K];
};

static void
record(void *arg, size_t i)
{
  struct rec *r = arg;

  if (i >= K)
    return; /* no cmocka assert off the test's thread; runs[] shows it */
  r->began[i] = atomic_fetch_add(&r->order, 1);
  r->on_caller[i] = pthread_equal(pthread_self(), r->caller);
  atomic_fetch_add(&r->runs[i], 1);
}

static void
rec_init(struct rec *r)
{
  memset(r, 0, sizeof(*r));
  r->caller = pthread_self();
}

/* Starts the first ctx->allow threads, then refuses with EAGAIN. */
struct refusing {
  size_t allow, tried;
};

static int
start_refusing(void *ctx, pthread_t *tid, void *(*run)(void *), void *arg)
{
  struct refusing *rf = ctx;

  rf->tried++;
  if (rf->allow == 0)
    return EAGAIN;
  rf->allow--;
  return pthread_create(tid, NULL, run, arg);
}

static void
test_each_task_runs_once_and_all_but_the_first_on_threads(void **state)
{
  struct rec r;

  (void)state;
  rec_init(&r);
  assert_int_equal(parallel_run(K, record, &r, NULL), K - 1);
  for (size_t i = 0; i < K; i++) {
    assert_int_equal(atomic_load(&r.runs[i]), 1);
    assert_int_equal(r.on_caller[i], i == 0);
  }
}

static void
test_tasks_run_inline_in_order_when_no_thread_starts(void **state)
{
  struct refusing rf = {.allow = 0};
  struct parallel_opts o = {.start = start_refusing, .start_ctx = &rf};
  struct rec r;

  (void)state;
  rec_init(&r);
  assert_int_equal(parallel_run(K, record, &r, &o), 0);
  /* One refusal ends the tries: the others would be refused too. */
  assert_int_equal(rf.tried, 1);
  for (size_t i = 0; i < K; i++) {
    assert_int_equal(atomic_load(&r.runs[i]), 1);
    assert_true(r.on_caller[i]);
    assert_int_equal(r.began[i], i);
  }
}

static void
test_tasks_whose_thread_is_refused_run_on_the_caller(void **state)
{
  struct refusing rf = {.allow = 3};
  struct parallel_opts o = {.start = start_refusing, .start_ctx = &rf};
  struct rec r;

  (void)state;
  rec_init(&r);
  assert_int_equal(parallel_run(K, record, &r, &o), 3);
  for (size_t i = 0; i < K; i++) {
    assert_int_equal(atomic_load(&r.runs[i]), 1);
    /* tasks 1..3 had threads; 0 and 4..7 ran here */
    assert_int_equal(r.on_caller[i], i == 0 || i > 3);
  }
}

/* A real refusal from pthread_create: a stack no system can map. */
static int
start_huge_stack(void *ctx, pthread_t *tid, void *(*run)(void *), void *arg)
{
  pthread_attr_t attr;
  int rc;

  (void)ctx;
  pthread_attr_init(&attr);
  rc = pthread_attr_setstacksize(&attr, (size_t)1 << 60);
  if (rc == 0)
    rc = pthread_create(tid, &attr, run, arg);
  pthread_attr_destroy(&attr);
  return rc;
}

static void
test_a_real_thread_refusal_runs_the_tasks_inline(void **state)
{
  struct parallel_opts o = {.start = start_huge_stack};
  struct rec r;

  (void)state;
  rec_init(&r);
  assert_int_equal(parallel_run(K, record, &r, &o), 0);
  for (size_t i = 0; i < K; i++) {
    assert_int_equal(atomic_load(&r.runs[i]), 1);
    assert_true(r.on_caller[i]);
  }
}

/* Tasks sharing a queue of items, as the sync callers do: whichever
 * threads run, every item is done once. */
struct share {
  atomic_size_t next;
  size_t n;
  atomic_uint done[1000];
};

static void
take_items(void *arg, size_t i)
{
  struct share *s = arg;
  size_t k;

  (void)i;
  while ((k = atomic_fetch_add(&s->next, 1)) < s->n)
    atomic_fetch_add(&s->done[k], 1);
}

static void
test_shared_items_are_each_done_once_with_or_without_threads(void **state)
{
  static struct share s;

  (void)state;
  for (size_t allow = 0; allow < 4; allow++) {
    struct refusing rf = {.allow = allow};
    struct parallel_opts o = {.start = start_refusing, .start_ctx = &rf};

    memset(&s, 0, sizeof(s));
    s.n = 1000;
    assert_int_equal(parallel_run(4, take_items, &s, &o), allow);
    for (size_t k = 0; k < s.n; k++)
      assert_int_equal(atomic_load(&s.done[k]), 1);
  }
}

static void
test_no_task_runs_nothing_and_one_task_starts_no_thread(void **state)
{
  struct refusing rf = {.allow = 10};
  struct parallel_opts o = {.start = start_refusing, .start_ctx = &rf};
  struct rec r;

  (void)state;
  rec_init(&r);
  assert_int_equal(parallel_run(0, record, &r, &o), 0);
  assert_int_equal(atomic_load(&r.order), 0);
  assert_int_equal(parallel_run(1, record, &r, &o), 0);
  assert_int_equal(rf.tried, 0);
  assert_int_equal(atomic_load(&r.runs[0]), 1);
  assert_true(r.on_caller[0]);
}

static void
test_cores_are_at_least_one_and_at_most_the_cap(void **state)
{
  (void)state;
  assert_int_equal(parallel_cores(1), 1);
  assert_int_equal(parallel_cores(0), 1);
  assert_true(parallel_cores(1024) >= 1);
  assert_true(parallel_cores(2) <= 2);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(
          test_each_task_runs_once_and_all_but_the_first_on_threads),
      cmocka_unit_test(test_tasks_run_inline_in_order_when_no_thread_starts),
      cmocka_unit_test(test_tasks_whose_thread_is_refused_run_on_the_caller),
      cmocka_unit_test(test_a_real_thread_refusal_runs_the_tasks_inline),
      cmocka_unit_test(
          test_shared_items_are_each_done_once_with_or_without_threads),
      cmocka_unit_test(
          test_no_task_runs_nothing_and_one_task_starts_no_thread),
      cmocka_unit_test(test_cores_are_at_least_one_and_at_most_the_cap),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
