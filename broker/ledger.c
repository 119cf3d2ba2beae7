/*
 * The usage ledger: what every GPU-hour a job held cost, and every byte
 * a transfer moved.
 *
 * A hold runs from the time a job started running to the time it
 * stopped (ended, or went back to the queue).  Its pieces (cut where a
 * rate changes and at midnight of the report zone, policies/price.h)
 * are rewritten whole by broker__ledger_hold, in the transaction of the
 * job change that moves the hold: started, ended, requeued.  A hold
 * that still runs keeps its last piece open; whoever reads the ledger
 * bills that piece up to now (broker__usage_accrued), so month-to-date
 * figures are current to the second without a write per job per
 * minute.  A timer rewrites open holds once their open piece reaches
 * midnight, and at start every open hold is rewritten (a config price
 * change or a crash may have left it behind), so kill -9 at any moment
 * loses nothing and bills nothing twice: each write is a replacement.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/broker_internal.h"
#include "util/alloc.h"
#include "util/grow.h"
#include "util/log.h"
#include "util/timeutil.h"

/* How often open holds are looked at for a midnight to cut at; at
 * midnight, how many are cut per loop turn, and how soon the next turn
 * comes while some are left (every running job's hold is cut at once). */
#define LEDGER_TICK_MS 60000
#define LEDGER_CUT_BATCH 500
#define LEDGER_CUT_AGAIN_MS 200

/* A rate history read from the database. */
struct periods {
  struct price_period *p;
  size_t n, cap;
};

static int
period_cb(const struct db_price *row, void *arg)
{
  struct periods *s = arg;

  GROW(s->p, s->n + 1, s->cap);
  s->p[s->n++] = (struct price_period){row->valid_from_ms, row->rate_micro};
  return 0;
}

static int
history(struct broker *b, const char *site, const char *type,
        const char *kind, struct periods *out, struct err *e)
{
  out->n = 0;
  return db_price_history(b->db, site, type, kind, period_cb, out, e);
}

/*
 * The GPU type j's hold is counted under: the one it asked for, else
 * the one type its site has (or rents), else "any".
 */
static void
gpu_type_of(const struct site *s, const struct db_job *j, char *out,
            size_t len)
{
  struct adapter_capacity cap;
  const char *type = "any";

  if (j->gpu_type != NULL) {
    type = j->gpu_type;
  } else if (s != NULL) {
    memset(&cap, 0, sizeof(cap));
    s->ops->capacity(s->ctx, &cap);
    if (cap.npools == 1)
      type = cap.pools[0].type;
    else if (s->cost.nrented == 1)
      type = s->cost.rented[0].gpu_type;
  }
  snprintf(out, len, "%s", type);
  for (char *p = out; *p; p++)
    *p = (char)tolower((unsigned char)*p);
}

/* Midnights of the report zone strictly inside (t0, t1). */
static size_t
midnights(int64_t t0, int64_t t1, int tz, int64_t **out)
{
  size_t n = 0, cap = 0;

  *out = NULL;
  for (int64_t d = time_day_start(t0, tz) + TIME_DAY_MS; d < t1;
       d += TIME_DAY_MS) {
    GROW(*out, n + 1, cap);
    (*out)[n++] = d;
  }
  return n;
}

/* What a hold is of: a job's GPUs, or a VM's idle ones. */
struct holder {
  int64_t id;             /* the usage rows' job_id */
  const char *project;
  const char *site;
  int64_t gpus;
  int billing_minimum;    /* a closed job hold is billed at least the
                             site's minimum; an idle piece never */
};

static int
bill_hold(struct broker *b, const struct holder *j, const char *type,
          int64_t hold_ms, int64_t to_ms, const char *outcome, struct err *e)
{
  const struct site *s = broker__site(b, j->site);
  enum site_pricing pricing = s != NULL ? s->cost.kind : SITE_UNPRICED;
  struct periods series[PRICE_SERIES_MAX] = {{0}};
  struct price_series ps[PRICE_SERIES_MAX];
  struct price_bill *bills = NULL;
  struct db_usage *rows = NULL;
  char(*days)[11] = NULL;
  int64_t *cuts = NULL;
  size_t nseries = 0, ncuts, n;
  int64_t min_ms = 0, end = to_ms > hold_ms ? to_ms : hold_ms + 1;
  int rc = 0;

  if (j->gpus <= 0 || j->site == NULL)
    return 0;
  if (pricing == SITE_RENTED) {
    rc = history(b, j->site, type, "on_demand", &series[0], e);
    nseries = 1;
    if (outcome != NULL && j->billing_minimum)
      min_ms = s->cost.min_billed_seconds * 1000;
  } else if (pricing == SITE_OWNED) {
    rc = history(b, j->site, "*", "sunk", &series[0], e);
    if (rc == 0)
      rc = history(b, j->site, "*", "marginal", &series[1], e);
    nseries = 2;
  }
  if (rc < 0)
    goto out;
  for (size_t k = 0; k < nseries; k++)
    ps[k] = (struct price_series){series[k].p, series[k].n};
  /* A hold of no length (just opened, or a job that ended in the
   * millisecond it started) still has its piece: cut a millisecond for
   * the rates, then bill the piece as long as it was, or the minimum. */
  ncuts = midnights(hold_ms, end, b->tz_offset_min, &cuts);
  n = price_bill_hold(ps, nseries, cuts, ncuts, hold_ms, end, j->gpus,
                      min_ms, NULL, 0);
  bills = xcalloc(n, sizeof(*bills));
  price_bill_hold(ps, nseries, cuts, ncuts, hold_ms, end, j->gpus, min_ms,
                  bills, n);
  if (to_ms <= hold_ms && n > 0) {
    bills[n - 1].to_ms = hold_ms;
    bills[n - 1].billed_ms = min_ms;
    for (size_t k = 0; k < PRICE_SERIES_MAX; k++)
      bills[n - 1].cost_micro[k] =
          price_charge(bills[n - 1].rate_micro[k], j->gpus, min_ms);
  }
  rows = xcalloc(n, sizeof(*rows));
  days = xcalloc(n, sizeof(*days));
  for (size_t i = 0; i < n; i++) {
    const struct price_bill *pb = &bills[i];
    struct db_usage *u = &rows[i];

    time_format_day(pb->from_ms, b->tz_offset_min, days[i]);
    *u = (struct db_usage){
        .from_ms = pb->from_ms, .to_ms = pb->to_ms,
        .billed_ms = pb->billed_ms, .open = outcome == NULL && i + 1 == n,
        .day = days[i], .project = j->project, .site = j->site,
        .gpu_type = type, .gpus = j->gpus, .outcome = outcome,
        .billed_rate = DB_NO_RATE, .sunk_rate = DB_NO_RATE,
        .marginal_rate = DB_NO_RATE};
    if (pricing == SITE_RENTED) {
      u->kind = "on_demand";
      u->billed_rate = pb->rate_micro[0];
      u->billed_micro = pb->cost_micro[0];
    } else if (pricing == SITE_OWNED) {
      u->kind = "owned";
      u->sunk_rate = pb->rate_micro[0];
      u->sunk_micro = pb->cost_micro[0];
      u->marginal_rate = pb->rate_micro[1];
      u->marginal_micro = pb->cost_micro[1];
    } else {
      u->kind = "unpriced";
    }
  }
  rc = db_usage_replace(b->db, j->id, hold_ms, rows, n, e);
out:
  for (size_t k = 0; k < PRICE_SERIES_MAX; k++)
    free(series[k].p);
  free(bills);
  free(rows);
  free(days);
  free(cuts);
  return rc;
}

int
broker__ledger_hold(struct broker *b, const struct db_job *j,
                    int64_t hold_ms, int64_t to_ms, const char *outcome,
                    struct err *e)
{
  const struct holder h = {j->id, j->project, j->site, j->gpus, 1};
  char type[ADAPTER_GPU_TYPE_LEN];

  if (j->gpus <= 0 || j->site == NULL)
    return 0;
  gpu_type_of(broker__site(b, j->site), j, type, sizeof(type));
  return bill_hold(b, &h, type, hold_ms, to_ms, outcome, e);
}

int
broker__ledger_idle(struct broker *b, const char *site, int64_t node_id,
                    const char *gpu_type, int64_t gpus, int64_t from_ms,
                    int64_t to_ms, struct err *e)
{
  const struct holder h = {-node_id, BROKER_IDLE_PROJECT, site, gpus, 0};

  return bill_hold(b, &h, gpu_type, from_ms, to_ms, "idle", e);
}

void
broker__usage_accrued(const struct db_usage *u, int64_t now, int tz,
                      struct db_usage_sum *add)
{
  int64_t to = time_day_start(u->from_ms, tz) + TIME_DAY_MS;
  int64_t ms;

  memset(add, 0, sizeof(*add));
  if (!u->open)
    return;
  /* Past midnight belongs to the next piece, which the timer cuts. */
  if (now < to)
    to = now;
  if (to <= u->to_ms)
    return;
  ms = to - u->from_ms;
  add->gpu_ms = (to - u->to_ms) * u->gpus;
  add->billed_micro = price_charge(u->billed_rate, u->gpus, ms) -
                      u->billed_micro;
  add->sunk_micro = price_charge(u->sunk_rate, u->gpus, ms) - u->sunk_micro;
  add->marginal_micro = price_charge(u->marginal_rate, u->gpus, ms) -
                        u->marginal_micro;
}

/* The open holds to rewrite: (job, hold) pairs, at most max. */
struct open_holds {
  struct {
    int64_t job_id, hold_ms;
  } *h;
  size_t n, cap, max;
};

static int
open_cb(const struct db_usage *u, void *arg)
{
  struct open_holds *o = arg;

  if (o->n == o->max)
    return 1; /* more than a batch: the rest next turn */
  GROW(o->h, o->n + 1, o->cap);
  o->h[o->n].job_id = u->job_id;
  o->h[o->n].hold_ms = u->hold_ms;
  o->n++;
  return 0;
}

/* Rewrite one open hold as its job stands now. */
static int
catch_up_one(struct broker *b, int64_t job_id, int64_t hold_ms, int64_t now,
             struct err *e)
{
  struct db_job j;
  int rc;

  db_job_init(&j);
  rc = db_job_get(b->db, job_id, &j, e);
  if (rc == 0) {
    if (j.state == JOB_RUNNING && j.started_ms == hold_ms)
      rc = broker__ledger_hold(b, &j, hold_ms, now, NULL, e);
    else if (job_state_is_final(j.state) && j.started_ms == hold_ms)
      rc = broker__ledger_hold(b, &j, hold_ms, j.ended_ms,
                               job_state_name(j.state), e);
    else /* the hold ended when the job left it */
      rc = broker__ledger_hold(b, &j, hold_ms, j.updated_ms, "requeued", e);
  }
  db_job_release(&j);
  return rc;
}

int
broker__ledger_catch_up(struct broker *b, int64_t now, int all,
                        struct err *e)
{
  struct open_holds o = {.max = all ? SIZE_MAX : LEDGER_CUT_BATCH};
  char today[11];
  int more, rc;

  time_format_day(now, b->tz_offset_min, today);
  /* Open pieces of days before today have reached midnight. */
  rc = db_usage_open(b->db, all ? NULL : today, open_cb, &o, e);
  more = rc == 1;
  if (rc == 1)
    rc = 0;
  for (size_t i = 0; rc == 0 && i < o.n; i++)
    rc = catch_up_one(b, o.h[i].job_id, o.h[i].hold_ms, now, e);
  free(o.h);
  return rc < 0 ? rc : more;
}

static void
tick_cb(uv_timer_t *t)
{
  struct broker *b = t->data;
  struct err e = {0};
  int more = 0;
  int rc = db_begin(b->db, &e);

  if (rc == 0)
    rc = more = broker__ledger_catch_up(b, time_now_ms(), 0, &e);
  if (rc >= 0 && !more)
    rc = broker__budgets_tick(b, time_now_ms(), &e);
  if (rc >= 0)
    rc = db_commit(b->db, &e);
  if (rc >= 0 && more)
    uv_timer_start(&b->ledger_timer, tick_cb, LEDGER_CUT_AGAIN_MS,
                   LEDGER_TICK_MS);
  if (rc < 0) {
    db_rollback(b->db);
    log_error("ledger: %s", err_msg(&e));
  }
}

void
broker__ledger_init(struct broker *b)
{
  uv_timer_init(b->loop, &b->ledger_timer);
  b->ledger_timer.data = b;
  uv_timer_start(&b->ledger_timer, tick_cb, LEDGER_TICK_MS, LEDGER_TICK_MS);
}

void
broker__ledger_close(struct broker *b)
{
  uv_timer_stop(&b->ledger_timer);
  broker__close_handle(b, (uv_handle_t *)&b->ledger_timer);
}

int
broker__egress_bill(struct broker *b, int64_t transfer_id,
                    const char *project, const char *dataset,
                    const char *version, const char *from, const char *to,
                    int64_t bytes, int64_t now, struct err *e)
{
  const struct site *src = broker__site(b, from);
  struct db_replica r;
  struct db_dataset d;
  char day[11];
  int64_t rate = DB_NO_RATE, cost = 0;
  int rc = 0;

  memset(&r, 0, sizeof(r));
  memset(&d, 0, sizeof(d));
  if (project == NULL)
    rc = db_replica_get(b->db, dataset, version, to, &r, e);
  if (rc == ERR_NOT_FOUND)
    rc = 0;
  if (rc == 0 && project == NULL && r.project == NULL)
    rc = db_dataset_get(b->db, dataset, &d, e);
  if (rc < 0)
    goto out;
  if (project == NULL)
    project = r.project != NULL ? r.project
              : d.project != NULL ? d.project
                                  : "";
  if (src != NULL && src->cost.kind != SITE_UNPRICED) {
    rate = broker__egress_rate(&src->cost, to);
    cost = price_egress(rate, bytes);
  }
  time_format_day(now, b->tz_offset_min, day);
  rc = db_egress_insert(b->db,
                        &(struct db_egress){transfer_id, now, day, project,
                                            from, to, dataset, bytes, rate,
                                            cost},
                        e);
out:
  db_replica_release(&r);
  db_dataset_release(&d);
  return rc;
}
