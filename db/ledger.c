/*
 * The usage ledger, egress charges and budgets (db.h; schema in
 * 006_ledger.sql).
 * Same rules as prices.c: statements prepared once at open into this
 * file's slots, values always bound, rows handed to callbacks borrowed.
 * A report's statement depends on its grouping and is prepared per
 * call (a report is rare; its text is built from fixed column names
 * only).
 */
#include <sqlite3.h>
#include <string.h>

#include "db/db.h"
#include "db/db_internal.h"
#include "util/buf.h"

#define USAGE_COLS                                                         \
  "job_id, hold_ms, from_ms, to_ms, billed_ms, open, day, project, site, " \
  "gpu_type, gpus, kind, billed_rate, sunk_rate, marginal_rate, "          \
  "billed_micro, sunk_micro, marginal_micro, outcome"

enum lg_stmt {
  LG_DELETE,
  LG_INSERT,
  LG_OPEN,
  LG_OF_JOB,
  LG_TOTALS,
  LG_EGRESS,
  LG_BUDGET_PUT,
  LG_BUDGET_LIST,
  LG_BUDGET_WARNED,
  LG_RUNTIMES,
  LG_HOLDING,
  LG_SITE_MS,
  LG_OF_SITE,
  LG_COUNT
};

_Static_assert(LG_COUNT <= DB__LG_MAX, "struct db has too few lg slots");

static const char *const lg_sql[LG_COUNT] = {
    [LG_DELETE] = "DELETE FROM usage WHERE job_id = ?1 AND hold_ms = ?2",
    [LG_INSERT] = "INSERT INTO usage (" USAGE_COLS ") VALUES (?1, ?2, ?3, "
                  "?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, "
                  "?16, ?17, ?18, ?19)",
    [LG_OPEN] = "SELECT " USAGE_COLS " FROM usage INDEXED BY usage_open "
                "WHERE open = 1 AND day < ?1 ORDER BY job_id, hold_ms, "
                "from_ms",
    [LG_OF_JOB] = "SELECT " USAGE_COLS " FROM usage WHERE job_id = ?1 "
                  "ORDER BY hold_ms, from_ms",
    /* A piece is at most a day long (the ledger cuts at midnight): the
     * index on (site, from_ms) finds those ending since since_ms. */
    [LG_OF_SITE] = "SELECT " USAGE_COLS " FROM usage INDEXED BY "
                   "usage_site_from WHERE site = ?1 AND from_ms >= ?2 - "
                   "86400000 AND to_ms >= ?2 ORDER BY from_ms",
    [LG_TOTALS] = "SELECT project, site, gpu_type, kind, gpu_ms, "
                  "billed_micro, sunk_micro, marginal_micro FROM "
                  "usage_totals ORDER BY project, site, gpu_type, kind",
    [LG_EGRESS] = "INSERT OR IGNORE INTO egress (transfer_id, at_ms, day, "
                  "project, site, to_site, dataset, bytes, rate_micro, "
                  "cost_micro) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
                  "?10)",
    [LG_BUDGET_PUT] = "INSERT OR REPLACE INTO budgets (project, "
                      "monthly_micro, hard, counts, updated_ms, warned_pct, "
                      "warned_month) VALUES (?1, ?2, ?3, ?4, ?5, 0, NULL)",
    [LG_BUDGET_LIST] = "SELECT project, monthly_micro, hard, counts, "
                       "updated_ms, warned_pct, warned_month FROM budgets "
                       "ORDER BY project",
    [LG_BUDGET_WARNED] = "UPDATE budgets SET warned_pct = ?2, "
                         "warned_month = ?3 WHERE project = ?1",
    [LG_RUNTIMES] = "SELECT project, coalesce(workload, name), "
                    "ended_ms - started_ms FROM jobs WHERE state = "
                    "'succeeded' AND started_ms > 0 ORDER BY id DESC "
                    "LIMIT ?1",
    [LG_SITE_MS] = "SELECT coalesce(SUM(gpu_ms), 0) FROM usage_daily "
                   "WHERE day BETWEEN ?2 AND ?3 AND site = ?1",
    [LG_HOLDING] = "SELECT id, project, coalesce(workload, name), site, "
                   "gpus, gpu_type, started_ms, json_extract(spec_json, "
                   "'$.time_limit') FROM jobs WHERE state IN "
                   "('placed', 'submitted', 'running') AND site IS NOT "
                   "NULL AND gpus > 0",
};

static sqlite3_stmt *
stmt(struct db *db, enum lg_stmt i)
{
  return db__lg_stmts(db)[i];
}

int
db__lg_prepare(struct db *db, struct err *e)
{
  sqlite3_stmt **slots = db__lg_stmts(db);

  for (unsigned i = 0; i < LG_COUNT; i++) {
    int ret = db__prepare(db, lg_sql[i], &slots[i], e);

    if (ret < 0)
      return ret;
  }
  return 0;
}

/* A rate column: NULL for DB_NO_RATE. */
static void
bind_rate(sqlite3_stmt *st, int i, int64_t rate, int *rc)
{
  if (rate != DB_NO_RATE)
    db__bind_int64(st, i, rate, rc);
  else if (*rc == SQLITE_OK)
    *rc = sqlite3_bind_null(st, i);
}

static int64_t
col_rate(sqlite3_stmt *st, int i)
{
  return sqlite3_column_type(st, i) == SQLITE_NULL
             ? DB_NO_RATE
             : sqlite3_column_int64(st, i);
}

int
db_usage_replace(struct db *db, int64_t job_id, int64_t hold_ms,
                 const struct db_usage *pieces, size_t n, struct err *e)
{
  sqlite3_stmt *st = stmt(db, LG_DELETE);
  int rc = SQLITE_OK;
  int ret;

  db__bind_int64(st, 1, job_id, &rc);
  db__bind_int64(st, 2, hold_ms, &rc);
  ret = db__step_write(db, st, rc, "clearing a hold's pieces", e);
  st = stmt(db, LG_INSERT);
  for (size_t i = 0; ret == 0 && i < n; i++) {
    const struct db_usage *u = &pieces[i];

    rc = SQLITE_OK;
    db__bind_int64(st, 1, job_id, &rc);
    db__bind_int64(st, 2, hold_ms, &rc);
    db__bind_int64(st, 3, u->from_ms, &rc);
    db__bind_int64(st, 4, u->to_ms, &rc);
    db__bind_int64(st, 5, u->billed_ms, &rc);
    db__bind_int64(st, 6, u->open ? 1 : 0, &rc);
    db__bind_text(st, 7, u->day, &rc);
    db__bind_text(st, 8, u->project, &rc);
    db__bind_text(st, 9, u->site, &rc);
    db__bind_text(st, 10, u->gpu_type, &rc);
    db__bind_int64(st, 11, u->gpus, &rc);
    db__bind_text(st, 12, u->kind, &rc);
    bind_rate(st, 13, u->billed_rate, &rc);
    bind_rate(st, 14, u->sunk_rate, &rc);
    bind_rate(st, 15, u->marginal_rate, &rc);
    db__bind_int64(st, 16, u->billed_micro, &rc);
    db__bind_int64(st, 17, u->sunk_micro, &rc);
    db__bind_int64(st, 18, u->marginal_micro, &rc);
    db__bind_text(st, 19, u->outcome, &rc);
    ret = db__step_write(db, st, rc, "recording a hold's piece", e);
  }
  return ret;
}

struct visit {
  db_usage_cb cb;
  db_usage_sum_cb sum_cb;
  db_budget_cb budget_cb;
  db_runtime_cb runtime_cb;
  db_holding_cb holding_cb;
  void *arg;
};

static int
visit_usage(sqlite3_stmt *st, void *arg, struct err *e)
{
  struct visit *v = arg;
  struct db_usage u = {
      .job_id = sqlite3_column_int64(st, 0),
      .hold_ms = sqlite3_column_int64(st, 1),
      .from_ms = sqlite3_column_int64(st, 2),
      .to_ms = sqlite3_column_int64(st, 3),
      .billed_ms = sqlite3_column_int64(st, 4),
      .open = sqlite3_column_int(st, 5),
      .day = db__col_borrow(st, 6),
      .project = db__col_borrow(st, 7),
      .site = db__col_borrow(st, 8),
      .gpu_type = db__col_borrow(st, 9),
      .gpus = sqlite3_column_int64(st, 10),
      .kind = db__col_borrow(st, 11),
      .billed_rate = col_rate(st, 12),
      .sunk_rate = col_rate(st, 13),
      .marginal_rate = col_rate(st, 14),
      .billed_micro = sqlite3_column_int64(st, 15),
      .sunk_micro = sqlite3_column_int64(st, 16),
      .marginal_micro = sqlite3_column_int64(st, 17),
      .outcome = db__col_borrow(st, 18)};

  (void)e;
  return v->cb(&u, v->arg);
}

int
db_usage_open(struct db *db, const char *before_day, db_usage_cb cb,
              void *arg, struct err *e)
{
  sqlite3_stmt *st = stmt(db, LG_OPEN);
  struct visit v = {.cb = cb, .arg = arg};
  int rc = SQLITE_OK;
  int ret = db__take_for_callbacks(st, "db_usage_open", e);

  if (ret < 0)
    return ret;
  /* every day sorts before this one */
  db__bind_text(st, 1, before_day != NULL ? before_day : "~", &rc);
  return db__each_row(db, st, rc, "listing open holds", visit_usage, &v,
                      e);
}

int
db_usage_of_job(struct db *db, int64_t job_id, db_usage_cb cb, void *arg,
                struct err *e)
{
  sqlite3_stmt *st = stmt(db, LG_OF_JOB);
  struct visit v = {.cb = cb, .arg = arg};
  int rc = SQLITE_OK;
  int ret = db__take_for_callbacks(st, "db_usage_of_job", e);

  if (ret < 0)
    return ret;
  db__bind_int64(st, 1, job_id, &rc);
  return db__each_row(db, st, rc, "reading a job's usage", visit_usage, &v,
                      e);
}

int
db_usage_of_site(struct db *db, const char *site, int64_t since_ms,
                 db_usage_cb cb, void *arg, struct err *e)
{
  sqlite3_stmt *st = stmt(db, LG_OF_SITE);
  struct visit v = {.cb = cb, .arg = arg};
  int rc = SQLITE_OK;
  int ret = db__take_for_callbacks(st, "db_usage_of_site", e);

  if (ret < 0)
    return ret;
  db__bind_text(st, 1, site, &rc);
  db__bind_int64(st, 2, since_ms, &rc);
  return db__each_row(db, st, rc, "reading a site's usage", visit_usage, &v,
                      e);
}

/* A report line: columns 0-3 the keys (NULL when not grouped by), then
 * the sums in struct db_usage_sum's order. */
static int
visit_sum(sqlite3_stmt *st, void *arg, struct err *e)
{
  struct visit *v = arg;
  struct db_usage_sum s = {
      .project = db__col_borrow(st, 0),
      .site = db__col_borrow(st, 1),
      .gpu_type = db__col_borrow(st, 2),
      .day = db__col_borrow(st, 3),
      .gpu_ms = sqlite3_column_int64(st, 4),
      .failed_gpu_ms = sqlite3_column_int64(st, 5),
      .jobs = sqlite3_column_int64(st, 6),
      .billed_micro = sqlite3_column_int64(st, 7),
      .sunk_micro = sqlite3_column_int64(st, 8),
      .marginal_micro = sqlite3_column_int64(st, 9),
      .egress_bytes = sqlite3_column_int64(st, 10),
      .egress_micro = sqlite3_column_int64(st, 11)};

  (void)e;
  return v->sum_cb(&s, v->arg);
}

static const char *const by_cols[] = {"project", "site", "gpu_type", "day"};

/* The report's statement for grouping by into sql. */
static int
report_sql(unsigned by, int scoped, struct buf *sql)
{
  static const char scope[] =
      " AND project IN (SELECT value FROM json_each(?3))";
  int ret = buf_adds(sql, "SELECT ");

  for (unsigned k = 0; k < 4; k++)
    ret |= buf_addf(sql, "%s, ", (by & (1u << k)) ? by_cols[k] : "NULL");
  ret |= buf_addf(
      sql,
      "SUM(gpu_ms), SUM(failed_ms), SUM(holds), SUM(billed), SUM(sunk), "
      "SUM(marginal), SUM(ebytes), SUM(ecost) FROM ("
      "SELECT project, site, gpu_type, day, gpu_ms, failed_gpu_ms AS "
      "failed_ms, holds, billed_micro AS billed, sunk_micro AS sunk, "
      "marginal_micro AS marginal, 0 AS ebytes, 0 AS ecost FROM "
      "usage_daily WHERE day BETWEEN ?1 AND ?2%s UNION ALL "
      "SELECT project, site, '', day, 0, 0, 0, 0, 0, 0, bytes, "
      "cost_micro FROM egress WHERE day BETWEEN ?1 AND ?2%s)",
      scoped ? scope : "", scoped ? scope : "");
  for (unsigned k = 0, first = 1; k < 4; k++) {
    if (by & (1u << k)) {
      ret |= buf_addf(sql, "%s%s", first ? " GROUP BY " : ", ", by_cols[k]);
      first = 0;
    }
  }
  for (unsigned k = 0, first = 1; k < 4; k++) {
    if (by & (1u << k)) {
      ret |= buf_addf(sql, "%s%s", first ? " ORDER BY " : ", ", by_cols[k]);
      first = 0;
    }
  }
  return ret;
}

int
db_usage_report(struct db *db, const char *from_day, const char *to_day,
                unsigned by, char *const *projects, db_usage_sum_cb cb,
                void *arg, struct err *e)
{
  struct buf sql, allow;
  struct visit v = {.sum_cb = cb, .arg = arg};
  sqlite3_stmt *st = NULL;
  int rc = SQLITE_OK;
  int ret;

  buf_init(&sql, 4096);
  buf_init(&allow, 1 << 20);
  if (report_sql(by & 15u, projects != NULL, &sql) != 0) {
    ret = err_set(e, ERR_NOMEM, "report query");
    goto out;
  }
  ret = db__prepare(db, buf_str(&sql), &st, e);
  if (ret == 0 && projects != NULL)
    ret = db__allow_list_json(projects, &allow, e);
  if (ret < 0)
    goto out;
  db__bind_text(st, 1, from_day, &rc);
  db__bind_text(st, 2, to_day, &rc);
  if (projects != NULL && rc == SQLITE_OK)
    rc = sqlite3_bind_text(st, 3, buf_str(&allow), (int)allow.len,
                           SQLITE_TRANSIENT);
  ret = db__each_row(db, st, rc, "summing the ledger", visit_sum, &v, e);
out:
  sqlite3_finalize(st);
  buf_release(&sql);
  buf_release(&allow);
  return ret;
}

static int
visit_total(sqlite3_stmt *st, void *arg, struct err *e)
{
  struct visit *v = arg;
  struct db_usage_sum s = {.project = db__col_borrow(st, 0),
                           .site = db__col_borrow(st, 1),
                           .gpu_type = db__col_borrow(st, 2),
                           .kind = db__col_borrow(st, 3),
                           .gpu_ms = sqlite3_column_int64(st, 4),
                           .billed_micro = sqlite3_column_int64(st, 5),
                           .sunk_micro = sqlite3_column_int64(st, 6),
                           .marginal_micro = sqlite3_column_int64(st, 7)};

  (void)e;
  return v->sum_cb(&s, v->arg);
}

int
db_usage_totals(struct db *db, db_usage_sum_cb cb, void *arg, struct err *e)
{
  sqlite3_stmt *st = stmt(db, LG_TOTALS);
  struct visit v = {.sum_cb = cb, .arg = arg};
  int ret = db__take_for_callbacks(st, "db_usage_totals", e);

  if (ret < 0)
    return ret;
  return db__each_row(db, st, SQLITE_OK, "reading cost totals", visit_total,
                      &v, e);
}

int
db_egress_insert(struct db *db, const struct db_egress *eg, struct err *e)
{
  sqlite3_stmt *st = stmt(db, LG_EGRESS);
  int rc = SQLITE_OK;

  db__bind_int64(st, 1, eg->transfer_id, &rc);
  db__bind_int64(st, 2, eg->at_ms, &rc);
  db__bind_text(st, 3, eg->day, &rc);
  db__bind_text(st, 4, eg->project, &rc);
  db__bind_text(st, 5, eg->site, &rc);
  db__bind_text(st, 6, eg->to_site, &rc);
  db__bind_text(st, 7, eg->dataset, &rc);
  db__bind_int64(st, 8, eg->bytes, &rc);
  bind_rate(st, 9, eg->rate_micro, &rc);
  db__bind_int64(st, 10, eg->cost_micro, &rc);
  return db__step_write(db, st, rc, "recording egress", e);
}

int
db_budget_put(struct db *db, const struct db_budget *b, struct err *e)
{
  sqlite3_stmt *st = stmt(db, LG_BUDGET_PUT);
  int rc = SQLITE_OK;

  db__bind_text(st, 1, b->project, &rc);
  db__bind_int64(st, 2, b->monthly_micro, &rc);
  db__bind_int64(st, 3, b->hard ? 1 : 0, &rc);
  db__bind_text(st, 4, b->counts, &rc);
  db__bind_int64(st, 5, b->updated_ms, &rc);
  return db__step_write(db, st, rc, "storing a budget", e);
}

static int
visit_budget(sqlite3_stmt *st, void *arg, struct err *e)
{
  const struct visit *v = arg;
  struct db_budget b = {.project = db__col_borrow(st, 0),
                        .monthly_micro = sqlite3_column_int64(st, 1),
                        .hard = sqlite3_column_int(st, 2),
                        .counts = db__col_borrow(st, 3),
                        .updated_ms = sqlite3_column_int64(st, 4),
                        .warned_pct = sqlite3_column_int(st, 5),
                        .warned_month = db__col_borrow(st, 6)};

  (void)e;
  return v->budget_cb(&b, v->arg);
}

int
db_budget_list(struct db *db, db_budget_cb cb, void *arg, struct err *e)
{
  sqlite3_stmt *st = stmt(db, LG_BUDGET_LIST);
  struct visit v = {.budget_cb = cb, .arg = arg};
  int ret = db__take_for_callbacks(st, "db_budget_list", e);

  if (ret < 0)
    return ret;
  return db__each_row(db, st, SQLITE_OK, "listing budgets", visit_budget,
                      &v, e);
}

int
db_budget_warned(struct db *db, const char *project, int pct,
                 const char *month, struct err *e)
{
  sqlite3_stmt *st = stmt(db, LG_BUDGET_WARNED);
  int rc = SQLITE_OK;

  db__bind_text(st, 1, project, &rc);
  db__bind_int64(st, 2, pct, &rc);
  db__bind_text(st, 3, month, &rc);
  return db__step_write(db, st, rc, "recording a budget warning", e);
}

static int
visit_runtime(sqlite3_stmt *st, void *arg, struct err *e)
{
  const struct visit *v = arg;

  (void)e;
  return v->runtime_cb(db__col_borrow(st, 0), db__col_borrow(st, 1),
                       sqlite3_column_int64(st, 2), v->arg);
}

int
db_job_runtimes(struct db *db, int limit, db_runtime_cb cb, void *arg,
                struct err *e)
{
  sqlite3_stmt *st = stmt(db, LG_RUNTIMES);
  struct visit v = {.runtime_cb = cb, .arg = arg};
  int rc = SQLITE_OK;
  int ret = db__take_for_callbacks(st, "db_job_runtimes", e);

  if (ret < 0)
    return ret;
  db__bind_int64(st, 1, limit, &rc);
  return db__each_row(db, st, rc, "reading run times", visit_runtime, &v,
                      e);
}

static int
visit_holding(sqlite3_stmt *st, void *arg, struct err *e)
{
  const struct visit *v = arg;
  struct db_holding h = {.id = sqlite3_column_int64(st, 0),
                         .project = db__col_borrow(st, 1),
                         .key = db__col_borrow(st, 2),
                         .site = db__col_borrow(st, 3),
                         .gpus = sqlite3_column_int64(st, 4),
                         .gpu_type = db__col_borrow(st, 5),
                         .started_ms = sqlite3_column_int64(st, 6),
                         .time_limit = db__col_borrow(st, 7)};

  (void)e;
  return v->holding_cb(&h, v->arg);
}

int
db_job_list_holding(struct db *db, db_holding_cb cb, void *arg,
                    struct err *e)
{
  sqlite3_stmt *st = stmt(db, LG_HOLDING);
  struct visit v = {.holding_cb = cb, .arg = arg};
  int ret = db__take_for_callbacks(st, "db_job_list_holding", e);

  if (ret < 0)
    return ret;
  return db__each_row(db, st, SQLITE_OK, "listing jobs that hold GPUs",
                      visit_holding, &v, e);
}

static int
read_ms(sqlite3_stmt *st, void *out, struct err *e)
{
  (void)e;
  *(int64_t *)out = sqlite3_column_int64(st, 0);
  return 0;
}

int
db_usage_site_ms(struct db *db, const char *site, const char *from_day,
                 const char *to_day, int64_t *gpu_ms, struct err *e)
{
  sqlite3_stmt *st = stmt(db, LG_SITE_MS);
  int rc = SQLITE_OK, found;

  *gpu_ms = 0;
  db__bind_text(st, 1, site, &rc);
  db__bind_text(st, 2, from_day, &rc);
  db__bind_text(st, 3, to_day, &rc);
  return db__get_one(db, st, rc, "summing a site's GPU time", read_ms, gpu_ms,
                     &found, e);
}
