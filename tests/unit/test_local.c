/*
 * Tests of the local site adapter: real jobs run as processes under the
 * real shim.  The shim is tenbind's own executable in "--shim" mode; here
 * that executable is this test binary, whose main() dispatches to
 * adapter_local_shim_main() first.
 *
 * Every job is short, and waits on files rather than on time: a job that
 * must still be running when the test acts touches 'ready' and then waits
 * for a 'go' file in its directory.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "adapters/adapter.h"
#include "adapters/local.h"
#include "adapters/local_int.h"
#include "spec/jobspec.h"
#include "util/alloc.h"

#define MAX_UPDATES 128
/* A guard against a hang, never a timing assertion: a test that has not
 * seen what it waits for within this long has failed anyway. */
#define GUARD_NS (60ull * 1000 * 1000 * 1000)
#define WAIT_GO "touch ready; while [ ! -e go ]; do sleep 0.02; done"

struct rec {
  int64_t job_id;
  enum job_state state;
  char *remote_id;
  char *alloc;
  char *log_path;
  char *reason;
  int exit_code;
  int signal;
};

struct fx {
  uv_loop_t loop;
  uv_timer_t tick;
  char state[256];  /* the temporary state dir */
  char self[PATH_MAX];
  void *ctx;     /* the open site, or NULL */
  int closed;
  struct rec ups[MAX_UPDATES];
  int nups;
};

/* ---- job specs ---- */

/* A new NULL-terminated vector of the arguments up to NULL. */
static char **
strv_of(const char *first, ...)
{
  char **v = NULL;
  va_list ap;

  va_start(ap, first);
  for (const char *s = first; s != NULL; s = va_arg(ap, const char *))
    strv_push(&v, s);
  va_end(ap);
  return v;
}

/* What jobspec validation guarantees: a name and a project. */
static void
spec_init_(struct job_spec *s)
{
  jobspec_init(s);
  s->name = xstrdup("t");
  s->project = xstrdup("p");
}

/* A spec running "/bin/sh -c cmd". */
static void
spec_sh(struct job_spec *s, const char *cmd)
{
  spec_init_(s);
  s->argv = strv_of("/bin/sh", "-c", cmd, NULL);
}

/* ---- fixture ---- */

static void
on_update(void *arg, const struct adapter_update *batch, size_t n)
{
  struct fx *f = arg;

  for (size_t i = 0; i < n; i++) {
    const struct adapter_update *u = &batch[i];
    struct rec *r;

    assert_true(f->nups < MAX_UPDATES);
    r = &f->ups[f->nups++];
    r->job_id = u->job_id;
    r->state = u->state;
    r->remote_id = xstrdup(u->remote_id);
    r->alloc = xstrdup(u->alloc);
    r->log_path = xstrdup(u->log_path);
    r->reason = xstrdup(u->reason);
    r->exit_code = u->exit_code;
    r->signal = u->signal;
  }
}

static int
setup(void **state)
{
  struct fx *f = xcalloc(1, sizeof(*f));
  ssize_t n;

  assert_int_equal(uv_loop_init(&f->loop), 0);
  uv_timer_init(&f->loop, &f->tick);
  snprintf(f->state, sizeof(f->state), "/tmp/tenbin-local-XXXXXX");
  assert_non_null(mkdtemp(f->state));
  n = readlink("/proc/self/exe", f->self, sizeof(f->self) - 1);
  assert_true(n > 0);
  f->self[n] = '\0';
  *state = f;
  return 0;
}

static void
on_closed(void *arg)
{
  struct fx *f = arg;

  f->closed = 1;
}

static void
close_site(struct fx *f)
{
  if (f->ctx == NULL)
    return;
  f->closed = 0;
  adapter_local_ops.close(f->ctx, on_closed, f);
  f->ctx = NULL;
  /* The callback comes from the loop, never from inside close(). */
  assert_int_equal(f->closed, 0);
  while (!f->closed)
    uv_run(&f->loop, UV_RUN_ONCE);
}

static int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void)st;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

static int
teardown(void **state)
{
  struct fx *f = *state;

  close_site(f);
  uv_close((uv_handle_t *)&f->tick, NULL);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&f->loop), 0);
  nftw(f->state, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  for (int i = 0; i < f->nups; i++) {
    free(f->ups[i].remote_id);
    free(f->ups[i].alloc);
    free(f->ups[i].log_path);
    free(f->ups[i].reason);
  }
  free(f);
  return 0;
}

static int
try_open(struct fx *f, const char *config, void **ctx, struct err *e)
{
  struct adapter_env env = {
      .loop = &f->loop,
      .site_name = "local",
      .state_dir = f->state,
      .self_exe = f->self,
      .update = on_update,
      .update_arg = f,
  };
  json_t *cfg = NULL;
  int rc;

  if (config != NULL) {
    cfg = json_loads(config, 0, NULL);
    assert_non_null(cfg);
  }
  rc = adapter_local_ops.open(&env, cfg, ctx, e);
  json_decref(cfg);
  return rc;
}

static void
open_site(struct fx *f, const char *config)
{
  struct err e = {0};

  assert_null(f->ctx);
  assert_int_equal(try_open(f, config, &f->ctx, &e), 0);
}

/* ---- running the loop until something happened ---- */

typedef int (*pred_fn)(struct fx *f, const void *arg);

static void
on_tick(uv_timer_t *t)
{
  (void)t;
}

static void
run_until(struct fx *f, pred_fn pred, const void *arg)
{
  uint64_t deadline = uv_hrtime() + GUARD_NS;
  int ok;

  /* The tick wakes the loop to re-check conditions on files. */
  uv_timer_start(&f->tick, on_tick, 10, 10);
  while (!pred(f, arg) && uv_hrtime() < deadline)
    uv_run(&f->loop, UV_RUN_ONCE);
  ok = pred(f, arg);
  uv_timer_stop(&f->tick);
  assert_true(ok);
}

static const struct rec *
find_final(const struct fx *f, int64_t id)
{
  for (int i = 0; i < f->nups; i++) {
    /* QUEUED from the site is final too: "place it again". */
    if (f->ups[i].job_id == id && (job_state_is_final(f->ups[i].state) ||
                                   f->ups[i].state == JOB_QUEUED))
      return &f->ups[i];
  }
  return NULL;
}

static const struct rec *
find_state(const struct fx *f, int64_t id, enum job_state st)
{
  for (int i = 0; i < f->nups; i++) {
    if (f->ups[i].job_id == id && f->ups[i].state == st)
      return &f->ups[i];
  }
  return NULL;
}

static int
has_final(struct fx *f, const void *arg)
{
  return find_final(f, *(const int64_t *)arg) != NULL;
}

static char *
job_path(const struct fx *f, int64_t id, const char *name)
{
  size_t n = strlen(f->state) + strlen(name) + 32;
  char *p = xmalloc(n);

  snprintf(p, n, "%s/jobs/%lld/%s", f->state, (long long)id, name);
  return p;
}

static char *
read_text(const char *path)
{
  char *text = NULL;

  assert_int_equal(
      file_read(path, 1 << 20, &text, NULL, NULL), 0);
  return text;
}

/* The shim is this (sanitized) binary: its complaints land in shim.log. */
static void
assert_shim_log_clean(const struct fx *f, int64_t id)
{
  char *path = job_path(f, id, "shim.log");
  char *text = NULL;

  if (file_read(path, 1 << 20, &text, NULL, NULL) == 0) {
    if (strstr(text, "Sanitizer") != NULL ||
        strstr(text, "runtime error") != NULL)
      fail_msg("shim of job %lld: %s", (long long)id, text);
    free(text);
  }
  free(path);
}

static const struct rec *
wait_final(struct fx *f, int64_t id)
{
  run_until(f, has_final, &id);
  assert_shim_log_clean(f, id);
  return find_final(f, id);
}

static int
file_exists_pred(struct fx *f, const void *arg)
{
  (void)f;
  return adapter_local__exists(arg);
}

static void
wait_file(struct fx *f, int64_t id, const char *name)
{
  char *p = job_path(f, id, name);

  run_until(f, file_exists_pred, p);
  free(p);
}

static void
touch(const struct fx *f, int64_t id, const char *name)
{
  char *p = job_path(f, id, name);
  int fd = open(p, O_WRONLY | O_CREAT, 0600);

  assert_true(fd >= 0);
  close(fd);
  free(p);
}

static int
submit(struct fx *f, int64_t id, const struct job_spec *s, struct err *e)
{
  struct adapter_job job = {.id = id, .spec = s};

  return adapter_local_ops.submit(f->ctx, &job, e);
}

static void
submit_sh(struct fx *f, int64_t id, const char *cmd)
{
  struct job_spec s;
  struct err e = {0};

  spec_sh(&s, cmd);
  if (submit(f, id, &s, &e) != 0)
    fail_msg("submit of job %lld: %s", (long long)id, e.msg);
  jobspec_release(&s);
}

static const struct rec *
adopt(struct fx *f, int64_t id, const char *remote_id)
{
  struct adapter_job job = {.id = id, .remote_id = remote_id};
  struct job_spec s;
  struct err e = {0};
  int n = f->nups;

  spec_sh(&s, "true");
  job.spec = &s;
  assert_int_equal(adapter_local_ops.adopt(f->ctx, &job, &e), 0);
  jobspec_release(&s);
  /* Delivered from the loop, not from inside adopt(). */
  assert_int_equal(f->nups, n);
  while (f->nups == n)
    uv_run(&f->loop, UV_RUN_ONCE);
  return &f->ups[n];
}

static char *
log_of(const struct rec *r)
{
  assert_non_null(r->log_path);
  return read_text(r->log_path);
}

/* ---- the tests ---- */

static void
test_adapter_find_returns_the_local_adapter(void **state)
{
  (void)state;
  assert_ptr_equal(adapter_find("local"), &adapter_local_ops);
  assert_null(adapter_find("nosuch"));
  assert_null(adapter_find(NULL));
}

static void
test_echo_hello_succeeds_with_its_output_in_the_log(void **state)
{
  struct fx *f = *state;
  struct job_spec s;
  struct err e = {0};
  const struct rec *r;
  char *expect_log = job_path(f, 1, "output.log");
  char *text;
  pid_t pid;
  unsigned long long start;

  open_site(f, NULL);
  spec_init_(&s);
  s.argv = strv_of("echo", "hello", NULL);
  assert_int_equal(submit(f, 1, &s, &e), 0);
  jobspec_release(&s);
  /* Updates come from the loop, after submit() returned. */
  assert_int_equal(f->nups, 0);
  r = wait_final(f, 1);
  assert_int_equal(r->state, JOB_SUCCEEDED);
  assert_int_equal(r->exit_code, 0);
  assert_int_equal(r->signal, 0);
  assert_int_equal(f->ups[0].state, JOB_SUBMITTED);
  assert_int_equal(f->ups[1].state, JOB_RUNNING);
  assert_int_equal(
      adapter_local__parse_remote_id(f->ups[0].remote_id, &pid, &start), 0);
  assert_string_equal(f->ups[0].log_path, expect_log);
  assert_string_equal(f->ups[0].alloc, "");
  text = log_of(r);
  assert_string_equal(text, "hello\n");
  free(text);
  free(expect_log);
}

static void
test_exit_3_fails_with_exit_code_3(void **state)
{
  struct fx *f = *state;
  const struct rec *r;

  open_site(f, NULL);
  submit_sh(f, 2, "exit 3");
  r = wait_final(f, 2);
  assert_int_equal(r->state, JOB_FAILED);
  assert_int_equal(r->exit_code, 3);
  assert_string_equal(r->reason, "exit code 3");
}

static void
test_job_killed_by_a_signal_fails_naming_the_signal(void **state)
{
  struct fx *f = *state;
  const struct rec *r;

  open_site(f, NULL);
  submit_sh(f, 3, "kill -KILL $$");
  r = wait_final(f, 3);
  assert_int_equal(r->state, JOB_FAILED);
  assert_int_equal(r->signal, SIGKILL);
  assert_int_equal(r->exit_code, -1);
  assert_string_equal(r->reason, "killed by signal 9 (SIGKILL)");
}

static void
test_command_not_found_fails_saying_so(void **state)
{
  struct fx *f = *state;
  struct job_spec s;
  struct err e = {0};
  const struct rec *r;

  open_site(f, NULL);
  spec_init_(&s);
  s.argv = strv_of("tenbin-no-such-command", NULL);
  assert_int_equal(submit(f, 4, &s, &e), 0);
  jobspec_release(&s);
  r = wait_final(f, 4);
  assert_int_equal(r->state, JOB_FAILED);
  assert_int_equal(r->exit_code, 127);
  assert_string_equal(r->reason,
                      "command 'tenbin-no-such-command' not found");
}

static void
test_cancel_ends_a_running_job_as_cancelled(void **state)
{
  struct fx *f = *state;
  struct adapter_job job = {.id = 5};
  struct err e = {0};
  const struct rec *r;

  open_site(f, NULL);
  submit_sh(f, 5, "touch ready; exec sleep 30");
  wait_file(f, 5, "ready");
  assert_int_equal(adapter_local_ops.cancel(f->ctx, &job, &e), 0);
  /* Idempotent. */
  assert_int_equal(adapter_local_ops.cancel(f->ctx, &job, &e), 0);
  r = wait_final(f, 5);
  assert_int_equal(r->state, JOB_CANCELLED);
  assert_int_equal(r->signal, SIGTERM);
  assert_string_equal(r->reason, "cancelled");
  /* Gone now: still not an error. */
  assert_int_equal(adapter_local_ops.cancel(f->ctx, &job, &e), 0);
}

/* 1 when no process pid exists, not even a zombie. */
static int
pid_absent(pid_t pid)
{
  char path[64];

  snprintf(path, sizeof(path), "/proc/%ld", (long)pid);
  return !adapter_local__exists(path);
}

static pid_t
pid_from(const struct fx *f, int64_t id, const char *name)
{
  char *path = job_path(f, id, name);
  char *text = read_text(path);
  pid_t pid = (pid_t)strtol(text, NULL, 10);

  free(text);
  free(path);
  assert_true(pid > 0);
  return pid;
}

static void
test_an_ended_job_leaves_no_process_behind(void **state)
{
  struct fx *f = *state;
  struct adapter_job job = {.id = 8};
  struct err e = {0};
  const struct rec *r;
  pid_t child;
  pid_t escaped;

  open_site(f, NULL);
  /* One child stays in the job's process group, one leaves it. */
  submit_sh(f, 8, "sleep 300 & echo $! > child.pid; "
                  "setsid sleep 300 & echo $! > escaped.pid; "
                  "touch ready; wait");
  wait_file(f, 8, "ready");
  child = pid_from(f, 8, "child.pid");
  escaped = pid_from(f, 8, "escaped.pid");
  assert_int_equal(adapter_local_ops.cancel(f->ctx, &job, &e), 0);
  r = wait_final(f, 8);
  assert_int_equal(r->state, JOB_CANCELLED);
  /* Killed and reaped before the end was recorded. */
  assert_true(pid_absent(child));
  assert_true(pid_absent(escaped));
}

static void
test_job_ignoring_sigterm_is_killed_after_the_grace_period(void **state)
{
  struct fx *f = *state;
  struct adapter_job job = {.id = 6};
  struct err e = {0};
  const struct rec *r;

  open_site(f, "{\"cancel_grace_s\": 1}");
  submit_sh(f, 6, "trap '' TERM; touch ready; sleep 30");
  wait_file(f, 6, "ready");
  assert_int_equal(adapter_local_ops.cancel(f->ctx, &job, &e), 0);
  r = wait_final(f, 6);
  assert_int_equal(r->state, JOB_CANCELLED);
  assert_int_equal(r->signal, SIGKILL);
  assert_string_equal(r->reason,
                      "cancelled, killed by SIGKILL after the grace period");
}

static void
test_time_limit_fails_the_job_with_timeout(void **state)
{
  struct fx *f = *state;
  struct job_spec s;
  struct err e = {0};
  const struct rec *r;

  open_site(f, NULL);
  spec_init_(&s);
  s.argv = strv_of("sleep", "30", NULL);
  s.time_limit_s = 1;
  assert_int_equal(submit(f, 7, &s, &e), 0);
  jobspec_release(&s);
  r = wait_final(f, 7);
  assert_int_equal(r->state, JOB_FAILED);
  assert_string_equal(r->reason, "TIMEOUT");
  assert_int_equal(r->signal, SIGTERM);
}

static void
submit_gpu_job(struct fx *f, int64_t id, const char *type, int64_t n,
               int expect)
{
  struct job_spec s;
  struct err e = {0};

  spec_sh(&s, "echo \"$CUDA_VISIBLE_DEVICES $TENBIN_GPUS $TENBIN_GPU_TYPE\"");
  s.gpus = n;
  s.gpu_type = xstrdup(type);
  assert_int_equal(submit(f, id, &s, &e), expect);
  jobspec_release(&s);
}

static const struct adapter_gpu_pool *
pool_of(const struct adapter_capacity *c, const char *type)
{
  for (int i = 0; i < c->npools; i++) {
    if (strcmp(c->pools[i].type, type) == 0)
      return &c->pools[i];
  }
  fail_msg("no pool '%s'", type);
  return NULL;
}

static void
test_gpus_are_assigned_disjoint_and_never_more_than_exist(void **state)
{
  struct fx *f = *state;
  struct adapter_capacity cap;
  const struct rec *r1;
  const struct rec *r2;
  char *log1;
  char *log2;

  open_site(f, "{\"gpus\": {\"h100\": 4}}");
  submit_gpu_job(f, 11, "h100", 2, 0);
  submit_gpu_job(f, 12, "h100", 2, 0);
  submit_gpu_job(f, 13, "h100", 2, ERR_UNAVAILABLE);
  adapter_local_ops.capacity(f->ctx, &cap);
  assert_int_equal(cap.npools, 1);
  assert_int_equal(pool_of(&cap, "h100")->total, 4);
  assert_int_equal(pool_of(&cap, "h100")->in_use, 4);
  assert_int_equal(pool_of(&cap, "h100")->per_node, 4);
  assert_int_equal(cap.nodes, 1);
  assert_int_equal(cap.jobs_active, 2);
  r1 = wait_final(f, 11);
  r2 = wait_final(f, 12);
  assert_int_equal(r1->state, JOB_SUCCEEDED);
  assert_int_equal(r2->state, JOB_SUCCEEDED);
  /* Lowest free first, and what the job saw is what was reported. */
  log1 = log_of(r1);
  log2 = log_of(r2);
  assert_string_equal(log1, "0,1 2 h100\n");
  assert_string_equal(log2, "2,3 2 h100\n");
  assert_string_equal(r1->alloc, "0,1");
  assert_string_equal(r2->alloc, "2,3");
  free(log1);
  free(log2);
  /* Freed once they ended. */
  adapter_local_ops.capacity(f->ctx, &cap);
  assert_int_equal(pool_of(&cap, "h100")->in_use, 0);
  assert_int_equal(cap.jobs_active, 0);
  submit_gpu_job(f, 13, "h100", 2, 0);
  assert_int_equal(wait_final(f, 13)->state, JOB_SUCCEEDED);
}

/* Two local sites split one host's GPUs: the second numbers its own from
 * first_gpu, so CUDA_VISIBLE_DEVICES names GPUs the first never hands out. */
static void
test_first_gpu_numbers_the_inventory_from_that_index(void **state)
{
  struct fx *f = *state;
  const struct rec *r;
  char *log;

  open_site(f, "{\"gpus\": {\"h100\": 2}, \"first_gpu\": 4}");
  submit_gpu_job(f, 21, "h100", 2, 0);
  r = wait_final(f, 21);
  assert_int_equal(r->state, JOB_SUCCEEDED);
  log = log_of(r);
  assert_string_equal(log, "4,5 2 h100\n");
  assert_string_equal(r->alloc, "4,5");
  free(log);
}

static void
test_gpus_of_any_type_come_from_a_single_pool(void **state)
{
  struct fx *f = *state;
  const struct rec *r;
  char *text;

  open_site(f, "{\"gpus\": {\"h100\": 1, \"a10g\": 2}}");
  submit_gpu_job(f, 14, NULL, 2, 0);
  r = wait_final(f, 14);
  text = log_of(r);
  assert_string_equal(text, "1,2 2 a10g\n");
  free(text);
  /* One of each type is not two of one type. */
  submit_gpu_job(f, 15, NULL, 3, ERR_UNPROCESSABLE);
}

static void
test_requests_the_site_can_never_run_are_unprocessable(void **state)
{
  struct fx *f = *state;
  struct job_spec s;
  struct err e = {0};

  open_site(f, "{\"gpus\": {\"h100\": 4}}");
  submit_gpu_job(f, 16, "a10g", 1, ERR_UNPROCESSABLE);
  submit_gpu_job(f, 16, "h100", 5, ERR_UNPROCESSABLE);
  spec_sh(&s, "true");
  s.nodes = 2;
  assert_int_equal(submit(f, 16, &s, &e), ERR_UNPROCESSABLE);
  jobspec_release(&s);
  assert_int_equal(f->nups, 0);
}

static void
test_max_jobs_makes_further_jobs_wait(void **state)
{
  struct fx *f = *state;
  struct job_spec s;
  struct err e = {0};
  struct adapter_capacity cap;

  open_site(f, "{\"max_jobs\": 1, \"gpus\": {}}");
  submit_sh(f, 17, WAIT_GO);
  spec_sh(&s, "true");
  assert_int_equal(submit(f, 18, &s, &e), ERR_UNAVAILABLE);
  /* The same job twice is a conflict, not a second run. */
  assert_int_equal(submit(f, 17, &s, &e), ERR_CONFLICT);
  adapter_local_ops.capacity(f->ctx, &cap);
  assert_int_equal(cap.max_jobs, 1);
  assert_int_equal(cap.jobs_active, 1);
  assert_int_equal(cap.npools, 0);
  wait_file(f, 17, "ready");
  touch(f, 17, "go");
  assert_int_equal(wait_final(f, 17)->state, JOB_SUCCEEDED);
  assert_int_equal(submit(f, 18, &s, &e), 0);
  jobspec_release(&s);
  assert_int_equal(wait_final(f, 18)->state, JOB_SUCCEEDED);
}

static void
test_adopt_of_a_running_job_reports_its_end(void **state)
{
  struct fx *f = *state;
  const struct rec *r;
  char *first_rid;

  open_site(f, "{\"gpus\": {\"h100\": 2}}");
  {
    struct job_spec s;
    struct err e = {0};

    spec_sh(&s, WAIT_GO "; exit 7");
    s.gpus = 1;
    assert_int_equal(submit(f, 21, &s, &e), 0);
    jobspec_release(&s);
  }
  wait_file(f, 21, "ready");
  first_rid = xstrdup(find_state(f, 21, JOB_SUBMITTED)->remote_id);
  /* tenbind goes away; the job keeps running. */
  close_site(f);
  open_site(f, "{\"gpus\": {\"h100\": 2}}");
  /* The broker lost the remote id: the job directory still has it. */
  r = adopt(f, 21, NULL);
  assert_int_equal(r->state, JOB_RUNNING);
  assert_string_equal(r->remote_id, first_rid);
  assert_string_equal(r->alloc, "0");
  {
    struct adapter_capacity cap;

    /* Its GPU is not handed out twice. */
    adapter_local_ops.capacity(f->ctx, &cap);
    assert_int_equal(pool_of(&cap, "h100")->in_use, 1);
    assert_int_equal(cap.jobs_active, 1);
  }
  touch(f, 21, "go");
  r = wait_final(f, 21);
  assert_int_equal(r->state, JOB_FAILED);
  assert_int_equal(r->exit_code, 7);
  free(first_rid);
}

static void
test_adopt_of_an_ended_job_reports_its_end_at_once(void **state)
{
  struct fx *f = *state;
  const struct rec *r;

  open_site(f, NULL);
  submit_sh(f, 22, "exit 3");
  wait_final(f, 22);
  close_site(f);
  open_site(f, NULL);
  r = adopt(f, 22, NULL);
  assert_int_equal(r->state, JOB_FAILED);
  assert_int_equal(r->exit_code, 3);
  assert_string_equal(r->reason, "exit code 3");
}

static void
test_adopt_without_a_job_dir_is_queued(void **state)
{
  struct fx *f = *state;
  const struct rec *r;

  open_site(f, NULL);
  r = adopt(f, 23, NULL);
  assert_int_equal(r->state, JOB_QUEUED);
  assert_string_equal(r->reason, "never started");
}

static void
test_adopt_before_the_job_started_is_queued(void **state)
{
  struct fx *f = *state;
  char *dir = job_path(f, 24, "");
  char *lock = job_path(f, 24, "lock");
  int fd;

  /* What a crash between the lock and the spawn leaves behind. */
  assert_int_equal(file_mkdirs(dir, 0700, NULL), 0);
  fd = open(lock, O_RDWR | O_CREAT, 0600);
  assert_true(fd >= 0);
  close(fd);
  open_site(f, NULL);
  assert_int_equal(adopt(f, 24, NULL)->state, JOB_QUEUED);
  free(dir);
  free(lock);
}

static int
lock_is_free(struct fx *f, const void *arg)
{
  int fd = open(arg, O_RDWR | O_CLOEXEC);
  int free_ = 0;

  (void)f;
  if (fd >= 0) {
    free_ = flock(fd, LOCK_EX | LOCK_NB) == 0;
    close(fd);
  }
  return free_;
}

static int
process_gone(struct fx *f, const void *arg)
{
  pid_t pid = *(const pid_t *)arg;
  char path[64];
  char *text = NULL;
  int gone;

  (void)f;
  snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
  if (file_read(path, 4096, &text, NULL, NULL) < 0)
    return 1;
  /* A zombie waiting for whoever reaps orphans here is gone too. */
  gone = strstr(text, ") Z ") != NULL;
  free(text);
  return gone;
}

static void
test_adopt_after_the_shim_was_killed_is_lost(void **state)
{
  struct fx *f = *state;
  char *lock = job_path(f, 25, "lock");
  char *pidfile = job_path(f, 25, "jobpid");
  char *text;
  const struct rec *r;
  unsigned long long start;
  pid_t shim;
  pid_t job;

  open_site(f, NULL);
  submit_sh(f, 25, "echo $$ > jobpid; touch ready; exec sleep 300");
  wait_file(f, 25, "ready");
  assert_int_equal(adapter_local__parse_remote_id(
                       find_state(f, 25, JOB_SUBMITTED)->remote_id, &shim,
                       &start),
                   0);
  text = read_text(pidfile);
  job = (pid_t)strtol(text, NULL, 10);
  free(text);
  close_site(f);
  assert_int_equal(kill(shim, SIGKILL), 0);
  run_until(f, lock_is_free, lock);
  /* Its job died with it rather than run on unrecorded. */
  run_until(f, process_gone, &job);
  open_site(f, NULL);
  r = adopt(f, 25, NULL);
  assert_int_equal(r->state, JOB_LOST);
  assert_string_equal(r->reason, "shim vanished");
  free(lock);
  free(pidfile);
}

static void
test_export_none_hides_a_variable_export_all_passes(void **state)
{
  struct fx *f = *state;
  const char *cmd = "echo \"[${TENBIN_TEST_SECRET-unset}] [${MINE-}] "
                    "$TENBIN_JOB_ID $TENBIN_SITE $TENBIN_PROJECT "
                    "[$CUDA_VISIBLE_DEVICES] $TENBIN_GPUS\"";
  struct job_spec s;
  struct err e = {0};
  char *text;

  setenv("TENBIN_TEST_SECRET", "s3cret", 1);
  open_site(f, NULL);
  spec_sh(&s, cmd);
  assert_int_equal(submit(f, 31, &s, &e), 0);
  jobspec_release(&s);
  spec_sh(&s, cmd);
  s.export_mode = JOBSPEC_EXPORT_NONE;
  s.env = strv_of("MINE=1", NULL);
  assert_int_equal(submit(f, 32, &s, &e), 0);
  jobspec_release(&s);
  spec_sh(&s, "echo \"[${TENBIN_TEST_SECRET-unset}] $PATH\"");
  s.export_mode = JOBSPEC_EXPORT_NONE;
  s.export_names = strv_of("TENBIN_TEST_SECRET", NULL);
  assert_int_equal(submit(f, 33, &s, &e), 0);
  jobspec_release(&s);
  text = log_of(wait_final(f, 31));
  assert_string_equal(text, "[s3cret] [] 31 local p [] 0\n");
  free(text);
  text = log_of(wait_final(f, 32));
  assert_string_equal(text, "[unset] [1] 32 local p [] 0\n");
  free(text);
  text = log_of(wait_final(f, 33));
  assert_string_equal(text, "[s3cret] /usr/local/bin:/usr/bin:/bin\n");
  free(text);
  unsetenv("TENBIN_TEST_SECRET");
}

static void
test_script_job_runs_its_script(void **state)
{
  struct fx *f = *state;
  struct job_spec s;
  struct err e = {0};
  struct stat st;
  char *script = job_path(f, 41, "script");
  char *text;

  open_site(f, NULL);
  spec_init_(&s);
  s.script = xstrdup("#!/bin/sh\n#SBATCH --job-name=t\n"
                     "echo \"script of job $TENBIN_JOB_ID in $(pwd)\"\n");
  assert_int_equal(submit(f, 41, &s, &e), 0);
  jobspec_release(&s);
  text = log_of(wait_final(f, 41));
  {
    char expect[512];

    snprintf(expect, sizeof(expect), "script of job 41 in %s/jobs/41\n",
             f->state);
    assert_string_equal(text, expect);
  }
  free(text);
  assert_int_equal(stat(script, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0700);
  free(script);
}

static void
test_output_patterns_expand_relative_to_the_working_directory(void **state)
{
  struct fx *f = *state;
  struct job_spec s;
  struct err e = {0};
  const struct rec *r;
  char work[512];
  char path[1024];
  char expect[1024];
  char *text;

  snprintf(work, sizeof(work), "%s/work", f->state);
  assert_int_equal(mkdir(work, 0700), 0);
  open_site(f, NULL);
  spec_sh(&s, "echo out; echo err >&2; pwd");
  free(s.name);
  s.name = xstrdup("train");
  s.chdir = xstrdup(work);
  s.stdout_path = xstrdup("out-%j-%x-100%%.log");
  s.stderr_path = xstrdup("err-%j.log");
  assert_int_equal(submit(f, 51, &s, &e), 0);
  jobspec_release(&s);
  r = wait_final(f, 51);
  assert_int_equal(r->state, JOB_SUCCEEDED);
  snprintf(path, sizeof(path), "%s/out-51-train-100%%.log", work);
  assert_string_equal(r->log_path, path);
  text = read_text(path);
  snprintf(expect, sizeof(expect), "out\n%s\n", work);
  assert_string_equal(text, expect);
  free(text);
  snprintf(path, sizeof(path), "%s/err-51.log", work);
  text = read_text(path);
  assert_string_equal(text, "err\n");
  free(text);
}

static void
test_pattern_expansion_keeps_unknown_sequences(void **state)
{
  char *out = NULL;

  (void)state;
  assert_int_equal(
      adapter_local__expand_pattern("a%j_%A_%x%", 9, "n", &out, NULL), 0);
  assert_string_equal(out, "a9_%A_n%");
  free(out);
}

static void
test_cancel_with_a_stale_remote_id_signals_nothing(void **state)
{
  struct fx *f = *state;
  char *dir = job_path(f, 999, "");
  char *lock = job_path(f, 999, "lock");
  char stale[64];
  struct adapter_job job = {.id = 999};
  struct err e = {0};
  const struct rec *r;
  unsigned long long start;
  pid_t shim;
  int fd;

  open_site(f, NULL);
  submit_sh(f, 61, WAIT_GO);
  wait_file(f, 61, "ready");
  assert_int_equal(adapter_local__parse_remote_id(
                       find_state(f, 61, JOB_SUBMITTED)->remote_id, &shim,
                       &start),
                   0);
  /* Job 999 looks alive (its lock is held, here by the test) and was
   * recorded with job 61's shim pid but another start time: the pid was
   * reused since. */
  assert_int_equal(file_mkdirs(dir, 0700, NULL), 0);
  fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  assert_true(fd >= 0);
  assert_int_equal(flock(fd, LOCK_EX), 0);
  snprintf(stale, sizeof(stale), "%ld:%llu", (long)shim, start + 1);
  assert_int_equal(adopt(f, 999, stale)->state, JOB_RUNNING);
  job.remote_id = stale;
  assert_int_equal(adapter_local_ops.cancel(f->ctx, &job, &e), 0);
  /* Job 61's shim was not signalled: the job ends on its own. */
  touch(f, 61, "go");
  r = wait_final(f, 61);
  assert_int_equal(r->state, JOB_SUCCEEDED);
  /* Once 999's "shim" goes, the cancel is what is reported. */
  close(fd);
  r = wait_final(f, 999);
  assert_int_equal(r->state, JOB_CANCELLED);
  free(dir);
  free(lock);
}

static void
test_config_is_validated_naming_the_field(void **state)
{
  static const struct {
    const char *config;
    const char *field;
  } cases[] = {
      {"{\"gpu\": 1}", "'gpu'"},
      {"{\"gpus\": {\"h100\": -1}}", "'gpus.h100'"},
      {"{\"gpus\": {\"H 100\": 1}}", "'gpus.H 100'"},
      {"{\"gpus\": \"all\"}", "'gpus'"},
      {"{\"gpus\": 8}", "'gpus'"},
      {"{\"max_jobs\": \"x\"}", "'max_jobs'"},
      {"{\"max_jobs\": -1}", "'max_jobs'"},
      {"{\"cancel_grace_s\": 3601}", "'cancel_grace_s'"},
  };
  struct fx *f = *state;
  struct err e = {0};
  void *ctx = NULL;

  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    err_clear(&e);
    assert_int_equal(try_open(f, cases[i].config, &ctx, &e), ERR_CONFIG);
    assert_int_equal(e.code, ERR_CONFIG);
    if (strstr(e.msg, cases[i].field) == NULL)
      fail_msg("%s: '%s' does not name %s", cases[i].config, e.msg,
               cases[i].field);
  }
  /* name and kind belong to the broker and are accepted. */
  open_site(f, "{\"name\": \"local\", \"kind\": \"local\", \"gpus\": "
               "{\"h100\": 8, \"a10g\": 2}, \"max_jobs\": 0, "
               "\"cancel_grace_s\": 0}");
}

static void
test_nvidia_smi_lines_give_gpu_types(void **state)
{
  static const char smi[] =
      "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa)\n"
      "GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-bbbb)\n"
      "  MIG 1g.10gb     Device  0: (UUID: MIG-cccc)\n"
      "GPU 2: NVIDIA A10G (UUID: GPU-dddd)\n"
      "GPU 3: Tesla T4 (UUID: GPU-eeee)\n"
      "GPU 4: NVIDIA L40S (UUID: GPU-ffff)\n"
      "GPU 5: NVIDIA GeForce RTX 4090 (UUID: GPU-gggg)\n"
      "GPU 6: NVIDIA H100 80GB HBM3 (UUID: GPU-hhhh)";
  static const char *const types[] = {"h100", "a100", "a10g", "t4",
                                      "l40s", "geforce-rtx-4090", "h100"};
  struct local_inventory inv;
  char *alloc = NULL;
  const char *type = NULL;

  (void)state;
  adapter_local__inventory_init(&inv);
  assert_int_equal(adapter_local__inventory_parse_smi(&inv, smi, NULL), 0);
  assert_int_equal(inv.ngpus, 7);
  assert_int_equal(inv.npools, 6);
  for (size_t i = 0; i < inv.ngpus; i++) {
    assert_int_equal(inv.gpus[i].index, (int)i);
    assert_string_equal(inv.types[inv.gpus[i].pool], types[i]);
  }
  assert_int_equal(adapter_local__inventory_take(&inv, 1, "h100", 2, &alloc,
                                                 &type, NULL),
                   0);
  assert_string_equal(alloc, "0,6");
  assert_string_equal(type, "h100");
  free(alloc);
  adapter_local__inventory_release(&inv);
}

static void
test_auto_inventory_asks_nvidia_smi_on_path(void **state)
{
  struct fx *f = *state;
  struct adapter_capacity cap;
  char bin[512];
  char *old_path = xstrdup(getenv("PATH"));
  char *new_path;
  static const char script[] =
      "#!/bin/sh\n"
      "echo 'GPU 0: NVIDIA H200 (UUID: GPU-1)'\n"
      "echo 'GPU 1: NVIDIA H200 (UUID: GPU-2)'\n";

  snprintf(bin, sizeof(bin), "%s/bin", f->state);
  assert_int_equal(mkdir(bin, 0700), 0);
  assert_int_equal(file_write_atomic(bin, "nvidia-smi", script,
                                               strlen(script), 0700, NULL),
                   0);
  {
    size_t n = strlen(bin) + strlen(old_path) + 2;

    new_path = xmalloc(n);
    snprintf(new_path, n, "%s:%s", bin, old_path);
  }
  setenv("PATH", new_path, 1);
  open_site(f, "{\"gpus\": \"auto\"}");
  setenv("PATH", old_path, 1);
  adapter_local_ops.capacity(f->ctx, &cap);
  assert_int_equal(cap.npools, 1);
  assert_int_equal(pool_of(&cap, "h200")->total, 2);
  free(new_path);
  free(old_path);
}

static void
test_auto_inventory_without_nvidia_smi_says_why_it_has_no_gpus(
    void **state)
{
  struct fx *f = *state;
  struct adapter_capacity cap;
  char *old_path = xstrdup(getenv("PATH"));
  char empty[512];

  /* A PATH with no nvidia-smi on it: a host without the driver. */
  snprintf(empty, sizeof(empty), "%s/nobin", f->state);
  assert_int_equal(mkdir(empty, 0700), 0);
  setenv("PATH", empty, 1);
  open_site(f, "{\"gpus\": \"auto\"}");
  setenv("PATH", old_path, 1);
  adapter_local_ops.capacity(f->ctx, &cap);
  assert_int_equal(cap.npools, 0);
  assert_int_equal(cap.reachable, 1);
  assert_string_equal(cap.detail, "nvidia-smi is not on PATH");
  free(old_path);
}

int
main(int argc, char **argv)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_adapter_find_returns_the_local_adapter),
      cmocka_unit_test(test_pattern_expansion_keeps_unknown_sequences),
      cmocka_unit_test(test_nvidia_smi_lines_give_gpu_types),
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
      T(test_echo_hello_succeeds_with_its_output_in_the_log),
      T(test_exit_3_fails_with_exit_code_3),
      T(test_job_killed_by_a_signal_fails_naming_the_signal),
      T(test_command_not_found_fails_saying_so),
      T(test_cancel_ends_a_running_job_as_cancelled),
      T(test_an_ended_job_leaves_no_process_behind),
      T(test_job_ignoring_sigterm_is_killed_after_the_grace_period),
      T(test_time_limit_fails_the_job_with_timeout),
      T(test_gpus_are_assigned_disjoint_and_never_more_than_exist),
      T(test_first_gpu_numbers_the_inventory_from_that_index),
      T(test_gpus_of_any_type_come_from_a_single_pool),
      T(test_requests_the_site_can_never_run_are_unprocessable),
      T(test_max_jobs_makes_further_jobs_wait),
      T(test_adopt_of_a_running_job_reports_its_end),
      T(test_adopt_of_an_ended_job_reports_its_end_at_once),
      T(test_adopt_without_a_job_dir_is_queued),
      T(test_adopt_before_the_job_started_is_queued),
      T(test_adopt_after_the_shim_was_killed_is_lost),
      T(test_export_none_hides_a_variable_export_all_passes),
      T(test_script_job_runs_its_script),
      T(test_output_patterns_expand_relative_to_the_working_directory),
      T(test_cancel_with_a_stale_remote_id_signals_nothing),
      T(test_config_is_validated_naming_the_field),
      T(test_auto_inventory_without_nvidia_smi_says_why_it_has_no_gpus),
      T(test_auto_inventory_asks_nvidia_smi_on_path),
#undef T
  };

  /* The shim is this binary, as it is tenbind in production. */
  if (argc >= 2 && strcmp(argv[1], "--shim") == 0)
    return adapter_local_shim_main(argc - 2, argv + 2);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
