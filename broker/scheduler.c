/*
 * The scheduler: placement passes, dispatch to sites, and the updates the
 * sites send back.
 *
 * A pass takes a snapshot of every site's capacity, walks the runnable
 * queue oldest first and asks the placement policy about each job.  Jobs
 * placed in a pass are committed as `placed` before any site hears of
 * them, so a crash between the commit and the launch leaves a job that
 * recovery hands to adopt(): the adapter's tag decides whether it ran.
 *
 * A job that names a dataset goes where the version is complete when
 * the policy gives a choice (among the sites it would run on now, or
 * else among those it waits for); when none of those has it, the job
 * goes `staging` at the policy's pick (a site with an agent), the site's
 * agent is asked to pull the version, and the job holds no GPUs
 * meanwhile: staging overlaps the transfer with the wait for capacity.
 * Each pass then looks at the staging jobs first: once the replica is
 * complete the job is placed at that same site as soon as it fits there
 * (it may wait there, still staging, for GPUs); a failed replica fails
 * the job with the agent's error.  An elastic site (aws, gcp, azure)
 * is never staged to: its VM's node agent pulls the version when the
 * job gets there, so such a job is placed as one whose data is there,
 * and the bytes the node reports with the job's end are billed then.
 *
 * The cost policy (policies/placement.h) gets its inputs for the pass
 * from costing.c, and the oldest waiting job of each GPU type reserves
 * its start so that smaller ones pass it only when they end before;
 * first-fit lets small jobs pass a large one that waits (backfill
 * without reservations).  A decision is stored, explained, only when it
 * changes.
 *
 * NEEDSWORK: a pass looks at the SCHEDULE_BATCH oldest runnable jobs
 * only, so with more waiting jobs than that a small one further back is
 * not placed until the head moves.
 */
#include <stdlib.h>
#include <string.h>

#include "broker/broker_internal.h"
#include "util/alloc.h"
#include "util/grow.h"
#include "util/jsonx.h"
#include "util/log.h"
#include "util/timeutil.h"

/* Jobs looked at per pass: bounds the work of one loop turn. */
#define SCHEDULE_BATCH 256
/* Staging jobs looked at per pass (each costs one replica lookup). */
#define STAGING_BATCH 1000

void
broker__placement_request(const struct job_spec *spec,
                          struct placement_request *req)
{
  req->gpus = spec->gpus;
  req->gpu_type = spec->gpu_type;
  req->nodes = spec->nodes;
  req->gpus_per_node = spec->gpus_per_node;
  req->site = spec->site;
}

void
broker__snapshot(struct broker *b, struct placement_site *out,
                 struct adapter_capacity *caps)
{
  for (size_t i = 0; i < b->nsites && i < PLACEMENT_MAX_SITES; i++) {
    struct site *s = &b->sites[i];
    struct adapter_capacity *c = &caps[i];
    struct placement_site *ps = &out[i];

    memset(c, 0, sizeof(*c));
    s->ops->capacity(s->ctx, c);
    memset(ps, 0, sizeof(*ps));
    ps->name = s->name;
    ps->reachable = c->reachable;
    ps->unknown = c->unknown;
    ps->detail = c->detail;
    ps->nodes = c->nodes;
    ps->max_jobs = c->max_jobs;
    ps->grows_on_submit = c->grows_on_submit;
    ps->jobs_active = c->jobs_active;
    ps->npools = c->npools < PLACEMENT_MAX_POOLS ? c->npools
                                                 : PLACEMENT_MAX_POOLS;
    for (int k = 0; k < ps->npools; k++) {
      ps->pools[k].type = c->pools[k].type;
      ps->pools[k].total = c->pools[k].total;
      /* Jobs already waiting in the site's own queue come first there. */
      ps->pools[k].free = c->pools[k].total - c->pools[k].in_use -
                          c->pools[k].down - c->pools[k].pending -
                          c->pools[k].grow;
      if (ps->pools[k].free < 0)
        ps->pools[k].free = 0;
      ps->pools[k].per_node = c->pools[k].per_node;
      ps->pools[k].grow = c->pools[k].grow;
    }
  }
}

/* Take what job asks from the snapshot of the site it was placed on, so
 * the rest of the pass sees the capacity it leaves. */
static void
snapshot_reserve(struct placement_site *site, const struct job_spec *spec)
{
  int64_t need = spec->gpus;

  site->jobs_active++;
  for (int k = 0; k < site->npools && need > 0; k++) {
    struct placement_pool *p = &site->pools[k];

    if (spec->gpu_type != NULL && strcmp(spec->gpu_type, p->type) != 0)
      continue;
    if (p->free >= need) {
      p->free -= need;
      need = 0;
    }
  }
}

/* Every candidate's verdict and reason, and with a cost decision its
 * terms (money in micro-dollars, -1 where not estimated). */
static json_t *
candidates_json(const struct placement_decision *d, int costed)
{
  json_t *arr = json_array();
  static const char *const verdicts[] = {"now", "wait", "never"};
  static const char *const excluded[] = {NULL, "site", "data", "deadline"};

  for (size_t i = 0; i < d->ncandidates; i++) {
    const struct placement_candidate *c = &d->candidates[i];
    json_t *o = json_pack("{s:s, s:s, s:f, s:s}", "site", c->site,
                          "verdict", verdicts[c->verdict], "score",
                          c->score, "reason", c->reason);

    if (costed) {
      jsonx_set_time(o, "start", c->start_ms);
      json_object_set_new(o, "runtime_ms", json_integer(c->runtime_ms));
      json_object_set_new(o, "compute_micro",
                          json_integer(c->compute_micro));
      json_object_set_new(o, "data_micro", json_integer(c->data_micro));
      json_object_set_new(o, "waiting_micro",
                          json_integer(c->waiting_micro));
      json_object_set_new(o, "total_micro", json_integer(c->total_micro));
      json_object_set_new(o, "priced", json_boolean(c->priced));
      json_object_set_new(o, "held", json_boolean(c->held));
      json_object_set_new(o, "picked", json_boolean(c->index == d->pick));
      if ((unsigned)c->excluded < 4 && excluded[c->excluded] != NULL)
        jsonx_set_str(o, "excluded", excluded[c->excluded]);
    }
    json_array_append_new(arr, o);
  }
  return arr;
}

/* Copy of a listed row, collected before any write. */
struct job_list {
  struct db_job *rows;
  size_t n;
  size_t cap;
};

static int
collect_cb(const struct db_job *j, void *arg)
{
  struct job_list *l = arg;
  struct db_job *r;

  GROW(l->rows, l->n + 1, l->cap);
  r = &l->rows[l->n++];
  db_job_init(r);
  r->id = j->id;
  r->state = j->state;
  r->name = xstrdup(j->name);
  r->project = xstrdup(j->project);
  r->workload = xstrdup(j->workload);
  r->site = xstrdup(j->site);
  r->spec_json = xstrdup(j->spec_json);
  r->gpus = j->gpus;
  r->gpu_type = xstrdup(j->gpu_type);
  r->hold = j->hold;
  r->idem_key = xstrdup(j->idem_key);
  r->idem_hash = xstrdup(j->idem_hash);
  r->remote_id = xstrdup(j->remote_id);
  r->alloc = xstrdup(j->alloc);
  r->reason = xstrdup(j->reason);
  r->log_path = xstrdup(j->log_path);
  r->exit_code = j->exit_code;
  r->signal = j->signal;
  r->created_ms = j->created_ms;
  r->updated_ms = j->updated_ms;
  r->started_ms = j->started_ms;
  r->ended_ms = j->ended_ms;
  r->restarts = j->restarts;
  return 0;
}

static void
job_list_release(struct job_list *l)
{
  for (size_t i = 0; i < l->n; i++)
    db_job_release(&l->rows[i]);
  free(l->rows);
  l->rows = NULL;
  l->n = l->cap = 0;
}

static int
spec_of(const struct db_job *j, struct job_spec *spec, struct err *e)
{
  json_error_t jerr;
  json_t *obj = json_loads(j->spec_json, 0, &jerr);
  int rc;

  if (obj == NULL)
    return err_set(e, ERR_INTERNAL, "job %lld has an unreadable spec: %s",
                   (long long)j->id, jerr.text);
  rc = jobspec_from_json(spec, obj, NULL, e);
  json_decref(obj);
  return rc;
}

/* Record why j waits, but only when that changes: a waiting job is
 * looked at every pass and its history would be noise. */
static int
set_reason(struct broker *b, struct db_job *j, const char *reason,
           struct err *e)
{
  if (j->reason != NULL && strcmp(j->reason, reason) == 0)
    return 0;
  free(j->reason);
  j->reason = xstrdup(reason);
  j->updated_ms = time_now_ms();
  return db_job_update(b->db, j, e);
}

static int
snap_index(const struct placement_site *snap, size_t n, const char *name)
{
  for (size_t i = 0; i < n; i++) {
    if (strcmp(snap[i].name, name) == 0)
      return (int)i;
  }
  return -1;
}

static int
replica_complete(struct broker *b, const char *name, const char *version,
                 const char *site)
{
  struct db_replica r;
  int ok = db_replica_get(b->db, name, version, site, &r, NULL) == 0 &&
           r.state == DB_REPLICA_COMPLETE;

  db_replica_release(&r);
  return ok;
}

/* Whether site s can get a dataset it lacks: its agent pulls it, or,
 * elastic, its nodes do (pulls: the source has an agent to pull from). */
static int
can_receive(const struct site *s, int pulls)
{
  if (s == NULL)
    return 0;
  return adapter_is_elastic(s->ops) ? pulls : s->agent != NULL;
}

/* The predicted start of decision d: its pick's (0: not estimated). */
static int64_t
pick_start(const struct placement_decision *d)
{
  for (size_t i = 0; d->pick >= 0 && i < d->ncandidates; i++) {
    if (d->candidates[i].index == d->pick)
      return d->candidates[i].start_ms > 0 ? d->candidates[i].start_ms : 0;
  }
  return 0;
}

/* Store the decision for j: verdict and site, predicted start, reason,
 * every candidate's say. */
static int
record_decision(struct broker *b, const struct db_job *j,
                const struct placement_decision *d, const char *verdict,
                const char *site, struct err *e)
{
  json_t *cands = candidates_json(d, b->policy->decide_cost != NULL);
  char *text = jsonx_dump(cands);
  struct db_placement p = {j->id, time_now_ms(), verdict, site,
                           pick_start(d), d->reason, text};
  int rc = db_placement_put(b->db, &p, e);

  free(text);
  json_decref(cands);
  return rc;
}

/* Place j at snap[i] now (the caller dispatches it after the commit). */
static int
place_at(struct broker *b, struct db_job *j, const struct job_spec *spec,
         const struct placement_decision *d, struct placement_site *snap,
         int i, const char *reason, struct err *e)
{
  int rc = record_decision(b, j, d, "now", snap[i].name, e);

  if (rc < 0)
    return rc;
  free(j->site);
  j->site = xstrdup(snap[i].name);
  rc = broker__transition(b, j, JOB_PLACED, reason, 0, e);
  if (rc < 0)
    return rc;
  snapshot_reserve(&snap[i], spec);
  return 1;
}

/*
 * Decide for a queued job with a dataset, given the policy's decision d
 * (NOW or WAIT).  Returns 1 when placed, 0 otherwise.
 */
static int
decide_data(struct broker *b, struct db_job *j, const struct job_spec *spec,
            struct placement_site *snap, struct placement_decision *d,
            struct err *e)
{
  char name[BROKER_DS_NAME];
  char version[BROKER_DS_VERSION];
  char reason[PLACEMENT_REASON_LEN + 160];
  struct db_dataset_version v = {0};
  struct db_dataset ds = {0};
  struct site *s;
  int target = -1;
  int have = 0;
  int pulls = 0;   /* the source can be pulled from by a node */
  int weighed;
  int rc;

  rc = broker__dataset_split(spec->dataset, name, version, e);
  /* A spec stored before datasets were resolved at submit, or naming a
   * version that is gone, can never be staged: say so once. */
  if (rc == 0)
    rc = db_dataset_version_get(b->db, name, version, &v, e);
  db_dataset_version_release(&v);
  if (rc == 0)
    rc = db_dataset_get(b->db, name, &ds, e);
  if (rc == 0) {
    s = broker__site(b, ds.source_site);
    pulls = s != NULL && s->agent_url != NULL;
  }
  db_dataset_release(&ds);
  if (rc == ERR_NOT_FOUND || rc == ERR_INVALID)
    return broker__transition(b, j, JOB_FAILED, err_msg(e), 0, e);
  if (rc < 0)
    return rc;
  /* The cost policy weighed the data already: its pick.  Else, among
   * the sites of the policy's verdict, in its order: the first that has
   * the data, else the first that can get it.  An elastic site gets it
   * on the node, when the job starts there: no staging. */
  weighed = b->policy->decide_cost != NULL && d->pick >= 0;
  if (weighed) {
    target = d->pick;
    have = replica_complete(b, name, version, snap[target].name);
    s = broker__site(b, snap[target].name);
    if (!have && !can_receive(s, pulls))
      target = -1;
  }
  for (size_t k = 0; !weighed && k < d->ncandidates; k++) {
    const struct placement_candidate *c = &d->candidates[k];
    int i = snap_index(snap, b->nsites, c->site);

    if (c->verdict != d->verdict || i < 0)
      continue;
    if (replica_complete(b, name, version, c->site)) {
      target = i;
      have = 1;
      break;
    }
    if (target < 0 && can_receive(broker__site(b, c->site), pulls))
      target = i;
  }
  if (target < 0) {
    snprintf(reason, sizeof(reason), "no site the job fits can receive "
             "dataset %s (none of them has an agent%s)", name,
             pulls ? "" : ", nor its source one for a VM to pull from");
    return set_reason(b, j, reason, e);
  }
  s = broker__site(b, snap[target].name);
  if (!have && adapter_is_elastic(s->ops))
    have = 1;
  if (have && d->verdict == PLACEMENT_NOW) {
    if (target == d->site)
      return place_at(b, j, spec, d, snap, target, d->reason, e);
    snprintf(reason, sizeof(reason), "site '%s' %s dataset %s@%.12s",
             snap[target].name,
             adapter_is_elastic(s->ops) ? "pulls" : "has", name, version);
    return place_at(b, j, spec, d, snap, target, reason, e);
  }
  if (have) {
    s->waiting++;
    return set_reason(b, j, d->reason, e);
  }
  /* Stage: ask for the replica, hold no capacity. */
  rc = broker__replica_want(b, name, version, snap[target].name, j->project,
                            1, NULL, e);
  if (rc < 0)
    return rc;
  rc = record_decision(b, j, d, d->verdict == PLACEMENT_NOW ? "now" : "wait",
                       snap[target].name, e);
  if (rc < 0)
    return rc;
  free(j->site);
  j->site = xstrdup(snap[target].name);
  snprintf(reason, sizeof(reason), "waiting for dataset %s@%s at site '%s'",
           name, version, snap[target].name);
  rc = broker__transition(b, j, JOB_STAGING, reason, 0, e);
  return rc < 0 ? rc : 0;
}

/*
 * Decide for one staging job inside the pass's transaction: placed at
 * its site once the replica is complete and the job fits there now
 * (returns 1), failed with the replica, else left as it is (0).
 */
static int
decide_staged(struct broker *b, struct db_job *j,
              struct placement_site *snap, struct err *e)
{
  struct placement_request req;
  struct placement_decision d;
  struct job_spec spec;
  struct db_replica r;
  char name[BROKER_DS_NAME];
  char version[BROKER_DS_VERSION];
  char reason[PLACEMENT_SUMMARY_LEN + 2 * BROKER_DS_NAME + 160];
  int i;
  int rc;

  jobspec_init(&spec);
  memset(&r, 0, sizeof(r));
  rc = spec_of(j, &spec, e);
  if (rc == 0)
    rc = broker__dataset_split(spec.dataset, name, version, e);
  if (rc < 0) {
    rc = broker__transition(b, j, JOB_FAILED, err_msg(e), 0, e);
    goto out;
  }
  rc = db_replica_get(b->db, name, version, j->site, &r, e);
  if (rc == ERR_NOT_FOUND) {
    /* Gone from under the job (cannot happen today): ask again. */
    rc = broker__replica_want(b, name, version, j->site, j->project, 1, &r,
                              e);
    if (rc == ERR_UNPROCESSABLE) {
      snprintf(reason, sizeof(reason), "dataset %s@%s at %s: %s", name,
               version, j->site, err_msg(e));
      rc = broker__transition(b, j, JOB_FAILED, reason, 0, e);
      goto out;
    }
  }
  if (rc < 0)
    goto out;
  switch (r.state) {
  case DB_REPLICA_PENDING:
  case DB_REPLICA_SYNCING:
  case DB_REPLICA_STATE_COUNT:
    break;
  case DB_REPLICA_FAILED:
  case DB_REPLICA_SUPERSEDED: /* the source moved on: it is not there */
    snprintf(reason, sizeof(reason), "dataset %s@%s at %s: %s", name,
             version, j->site, r.error != NULL ? r.error : "failed");
    rc = broker__transition(b, j, JOB_FAILED, reason, 0, e);
    break;
  case DB_REPLICA_COMPLETE:
    i = snap_index(snap, b->nsites, j->site);
    if (i < 0) {
      snprintf(reason, sizeof(reason), "site '%s' is no longer configured",
               j->site);
      rc = broker__transition(b, j, JOB_FAILED, reason, 0, e);
      break;
    }
    /* Placed again, at the site that has the data now. */
    broker__placement_request(&spec, &req);
    req.site = j->site;
    b->policy->decide(&req, snap, b->nsites, &d);
    if (d.verdict == PLACEMENT_NOW) {
      snprintf(reason, sizeof(reason), "dataset %s@%.12s staged; %s", name,
               version, d.reason);
      rc = place_at(b, j, &spec, &d, snap, i, reason, e);
    } else if (d.verdict == PLACEMENT_WAIT) {
      b->sites[i].waiting++;
      snprintf(reason, sizeof(reason), "dataset %s@%.12s staged; %s", name,
               version, d.reason);
      rc = set_reason(b, j, reason, e);
    } else {
      rc = broker__transition(b, j, JOB_FAILED, d.reason, 0, e);
    }
    break;
  }
out:
  db_replica_release(&r);
  jobspec_release(&spec);
  return rc;
}

/* One job's decision and what it was decided from.  A pass has one and
 * reuses it job after job: it is large. */
struct decision {
  struct placement_site only[PLACEMENT_MAX_SITES]; /* a spent budget's */
  const struct placement_site *sites;              /* snap, or only */
  char closed[PLACEMENT_REASON_LEN];               /* why rented sites are
                                                      closed to the job */
  struct placement_request req;
  struct placement_cost cost;
  struct placement_data data[PLACEMENT_MAX_SITES];
  int costed;   /* decided by the cost policy, with its inputs */
  int blocked;  /* the job's project spent its hard budget */
  struct placement_decision d;
};

/*
 * The policy's decision for j, numbers only (explain() writes the
 * words).  A job whose project spent its hard budget sees the rented
 * sites closed (placement_site.closed): they keep what they could ever
 * run, so nothing becomes impossible, and it waits for owned capacity.
 */
static int
decide(struct broker *b, const struct db_job *j, const struct job_spec *spec,
       const struct placement_site *snap, struct pass_cost *pc,
       struct decision *x, struct err *e)
{
  int rc;

  broker__placement_request(spec, &x->req);
  x->sites = snap;
  x->blocked = broker__budget_blocks_rented(b, j->project);
  if (x->blocked || spec->require_baseline) {
    memcpy(x->only, snap, sizeof(x->only[0]) * b->nsites);
    x->sites = x->only;
  }
  if (x->blocked) {
    snprintf(x->closed, sizeof(x->closed), "project '%s' spent its hard "
             "budget this month: no rented site until it is raised",
             j->project);
    for (size_t i = 0; i < b->nsites; i++) {
      if (b->sites[i].cost.kind == SITE_RENTED)
        x->only[i].closed = x->closed;
    }
  }
  /* A site that is not at the reference's baseline is waited for, as a
   * closed one: a probe may bring it back. */
  for (size_t i = 0; spec->require_baseline && i < b->nsites; i++) {
    const char *bars = broker__baseline_bars(b, i);

    if (bars != NULL)
      x->only[i].closed = bars;
  }
  x->costed = b->policy->decide_cost != NULL && pc != NULL;
  if (!x->costed) {
    b->policy->decide(&x->req, x->sites, b->nsites, &x->d);
    return 0;
  }
  rc = broker__pass_cost_job(b, pc, spec, x->data, &x->cost, e);
  if (rc < 0)
    return rc;
  placement_cost_decide(&x->req, x->sites, b->nsites, &x->cost, &x->d);
  return 0;
}

/* The words of x's decision: written only for a decision that is
 * stored or shown (they cost more than the numbers). */
static void
explain(struct broker *b, const struct db_job *j, struct decision *x)
{
  struct placement_decision *d = &x->d;

  if (x->costed)
    placement_cost_explain(&x->req, x->sites, b->nsites, &x->cost, d);
  /* the job's own reason says why, whatever site it waits for */
  if (x->blocked && d->verdict == PLACEMENT_WAIT)
    snprintf(d->reason, sizeof(d->reason), "waits for owned capacity: "
             "project '%s' spent its hard budget this month (no rented "
             "site until it is raised or the month turns)", j->project);
}

/* What was stored of a job's last decision. */
struct stored {
  int found;
  char verdict[8];
  char site[SITE_NAME_LEN];
  int64_t start_ms;
};

static int
stored_cb(const struct db_placement *p, void *arg)
{
  struct stored *st = arg;

  snprintf(st->verdict, sizeof(st->verdict), "%s", p->verdict);
  snprintf(st->site, sizeof(st->site), "%s", p->site ? p->site : "");
  st->start_ms = p->start_ms;
  return 0;
}

/* A start predicted again within this much is the same decision. */
#define START_MOVED_MS 60000

/* 1 when the waiting decision x differs from the one stored for j (so
 * that a job waiting for hours writes its decision only when it
 * changes), else 0. */
static int
wait_changed(struct broker *b, const struct db_job *j,
             const struct decision *x, const char *site, struct err *e)
{
  struct stored st = {0};
  int64_t start = pick_start(&x->d), moved;
  int rc = db_placement_get(b->db, j->id, stored_cb, &st, &st.found, e);

  if (rc < 0)
    return rc;
  moved = start > st.start_ms ? start - st.start_ms : st.start_ms - start;
  return !st.found || strcmp(st.verdict, "wait") != 0 ||
         strcmp(st.site, site != NULL ? site : "") != 0 ||
         moved >= START_MOVED_MS || j->reason == NULL;
}

/* The site x's waiting job waits for: its pick, else the first that
 * could take it later. */
static const char *
waits_for(const struct decision *x)
{
  const struct placement_decision *d = &x->d;

  if (d->pick >= 0)
    return x->sites[d->pick].name;
  for (size_t i = 0; i < d->ncandidates; i++) {
    if (d->candidates[i].verdict == PLACEMENT_WAIT)
      return d->candidates[i].site;
  }
  return NULL;
}

/* A job that waits for a site to grow is that site's demand. */
static void
grow_demand(struct broker *b, const struct job_spec *spec,
            const struct decision *x)
{
  const struct placement_decision *d = &x->d;

  if (d->verdict != PLACEMENT_WAIT || d->pick < 0)
    return;
  for (size_t i = 0; i < d->ncandidates; i++) {
    const struct placement_candidate *c = &d->candidates[i];

    if (c->index == d->pick && c->grows) {
      broker__autoscaler_demand(b, d->pick, spec,
                                x->costed ? x->cost.runtime_ms : 0);
      return;
    }
  }
}

/*
 * Decide for one queued job inside the pass's transaction.  Returns 1 when
 * the job was placed (and should be dispatched), 0 otherwise.
 */
static int
decide_one(struct broker *b, struct db_job *j, struct placement_site *snap,
           struct pass_cost *pc, struct decision *x, struct err *e)
{
  struct placement_decision *d = &x->d;
  struct job_spec spec;
  const char *site;
  int placed = 0;
  int rc;

  jobspec_init(&spec);
  rc = spec_of(j, &spec, e);
  if (rc < 0) {
    rc = broker__transition(b, j, JOB_FAILED, err_msg(e), 0, e);
    goto out;
  }
  rc = decide(b, j, &spec, snap, pc, x, e);
  if (rc < 0)
    goto out;
  grow_demand(b, &spec, x);
  if (spec.dataset != NULL && d->verdict != PLACEMENT_NEVER) {
    explain(b, j, x);
    rc = decide_data(b, j, &spec, snap, d, e);
    if (rc > 0)
      placed = 1;
    goto after;
  }
  switch (d->verdict) {
  case PLACEMENT_NOW:
    explain(b, j, x);
    rc = place_at(b, j, &spec, d, snap, d->site, d->reason, e);
    placed = rc > 0;
    break;
  case PLACEMENT_WAIT:
    site = waits_for(x);
    if (site != NULL && broker__site(b, site) != NULL)
      broker__site(b, site)->waiting++;
    rc = wait_changed(b, j, x, site, e);
    if (rc > 0) {
      explain(b, j, x);
      rc = record_decision(b, j, d, "wait", site, e);
      if (rc == 0)
        rc = set_reason(b, j, d->reason, e);
    }
    break;
  case PLACEMENT_NEVER:
    /* Possible when the configuration changed since submission. */
    explain(b, j, x);
    rc = broker__transition(b, j, JOB_FAILED, d->reason, 0, e);
    break;
  }
after:
  if (rc >= 0 && x->costed && !placed)
    broker__pass_cost_after(pc, &x->req, x->sites, d);
out:
  jobspec_release(&spec);
  if (rc < 0)
    return rc;
  return placed;
}

/* A job an elastic site had no node for, though placement saw GPUs
 * free there (on a spot node for a job that needs on demand, or spread
 * over nodes): that site's demand too, or it would never grow for it. */
static void
refused_demand(struct broker *b, struct site *site, const struct db_job *j)
{
  struct job_spec spec;
  struct err e = {0};
  const char *how;

  if (site->scaler == NULL)
    return;
  jobspec_init(&spec);
  if (spec_of(j, &spec, &e) == 0)
    broker__autoscaler_demand(
        b, (int)(site - b->sites), &spec,
        broker__runtime_predict(b, spec.project,
                                spec.workload != NULL ? spec.workload
                                                      : spec.name,
                                spec.time_limit_s, &how));
  jobspec_release(&spec);
}

/* Hand a placed job to its site. */
static void
dispatch_one(struct broker *b, struct db_job *j)
{
  struct site *site = broker__site(b, j->site);
  struct err e = {0};
  int64_t id = j->id;
  int rc;

  rc = broker__adapter_call(j, site->ops->submit, site, &e);
  if (rc == 0)
    return;
  /* The adapter's updates may have moved the job already: reload it.
   * The release clears the row, id included. */
  db_job_release(j);
  if (db_job_get(b->db, id, j, NULL) < 0 || j->state != JOB_PLACED)
    return;
  if (rc == ERR_UNAVAILABLE) {
    refused_demand(b, site, j);
    rc = broker__transition_tx(b, j, JOB_QUEUED, err_msg(&e), 0, &e);
  } else {
    char detail[ERR_MSG_SIZE + 32];

    snprintf(detail, sizeof(detail), "site '%s' refused the job: %s",
             site->name, err_msg(&e));
    rc = broker__transition_tx(b, j, JOB_FAILED, detail, 0, &e);
  }
  if (rc < 0)
    log_error("job %lld: %s", (long long)j->id, err_msg(&e));
}

/* Staging jobs come newest first from the list: keep them oldest
 * first, as the queue is. */
static void
reverse(struct job_list *l)
{
  for (size_t i = 0; i < l->n / 2; i++) {
    struct db_job t = l->rows[i];

    l->rows[i] = l->rows[l->n - 1 - i];
    l->rows[l->n - 1 - i] = t;
  }
}

static void
schedule(struct broker *b)
{
  struct placement_site snap[PLACEMENT_MAX_SITES];
  struct adapter_capacity caps[PLACEMENT_MAX_SITES];
  struct db_job_filter staging_filter = {.state = "staging",
                                         .limit = STAGING_BATCH};
  struct job_list st = {0};
  struct job_list l = {0};
  struct err e = {0};
  char *placed = NULL;
  char *st_placed = NULL;
  struct pass_cost *pc = NULL;
  struct decision *x = NULL;
  int rc;

  if (b->closing)
    return;
  rc = db_job_list(b->db, &staging_filter, collect_cb, &st, &e);
  if (rc < 0)
    goto fail;
  reverse(&st);
  rc = db_job_list_runnable(b->db, SCHEDULE_BATCH, collect_cb, &l, &e);
  if (rc < 0)
    goto fail;
  for (size_t i = 0; i < b->nsites; i++)
    b->sites[i].waiting = 0;
  broker__autoscaler_pass_begin(b);
  /* An idle pass still reads the cost policy's inputs: submissions are
   * forecast against them. */
  if (l.n == 0 && st.n == 0 && b->policy->decide_cost == NULL)
    goto out;
  broker__snapshot(b, snap, caps);
  x = xcalloc(1, sizeof(*x));
  if (b->policy->decide_cost != NULL) {
    pc = xcalloc(1, sizeof(*pc));
    rc = broker__pass_cost_init(b, snap, caps, time_now_ms(), pc, &e);
    if (rc < 0)
      goto fail;
  }
  placed = xcalloc(l.n + 1, 1);
  st_placed = xcalloc(st.n + 1, 1);
  rc = db_begin(b->db, &e);
  if (rc < 0)
    goto fail;
  /* Staged jobs first: they were placed once already, before anything
   * still queued. */
  for (size_t i = 0; i < st.n; i++) {
    rc = decide_staged(b, &st.rows[i], snap, &e);
    if (rc < 0) {
      db_rollback(b->db);
      goto fail;
    }
    st_placed[i] = (char)rc;
  }
  for (size_t i = 0; i < l.n; i++) {
    rc = decide_one(b, &l.rows[i], snap, pc, x, &e);
    if (rc < 0) {
      db_rollback(b->db);
      goto fail;
    }
    placed[i] = (char)rc;
  }
  rc = db_commit(b->db, &e);
  if (rc < 0) {
    db_rollback(b->db);
    goto fail;
  }
  for (size_t i = 0; i < st.n; i++) {
    if (st_placed[i])
      dispatch_one(b, &st.rows[i]);
  }
  for (size_t i = 0; i < l.n; i++) {
    if (placed[i])
      dispatch_one(b, &l.rows[i]);
  }
  /* After dispatch: the nodes the placed jobs took are not free. */
  broker__autoscaler_pass_end(b);
  goto out;

fail:
  log_error("scheduler pass failed: %s", err_msg(&e));
out:
  broker__baseline_tick(b);
  if (pc != NULL)
    broker__pass_cost_keep(b, pc);
  free(x);
  free(placed);
  free(st_placed);
  job_list_release(&l);
  job_list_release(&st);
}

static void
tick_cb(uv_timer_t *t)
{
  schedule(t->data);
}

static void
kick_cb(uv_timer_t *t)
{
  struct broker *b = t->data;

  b->kick_pending = 0;
  schedule(b);
}

void
broker__scheduler_init(struct broker *b)
{
  uv_timer_init(b->loop, &b->tick_timer);
  uv_timer_init(b->loop, &b->kick_timer);
  b->tick_timer.data = b;
  b->kick_timer.data = b;
  uv_timer_start(&b->tick_timer, tick_cb, (uint64_t)b->tick_ms,
                 (uint64_t)b->tick_ms);
}

void
broker__scheduler_close(struct broker *b)
{
  broker__close_handle(b, (uv_handle_t *)&b->tick_timer);
  broker__close_handle(b, (uv_handle_t *)&b->kick_timer);
}

void
broker__kick(struct broker *b)
{
  if (b->kick_pending || b->closing)
    return;
  b->kick_pending = 1;
  uv_timer_start(&b->kick_timer, kick_cb, 0, 0);
}

static void
replace_str(char **dst, const char *src)
{
  if (src == NULL)
    return;
  free(*dst);
  *dst = xstrdup(src);
}

/* The bytes j's node pulled of j's dataset, reported with its final
 * update u: a transfer to site, billed (inside the caller's
 * transaction; < 0 only for a database error). */
static int
record_pull(struct broker *b, const struct db_job *j,
            const struct site *site, const struct adapter_update *u,
            struct err *e)
{
  char name[BROKER_DS_NAME];
  char version[BROKER_DS_VERSION];
  struct job_spec spec;
  struct err pe = {0};
  int rc;

  jobspec_init(&spec);
  rc = spec_of(j, &spec, &pe);
  if (rc == 0)
    rc = broker__dataset_split(spec.dataset, name, version, &pe);
  jobspec_release(&spec);
  if (rc < 0) {
    /* Nothing to bill it to; the job's end is recorded all the same. */
    log_warn("job %lld: site '%s' reports %lld bytes pulled, but: %s",
             (long long)j->id, site->name, (long long)u->pulled_bytes,
             err_msg(&pe));
    return 0;
  }
  return broker__node_pull_record(b, j->project, name, version,
                                  site->name, u->pulled_bytes,
                                  u->pull_failed, time_now_ms(), e);
}

/*
 * Apply one update inside the caller's transaction.  Returns 1 when the
 * scheduler should run (capacity came back), 0 when nothing needs doing,
 * and < 0 only for a database error, which spoils the transaction.
 */
static int
apply_update(struct site *site, const struct adapter_update *u,
             struct err *e)
{
  struct broker *b = site->broker;
  struct db_job j;
  struct err te = {0};
  int rc;

  db_job_init(&j);
  rc = db_job_get(b->db, u->job_id, &j, e);
  if (rc < 0) {
    /* A job the database does not have is news from a stale tag, not a
     * reason to drop the rest of the batch. */
    if (rc == ERR_NOT_FOUND) {
      log_warn("site '%s' reported job %lld, which does not exist",
               site->name, (long long)u->job_id);
      rc = 0;
    }
    goto out;
  }
  /* Only the site a job is placed at may move it: a queued job has no
   * site, and a job re-placed elsewhere must not hear from its old one. */
  if (job_state_is_final(j.state) || j.site == NULL ||
      strcmp(j.site, site->name) != 0) {
    log_debug("job %lld: ignoring late update from site '%s'",
              (long long)u->job_id, site->name);
    goto out;
  }
  replace_str(&j.remote_id, u->remote_id);
  replace_str(&j.alloc, u->alloc);
  replace_str(&j.log_path, u->log_path);
  if (u->exit_code >= 0)
    j.exit_code = u->exit_code;
  if (u->signal > 0)
    j.signal = u->signal;
  if (u->state == j.state) {
    /* Same state (e.g. recovery confirms a running job): refresh only. */
    replace_str(&j.reason, u->reason);
    j.updated_ms = time_now_ms();
    rc = db_job_update(b->db, &j, e);
    goto out;
  }
  rc = broker__transition(b, &j, u->state, u->reason, u->at_ms, &te);
  if (rc == ERR_BAD_STATE) {
    /* Refused before anything was written (e.g. Slurm requeued a running
     * job, and running does not go back to submitted). */
    log_info("site '%s': %s", site->name, err_msg(&te));
    rc = 0;
    goto out;
  }
  if (rc < 0) {
    *e = te;
    goto out;
  }
  /* Once, with the final state: a later update of the job is ignored. */
  if (job_state_is_final(u->state) && u->pulled_bytes > 0) {
    rc = record_pull(b, &j, site, u, e);
    if (rc < 0)
      goto out;
  }
  rc = u->state == JOB_QUEUED || job_state_is_final(u->state);
out:
  db_job_release(&j);
  return rc;
}

void
broker__on_update(void *arg, const struct adapter_update *u, size_t n)
{
  struct site *site = arg;
  struct broker *b = site->broker;
  struct err e = {0};
  int kick = 0;
  int rc;

  /* One transaction (one fsync) for everything a site reported at once:
   * a poll of a busy Slurm site brings hundreds of changes. */
  rc = db_begin(b->db, &e);
  for (size_t i = 0; rc == 0 && i < n; i++) {
    rc = apply_update(site, &u[i], &e);
    if (rc > 0) {
      kick = 1;
      rc = 0;
    }
  }
  if (rc == 0)
    rc = db_commit(b->db, &e);
  if (rc < 0) {
    db_rollback(b->db);
    log_error("cannot record %zu update(s) from site '%s': %s", n,
              site->name, err_msg(&e));
    return;
  }
  if (kick)
    broker__kick(b);
}

static int
collect_placed_cb(const struct db_job *j, void *arg)
{
  /* Staging jobs are at no site yet: the next pass looks at them, and
   * the stager resumes their replicas. */
  if (j->state == JOB_QUEUED || j->state == JOB_STAGING)
    return 0;
  return collect_cb(j, arg);
}

int
broker__recover(struct broker *b, struct err *e)
{
  struct job_list l = {0};
  int rc;

  rc = db_job_list_active(b->db, 1, collect_placed_cb, &l, e);
  if (rc < 0)
    goto out;
  for (size_t i = 0; i < l.n; i++) {
    struct db_job *j = &l.rows[i];
    struct site *site = broker__site(b, j->site);
    struct err ae = {0};
    char detail[ERR_MSG_SIZE + 64];

    if (site == NULL) {
      snprintf(detail, sizeof(detail),
               "site '%s' is no longer configured", j->site);
      rc = broker__transition_tx(b, j, JOB_LOST, detail, 0, e);
      if (rc < 0)
        goto out;
      continue;
    }
    log_info("recovering job %lld (%s at site '%s')", (long long)j->id,
             job_state_name(j->state), site->name);
    if (broker__adapter_call(j, site->ops->adopt, site, &ae) < 0) {
      snprintf(detail, sizeof(detail), "cannot re-attach: %s",
               err_msg(&ae));
      rc = broker__transition_tx(b, j, JOB_LOST, detail, 0, e);
      if (rc < 0)
        goto out;
    }
  }
  rc = 0;
out:
  job_list_release(&l);
  return rc;
}
