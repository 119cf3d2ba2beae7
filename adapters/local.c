/*
 * The local site adapter: jobs run as processes on this host, each under
 * a shim (local_shim.c) that outlives tenbind.
 *
 * submit() assigns GPUs, writes the job directory (spec.json; see
 * local_int.h for the layout), takes the directory's lock and spawns
 * "SELF --shim JOBDIR" detached, handing the locked descriptor over, so
 * the lock is held without a gap from before the fork until the shim
 * exits.  The adapter learns that a shim ended from libuv's exit callback
 * for its own children and, for jobs adopted after a restart, by trying
 * the lock every WATCH_MS.  Either way it then reads status.json.
 *
 * Updates are queued and delivered from the loop (a zero timer), never
 * from inside a call the broker made, so the broker never sees an update
 * for a job whose submit() has not returned yet.
 */
#include "adapters/adapter.h"
#include "adapters/config_fields.h"
#include "adapters/local.h"
#include "adapters/update_queue.h"
#include "local_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "util/alloc.h"
#include "util/jsonx.h"
#include "util/list.h"
#include "util/log.h"
#include "util/timeutil.h"

/* How often adopted jobs' locks are tried: the delay before the final
 * update of a job that is not our child. */
#define WATCH_MS 500

extern char **environ;

struct local;

/* A job this adapter is watching. */
struct local_job {
  struct local *site;
  int64_t id;
  char *dir;
  char *remote_id;           /* "PID:STARTTIME" of the shim, or NULL */
  char *alloc;               /* "0,1", "" */
  char *log_path;            /* absolute stdout path, or NULL */
  uv_process_t proc;         /* our child: its handle (own is set) */
  int own;                   /* proc was initialised by uv_spawn */
  int lock_fd;               /* adopted: our descriptor on its lock */
  int cancel_requested;
  int cancel_sent;
  int ended;                 /* its final update is queued */
  struct list link;          /* in struct local's jobs */
};

struct local {
  uv_loop_t *loop;
  char *site_name;
  char *jobs_dir;          /* absolute STATE/jobs */
  char *self_exe;
  struct local_inventory inv;
  int64_t max_jobs;        /* 0 = no cap */
  int64_t cancel_grace_s;
  uv_timer_t watch;        /* tries adopted jobs' locks */
  struct adapter_queue updates;
  struct list jobs;        /* of struct local_job, newest first */
  int handles;             /* our uv handles not yet closed */
  int closing;
  void (*close_cb)(void *arg);
  void *close_arg;
};

/* ---- updates ---- */

static void
queue_update(struct local *l, int64_t job_id, enum job_state state,
             const char *remote_id, const char *alloc, const char *log_path,
             const char *reason, int exit_code, int sig, int64_t at_ms)
{
  struct adapter_update u = {
      .job_id = job_id,
      .state = state,
      .remote_id = remote_id,
      .alloc = alloc,
      .log_path = log_path,
      .reason = reason,
      .exit_code = exit_code,
      .signal = sig,
      .at_ms = at_ms,
  };

  adapter_queue_push(&l->updates, &u);
}

/* ---- jobs ---- */

#define JOB_OF(q) LIST_ENTRY(q, struct local_job, link)

static struct local_job *
find_job(struct local *l, int64_t id)
{
  struct list *q;

  LIST_FOREACH(q, &l->jobs) {
    if (JOB_OF(q)->id == id)
      return JOB_OF(q);
  }
  return NULL;
}

static int64_t
jobs_active(const struct local *l)
{
  const struct list *q;
  int64_t n = 0;

  LIST_FOREACH(q, &l->jobs) {
    if (!JOB_OF(q)->ended)
      n++;
  }
  return n;
}

/* A new job of l, in no list yet. */
static struct local_job *
new_job(struct local *l, int64_t id)
{
  struct local_job *j = xcalloc(1, sizeof(*j));

  list_init(&j->link);
  j->site = l;
  j->id = id;
  return j;
}

/* Take j off its site's list (if it is in it) and free it. */
static void
free_job(struct local_job *j)
{
  if (j == NULL)
    return;
  list_remove(&j->link);
  if (j->lock_fd >= 0)
    close(j->lock_fd);
  free(j->dir);
  free(j->remote_id);
  free(j->alloc);
  free(j->log_path);
  free(j);
}

static char *
job_dir(const struct local *l, int64_t id)
{
  char name[32];

  snprintf(name, sizeof(name), "%lld", (long long)id);
  return adapter_local__path(l->jobs_dir, name);
}

static int
job_file_exists(const char *dir, const char *name)
{
  char *p = adapter_local__path(dir, name);
  int r = adapter_local__exists(p);

  free(p);
  return r;
}

/* status.json of dir (new reference), or NULL when absent or unreadable
 * (*why says which). */
static json_t *
read_status(const char *dir, struct err *why)
{
  char *path = adapter_local__path(dir, "status.json");
  char *text = NULL;
  size_t len;
  json_t *st = NULL;

  if (file_read(path, LOCAL_STATUS_MAX, &text, &len, why) ==
      0) {
    if (jsonx_parse_object(text, len, &st, why) < 0)
      st = NULL;
  }
  free(text);
  free(path);
  return st;
}

static int
json_int_or(const json_t *obj, const char *key, int dflt)
{
  json_t *v = json_object_get(obj, key);

  return json_is_integer(v) ? (int)json_integer_value(v) : dflt;
}

/*
 * Queue the final update status.json describes: SUCCEEDED for exit 0,
 * CANCELLED for a cancel, FAILED otherwise with the reason the broker
 * shows ("exit code 3", "killed by signal 9 (SIGKILL)", "TIMEOUT").
 */
static void
queue_final_from_status(struct local *l, const struct local_job *j,
                        const json_t *st)
{
  const char *reason = jsonx_str(st, "reason");
  const char *error = jsonx_str(st, "error");
  int exit_code = json_int_or(st, "exit_code", -1);
  int sig = json_int_or(st, "signal", 0);
  json_t *end = json_object_get(st, "end_ms");
  int64_t end_ms = json_is_integer(end) ? json_integer_value(end) : 0;
  enum job_state state = JOB_FAILED;
  char text[ERR_MSG_SIZE];

  if (reason == NULL) {
    state = JOB_LOST;
    snprintf(text, sizeof(text), "status.json names no reason");
  } else if (strcmp(reason, LOCAL_END_CANCELLED) == 0) {
    state = JOB_CANCELLED;
    snprintf(text, sizeof(text), "%s",
             jsonx_bool(st, "killed_after_grace", 0)
                 ? "cancelled, killed by SIGKILL after the grace period"
                 : "cancelled");
  } else if (strcmp(reason, LOCAL_END_TIMEOUT) == 0) {
    snprintf(text, sizeof(text), "TIMEOUT");
  } else if (strcmp(reason, LOCAL_END_ERROR) == 0) {
    snprintf(text, sizeof(text), "%s",
             error != NULL ? error : "the job could not be started");
  } else if (sig > 0) {
    adapter_local__signal_text(sig, text, sizeof(text));
  } else {
    snprintf(text, sizeof(text), "exit code %d", exit_code);
    if (exit_code == 0)
      state = JOB_SUCCEEDED;
  }
  queue_update(l, j->id, state, j->remote_id, j->alloc, j->log_path, text,
               exit_code, sig, end_ms);
}

/*
 * The job's shim is gone (its lock is free): queue its final update and
 * give its GPUs back.  shim_exit is the shim's exit status when it was
 * our child, -1 otherwise.
 */
static void
finish_job(struct local *l, struct local_job *j, int64_t shim_exit,
           int shim_signal)
{
  struct err why = {0};
  json_t *st;

  if (j->ended)
    return;
  j->ended = 1;
  adapter_local__inventory_put(&l->inv, j->id);
  st = read_status(j->dir, &why);
  if (st != NULL) {
    if (shim_exit > 0 || shim_signal > 0)
      log_warn("job %lld: its shim ended with status %lld, signal %d; see "
               "'%s/shim.log'", (long long)j->id, (long long)shim_exit,
               shim_signal, j->dir);
    queue_final_from_status(l, j, st);
    json_decref(st);
    return;
  }
  if (why.code != ERR_NOT_FOUND)
    log_warn("job %lld: %s", (long long)j->id, err_msg(&why));
  /* No status.json: the shim died without recording the job's end. */
  if (j->cancel_requested) {
    queue_update(l, j->id, JOB_CANCELLED, j->remote_id, j->alloc,
                 j->log_path, "cancelled", -1, 0, 0);
  } else if (job_file_exists(j->dir, "started")) {
    queue_update(l, j->id, JOB_LOST, j->remote_id, j->alloc, j->log_path,
                 "shim vanished", -1, 0, 0);
  } else if (shim_exit >= 0 || shim_signal > 0) {
    char text[ERR_MSG_SIZE];

    /* Our own shim failed before starting the job: placing it again
     * would fail the same way, so say why (the shim's log has more). */
    if (shim_signal > 0)
      adapter_local__signal_text(shim_signal, text, sizeof(text));
    else
      snprintf(text, sizeof(text), "exit status %lld",
               (long long)shim_exit);
    {
      char msg[ERR_MSG_SIZE + 64];

      snprintf(msg, sizeof(msg), "shim failed before starting the job: %s",
               text);
      queue_update(l, j->id, JOB_FAILED, j->remote_id, j->alloc,
                   j->log_path, msg, -1, 0, 0);
    }
  } else {
    queue_update(l, j->id, JOB_QUEUED, NULL, NULL, NULL, "never started",
                 -1, 0, 0);
  }
}

static void maybe_finish_close(struct local *l);

static void
on_proc_closed(uv_handle_t *h)
{
  struct local_job *j = h->data;
  struct local *l = j->site;

  free_job(j);
  l->handles--;
  maybe_finish_close(l);
}

static void
on_shim_exit(uv_process_t *p, int64_t exit_status, int term_signal)
{
  struct local_job *j = p->data;

  finish_job(j->site, j, exit_status, term_signal);
  uv_close((uv_handle_t *)p, on_proc_closed);
}

/* ---- signalling a shim that is not our child ---- */

/*
 * The shim's identity: shim.pid (written by the shim itself) when present,
 * else the remote_id the broker recorded.  0 when not known yet.
 */
static int
shim_identity(const struct local_job *j, pid_t *pid,
              unsigned long long *start)
{
  char *path = adapter_local__path(j->dir, "shim.pid");
  char *text = NULL;
  int rc;

  rc = file_read(path, 128, &text, NULL, NULL);
  if (rc == 0)
    rc = adapter_local__parse_pid_file(text, pid, start);
  free(text);
  free(path);
  if (rc == 0)
    return 0;
  return adapter_local__parse_remote_id(j->remote_id, pid, start);
}

/*
 * SIGTERM to an adopted job's shim, but only to the process that really
 * is that shim: a pid alone may have been reused since it was recorded,
 * the pid with its start time cannot.  Tried again on every watch tick
 * until it is sent (the shim may not have written shim.pid yet).
 */
static void
signal_adopted(struct local_job *j)
{
  unsigned long long want;
  unsigned long long have;
  pid_t pid;

  if (j->cancel_sent || j->ended)
    return;
  if (shim_identity(j, &pid, &want) < 0)
    return;
  if (adapter_local__proc_start(pid, &have) < 0 || have != want) {
    log_debug("job %lld: process %ld is not its shim, not signalled",
              (long long)j->id, (long)pid);
    return;
  }
  if (kill(pid, SIGTERM) == 0 || errno == ESRCH)
    j->cancel_sent = 1;
}

/* ---- watching adopted jobs ---- */

static void
on_watch(uv_timer_t *t)
{
  struct local *l = t->data;
  struct list *q;
  struct list *tmp;
  int watched = 0;

  LIST_FOREACH_SAFE(q, tmp, &l->jobs) {
    struct local_job *j = JOB_OF(q);

    if (j->lock_fd >= 0 && !j->ended) {
      int got = flock(j->lock_fd, LOCK_EX | LOCK_NB) == 0;

      if (!got && errno != EWOULDBLOCK)
        log_warn("job %lld: cannot try its lock: %s", (long long)j->id,
                 strerror(errno));
      if (got) {
        finish_job(l, j, -1, 0);
        free_job(j);
      } else {
        if (j->cancel_requested)
          signal_adopted(j);
        watched++;
      }
    }
  }
  if (watched == 0)
    uv_timer_stop(&l->watch);
}

static void
start_watch(struct local *l)
{
  if (!uv_is_active((uv_handle_t *)&l->watch))
    uv_timer_start(&l->watch, on_watch, WATCH_MS, WATCH_MS);
}

/* ---- open ---- */

static void
free_site(struct local *l)
{
  adapter_local__inventory_release(&l->inv);
  free(l->site_name);
  free(l->jobs_dir);
  free(l->self_exe);
  free(l);
}

const struct jsonx_field adapter_local_fields[] = {
    {"name", JX_STRING},      {"kind", JX_STRING},
    {"gpus", JX_ANY},         {"max_jobs", JX_INT},
    {"cancel_grace_s", JX_INT}, {"first_gpu", JX_INT}, {NULL, 0}};

static int
local_open(const struct adapter_env *env, const json_t *config, void **ctx,
           struct err *e)
{
  struct local *l = NULL;
  char *state = NULL;
  int64_t first_gpu = 0;
  int rc;

  if (config != NULL && !json_is_object(config))
    return err_set(e, ERR_CONFIG, "site config must be an object");
  if (env->state_dir == NULL || env->state_dir[0] == '\0' ||
      env->self_exe == NULL || env->update == NULL)
    return err_set(e, ERR_INTERNAL,
                   "local site needs a state dir, self_exe and update");
  l = xcalloc(1, sizeof(*l));
  list_init(&l->jobs);
  l->loop = env->loop;
  l->site_name = xstrdup(env->site_name != NULL ? env->site_name : "local");
  /* The shim is started in the job directory: a relative path would not
   * find it there. */
  l->self_exe = realpath(env->self_exe, NULL);
  if (l->self_exe == NULL) {
    rc = err_set(e, ERR_INTERNAL, "cannot resolve '%s': %s", env->self_exe,
                 strerror(errno));
    goto out;
  }
  adapter_local__inventory_init(&l->inv);
  if (config != NULL) {
    rc = jsonx_check(config, adapter_local_fields, "", e);
    if (rc == 0)
      rc = jsonx_int(config, "max_jobs", 0, 1000000, 0, &l->max_jobs, "", e);
    if (rc == 0)
      rc = jsonx_int(config, "cancel_grace_s", 0, 3600, 10,
                     &l->cancel_grace_s, "", e);
    if (rc == 0)
      rc = jsonx_int(config, "first_gpu", 0, 65535, 0, &first_gpu, "", e);
    if (rc < 0) {
      rc = err_recode(e, ERR_CONFIG);
      goto out;
    }
  } else {
    l->cancel_grace_s = 10;
  }
  rc = adapter_local__inventory_configure(
      &l->inv, config != NULL ? json_object_get(config, "gpus") : NULL,
      (int)first_gpu, e);
  if (rc < 0)
    goto out;
  /* Jobs chdir elsewhere: every path handed to a shim is absolute. */
  if (env->state_dir[0] == '/') {
    state = xstrdup(env->state_dir);
  } else {
    char cwd[4096];

    if (getcwd(cwd, sizeof(cwd)) == NULL) {
      rc = err_set(e, ERR_IO, "cannot get the working directory: %s",
                   strerror(errno));
      goto out;
    }
    state = adapter_local__path(cwd, env->state_dir);
  }
  l->jobs_dir = adapter_local__path(state, "jobs");
  /* Job directories hold spec.json, which has the job's environment. */
  rc = file_mkdirs(l->jobs_dir, 0700, e);
  if (rc < 0)
    goto out;
  uv_timer_init(l->loop, &l->watch);
  adapter_queue_init(&l->updates, l->loop, env->update, env->update_arg);
  l->watch.data = l;
  l->updates.timer.data = l;
  l->handles = 2;
  *ctx = l;
  l = NULL;
  rc = 0;
out:
  if (l != NULL)
    free_site(l);
  free(state);
  return rc;
}

/* ---- submit ---- */

static int
remove_stale(const char *dir, const char *name, struct err *e)
{
  char *p = adapter_local__path(dir, name);
  int rc = 0;

  if (unlink(p) < 0 && errno != ENOENT)
    rc = err_set(e, ERR_IO, "cannot remove '%s': %s", p, strerror(errno));
  free(p);
  return rc;
}

static int
open_lock(const char *dir, int create, int *fd_out, struct err *e)
{
  char *p = adapter_local__path(dir, "lock");
  int fd = open(p, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK |
                  (create ? O_CREAT : 0), 0600);
  int rc = 0;

  /* O_CLOEXEC: no other child of tenbind may inherit (and so hold) the
   * lock; only the shim gets it, explicitly.  The job may have changed
   * its directory: no link is followed, and no open blocks. */
  if (fd < 0 && errno == ENOENT && !create)
    rc = ERR_NOT_FOUND;
  else if (fd < 0)
    rc = err_set(e, ERR_IO, "cannot open '%s': %s", p, strerror(errno));
  free(p);
  *fd_out = fd;
  return rc;
}

static int
gpus_needed(const struct job_spec *s)
{
  int64_t n = s->gpus;
  int64_t nodes = s->nodes > 0 ? s->nodes : 1;

  if (s->gpus_per_node > 0 && s->gpus_per_node * nodes > n)
    n = s->gpus_per_node * nodes;
  return n > JOBSPEC_MAX_GPUS ? JOBSPEC_MAX_GPUS + 1 : (int)n;
}

static int
local_submit(void *ctx, const struct adapter_job *job, struct err *e)
{
  struct local *l = ctx;
  const struct job_spec *s = job->spec;
  struct local_job *j = NULL;
  struct local_launch launch;
  uv_process_options_t opts;
  uv_stdio_container_t stdio[4];
  char *args[4];
  char *log_path = NULL;
  char *shim_log = NULL;
  char *text = NULL;
  char *alloc = NULL;
  char rid[64];
  const char *gpu_type = NULL;
  json_t *spec_json = NULL;
  unsigned long long start;
  int lock_fd = -1;
  int log_fd = -1;
  int took = 0;
  int rc;

  if (l->closing)
    return err_set(e, ERR_BAD_STATE, "site '%s' is closing", l->site_name);
  if (s == NULL)
    return err_set(e, ERR_INVALID, "job %lld has no spec", (long long)job->id);
  if (s->nodes > 1)
    return err_set(e, ERR_UNPROCESSABLE,
                   "site '%s' has one node, the job asks for %lld",
                   l->site_name, (long long)s->nodes);
  j = find_job(l, job->id);
  if (j != NULL && !j->ended)
    return err_set(e, ERR_CONFLICT, "job %lld is already running at '%s'",
                   (long long)job->id, l->site_name);
  j = NULL;
  if (l->max_jobs > 0 && jobs_active(l) >= l->max_jobs)
    return err_set(e, ERR_UNAVAILABLE, "site '%s' runs its maximum of %lld "
                   "jobs", l->site_name, (long long)l->max_jobs);
  rc = adapter_local__inventory_take(&l->inv, job->id, s->gpu_type,
                                     gpus_needed(s), &alloc, &gpu_type, e);
  if (rc < 0)
    goto out;
  took = 1;
  j = new_job(l, job->id);
  j->lock_fd = -1;
  j->dir = job_dir(l, job->id);
  rc = file_mkdirs(j->dir, 0700, e);
  if (rc < 0)
    goto out;
  rc = open_lock(j->dir, 1, &lock_fd, e);
  if (rc < 0)
    goto out;
  if (flock(lock_fd, LOCK_EX | LOCK_NB) < 0) {
    /* A shim from before a restart still runs it: adopt(), not submit(),
     * is the way back to it. */
    if (errno == EWOULDBLOCK)
      rc = err_set(e, ERR_CONFLICT, "job %lld still has a live shim in "
                   "'%s'", (long long)job->id, j->dir);
    else
      rc = err_set(e, ERR_IO, "cannot lock '%s/lock': %s", j->dir,
                   strerror(errno));
    goto out;
  }
  /* Under the lock, clear what an earlier attempt left, so that adopt()
   * never mistakes it for this one. */
  rc = remove_stale(j->dir, "status.json", e);
  if (rc == 0)
    rc = remove_stale(j->dir, "started", e);
  if (rc == 0)
    rc = remove_stale(j->dir, "shim.pid", e);
  if (rc == 0 && s->script != NULL)
    rc = file_write_atomic(j->dir, "script", s->script,
                                     strlen(s->script), 0700, e);
  if (rc < 0)
    goto out;
  memset(&launch, 0, sizeof(launch));
  launch.job_id = job->id;
  launch.spec = s;
  launch.site_name = l->site_name;
  launch.job_dir = j->dir;
  launch.alloc = alloc;
  launch.gpu_type = gpu_type;
  launch.ngpus = gpus_needed(s);
  launch.cancel_grace_s = l->cancel_grace_s;
  launch.environ_ = environ;
  rc = adapter_local__launch_spec(&launch, &spec_json, &log_path, e);
  if (rc < 0)
    goto out;
  text = jsonx_dump(spec_json);
  rc = file_write_atomic(j->dir, "spec.json", text, strlen(text),
                                   0600, e);
  if (rc < 0)
    goto out;
  shim_log = adapter_local__path(j->dir, "shim.log");
  /* An earlier attempt of this job may have left anything there: a
   * fifo must fail the open, not block the loop. */
  log_fd = open(shim_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC |
                O_NOFOLLOW | O_NONBLOCK, 0600);
  if (log_fd < 0) {
    rc = err_set(e, ERR_IO, "cannot open '%s': %s", shim_log,
                 strerror(errno));
    goto out;
  }
  args[0] = l->self_exe;
  args[1] = (char *)"--shim";
  args[2] = j->dir;
  args[3] = NULL;
  memset(&opts, 0, sizeof(opts));
  stdio[0].flags = UV_IGNORE;
  stdio[1].flags = UV_INHERIT_FD;
  stdio[1].data.fd = log_fd;
  stdio[2].flags = UV_INHERIT_FD;
  stdio[2].data.fd = log_fd;
  stdio[3].flags = UV_INHERIT_FD;
  stdio[3].data.fd = lock_fd;
  opts.exit_cb = on_shim_exit;
  opts.file = l->self_exe;
  opts.args = args;
  opts.cwd = j->dir;
  opts.stdio = stdio;
  opts.stdio_count = 4;
  /* A session of its own: Ctrl-C on tenbind does not reach it, and it
   * outlives tenbind. */
  opts.flags = UV_PROCESS_DETACHED;
  j->proc.data = j;
  rc = uv_spawn(l->loop, &j->proc, &opts);
  /* Initialised even when it failed: from here on the job struct is
   * freed by the handle's close callback. */
  j->own = 1;
  l->handles++;
  if (rc < 0) {
    err_set(e, ERR_INTERNAL, "cannot start the shim '%s': %s", l->self_exe,
            uv_strerror(rc));
    rc = ERR_INTERNAL;
    j->ended = 1;
    uv_close((uv_handle_t *)&j->proc, on_proc_closed);
    list_insert_head(&l->jobs, &j->link);
    j = NULL;
    goto out;
  }
  /* The shim cannot have been reaped yet (that happens on the loop), so
   * /proc still has it, zombie or not. */
  if (adapter_local__proc_start(j->proc.pid, &start) < 0)
    start = 0;
  snprintf(rid, sizeof(rid), "%ld:%llu", (long)j->proc.pid, start);
  j->remote_id = xstrdup(rid);
  j->alloc = alloc;
  alloc = NULL;
  j->log_path = log_path;
  log_path = NULL;
  list_insert_head(&l->jobs, &j->link);
  queue_update(l, j->id, JOB_SUBMITTED, j->remote_id, j->alloc, j->log_path,
               NULL, -1, 0, 0);
  queue_update(l, j->id, JOB_RUNNING, j->remote_id, j->alloc, j->log_path,
               NULL, -1, 0, 0);
  j = NULL;
  rc = 0;
out:
  /* The shim holds its own copies now. */
  if (lock_fd >= 0)
    close(lock_fd);
  if (log_fd >= 0)
    close(log_fd);
  if (rc < 0 && took)
    adapter_local__inventory_put(&l->inv, job->id);
  free_job(j);
  json_decref(spec_json);
  free(text);
  free(shim_log);
  free(log_path);
  free(alloc);
  return rc;
}

/* ---- adopt and cancel ---- */

/* What spec.json says about alloc and stdout (new strings, may be NULL). */
static void
read_launch_facts(const char *dir, char **alloc, char **log_path)
{
  char *path = adapter_local__path(dir, "spec.json");
  char *text = NULL;
  size_t len;
  json_t *obj = NULL;

  if (file_read(path, LOCAL_SPEC_MAX, &text, &len, NULL) ==
          0 &&
      jsonx_parse_object(text, len, &obj, NULL) == 0) {
    *alloc = xstrdup(jsonx_str(obj, "alloc"));
    *log_path = xstrdup(jsonx_str(obj, "stdout"));
  }
  json_decref(obj);
  free(text);
  free(path);
}

/*
 * Find out what became of job at this site, for adopt() (cancel == 0) and
 * for cancel() of a job this adapter is not watching (cancel == 1).
 *
 * Why this gives exactly-once: a job process is only ever forked by a
 * shim; a shim only runs while it holds the job's lock, which tenbind took
 * before spawning it and which the kernel drops when the shim exits; and
 * the shim makes 'started' durable before it forks.  So:
 *  - lock held: a shim is alive and will record the end.  Watch it; never
 *    launch again.
 *  - lock free, status.json: the job ran and ended; report that end.
 *  - lock free, 'started', no status: it ran, maybe partly, and its shim
 *    died without recording the end (its main process was killed with it,
 *    PR_SET_PDEATHSIG).  Nobody knows the outcome: LOST, and the broker
 *    decides whether to run it again.
 *  - no job directory or lock, or lock free and no 'started': no job
 *    process ever existed, and none can appear later, since no shim lives
 *    to fork one.  QUEUED: placing it again runs it once.
 */
static int
attach(struct local *l, const struct adapter_job *job, int cancel,
       struct err *e)
{
  struct local_job *j = NULL;
  char *dir = job_dir(l, job->id);
  char *alloc = NULL;
  char *log_path = NULL;
  pid_t pid;
  unsigned long long start;
  char rid[64];
  json_t *st;
  int fd = -1;
  int held;
  int rc;

  rc = open_lock(dir, 0, &fd, e);
  if (rc == ERR_NOT_FOUND) {
    queue_update(l, job->id, cancel ? JOB_CANCELLED : JOB_QUEUED, NULL, NULL,
                 NULL, cancel ? "cancelled" : "never started", -1, 0, 0);
    rc = 0;
    goto out;
  }
  if (rc < 0)
    goto out;
  held = flock(fd, LOCK_EX | LOCK_NB) < 0;
  if (held && errno != EWOULDBLOCK) {
    rc = err_set(e, ERR_IO, "cannot lock '%s/lock': %s", dir,
                 strerror(errno));
    goto out;
  }
  if (held) {
    /* A shim is alive: watch it. */
    j = new_job(l, job->id);
    j->dir = dir;
    dir = NULL;
    j->lock_fd = fd;
    fd = -1;
    read_launch_facts(j->dir, &alloc, &log_path);
    /* spec.json was written before the shim existed, so it is the truth
     * about the GPUs; the broker's record is the fallback. */
    j->alloc = alloc != NULL ? alloc : xstrdup(job->alloc);
    alloc = NULL;
    j->log_path = log_path != NULL ? log_path : xstrdup(job->log_path);
    log_path = NULL;
    j->remote_id = xstrdup(job->remote_id);
    if (shim_identity(j, &pid, &start) == 0) {
      snprintf(rid, sizeof(rid), "%ld:%llu", (long)pid, start);
      free(j->remote_id);
      j->remote_id = xstrdup(rid);
    }
    if (j->alloc != NULL &&
        adapter_local__inventory_claim(&l->inv, j->id, j->alloc) > 0)
      log_warn("job %lld: GPUs '%s' are not all free or known here",
               (long long)j->id, j->alloc);
    list_insert_head(&l->jobs, &j->link);
    start_watch(l);
    if (cancel) {
      j->cancel_requested = 1;
      signal_adopted(j);
    } else {
      queue_update(l, j->id, JOB_RUNNING, j->remote_id, j->alloc,
                   j->log_path, NULL, -1, 0, 0);
    }
    rc = 0;
    goto out;
  }
  /* Lock free: no shim.  The files say what happened. */
  st = read_status(dir, NULL);
  if (st != NULL) {
    struct local_job tmp;

    memset(&tmp, 0, sizeof(tmp));
    tmp.id = job->id;
    read_launch_facts(dir, &alloc, &log_path);
    tmp.remote_id = (char *)job->remote_id;
    tmp.alloc = alloc != NULL ? alloc : (char *)job->alloc;
    tmp.log_path = log_path != NULL ? log_path : (char *)job->log_path;
    queue_final_from_status(l, &tmp, st);
    json_decref(st);
  } else if (cancel) {
    queue_update(l, job->id, JOB_CANCELLED, job->remote_id, job->alloc,
                 job->log_path, "cancelled", -1, 0, 0);
  } else if (job_file_exists(dir, "started")) {
    queue_update(l, job->id, JOB_LOST, job->remote_id, job->alloc,
                 job->log_path, "shim vanished", -1, 0, 0);
  } else {
    queue_update(l, job->id, JOB_QUEUED, NULL, NULL, NULL, "never started",
                 -1, 0, 0);
  }
  rc = 0;
out:
  if (fd >= 0)
    close(fd);
  free(dir);
  free(alloc);
  free(log_path);
  return rc;
}

static int
local_adopt(void *ctx, const struct adapter_job *job, struct err *e)
{
  struct local *l = ctx;
  struct local_job *j;

  if (l->closing)
    return err_set(e, ERR_BAD_STATE, "site '%s' is closing", l->site_name);
  j = find_job(l, job->id);
  if (j != NULL) {
    /* Already watched: its updates are on their way; confirm it runs. */
    if (!j->ended)
      queue_update(l, j->id, JOB_RUNNING, j->remote_id, j->alloc,
                   j->log_path, NULL, -1, 0, 0);
    return 0;
  }
  return attach(l, job, 0, e);
}

static int
local_cancel(void *ctx, const struct adapter_job *job, struct err *e)
{
  struct local *l = ctx;
  struct local_job *j;
  int rc;

  if (l->closing)
    return err_set(e, ERR_BAD_STATE, "site '%s' is closing", l->site_name);
  j = find_job(l, job->id);
  if (j == NULL)
    return attach(l, job, 1, e);
  if (j->ended)
    return 0;
  j->cancel_requested = 1;
  if (!j->own) {
    signal_adopted(j);
    return 0;
  }
  /* Our child: until libuv reaps it its pid cannot be reused, so the
   * handle's pid is the shim for sure. */
  rc = uv_process_kill(&j->proc, SIGTERM);
  if (rc < 0 && rc != UV_ESRCH)
    return err_set(e, ERR_INTERNAL, "cannot signal the shim of job %lld: %s",
                   (long long)j->id, uv_strerror(rc));
  j->cancel_sent = 1;
  return 0;
}

/* ---- capacity and close ---- */

static void
local_capacity(void *ctx, struct adapter_capacity *out)
{
  struct local *l = ctx;

  memset(out, 0, sizeof(*out));
  out->reachable = 1;
  out->nodes = 1;
  out->nodes_down = 0;
  out->max_jobs = l->max_jobs;
  out->jobs_active = jobs_active(l);
  adapter_local__inventory_capacity(&l->inv, out);
}

static void
maybe_finish_close(struct local *l)
{
  void (*cb)(void *arg);
  void *arg;

  if (!l->closing || l->handles > 0)
    return;
  cb = l->close_cb;
  arg = l->close_arg;
  free_site(l);
  if (cb != NULL)
    cb(arg);
}

static void
on_timer_closed(uv_handle_t *h)
{
  struct local *l = h->data;

  l->handles--;
  maybe_finish_close(l);
}

static void
local_close(void *ctx, void (*cb)(void *arg), void *arg)
{
  struct local *l = ctx;
  struct list *q;
  struct list *tmp;

  l->closing = 1;
  l->close_cb = cb;
  l->close_arg = arg;
  uv_close((uv_handle_t *)&l->watch, on_timer_closed);
  adapter_queue_close(&l->updates, on_timer_closed);
  /* Jobs keep running: closing a process handle does not signal it, and
   * dropping an adopted job's descriptor does not touch its lock. */
  LIST_FOREACH_SAFE(q, tmp, &l->jobs) {
    struct local_job *j = JOB_OF(q);

    if (j->own) {
      if (!uv_is_closing((uv_handle_t *)&j->proc))
        uv_close((uv_handle_t *)&j->proc, on_proc_closed);
    } else {
      free_job(j);
    }
  }
}

/* A job's log is served from its own directory only: one job's output
 * pointed at another's log must not show it. */
static char *
local_log_dir(void *ctx, int64_t job_id)
{
  return job_dir(ctx, job_id);
}

const struct adapter_ops adapter_local_ops = {
    .kind = "local",
    .api_version = ADAPTER_API_VERSION,
    .open = local_open,
    .submit = local_submit,
    .cancel = local_cancel,
    .adopt = local_adopt,
    .capacity = local_capacity,
    .close = local_close,
    .log_dir = local_log_dir,
};
