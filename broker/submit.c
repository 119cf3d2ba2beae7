/*
 * Job submission with group commit.
 *
 * broker_submit() validates on the spot (so bad input is answered at
 * once) and appends the job to a pending batch.  The batch is committed in
 * the check phase of the same loop turn, after libmicrohttpd has read
 * every request that was ready, so one fsync covers all of them; only
 * then are the callers answered (an acknowledged job is durable).  The
 * uv_idle keeps the loop from blocking in poll while a batch is pending.
 */
#include <stdlib.h>
#include <string.h>

#include "broker/broker_internal.h"
#include "util/alloc.h"
#include "util/jsonx.h"
#include "util/log.h"
#include "util/strv.h"
#include "util/timeutil.h"

/* Idempotency keys are scoped by caller, so two clients cannot collide. */
#define IDEM_KEY_MAX 128

static void
pending_free(struct pending_submit *ps)
{
  db_job_release(&ps->row);
  strv_free(ps->warnings);
  free(ps->detail);
  free(ps);
}

static void
flush_check_cb(uv_check_t *h)
{
  broker__submit_flush(h->data);
}

static void
flush_idle_cb(uv_idle_t *h)
{
  (void)h; /* only there to make the poll phase non-blocking */
}

void
broker__submit_init(struct broker *b)
{
  b->pending = NULL;
  b->pending_tail = &b->pending;
  uv_check_init(b->loop, &b->flush_check);
  uv_idle_init(b->loop, &b->flush_idle);
  b->flush_check.data = b;
  b->flush_idle.data = b;
}

void
broker__submit_close(struct broker *b)
{
  broker__close_handle(b, (uv_handle_t *)&b->flush_check);
  broker__close_handle(b, (uv_handle_t *)&b->flush_idle);
}

/* 422 when no configured site could ever run spec; else the policy's
 * decision about it now into d. */
static int
check_feasible(struct broker *b, const struct job_spec *spec,
               struct placement_decision *d, struct err *e)
{
  struct placement_site sites[PLACEMENT_MAX_SITES];
  struct adapter_capacity caps[PLACEMENT_MAX_SITES];
  struct placement_request req;
  struct placement_cost cost;

  if (spec->site != NULL && broker__site(b, spec->site) == NULL)
    return err_set(e, ERR_UNPROCESSABLE, "field 'site': unknown site '%s'",
                   spec->site);
  broker__snapshot(b, sites, caps);
  broker__placement_request(spec, &req);
  /* The cost policy weighs against the last pass's queue and ends: the
   * forecast's site is the one the policy would pick (its dataset aside,
   * not resolved yet). */
  if (b->policy->decide_cost != NULL && b->last_pass != NULL &&
      broker__pass_cost_job(b, b->last_pass, spec, NULL, &cost, e) == 0) {
    cost.now_ms = time_now_ms();
    placement_cost_decide(&req, sites, b->nsites, &cost, d);
    if (d->verdict == PLACEMENT_NEVER)
      placement_cost_explain(&req, sites, b->nsites, &cost, d);
  } else {
    b->policy->decide(&req, sites, b->nsites, d);
  }
  if (d->verdict == PLACEMENT_NEVER)
    return err_set(e, ERR_UNPROCESSABLE, "%s", d->reason);
  return 0;
}

/* What a GPU-hour of spec costs at s as a budget counts money: a rented
 * site's price (the dearest of the types it rents when spec names
 * none), an owned site's sunk cost when the budget counts all. */
static int64_t
budget_rate(const struct site *s, const struct job_spec *spec, int all)
{
  const struct site_cost *c = &s->cost;
  const struct site_rate *r;
  int64_t max = 0;

  if (c->kind == SITE_OWNED)
    return all ? c->rates.sunk_micro : 0;
  if (c->kind != SITE_RENTED)
    return 0;
  if (spec->gpu_type != NULL) {
    r = broker__site_rate(c, spec->gpu_type);
    return r != NULL ? r->per_gpu_hour_micro : 0;
  }
  for (size_t k = 0; k < c->nrented; k++) {
    if (c->rented[k].per_gpu_hour_micro > max)
      max = c->rented[k].per_gpu_hour_micro;
  }
  return max;
}

/*
 * The forecast of spec given the policy's decision d: expected cost at
 * the site it would run at now (or the first it would wait for), upper
 * bound at the dearest site it may run at for its whole time limit.  A
 * hard budget refuses a job whose bound does not fit what is left
 * (ERR_OVER_BUDGET, with the numbers).
 */
static int
forecast(struct broker *b, const struct job_spec *spec,
         const struct placement_decision *d, struct job_view *f,
         struct err *e)
{
  const struct site *pick = NULL, *dearest = NULL;
  int64_t left = 0, rate, max = 0;
  int hard = 0, all = 0, has;
  char a[32], c[32], r[32];

  has = broker__budget_left(b, spec->project, &left, &hard, &all, e);
  if (has < 0)
    return has;
  for (size_t i = 0; i < d->ncandidates; i++) {
    const struct placement_candidate *cand = &d->candidates[i];
    const struct site *s = broker__site(b, cand->site);

    if (s == NULL || cand->verdict == PLACEMENT_NEVER)
      continue;
    if (pick == NULL && cand->verdict == d->verdict)
      pick = s;
    rate = budget_rate(s, spec, all);
    if (dearest == NULL || rate > max) {
      dearest = s;
      max = rate;
    }
  }
  if (d->verdict == PLACEMENT_NOW && d->site >= 0)
    pick = &b->sites[d->site];
  f->has_forecast = 1;
  f->runtime_ms = broker__runtime_predict(
      b, spec->project, spec->workload != NULL ? spec->workload : spec->name,
      spec->time_limit_s, &f->runtime_basis);
  f->expected_micro = pick != NULL ? price_charge(budget_rate(pick, spec,
                                                              all),
                                                  spec->gpus, f->runtime_ms)
                                   : 0;
  f->upper_micro = max == 0                ? 0
                   : spec->time_limit_s > 0 ? price_charge(max, spec->gpus,
                                                           spec->time_limit_s *
                                                               1000)
                                            : -1;
  f->has_budget = has;
  f->budget_left_micro = left;
  if (!has || !hard || (f->upper_micro >= 0 && f->upper_micro <= left))
    return 0;
  broker__fmt_dollars(left > 0 ? left : 0, a, sizeof(a));
  broker__fmt_dollars(max, r, sizeof(r));
  if (f->upper_micro < 0)
    return err_set(e, ERR_OVER_BUDGET, "project '%s' has %s left of its "
                   "hard budget this month, and this job has no time limit "
                   "at '%s' (%s per GPU-hour), so its cost has no bound: "
                   "give it a time limit, or pin it to an owned site",
                   spec->project, a, dearest->name, r);
  broker__fmt_dollars(f->upper_micro, c, sizeof(c));
  return err_set(e, ERR_OVER_BUDGET, "project '%s' has %s left of its hard "
                 "budget this month; this job could cost up to %s (%lld "
                 "GPUs for %lld s at '%s')", spec->project, a, c,
                 (long long)spec->gpus, (long long)spec->time_limit_s,
                 dearest->name);
}

/* 422 when a job pinned to a site names a dataset that site can neither
 * hold already nor receive (it has no agent). */
static int
check_dataset_site(struct broker *b, const struct job_spec *spec,
                   struct err *e)
{
  char name[BROKER_DS_NAME];
  char version[BROKER_DS_VERSION];
  struct db_replica r;
  struct site *s = broker__site(b, spec->site);
  int have;
  int rc;

  if (spec->dataset == NULL || s == NULL || s->agent != NULL)
    return 0;
  rc = broker__dataset_split(spec->dataset, name, version, e);
  if (rc < 0)
    return rc;
  have = db_replica_get(b->db, name, version, s->name, &r, NULL) == 0 &&
         r.state == DB_REPLICA_COMPLETE;
  db_replica_release(&r);
  if (!have)
    return err_set(e, ERR_UNPROCESSABLE, "field 'dataset': site '%s' has "
                   "no agent to receive dataset %s", s->name, name);
  return 0;
}

/* Find an earlier submission with key in the pending batch. */
static struct pending_submit *
pending_find(struct broker *b, const char *key)
{
  for (struct pending_submit *ps = b->pending; ps != NULL; ps = ps->next) {
    if (ps->row.idem_key != NULL && strcmp(ps->row.idem_key, key) == 0)
      return ps->same_as != NULL ? ps->same_as : ps;
  }
  return NULL;
}

static void
pending_append(struct broker *b, struct pending_submit *ps)
{
  *b->pending_tail = ps;
  b->pending_tail = &ps->next;
  if (b->npending++ == 0) {
    uv_check_start(&b->flush_check, flush_check_cb);
    uv_idle_start(&b->flush_idle, flush_idle_cb);
  }
}

/*
 * Resolve an Idempotency-Key: 1 when ps was filled as a replay (or linked
 * to an earlier pending twin), 0 when the key is new, < 0 when it was used
 * with a different request.
 */
static int
resolve_idem(struct broker *b, struct pending_submit *ps, const char *key,
             const char *body_hash, struct err *e)
{
  struct pending_submit *twin;
  struct db_job old;
  int rc;

  twin = pending_find(b, key);
  if (twin != NULL) {
    if (strcmp(twin->row.idem_hash, body_hash) != 0)
      goto mismatch;
    ps->same_as = twin;
    return 1;
  }
  db_job_init(&old);
  rc = db_job_get_by_idem(b->db, key, &old, NULL);
  if (rc == ERR_NOT_FOUND)
    return 0;
  if (rc < 0)
    return err_set(e, rc, "cannot look up the Idempotency-Key");
  if (old.idem_hash == NULL || strcmp(old.idem_hash, body_hash) != 0) {
    db_job_release(&old);
    goto mismatch;
  }
  db_job_release(&ps->row);
  ps->row = old;
  ps->replayed = 1;
  return 1;

mismatch:
  return err_set(e, ERR_UNPROCESSABLE,
                 "Idempotency-Key was already used with a different request");
}

int
broker_submit(struct broker *b, const struct principal *p,
              const json_t *body, const char *idem_key,
              const char *body_hash, broker_submit_cb cb, void *arg,
              struct err *e)
{
  struct pending_submit *ps = NULL;
  struct job_spec spec;
  struct placement_decision d;
  json_t *expanded = NULL;
  json_t *warnings = NULL;
  json_t *specj = NULL;
  char key[IDEM_KEY_MAX + 32];
  int64_t now = time_now_ms();
  int rc;

  jobspec_init(&spec);
  if (p->role < ROLE_SUBMITTER) {
    rc = err_set(e, ERR_FORBIDDEN, "role '%s' may not submit jobs",
                 broker_role_name(p->role));
    goto out;
  }
  if (idem_key != NULL &&
      (strlen(idem_key) == 0 || strlen(idem_key) > IDEM_KEY_MAX)) {
    rc = err_set(e, ERR_INVALID,
                 "header 'Idempotency-Key': must be 1 to %d characters",
                 IDEM_KEY_MAX);
    goto out;
  }
  ps = xcalloc(1, sizeof(*ps));
  db_job_init(&ps->row);
  ps->cb = cb;
  ps->cb_arg = arg;
  /* A retry is answered with the first job before anything else is
   * checked: the config may have changed since, but that job exists. */
  if (idem_key != NULL) {
    snprintf(key, sizeof(key), "%lld:%s", (long long)p->token_id, idem_key);
    rc = resolve_idem(b, ps, key, body_hash, e);
    if (rc < 0)
      goto out;
    if (rc == 1) {
      pending_append(b, ps);
      ps = NULL;
      rc = 0;
      goto out;
    }
    ps->row.idem_key = xstrdup(key);
    ps->row.idem_hash = xstrdup(body_hash);
  }
  if (json_object_get(body, "workload") != NULL &&
      !json_is_null(json_object_get(body, "workload"))) {
    rc = broker__workload_expand(b, body, &expanded, e);
    if (rc < 0)
      goto out;
  } else {
    if (json_object_get(body, "params") != NULL &&
        !json_is_null(json_object_get(body, "params"))) {
      rc = err_set(e, ERR_INVALID,
                   "field 'params': only allowed with 'workload'");
      goto out;
    }
    expanded = json_incref((json_t *)body);
  }
  warnings = json_array();
  rc = jobspec_from_json(&spec, expanded, warnings, e);
  if (rc < 0)
    goto out;
  if (!principal_has_project(p, spec.project)) {
    rc = err_set(e, ERR_FORBIDDEN, "no access to project '%s'",
                 spec.project);
    goto out;
  }
  if (!broker__project_allowed(b, spec.project)) {
    rc = err_set(e, ERR_UNPROCESSABLE, "field 'project': unknown project "
                 "'%s'", spec.project);
    goto out;
  }
  if (spec.require_baseline && !broker__baseline_configured(b)) {
    rc = err_set(e, ERR_UNPROCESSABLE, "field 'require_baseline': no "
                 "baseline is configured (the config's 'baseline' block "
                 "names the reference site)");
    goto out;
  }
  if (spec.deadline_ms > 0 && spec.deadline_ms <= now) {
    rc = err_set(e, ERR_UNPROCESSABLE, "field 'deadline': it has passed");
    goto out;
  }
  rc = check_feasible(b, &spec, &d, e);
  if (rc == 0)
    rc = forecast(b, &spec, &d, &ps->forecast, e);
  if (rc < 0)
    goto out;
  /* Stored resolved: "latest" means the latest at submit time. */
  rc = broker__dataset_resolve(b, p, &spec, e);
  if (rc == 0)
    rc = check_dataset_site(b, &spec, e);
  if (rc < 0)
    goto out;

  specj = jobspec_to_json(&spec);
  ps->row.state = JOB_QUEUED;
  ps->row.name = xstrdup(spec.name);
  ps->row.project = xstrdup(spec.project);
  ps->row.workload = xstrdup(spec.workload);
  ps->row.spec_json = jsonx_dump(specj);
  ps->row.gpus = spec.gpus;
  ps->row.gpu_type = xstrdup(spec.gpu_type);
  ps->row.hold = spec.hold;
  ps->row.exit_code = -1;
  ps->row.created_ms = now;
  ps->row.updated_ms = now;
  ps->detail = xmalloc(128);
  snprintf(ps->detail, 128, "submitted by %s", p->name);
  for (size_t i = 0; i < json_array_size(warnings); i++)
    strv_push(&ps->warnings,
              json_string_value(json_array_get(warnings, i)));
  pending_append(b, ps);
  ps = NULL;
  rc = 0;

out:
  if (ps != NULL)
    pending_free(ps);
  json_decref(specj);
  json_decref(warnings);
  json_decref(expanded);
  jobspec_release(&spec);
  return rc;
}

/* Insert every new job of batch; the caller commits. */
static int
insert_batch(struct broker *b, struct pending_submit *batch, struct err *e)
{
  for (struct pending_submit *ps = batch; ps != NULL; ps = ps->next) {
    int rc;

    if (ps->same_as != NULL || ps->replayed)
      continue;
    rc = db_job_insert(b->db, &ps->row, e);
    if (rc == 0)
      rc = db_event_append(b->db, ps->row.id, ps->row.created_ms, NULL,
                           "queued", ps->detail, e);
    if (rc < 0)
      return rc;
  }
  return 0;
}

void
broker__submit_flush(struct broker *b)
{
  struct pending_submit *batch = b->pending;
  struct pending_submit *ps;
  struct err e = {0};
  int rc;

  if (batch == NULL)
    return;
  /* Detach the batch first: a callback may submit again. */
  b->pending = NULL;
  b->pending_tail = &b->pending;
  b->npending = 0;
  uv_check_stop(&b->flush_check);
  uv_idle_stop(&b->flush_idle);

  rc = db_begin(b->db, &e);
  if (rc == 0)
    rc = insert_batch(b, batch, &e);
  if (rc == 0)
    rc = db_commit(b->db, &e);
  if (rc < 0) {
    db_rollback(b->db);
    log_error("cannot commit a batch of submissions: %s", err_msg(&e));
  }
  for (ps = batch; ps != NULL; ps = ps->next) {
    const struct pending_submit *src = ps->same_as ? ps->same_as : ps;
    int replayed = ps->same_as != NULL || ps->replayed;
    struct job_view v;

    broker__job_view_borrow(&v, &src->row);
    if (src->forecast.has_forecast && rc == 0) {
      v.has_forecast = 1;
      v.runtime_ms = src->forecast.runtime_ms;
      v.runtime_basis = src->forecast.runtime_basis;
      v.expected_micro = src->forecast.expected_micro;
      v.upper_micro = src->forecast.upper_micro;
      v.has_budget = src->forecast.has_budget;
      v.budget_left_micro = src->forecast.budget_left_micro;
    }
    ps->cb(ps->cb_arg, rc, rc == 0 ? &v : NULL, src->warnings,
           replayed, rc == 0 ? NULL : &e);
  }
  /* Twins point at their origin, so free only after every answer. */
  while (batch != NULL) {
    ps = batch->next;
    pending_free(batch);
    batch = ps;
  }
  if (rc == 0)
    broker__kick(b);
}

void
broker_flush(struct broker *b)
{
  broker__submit_flush(b);
  broker__publish_flush(b);
}
