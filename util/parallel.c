/*
 * k tasks on threads, inline when a thread cannot start (see parallel.h).
 */
#include "parallel.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "log.h"

/* One task, as a thread's start argument. */
struct task {
  parallel_fn *fn;
  void *arg;
  size_t i;
  pthread_t tid;
};

static void *
task_run(void *arg)
{
  struct task *t = arg;

  t->fn(t->arg, t->i);
  return NULL;
}

static int
start_default(void *ctx, pthread_t *tid, void *(*run)(void *), void *arg)
{
  (void)ctx;
  return pthread_create(tid, NULL, run, arg);
}

size_t
parallel_run(size_t k, parallel_fn *fn, void *arg,
             const struct parallel_opts *opts)
{
  parallel_start_fn *start =
      opts != NULL && opts->start != NULL ? opts->start : start_default;
  void *ctx = opts != NULL ? opts->start_ctx : NULL;
  struct task *t = NULL;
  size_t started = 0;

  if (k == 0)
    return 0;
  if (k > 1)
    t = xcalloc(k - 1, sizeof(*t));
  /* Tasks 1..k-1 in order, until the system refuses a thread: a second
   * try would most likely be refused too. */
  for (size_t j = 1; j < k; j++) {
    int rc;

    t[j - 1] = (struct task){.fn = fn, .arg = arg, .i = j};
    rc = start(ctx, &t[j - 1].tid, task_run, &t[j - 1]);
    if (rc != 0) {
      log_warn("cannot start a thread (%s): %zu of %zu tasks run inline",
               strerror(rc), k - j, k);
      break;
    }
    started++;
  }
  fn(arg, 0);
  for (size_t j = 1 + started; j < k; j++)
    fn(arg, j);
  for (size_t j = 0; j < started; j++)
    pthread_join(t[j].tid, NULL);
  free(t);
  return started;
}

size_t
parallel_cores(size_t most)
{
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

  if (most < 1)
    most = 1;
  return ncpu < 1 ? 1 : (size_t)ncpu > most ? most : (size_t)ncpu;
}
