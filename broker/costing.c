/*
 * The cost policy's inputs for one scheduler pass (policies/placement.h,
 * "Calling sequence"): per site and pool its rate for the job's GPUs,
 * the GPUs already waiting there, and the predicted ends of the jobs
 * that hold its GPUs; per job its predicted run time, its project's
 * wait value, its deadline and, when it names a dataset, what is
 * missing at each site and what moving it costs.
 *
 * A pass owns a struct pass_cost: built once from the snapshot, then
 * updated as the pass decides (a job placed takes its GPUs, one that
 * waits adds its GPUs ahead of the next, the oldest waiting job of each
 * type reserves its start).  Nothing survives the pass.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "broker/broker_internal.h"
#include "util/alloc.h"
#include "util/grow.h"
#include "util/log.h"
#include "util/timeutil.h"

/* What a transfer is taken to move, per second, to a site with an agent
 * and no bandwidth limit: a conservative link between sites. */
#define COST_BYTES_PER_S (100LL * 1000 * 1000)
/* A job that runs past its prediction is taken to run as long again as
 * it has overrun, and at least this much more: taking it to end a
 * minute from now, pass after pass, made every job queued behind it look
 * a minute from starting, and none ever burst (bench/README.md, "Burst
 * policy"). */
#define COST_OVERRUN_MS 60000

/* The pool of site s that jobs of type take GPUs from: the first of
 * that type, the first pool for a job of any type; -1 when none. */
static int
pool_of(const struct placement_site *s, const char *type)
{
  for (int k = 0; k < s->npools; k++) {
    if (type == NULL || strcasecmp(s->pools[k].type, type) == 0)
      return k;
  }
  return -1;
}

/* When a job holding GPUs since start_ms, predicted to run run_ms, is
 * taken to end: at its prediction, or once past it, after as long
 * again as it has overrun (COST_OVERRUN_MS at least). */
static int64_t
predicted_end(int64_t now, int64_t start_ms, int64_t run_ms)
{
  int64_t end = start_ms + run_ms, over = now - end;

  if (end > now)
    return end;
  return now + (over > COST_OVERRUN_MS ? over : COST_OVERRUN_MS);
}

struct end_row {
  int site, pool;
  int64_t end_ms, gpus;
};

struct collect {
  struct broker *b;
  const struct placement_site *snap;
  struct end_row *rows;
  size_t n, cap;
  int64_t now;
};

static int
holding_cb(const struct db_holding *h, void *arg)
{
  struct collect *c = arg;
  const struct site *s = broker__site(c->b, h->site);
  const char *how;
  int64_t run, start, limit_s = 0;
  int site, pool;

  if (s == NULL)
    return 0;
  site = (int)(s - c->b->sites);
  pool = pool_of(&c->snap[site], h->gpu_type);
  if (pool < 0)
    return 0;
  /* an unreadable limit is no limit: the prediction falls back */
  if (h->time_limit != NULL &&
      time_parse_slurm_duration(h->time_limit, &limit_s) < 0)
    limit_s = 0;
  run = broker__runtime_predict(c->b, h->project, h->key, limit_s, &how);
  start = h->started_ms > 0 ? h->started_ms : c->now;
  GROW(c->rows, c->n + 1, c->cap);
  c->rows[c->n++] = (struct end_row){
      site, pool, predicted_end(c->now, start, run), h->gpus};
  return 0;
}

static int
cmp_end(const void *a, const void *b)
{
  const struct end_row *x = a, *y = b;

  if (x->site != y->site)
    return x->site - y->site;
  if (x->pool != y->pool)
    return x->pool - y->pool;
  return (x->end_ms > y->end_ms) - (x->end_ms < y->end_ms);
}

/* A pool's rate for the policy: an owned site's marginal rate, a rented
 * site's price of the type (and its spot rate where the autoscaler
 * launches spot nodes of the type); unpriced otherwise. */
static void
pool_rate(struct broker *b, const struct site *s, const char *type,
          struct placement_cost_pool *p)
{
  const struct site_rate *r;

  if (s->cost.kind == SITE_OWNED) {
    p->priced = 1;
    p->rate_micro = s->cost.rates.marginal_micro;
  } else if (s->cost.kind == SITE_RENTED &&
             (r = broker__site_rate(&s->cost, type)) != NULL) {
    p->priced = 1;
    p->rate_micro = r->per_gpu_hour_micro;
    p->spot_priced =
        broker__autoscaler_spot_rate(b, s, type, &p->spot_rate_micro);
  }
}

int
broker__pass_cost_init(struct broker *b, const struct placement_site *snap,
                       const struct adapter_capacity *caps, int64_t now,
                       struct pass_cost *pc, struct err *e)
{
  struct collect c = {.b = b, .snap = snap, .now = now};
  int rc;

  memset(pc, 0, sizeof(*pc));
  pc->now = now;
  for (size_t i = 0; i < b->nsites; i++) {
    /* A node to start: the boot the autoscaler learned, else the
     * site's own figure. */
    pc->sites[i].grow_ms =
        broker__autoscaler_grow_ms(b, (int)i, caps[i].grow_ms);
    for (int k = 0; k < snap[i].npools; k++) {
      const struct adapter_gpu_pool *cp = &caps[i].pools[k];
      int64_t over = cp->in_use + cp->down + cp->pending - cp->total;
      char type[ADAPTER_GPU_TYPE_LEN];

      snprintf(type, sizeof(type), "%s", snap[i].pools[k].type);
      for (char *t = type; *t; t++)
        *t = (char)tolower((unsigned char)*t);
      pool_rate(b, &b->sites[i], type, &pc->sites[i].pools[k]);
      /* the site's own queue beyond what the snapshot shows free */
      pc->sites[i].pools[k].ahead_gpus = over > 0 ? over : 0;
    }
  }
  rc = db_job_list_holding(b->db, holding_cb, &c, e);
  if (rc < 0) {
    free(c.rows);
    return rc;
  }
  if (c.n > 0)
    qsort(c.rows, c.n, sizeof(*c.rows), cmp_end);
  pc->ends = xcalloc(c.n + 1, sizeof(*pc->ends));
  for (size_t i = 0, start = 0; i < c.n; i++) {
    struct placement_cost_pool *p =
        &pc->sites[c.rows[i].site].pools[c.rows[i].pool];

    if (i == start || c.rows[i].site != c.rows[i - 1].site ||
        c.rows[i].pool != c.rows[i - 1].pool) {
      start = i;
      p->ends = &pc->ends[i];
    }
    pc->ends[i] = (struct placement_end){
        c.rows[i].end_ms,
        c.rows[i].gpus + (i > start ? pc->ends[i - 1].freed : 0)};
    p->nends = i - start + 1;
  }
  free(c.rows);
  return 0;
}

void
broker__pass_cost_release(struct pass_cost *pc)
{
  if (pc == NULL)
    return;
  free(pc->ends);
  pc->ends = NULL;
}

void
broker__pass_cost_keep(struct broker *b, struct pass_cost *pc)
{
  /* reservations name their types in the pass's snapshot, gone now */
  pc->nres = 0;
  broker__pass_cost_release(b->last_pass);
  free(b->last_pass);
  b->last_pass = pc;
}

int64_t
broker__wait_value(const struct broker *b, const char *project)
{
  const json_t *v = json_object_get(b->wait_values, project);

  return v != NULL ? (int64_t)json_integer_value(v) : b->wait_value_micro;
}

/* What is missing of the job's dataset version at each site, and what
 * moving it costs and takes. */
static int
job_data(struct broker *b, const struct job_spec *spec,
         struct placement_data *data, struct err *e)
{
  char name[BROKER_DS_NAME], version[BROKER_DS_VERSION];
  struct db_dataset_version v = {0};
  struct db_dataset d = {0};
  const struct site *src;
  int rc = broker__dataset_split(spec->dataset, name, version, e);

  if (rc == 0)
    rc = db_dataset_version_get(b->db, name, version, &v, e);
  if (rc == 0)
    rc = db_dataset_get(b->db, name, &d, e);
  if (rc < 0)
    goto out;
  src = broker__site(b, d.source_site);
  for (size_t i = 0; i < b->nsites; i++) {
    const struct site *s = &b->sites[i];
    struct db_replica r = {0};
    int have = s == src;
    /* An elastic site holds no replica: each job's node pulls it all,
     * from the source's agent. */
    int elastic = adapter_is_elastic(s->ops);

    data[i] = (struct placement_data){0};
    if (!have && !elastic &&
        db_replica_get(b->db, name, version, s->name, &r, NULL) == 0) {
      have = r.state == DB_REPLICA_COMPLETE;
      if (!have && r.state == DB_REPLICA_SYNCING)
        data[i].missing_bytes = -r.bytes_done;
    }
    db_replica_release(&r);
    if (have)
      continue;
    data[i].missing_bytes += v.bytes;
    if (data[i].missing_bytes < 0)
      data[i].missing_bytes = 0;
    data[i].egress_micro_per_gb =
        src != NULL && src->cost.kind != SITE_UNPRICED
            ? broker__egress_rate(&src->cost, s->name)
            : 0;
    if (elastic)
      data[i].bytes_per_s = src != NULL && src->agent_url != NULL
                                ? COST_BYTES_PER_S
                                : 0;
    else
      data[i].bytes_per_s = s->agent == NULL  ? 0
                            : s->agent_bwlimit ? (int64_t)s->agent_bwlimit
                                               : COST_BYTES_PER_S;
  }
out:
  db_dataset_version_release(&v);
  db_dataset_release(&d);
  return rc;
}

int
broker__pass_cost_job(struct broker *b, struct pass_cost *pc,
                      const struct job_spec *spec,
                      struct placement_data *data, struct placement_cost *out,
                      struct err *e)
{
  const char *how;

  *out = (struct placement_cost){
      .now_ms = pc->now,
      .runtime_ms = broker__runtime_predict(
          b, spec->project,
          spec->workload != NULL ? spec->workload : spec->name,
          spec->time_limit_s, &how),
      .wait_value_micro = broker__wait_value(b, spec->project),
      .deadline_ms = spec->deadline_ms,
      /* A job without a deadline may take spot; one with a deadline is
       * priced on demand here, and goes on spot only where its slack
       * allows (broker__autoscaler_on_demand). */
      .spot_ok = spec->deadline_ms <= 0,
      .sites = pc->sites,
      .reservations = pc->res,
      .nreservations = pc->nres};
  if (out->runtime_ms <= 0)
    out->runtime_ms = 1;
  if (spec->dataset == NULL || data == NULL)
    return 0;
  out->data = data;
  return job_data(b, spec, data, e);
}

void
broker__pass_cost_after(struct pass_cost *pc,
                        const struct placement_request *req,
                        const struct placement_site *snap,
                        const struct placement_decision *d)
{
  struct placement_reservation res;
  const struct placement_candidate *c;
  int k;

  if (d->verdict != PLACEMENT_WAIT || d->pick < 0)
    return;
  c = &d->candidates[d->pick];
  for (size_t i = 0; i < d->ncandidates; i++) {
    if (d->candidates[i].index == d->pick)
      c = &d->candidates[i];
  }
  k = pool_of(&snap[d->pick], c->type);
  if (k >= 0)
    pc->sites[d->pick].pools[k].ahead_gpus += req->gpus;
  for (size_t i = 0; i < pc->nres; i++) {
    if (c->type != NULL && pc->res[i].type != NULL &&
        strcasecmp(pc->res[i].type, c->type) == 0)
      return;
  }
  if (pc->nres < PASS_MAX_RESERVATIONS &&
      placement_cost_reservation(req, d, &res))
    pc->res[pc->nres++] = res;
}
