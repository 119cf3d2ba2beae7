/*
 * Budgets: a project's monthly limit on what it spends, and what that
 * spending is.
 *
 * The month is the calendar month of the report zone.  A budget counts
 * what rented sites bill and the egress they charge ("rented", the
 * default: owned capacity is paid for already), or that plus the sunk
 * cost of owned GPU-hours ("all").  What a project spent this month is
 * read from the ledger (open holds up to now) and kept for a few
 * seconds, so a burst of submissions does not sum the ledger once each.
 *
 * A hard budget refuses a job whose cost could exceed what is left
 * (broker__budget_admit) and, once spent, keeps the project's queued
 * jobs off rented sites (broker__budget_blocks_rented) until the month
 * turns or the budget is raised; running jobs are never stopped.  A
 * soft one warns at 80 % and 100 %, once each per month: in the log,
 * in `tenbin budgets` and in /metrics.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/broker_internal.h"
#include "util/alloc.h"
#include "util/grow.h"
#include "util/log.h"
#include "util/timeutil.h"

/* How long a project's spending, once read, stands for it. */
#define BUDGET_FRESH_MS 5000

struct budget {
  char *project;
  int64_t monthly_micro;
  int hard;
  int all;                     /* counts owned sunk cost too */
  int warned_pct;
  char warned_month[8];
  /* spending this month, as of spent_at (0: to be read) */
  int64_t spent_micro;
  int64_t spent_at;
  char spent_month[8];
};

static void
month_of(const struct broker *b, int64_t ms, char out[8])
{
  char day[11];

  time_format_day(ms, b->tz_offset_min, day);
  memcpy(out, day, 7);
  out[7] = '\0';
}

static struct budget *
find(struct broker *b, const char *project)
{
  for (size_t i = 0; i < b->nbudgets; i++) {
    if (strcmp(b->budgets[i].project, project) == 0)
      return &b->budgets[i];
  }
  return NULL;
}

static int
load_cb(const struct db_budget *row, void *arg)
{
  struct broker *b = arg;
  struct budget *bud = find(b, row->project);

  if (bud == NULL) {
    GROW(b->budgets, b->nbudgets + 1, b->budgets_cap);
    bud = &b->budgets[b->nbudgets++];
    memset(bud, 0, sizeof(*bud));
    bud->project = xstrdup(row->project);
  }
  bud->monthly_micro = row->monthly_micro;
  bud->hard = row->hard;
  bud->all = strcmp(row->counts, "all") == 0;
  bud->warned_pct = row->warned_pct;
  snprintf(bud->warned_month, sizeof(bud->warned_month), "%s",
           row->warned_month != NULL ? row->warned_month : "");
  bud->spent_at = 0;
  return 0;
}

void
broker__fmt_dollars(int64_t micro, char *out, size_t len)
{
  int64_t m = micro < 0 ? -micro : micro;

  snprintf(out, len, "%s$%lld.%02lld", micro < 0 ? "-" : "",
           (long long)(m / 1000000), (long long)(m % 1000000 / 10000));
}

int
broker__budgets_load(struct broker *b, struct err *e)
{
  return db_budget_list(b->db, load_cb, b, e);
}

void
broker__budgets_free(struct broker *b)
{
  for (size_t i = 0; i < b->nbudgets; i++)
    free(b->budgets[i].project);
  free(b->budgets);
  b->budgets = NULL;
  b->nbudgets = b->budgets_cap = 0;
}

struct spend {
  int64_t micro;
  int all;
};

static int
spend_cb(const struct usage_line *l, void *arg)
{
  struct spend *s = arg;

  s->micro = l->billed_micro + l->egress_micro + (s->all ? l->sunk_micro
                                                         : 0);
  return 0;
}

/* Record a warning once per level and month. */
static int
warn(struct broker *b, struct budget *bud, const char *month, struct err *e)
{
  char spent[32], limit[32];
  int pct = bud->spent_micro >= bud->monthly_micro ? 100
            : bud->spent_micro * 10 >= bud->monthly_micro * 8 ? 80
                                                              : 0;
  int rc;

  if (pct == 0 || (strcmp(bud->warned_month, month) == 0 &&
                   bud->warned_pct >= pct))
    return 0;
  rc = db_budget_warned(b->db, bud->project, pct, month, e);
  if (rc < 0)
    return rc;
  bud->warned_pct = pct;
  snprintf(bud->warned_month, sizeof(bud->warned_month), "%s", month);
  broker__fmt_dollars(bud->spent_micro, spent, sizeof(spent));
  broker__fmt_dollars(bud->monthly_micro, limit, sizeof(limit));
  log_warn("project '%s' spent %s of its %s budget of %s for %s (%d %%)%s",
           bud->project, spent, bud->hard ? "hard" : "soft", limit, month,
           pct,
           pct == 100 && bud->hard ? ": its queued jobs wait for owned "
                                     "capacity"
                                   : "");
  return 0;
}

/* bud's spending this month, read again when stale. */
static int
refresh(struct broker *b, struct budget *bud, int64_t now, struct err *e)
{
  char *projects[2] = {bud->project, NULL};
  struct principal p = {.role = ROLE_ADMIN, .projects = projects};
  struct usage_query q = {.by = 0};
  struct spend s = {0, bud->all};
  char month[8];
  int rc;

  month_of(b, now, month);
  if (bud->spent_at != 0 && now - bud->spent_at < BUDGET_FRESH_MS &&
      strcmp(bud->spent_month, month) == 0)
    return 0;
  rc = broker_usage_report(b, &p, &q, spend_cb, &s, e);
  if (rc < 0)
    return rc;
  bud->spent_micro = s.micro;
  bud->spent_at = now;
  memcpy(bud->spent_month, month, sizeof(month));
  return warn(b, bud, month, e);
}

int
broker__budgets_tick(struct broker *b, int64_t now, struct err *e)
{
  int rc = 0;

  for (size_t i = 0; rc == 0 && i < b->nbudgets; i++) {
    b->budgets[i].spent_at = 0;
    rc = refresh(b, &b->budgets[i], now, e);
  }
  return rc;
}

int
broker__budget_blocks_rented(struct broker *b, const char *project)
{
  struct budget *bud = find(b, project);
  struct err e = {0};

  if (bud == NULL || !bud->hard)
    return 0;
  if (refresh(b, bud, time_now_ms(), &e) < 0) {
    log_warn("budget of project '%s': %s", project, err_msg(&e));
    return 0;
  }
  return bud->spent_micro >= bud->monthly_micro;
}

int
broker__budget_left(struct broker *b, const char *project, int64_t *left,
                    int *hard, int *all, struct err *e)
{
  struct budget *bud = find(b, project);
  int rc;

  if (bud == NULL)
    return 0;
  rc = refresh(b, bud, time_now_ms(), e);
  if (rc < 0)
    return rc;
  *left = bud->monthly_micro - bud->spent_micro;
  *hard = bud->hard;
  *all = bud->all;
  return 1;
}

int
broker_budget_set(struct broker *b, const struct principal *p,
                  const char *project, int64_t monthly_micro, int hard,
                  const char *counts, struct err *e)
{
  struct db_budget row = {project, monthly_micro, hard, counts,
                          time_now_ms(), 0, NULL};
  int rc;

  if (p->role != ROLE_ADMIN)
    return err_set(e, ERR_FORBIDDEN, "setting budgets needs the admin role");
  if (jobspec_ident_problem(project) != NULL)
    return err_set(e, ERR_INVALID, "field 'project': %s",
                   jobspec_ident_problem(project));
  if (!broker__project_allowed(b, project))
    return err_set(e, ERR_UNPROCESSABLE, "field 'project': unknown project "
                   "'%s'", project);
  if (monthly_micro < 0 || monthly_micro > BUDGET_MAX_MICRO)
    return err_set(e, ERR_INVALID, "field 'monthly': must be a number of "
                   "dollars, 0 to 100000000");
  if (counts == NULL)
    row.counts = "rented";
  else if (strcmp(counts, "rented") != 0 && strcmp(counts, "all") != 0)
    return err_set(e, ERR_INVALID, "field 'counts': '%.16s' is not rented "
                   "or all", counts);
  rc = db_budget_put(b->db, &row, e);
  if (rc == 0)
    rc = broker__budgets_load(b, e);
  if (rc == 0)
    broker__kick(b); /* a raised budget releases waiting jobs */
  return rc;
}

/* The month that holds now: its start and its length, ms. */
static void
month_span(const struct broker *b, int64_t now, int64_t *start,
           int64_t *len)
{
  *start = time_month_start(now, b->tz_offset_min);
  *len = time_month_start(*start + 32 * TIME_DAY_MS, b->tz_offset_min) -
         *start;
}

int
broker_budget_list(struct broker *b, const struct principal *p,
                   const char *project, budget_view_cb cb, void *arg,
                   struct err *e)
{
  int64_t now = time_now_ms(), start, len;
  char month[8];
  int rc = 0, seen = 0;

  month_of(b, now, month);
  month_span(b, now, &start, &len);
  for (size_t i = 0; rc == 0 && i < b->nbudgets; i++) {
    struct budget *bud = &b->budgets[i];
    struct budget_view v;

    if ((project != NULL && strcmp(project, bud->project) != 0) ||
        !principal_has_project(p, bud->project))
      continue;
    seen = 1;
    bud->spent_at = 0; /* a reader is shown the ledger as it is */
    rc = refresh(b, bud, now, e);
    if (rc < 0)
      break;
    v = (struct budget_view){
        .project = bud->project, .monthly_micro = bud->monthly_micro,
        .hard = bud->hard, .counts = bud->all ? "all" : "rented",
        .month = month, .spent_micro = bud->spent_micro,
        .left_micro = bud->monthly_micro - bud->spent_micro,
        .warned_pct = strcmp(bud->warned_month, month) == 0
                          ? bud->warned_pct
                          : 0};
    /* at this month's pace so far, to its end */
    v.forecast_micro = now > start
                           ? (int64_t)((__int128)bud->spent_micro * len /
                                       (now - start))
                           : bud->spent_micro;
    rc = cb(&v, arg);
  }
  if (rc == 0 && project != NULL && !seen)
    rc = err_set(e, ERR_NOT_FOUND, "project '%.64s' has no budget",
                 project);
  return rc;
}
