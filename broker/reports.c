/*
 * Reports over the usage ledger, and the money totals /metrics shows.
 *
 * The database sums the written pieces (db_usage_report); the open
 * pieces of jobs still running are then billed up to now here
 * (broker__usage_accrued) and added to the line they fall in, so a
 * report is current to the second.
 */
#include <stdlib.h>
#include <string.h>

#include "broker/broker_internal.h"
#include "util/alloc.h"
#include "util/grow.h"
#include "util/timeutil.h"

_Static_assert((unsigned)USAGE_BY_PROJECT == (unsigned)DB_BY_PROJECT &&
                   (unsigned)USAGE_BY_SITE == (unsigned)DB_BY_SITE &&
                   (unsigned)USAGE_BY_GPU_TYPE == (unsigned)DB_BY_GPU_TYPE &&
                   (unsigned)USAGE_BY_DAY == (unsigned)DB_BY_DAY,
               "report groupings are the database's");

int
broker_report_by_parse(const char *s, unsigned *by, struct err *e)
{
  static const struct {
    const char *name;
    unsigned bit;
  } keys[] = {{"project", USAGE_BY_PROJECT}, {"site", USAGE_BY_SITE},
              {"gpu_type", USAGE_BY_GPU_TYPE}, {"gpu-type", USAGE_BY_GPU_TYPE},
              {"day", USAGE_BY_DAY}};
  const char *p = s;

  *by = 0;
  while (*p != '\0') {
    size_t len = strcspn(p, ",");
    size_t k;

    for (k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
      if (strlen(keys[k].name) == len && strncmp(keys[k].name, p, len) == 0)
        break;
    }
    if (k == sizeof(keys) / sizeof(keys[0]))
      return err_set(e, ERR_INVALID, "field 'by': '%.*s' is not project, "
                     "site, gpu_type or day", (int)(len > 32 ? 32 : len),
                     p);
    *by |= keys[k].bit;
    p += len;
    if (*p == ',')
      p++;
  }
  return 0;
}

/* A report's lines as the database gave them, keys owned. */
struct lines {
  struct usage_line *l;
  size_t n, cap;
};

static int
line_cb(const struct db_usage_sum *s, void *arg)
{
  struct lines *ls = arg;

  GROW(ls->l, ls->n + 1, ls->cap);
  ls->l[ls->n++] = (struct usage_line){
      xstrdup(s->project), xstrdup(s->site),
      xstrdup(s->gpu_type), xstrdup(s->day), s->gpu_ms,
      s->failed_gpu_ms, s->jobs, s->billed_micro, s->sunk_micro,
      s->marginal_micro, s->egress_bytes, s->egress_micro};
  return 0;
}

static int
key_cmp(const char *a, const char *b)
{
  if (a == NULL || b == NULL)
    return (a != NULL) - (b != NULL);
  return strcmp(a, b);
}

/* The database orders lines by their keys (NULLs first): find the one
 * for these keys by bisection. */
static struct usage_line *
line_find(struct lines *ls, const char *const key[4])
{
  size_t lo = 0, hi = ls->n;

  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const struct usage_line *l = &ls->l[mid];
    const char *lk[4] = {l->project, l->site, l->gpu_type, l->day};
    int c = 0;

    for (int k = 0; c == 0 && k < 4; k++)
      c = key_cmp(lk[k], key[k]);
    if (c == 0)
      return &ls->l[mid];
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

struct accrue {
  struct lines *ls;
  const char *from, *to;
  unsigned by;
  const struct principal *p;
  int64_t now;
  int tz;
};

static int
accrue_cb(const struct db_usage *u, void *arg)
{
  struct accrue *a = arg;
  struct db_usage_sum add;
  struct usage_line *l;
  const char *key[4] = {u->project, u->site, u->gpu_type, u->day};

  if (strcmp(u->day, a->from) < 0 || strcmp(u->day, a->to) > 0 ||
      !principal_has_project(a->p, u->project))
    return 0;
  for (int k = 0; k < 4; k++) {
    if (!(a->by & (1u << k)))
      key[k] = NULL;
  }
  broker__usage_accrued(u, a->now, a->tz, &add);
  l = line_find(a->ls, key);
  if (l == NULL)
    return 0; /* not in the sums: it began after they were read */
  /* open: the job runs, so none of it is failed yet */
  l->gpu_ms += add.gpu_ms;
  l->billed_micro += add.billed_micro;
  l->sunk_micro += add.sunk_micro;
  l->marginal_micro += add.marginal_micro;
  return 0;
}

/* q's days, checked, into from and to ("YYYY-MM-DD"). */
static int
report_days(const struct broker *b, const struct usage_query *q,
            int64_t now, char from[11], char to[11], struct err *e)
{
  int64_t f, t;

  if (q->from != NULL) {
    if (time_parse_day(q->from, b->tz_offset_min, &f) < 0)
      return err_set(e, ERR_INVALID, "field 'from': '%.32s' is not a day "
                     "(YYYY-MM-DD)", q->from);
  } else {
    f = time_month_start(now, b->tz_offset_min);
  }
  if (q->to != NULL) {
    if (time_parse_day(q->to, b->tz_offset_min, &t) < 0)
      return err_set(e, ERR_INVALID, "field 'to': '%.32s' is not a day "
                     "(YYYY-MM-DD)", q->to);
  } else {
    t = time_day_start(now, b->tz_offset_min);
  }
  if (t < f)
    return err_set(e, ERR_UNPROCESSABLE, "field 'to': the report ends "
                   "before it begins ('from' is later)");
  if ((t - f) / TIME_DAY_MS + 1 > USAGE_REPORT_MAX_DAYS)
    return err_set(e, ERR_UNPROCESSABLE, "field 'from': a report spans at "
                   "most %d days", USAGE_REPORT_MAX_DAYS);
  time_format_day(f, b->tz_offset_min, from);
  time_format_day(t, b->tz_offset_min, to);
  return 0;
}

int
broker_usage_report(struct broker *b, const struct principal *p,
                    struct usage_query *q, usage_line_cb cb, void *arg,
                    struct err *e)
{
  struct lines ls = {0};
  int64_t now = time_now_ms();
  struct accrue a = {&ls, q->from_day, q->to_day, q->by, p, now,
                     b->tz_offset_min};
  int rc = report_days(b, q, now, q->from_day, q->to_day, e);

  if (rc == 0)
    rc = db_usage_report(b->db, q->from_day, q->to_day, q->by, p->projects,
                         line_cb, &ls, e);
  if (rc == 0)
    rc = db_usage_open(b->db, NULL, accrue_cb, &a, e);
  for (size_t i = 0; rc == 0 && i < ls.n; i++)
    rc = cb(&ls.l[i], arg);
  for (size_t i = 0; i < ls.n; i++) {
    free((char *)ls.l[i].project);
    free((char *)ls.l[i].site);
    free((char *)ls.l[i].gpu_type);
    free((char *)ls.l[i].day);
  }
  free(ls.l);
  return rc;
}

/* ---- one job ---- */

struct job_cost {
  struct job_view *v;
  int64_t now;
  int tz;
};

static int
job_piece_cb(const struct db_usage *u, void *arg)
{
  struct job_cost *c = arg;
  struct db_usage_sum add;

  broker__usage_accrued(u, c->now, c->tz, &add);
  c->v->cost_gpu_ms += (u->to_ms - u->from_ms) * u->gpus + add.gpu_ms;
  c->v->billed_micro += u->billed_micro + add.billed_micro;
  c->v->sunk_micro += u->sunk_micro + add.sunk_micro;
  c->v->marginal_micro += u->marginal_micro + add.marginal_micro;
  return 0;
}

int
broker__job_cost(struct broker *b, struct job_view *v, struct err *e)
{
  struct job_cost c = {v, time_now_ms(), b->tz_offset_min};

  v->has_cost = 1;
  v->cost_gpu_ms = v->billed_micro = v->sunk_micro = v->marginal_micro = 0;
  return db_usage_of_job(b->db, v->id, job_piece_cb, &c, e);
}

/* ---- money totals for /metrics ---- */

struct totals {
  struct metrics_view *m;
  size_t cap;
  int64_t now;
  int tz;
};

static void
total_add(struct totals *t, const char *project, const char *site,
          const char *gpu_type, const char *kind, int64_t micro)
{
  struct metrics_view *m = t->m;

  for (size_t i = 0; i < m->ncosts; i++) {
    struct cost_total_view *c = &m->costs[i];

    if (strcmp(c->project, project) == 0 && strcmp(c->site, site) == 0 &&
        strcmp(c->gpu_type, gpu_type) == 0 && strcmp(c->kind, kind) == 0) {
      c->micro += micro;
      return;
    }
  }
  GROW(m->costs, m->ncosts + 1, t->cap);
  m->costs[m->ncosts++] = (struct cost_total_view){
      xstrdup(project), xstrdup(site), xstrdup(gpu_type), kind, micro};
}

/* A ledger kind's money into the series /metrics names. */
static void
total_of(struct totals *t, const char *project, const char *site,
         const char *gpu_type, const char *kind, int64_t billed,
         int64_t sunk, int64_t marginal)
{
  if (strcmp(kind, "owned") == 0) {
    total_add(t, project, site, gpu_type, "sunk", sunk);
    total_add(t, project, site, gpu_type, "marginal", marginal);
  } else if (strcmp(kind, "on_demand") == 0) {
    total_add(t, project, site, gpu_type, "on_demand", billed);
  } else if (strcmp(kind, "spot") == 0) {
    total_add(t, project, site, gpu_type, "spot", billed);
  } else if (strcmp(kind, "egress") == 0) {
    total_add(t, project, site, gpu_type, "egress", billed);
  }
}

static int
stored_total_cb(const struct db_usage_sum *s, void *arg)
{
  total_of(arg, s->project, s->site, s->gpu_type, s->kind, s->billed_micro,
           s->sunk_micro, s->marginal_micro);
  return 0;
}

static int
open_total_cb(const struct db_usage *u, void *arg)
{
  struct totals *t = arg;
  struct db_usage_sum add;

  broker__usage_accrued(u, t->now, t->tz, &add);
  total_of(t, u->project, u->site, u->gpu_type, u->kind, add.billed_micro,
           add.sunk_micro, add.marginal_micro);
  return 0;
}

int
broker__cost_totals(struct broker *b, struct metrics_view *m, struct err *e)
{
  struct totals t = {m, 0, time_now_ms(), b->tz_offset_min};
  int rc = db_usage_totals(b->db, stored_total_cb, &t, e);

  if (rc == 0)
    rc = db_usage_open(b->db, NULL, open_total_cb, &t, e);
  return rc;
}
