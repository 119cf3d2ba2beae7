/*
 * Run k tasks side by side, on threads when they can be started.
 *
 * Hashing a large file, listing a tree or linking thousands of files
 * splits into tasks that a libuv work item runs on several cores.  A
 * thread is a resource the system may refuse (RLIMIT_NPROC, a
 * container's pids limit): then the tasks left run on the calling
 * thread, one after another, and the work still completes.  Nothing
 * here aborts or fails; only the time taken changes.
 *
 * Tasks must not wait for one another to start (no barrier between
 * them): run inline, task 1 starts only after task 0 has returned.
 * Waiting on work another task may add, while that task is busy, is
 * fine: a task that finds no work left returns.
 */
#ifndef TENBIN_UTIL_PARALLEL_H
#define TENBIN_UTIL_PARALLEL_H

#include <pthread.h>
#include <stddef.h>

/* Task i of a run (0 <= i < k), with the run's arg (borrowed). */
typedef void parallel_fn(void *arg, size_t i);

/* Starts a thread as pthread_create(tid, NULL, run, arg) does: 0, or an
 * errno value when it cannot.  ctx is parallel_opts.start_ctx. */
typedef int parallel_start_fn(void *ctx, pthread_t *tid,
                              void *(*run)(void *), void *arg);

struct parallel_opts {
  /* How a thread is started, with start_ctx (borrowed); NULL:
   * pthread_create.  Tests pass one that refuses, to see the inline
   * path. */
  parallel_start_fn *start;
  void *start_ctx;
};

/*
 * Run fn(arg, i) once for each i in [0, k): task 0 on the calling
 * thread, each other on a thread of its own when one starts, and every
 * task whose thread could not start on the calling thread after task 0
 * (a refusal is logged once per run; no thread is tried after one).
 * Returns when every task has returned, with the number of threads
 * started (0..k-1).  opts may be NULL (the defaults).
 */
size_t parallel_run(size_t k, parallel_fn *fn, void *arg,
                    const struct parallel_opts *opts);

/* The cores online, at least 1 and at most most (>= 1): how many tasks
 * a CPU-bound run is worth splitting into. */
size_t parallel_cores(size_t most);

#endif
