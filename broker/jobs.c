/*
 * The job state machine and the read/cancel/release side of jobs.
 *
 *   queued -> placed -> submitted -> running -> succeeded | failed |
 *      \        ^                               cancelled | lost
 *       staging-/
 *
 * A job whose dataset is missing at the site chosen for it waits in
 * staging (holding no GPUs) and is placed at that site once the replica
 * is complete.  Any non-final state may also end (a site can report a
 * final state at any point, cancel can strike early, a replica can fail)
 * or go back to queued (a site refused the job, or recovery found it
 * never started).  Final states are final.  Every transition writes the
 * row and appends a job_events row.
 */
#include <stdlib.h>
#include <string.h>

#include "broker/broker_internal.h"
#include "util/alloc.h"
#include "util/log.h"
#include "util/timeutil.h"

int
broker__transition_ok(enum job_state from, enum job_state to)
{
  if (job_state_is_final(from) || from == to)
    return 0;
  if (job_state_is_final(to) || to == JOB_QUEUED)
    return 1;
  /* Staging sits between queued and placed (its enum value is last). */
  if (to == JOB_STAGING)
    return from == JOB_QUEUED;
  if (from == JOB_STAGING)
    return to == JOB_PLACED;
  /* forward only: placed < submitted < running */
  return to > from;
}

static int
latest_event_cb(const struct db_event *ev, void *arg)
{
  int64_t *latest = arg;

  if (ev->at_ms > *latest)
    *latest = ev->at_ms;
  return 0;
}

int
broker__transition(struct broker *b, struct db_job *j, enum job_state to,
                   const char *detail, int64_t at_ms, struct err *e)
{
  enum job_state from = j->state;
  int64_t now = at_ms > 0 ? at_ms : time_now_ms();
  int64_t latest = j->created_ms;
  int rc;

  if (!broker__transition_ok(from, to))
    return err_set(e, ERR_BAD_STATE, "job %lld cannot go from %s to %s",
                   (long long)j->id, job_state_name(from),
                   job_state_name(to));
  if (at_ms > 0) {
    /* A site's own clock, in whole seconds for Slurm, can put a change
     * before one already recorded (a job submitted at 12.5 s that Slurm
     * started at 12 s): the history keeps its order, so a job never
     * starts before it was created nor ends before it started. */
    rc = db_event_list(b->db, j->id, latest_event_cb, &latest, e);
    if (rc < 0)
      return rc;
    if (now < latest)
      now = latest;
  }
  /* A hold that ends without the job ending: billed up to now. */
  if (to == JOB_QUEUED && j->started_ms > 0) {
    rc = broker__ledger_hold(b, j, j->started_ms, now, "requeued", e);
    if (rc < 0)
      return rc;
    j->restarts++;
  }
  j->state = to;
  j->updated_ms = now;
  if (to == JOB_RUNNING && j->started_ms == 0)
    j->started_ms = now;
  if (job_state_is_final(to))
    j->ended_ms = now;
  if (to == JOB_QUEUED) {
    /* Placed again from scratch: nothing of the attempt that did not
     * happen may describe the next one. */
    free(j->site);
    free(j->remote_id);
    free(j->alloc);
    free(j->log_path);
    j->site = j->remote_id = j->alloc = j->log_path = NULL;
    j->started_ms = 0;
    j->exit_code = -1;
    j->signal = 0;
  }
  if (detail != NULL) {
    free(j->reason);
    j->reason = xstrdup(detail);
  }
  rc = db_job_update(b->db, j, e);
  if (rc < 0)
    return rc;
  /* The hold opens when the job runs and closes when it ends, in this
   * same transaction: the ledger and the job never disagree. */
  if (j->started_ms > 0 && (to == JOB_RUNNING || job_state_is_final(to)))
    rc = broker__ledger_hold(b, j, j->started_ms, now,
                             to == JOB_RUNNING ? NULL : job_state_name(to),
                             e);
  if (rc < 0)
    return rc;
  if (job_state_is_final(to)) {
    rc = broker__baseline_job_ended(b, j, e);
    if (rc < 0)
      return rc;
  }
  if (to == JOB_SUCCEEDED && j->started_ms > 0)
    broker__runtime_add(b, j->project,
                        j->workload != NULL ? j->workload : j->name,
                        now - j->started_ms);
  rc = db_event_append(b->db, j->id, now, job_state_name(from),
                       job_state_name(to), detail, e);
  if (rc < 0)
    return rc;
  log_debug("job %lld %s -> %s%s%s", (long long)j->id, job_state_name(from),
            job_state_name(to), detail ? ": " : "", detail ? detail : "");
  return 0;
}

int
broker__transition_tx(struct broker *b, struct db_job *j,
                      enum job_state to, const char *detail, int64_t at_ms,
                      struct err *e)
{
  int rc = db_begin(b->db, e);

  if (rc == 0)
    rc = broker__transition(b, j, to, detail, at_ms, e);
  if (rc == 0)
    rc = db_commit(b->db, e);
  if (rc < 0)
    db_rollback(b->db);
  return rc;
}

struct site *
broker__site(struct broker *b, const char *name)
{
  if (name == NULL)
    return NULL;
  for (size_t i = 0; i < b->nsites; i++) {
    if (strcmp(b->sites[i].name, name) == 0)
      return &b->sites[i];
  }
  return NULL;
}

void
job_view_init(struct job_view *v)
{
  memset(v, 0, sizeof(*v));
  v->state = JOB_QUEUED;
  v->exit_code = -1;
}

void
job_view_release(struct job_view *v)
{
  if (v == NULL)
    return;
  free(v->name);
  free(v->project);
  free(v->workload);
  free(v->site);
  free(v->reason);
  free(v->remote_id);
  free(v->gpu_type);
  free(v->alloc);
  free(v->log_path);
  free(v->spec_json);
  job_view_init(v);
}

void
broker__job_view_borrow(struct job_view *v, const struct db_job *j)
{
  memset(v, 0, sizeof(*v));
  v->id = j->id;
  v->state = j->state;
  v->name = j->name;
  v->project = j->project;
  v->workload = j->workload;
  v->site = j->site;
  v->reason = j->reason;
  v->remote_id = j->remote_id;
  v->gpus = j->gpus;
  v->gpu_type = j->gpu_type;
  v->alloc = j->alloc;
  v->hold = j->hold;
  v->exit_code = j->exit_code;
  v->signal = j->signal;
  v->log_path = j->log_path;
  v->created_ms = j->created_ms;
  v->updated_ms = j->updated_ms;
  v->started_ms = j->started_ms;
  v->ended_ms = j->ended_ms;
  v->restarts = j->restarts;
  v->spec_json = j->spec_json;
}

/* Move the strings the view shows from j into v (released first); j
 * keeps the rest and is released. */
static void
view_take(struct job_view *v, struct db_job *j)
{
  job_view_release(v);
  broker__job_view_borrow(v, j);
  j->name = j->project = j->workload = j->site = j->reason = NULL;
  j->remote_id = j->gpu_type = j->alloc = j->log_path = NULL;
  j->spec_json = NULL;
  db_job_release(j);
}

/* The row of job id after checking that p may see it (see
 * broker_job_get); out is initialised, the caller releases it. */
static int
job_row_get(struct broker *b, const struct principal *p, int64_t id,
            struct db_job *out, struct err *e)
{
  int rc = db_job_get(b->db, id, out, e);

  if (rc < 0)
    return rc;
  /* The same answer as for an id that does not exist: another
   * project's jobs, and how many it has, are none of p's business. */
  if (!principal_has_project(p, out->project)) {
    rc = err_set(e, ERR_NOT_FOUND, "job %lld not found", (long long)id);
    db_job_release(out);
    return rc;
  }
  return 0;
}

static int
start_cb(const struct db_placement *p, void *arg)
{
  *(int64_t *)arg = p->start_ms;
  return 0;
}

/* A waiting job's predicted start, as its last decision stored it. */
static void
predicted_start(struct broker *b, struct job_view *v)
{
  int found;

  /* unknown when it cannot be read: a view is shown regardless */
  /* a held job is not placed: it has no decision to read */
  if ((v->state == JOB_QUEUED || v->state == JOB_STAGING) && !v->hold &&
      db_placement_get(b->db, v->id, start_cb, &v->predicted_start_ms,
                       &found, NULL) < 0)
    v->predicted_start_ms = 0;
}

int
broker_job_get(struct broker *b, const struct principal *p, int64_t id,
               struct job_view *out, struct err *e)
{
  struct db_job j;
  int rc;

  db_job_init(&j);
  rc = job_row_get(b, p, id, &j, e);
  if (rc == 0)
    view_take(out, &j);
  if (rc == 0) {
    predicted_start(b, out);
    /* a job without GPUs has no GPU-hours: no ledger to read */
    if (out->gpus > 0)
      rc = broker__job_cost(b, out, e);
  }
  db_job_release(&j);
  return rc;
}

char *
broker_job_log_dir(struct broker *b, const struct job_view *j)
{
  struct site *site = broker__site(b, j->site);

  if (site == NULL || site->ctx == NULL || site->ops->log_dir == NULL)
    return NULL;
  return site->ops->log_dir(site->ctx, j->id);
}

/* Hands each row to the caller's callback as a view. */
struct list_ctx {
  struct broker *b;
  job_view_cb cb;
  void *arg;
};

static int
list_row_cb(const struct db_job *j, void *arg)
{
  struct list_ctx *l = arg;
  struct job_view v;

  broker__job_view_borrow(&v, j);
  predicted_start(l->b, &v);
  return l->cb(&v, l->arg);
}

int
broker_job_list(struct broker *b, const struct principal *p,
                const struct job_filter *f, job_view_cb cb, void *arg,
                struct err *e)
{
  struct db_job_filter df = {0};
  struct list_ctx l = {b, cb, arg};

  if (f->project != NULL && !principal_has_project(p, f->project))
    return err_set(e, ERR_FORBIDDEN, "no access to project '%s'",
                   f->project);
  df.state = f->state;
  df.project = f->project;
  df.site = f->site;
  df.projects = p->projects;
  df.before_id = f->before_id;
  df.limit = f->limit;
  return db_job_list(b->db, &df, list_row_cb, &l, e);
}

struct events_ctx {
  event_view_cb cb;
  void *arg;
};

static int
event_row_cb(const struct db_event *ev, void *arg)
{
  struct events_ctx *c = arg;
  struct event_view v;

  v.id = ev->id;
  v.at_ms = ev->at_ms;
  v.from_state = ev->from_state;
  v.to_state = ev->to_state;
  v.detail = ev->detail;
  return c->cb(&v, c->arg);
}

int
broker_job_events(struct broker *b, const struct principal *p, int64_t id,
                  event_view_cb cb, void *arg, struct err *e)
{
  struct events_ctx c = {cb, arg};
  struct db_job j;
  int rc;

  db_job_init(&j);
  rc = job_row_get(b, p, id, &j, e);
  db_job_release(&j);
  if (rc < 0)
    return rc;
  return db_event_list(b->db, id, event_row_cb, &c, e);
}

/* The job as an adapter sees it; spec must outlive the call. */
static int
adapter_job_of(const struct db_job *j, struct job_spec *spec,
               struct adapter_job *aj, struct err *e)
{
  json_t *obj;
  json_error_t jerr;
  int rc;

  obj = json_loads(j->spec_json, 0, &jerr);
  if (obj == NULL)
    return err_set(e, ERR_INTERNAL, "job %lld has an unreadable spec: %s",
                   (long long)j->id, jerr.text);
  rc = jobspec_from_json(spec, obj, NULL, e);
  json_decref(obj);
  if (rc < 0)
    return rc;
  /* A hold is tenbin's: a job reaches a site only once released, and a
   * site told to hold it (Slurm's JobHeldUser) would keep it forever. */
  spec->hold = 0;
  memset(aj, 0, sizeof(*aj));
  aj->id = j->id;
  aj->spec = spec;
  aj->remote_id = j->remote_id;
  aj->alloc = j->alloc;
  aj->log_path = j->log_path;
  return 0;
}

int
broker__adapter_call(const struct db_job *j,
                     int (*fn)(void *ctx, const struct adapter_job *aj,
                               struct err *e),
                     struct site *site, struct err *e)
{
  struct dataset_source src;
  struct job_spec spec;
  struct adapter_job aj;
  int rc;

  jobspec_init(&spec);
  rc = adapter_job_of(j, &spec, &aj, e);
  /* An elastic site's node pulls the dataset itself: where from goes
   * with the job (adopt too: a node may not have had it yet). */
  if (rc == 0 && adapter_is_elastic(site->ops) &&
      (fn == site->ops->submit || fn == site->ops->adopt)) {
    rc = broker__dataset_source(site->broker, &spec, &src, e);
    if (rc < 0 && fn == site->ops->adopt) {
      /* A job that runs already needs no source: re-attach anyway. */
      log_warn("job %lld: adopted without its dataset's source: %s",
               (long long)j->id, err_msg(e));
      err_clear(e);
      rc = 0;
    }
    if (rc == 0 && src.ds.name != NULL)
      aj.dataset = &src.ds;
    if (fn == site->ops->submit)
      aj.on_demand = broker__autoscaler_on_demand(site->broker, site, &spec);
  } else if (rc == 0 && fn == site->ops->submit) {
    /* The replica the job reads, for the site to pass on; a job the
     * site knows already (cancel, adopt) does without. */
    rc = broker__dataset_env(site->broker, j, &spec, e);
  }
  if (rc == 0 && fn == site->ops->submit) {
    broker__site_env(site, &spec);
    rc = broker__baseline_job_env(site->broker, j, &spec, e);
  }
  if (rc == 0 && fn == site->ops->submit) {
    char n[16];

    /* A job may pick up where its last run left off. */
    snprintf(n, sizeof(n), "%d", j->restarts);
    broker__env_set(&spec.env, "TENBIN_RESTART_COUNT", n);
  }
  if (rc == 0)
    rc = fn(site->ctx, &aj, e);
  jobspec_release(&spec);
  return rc;
}

/* Cancel the job in *j (see broker_job_cancel); *j is the row after. */
static int
job_cancel(struct broker *b, const struct principal *p, int64_t id,
           struct db_job *out, struct err *e)
{
  struct site *site;
  char detail[128];
  int rc;

  rc = job_row_get(b, p, id, out, e);
  if (rc < 0)
    return rc;
  if (out->state == JOB_CANCELLED)
    return 0;
  if (b->closing)
    return err_set(e, ERR_UNAVAILABLE, "tenbind is shutting down");
  if (job_state_is_final(out->state))
    return err_set(e, ERR_BAD_STATE, "job %lld already %s", (long long)id,
                   job_state_name(out->state));
  site = broker__site(b, out->site);
  /* A staging job is at no site yet: nothing there to stop.  Its
   * replica goes on (other jobs may want it). */
  if (out->state == JOB_QUEUED || out->state == JOB_STAGING ||
      site == NULL) {
    snprintf(detail, sizeof(detail), "cancelled by %s", p->name);
    return broker__transition_tx(b, out, JOB_CANCELLED, detail, 0, e);
  }
  snprintf(detail, sizeof(detail), "cancel requested by %s", p->name);
  /* The site ends the job; its CANCELLED update records the transition.
   * The request itself is an event, so the log shows who asked. */
  rc = db_event_append(b->db, id, time_now_ms(), job_state_name(out->state),
                       job_state_name(out->state), detail, e);
  if (rc < 0)
    return rc;
  rc = broker__adapter_call(out, site->ops->cancel, site, e);
  if (rc < 0)
    return rc;
  /* A site may have answered at once (the update has been recorded):
   * show the caller the job as it is now. */
  db_job_release(out);
  return db_job_get(b->db, id, out, e);
}

int
broker_job_cancel(struct broker *b, const struct principal *p, int64_t id,
                  struct job_view *out, struct err *e)
{
  struct db_job j;
  int rc;

  db_job_init(&j);
  rc = job_cancel(b, p, id, &j, e);
  if (rc == 0)
    view_take(out, &j);
  db_job_release(&j);
  return rc;
}

/* Release the hold of job id (see broker_job_release); *out is the row
 * after. */
static int
job_release(struct broker *b, const struct principal *p, int64_t id,
            struct db_job *out, struct err *e)
{
  int rc;

  rc = job_row_get(b, p, id, out, e);
  if (rc < 0)
    return rc;
  if (out->state != JOB_QUEUED)
    return err_set(e, ERR_BAD_STATE, "job %lld is %s, not queued",
                   (long long)id, job_state_name(out->state));
  if (!out->hold)
    return 0;
  out->hold = 0;
  out->updated_ms = time_now_ms();
  rc = db_begin(b->db, e);
  if (rc == 0)
    rc = db_job_update(b->db, out, e);
  if (rc == 0)
    rc = db_event_append(b->db, id, out->updated_ms, "queued", "queued",
                         "released", e);
  if (rc == 0)
    rc = db_commit(b->db, e);
  if (rc < 0) {
    db_rollback(b->db);
    return rc;
  }
  broker__kick(b);
  return 0;
}

int
broker_job_release(struct broker *b, const struct principal *p, int64_t id,
                   struct job_view *out, struct err *e)
{
  struct db_job j;
  int rc;

  db_job_init(&j);
  rc = job_release(b, p, id, &j, e);
  if (rc == 0)
    view_take(out, &j);
  db_job_release(&j);
  return rc;
}

void
placement_view_release(struct placement_view *v)
{
  if (v == NULL)
    return;
  free(v->verdict);
  free(v->site);
  free(v->reason);
  free(v->candidates);
  memset(v, 0, sizeof(*v));
}

static int
placement_copy_cb(const struct db_placement *p, void *arg)
{
  struct placement_view *v = arg;

  v->at_ms = p->at_ms;
  v->verdict = xstrdup(p->verdict);
  v->site = xstrdup(p->site);
  v->start_ms = p->start_ms;
  v->reason = xstrdup(p->reason);
  v->candidates = xstrdup(p->candidates != NULL ? p->candidates : "[]");
  return 0;
}

int
broker_job_placement(struct broker *b, const struct principal *p,
                     int64_t id, struct placement_view *out, struct err *e)
{
  struct db_job j;
  int found = 0;
  int rc;

  db_job_init(&j);
  memset(out, 0, sizeof(*out));
  rc = job_row_get(b, p, id, &j, e);
  db_job_release(&j);
  if (rc == 0)
    rc = db_placement_get(b->db, id, placement_copy_cb, out, &found, e);
  if (rc == 0 && !found)
    rc = err_set(e, ERR_NOT_FOUND, "job %lld has no placement decision "
                 "yet", (long long)id);
  return rc;
}
