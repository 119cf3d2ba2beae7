/*
 * What the unit tests that drive a whole broker in one loop share
 * (test_broker.c, test_autoscaler.c, test_broker_baseline.c): parsing
 * test JSON, running the loop until a condition holds (bounded by
 * GUARD_NS, a failure, never a measurement), a job's state, submitting
 * as an admin, and removing the state directory.
 *
 * Include after <cmocka.h>, once the including file has defined
 * GUARD_NS and its struct fx, which must have the members
 *   uv_loop_t loop; uv_timer_t wake; char dir[64]; char db_path[128];
 *   char self[PATH_MAX]; struct broker *b; int closed; int turn;
 * The functions are static inline: each test gets its own copy, and one
 * that a test does not use costs nothing.
 */
#ifndef TENBIN_TESTS_BROKER_FX_H
#define TENBIN_TESTS_BROKER_FX_H

#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "broker/broker.h"

static const struct principal admin = {
    .role = ROLE_ADMIN, .token_id = 0, .projects = NULL, .name = "anonymous"};

/* text as JSON (new reference); a test's own JSON must parse. */
static inline json_t *
parse(const char *text)
{
  json_error_t jerr;
  json_t *v = json_loads(text, 0, &jerr);

  if (v == NULL)
    fail_msg("test JSON '%s': %s", text, jerr.text);
  return v;
}

/* For nftw(): remove every entry of the state directory. */
static inline int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void)st;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

/* f's loop and wake timer, a state directory from dir_template
 * ("/tmp/tenbin-NAME-XXXXXX"), its database path, and this
 * executable's path (the local site's shim is the test binary). */
static inline void
fx_open(struct fx *f, const char *dir_template)
{
  ssize_t n;

  assert_int_equal(uv_loop_init(&f->loop), 0);
  uv_timer_init(&f->loop, &f->wake);
  snprintf(f->dir, sizeof(f->dir), "%s", dir_template);
  assert_non_null(mkdtemp(f->dir));
  snprintf(f->db_path, sizeof(f->db_path), "%s/tenbin.db", f->dir);
  n = readlink("/proc/self/exe", f->self, sizeof(f->self) - 1);
  assert_true(n > 0);
  f->self[n] = '\0';
}

/* After the broker: every handle closed, the loop too, the state
 * directory removed. */
static inline void
fx_close(struct fx *f)
{
  uv_close((uv_handle_t *)&f->wake, NULL);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&f->loop), 0);
  nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static inline void
on_closed(void *arg)
{
  struct fx *f = arg;

  f->closed = 1;
}

/* Close f's broker, if open, and turn the loop until it has. */
static inline void
close_broker(struct fx *f)
{
  uint64_t deadline = uv_hrtime() + GUARD_NS;

  if (f->b == NULL)
    return;
  f->closed = 0;
  broker_close(f->b, on_closed, f);
  f->b = NULL;
  /* The callback comes from the loop, never from inside broker_close(). */
  assert_int_equal(f->closed, 0);
  while (!f->closed && uv_hrtime() < deadline)
    uv_run(&f->loop, UV_RUN_ONCE);
  assert_true(f->closed);
}

typedef int (*pred_fn)(struct fx *f, const void *arg);

static inline void
on_wake(uv_timer_t *t)
{
  (void)t;
}

/* Turn the loop until pred holds, GUARD_NS at most; whether it holds.
 * f->wake keeps the loop from sleeping on a condition no event marks. */
static inline int
run_until(struct fx *f, pred_fn pred, const void *arg)
{
  uint64_t deadline = uv_hrtime() + GUARD_NS;
  int ok;

  uv_timer_start(&f->wake, on_wake, 10, 10);
  while (!pred(f, arg) && uv_hrtime() < deadline) {
    uv_run(&f->loop, UV_RUN_ONCE);
    f->turn++;
  }
  ok = pred(f, arg);
  uv_timer_stop(&f->wake);
  return ok;
}

static inline enum job_state
state_of(struct fx *f, int64_t id)
{
  struct job_view j;
  struct err e = {0};
  enum job_state s;

  job_view_init(&j);
  if (broker_job_get(f->b, &admin, id, &j, &e) < 0)
    fail_msg("job %lld: %s", (long long)id, e.msg);
  s = j.state;
  job_view_release(&j);
  return s;
}

struct want_state {
  int64_t id;
  enum job_state state;
};

static inline int
job_is(struct fx *f, const void *arg)
{
  const struct want_state *w = arg;

  return state_of(f, w->id) == w->state;
}

/* Run the loop until job id is in state, or fail saying where it is. */
static inline void
wait_state(struct fx *f, int64_t id, enum job_state state)
{
  struct want_state w = {id, state};

  if (!run_until(f, job_is, &w))
    fail_msg("job %lld is %s, never became %s", (long long)id,
             job_state_name(state_of(f, id)), job_state_name(state));
}

/* ---- submitting as an admin ---- */

/* A submission's answer, as its callback gave it. */
struct fx_answer {
  int called;
  int rc;
  int64_t id;  /* -1 when refused */
};

static inline void
fx_on_submitted(void *arg, int rc, const struct job_view *job,
                char *const *warnings, int replayed, const struct err *e)
{
  struct fx_answer *a = arg;

  (void)warnings;
  (void)replayed;
  (void)e;
  a->called++;
  a->rc = rc;
  a->id = job != NULL ? job->id : -1;
}

static inline int
fx_answered(struct fx *f, const void *arg)
{
  (void)f;
  return ((const struct fx_answer *)arg)->called > 0;
}

/* Submit body_text as an admin; its answer comes into *a later. */
static inline void
fx_submit(struct fx *f, const char *body_text, struct fx_answer *a)
{
  json_t *body = parse(body_text);
  struct err e = {0};

  memset(a, 0, sizeof(*a));
  if (broker_submit(f->b, &admin, body, NULL, NULL, fx_on_submitted, a,
                    &e) < 0)
    fail_msg("'%s' refused: %s", body_text, e.msg);
  json_decref(body);
}

/* Wait for a's answer, which must be a job: its id. */
static inline int64_t
fx_answer_id(struct fx *f, struct fx_answer *a)
{
  assert_true(run_until(f, fx_answered, a));
  assert_int_equal(a->rc, 0);
  assert_true(a->id > 0);
  return a->id;
}

/* Submit and wait: the job's id. */
static inline int64_t
fx_submit_ok(struct fx *f, const char *body_text)
{
  struct fx_answer a;

  fx_submit(f, body_text, &a);
  return fx_answer_id(f, &a);
}

#endif
