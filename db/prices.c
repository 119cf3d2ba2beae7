/*
 * The price history (db.h "prices"; schema in 005_prices.sql, its
 * sources widened by 010_provider_prices.sql).  Same rules as
 * datasets.c: statements prepared once at open into struct db's slots
 * for this file, values always bound, rows handed to callbacks
 * borrowed.
 */
#include <sqlite3.h>
#include <string.h>

#include "db/db.h"
#include "db/db_internal.h"

#define PRICE_COLS "site, gpu_type, kind, valid_from_ms, rate_micro, source"

enum pr_stmt { PR_INSERT, PR_LAST_CONFIG, PR_CURRENT, PR_HISTORY, PR_COUNT };

_Static_assert(PR_COUNT <= DB__PR_MAX, "struct db has too few pr slots");

static const char *const pr_sql[PR_COUNT] = {
    [PR_INSERT] = "INSERT OR REPLACE INTO prices (" PRICE_COLS ") "
                  "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [PR_LAST_CONFIG] = "SELECT " PRICE_COLS " FROM prices WHERE site = ?1 "
                       "AND gpu_type = ?2 AND kind = ?3 AND "
                       "source = 'config' ORDER BY valid_from_ms DESC "
                       "LIMIT 1",
    /* The newest row of each key from no later than ?1: SQLite takes the
     * other columns from the row that holds the max. */
    [PR_CURRENT] = "SELECT site, gpu_type, kind, MAX(valid_from_ms), "
                   "rate_micro, source FROM prices WHERE valid_from_ms <= "
                   "?1 GROUP BY site, gpu_type, kind "
                   "ORDER BY site, gpu_type, kind",
    [PR_HISTORY] = "SELECT " PRICE_COLS " FROM prices WHERE site = ?1 AND "
                   "gpu_type = ?2 AND kind = ?3 ORDER BY valid_from_ms",
};

static sqlite3_stmt *
stmt(struct db *db, enum pr_stmt i)
{
  return db__pr_stmts(db)[i];
}

int
db__pr_prepare(struct db *db, struct err *e)
{
  sqlite3_stmt **slots = db__pr_stmts(db);

  for (unsigned i = 0; i < PR_COUNT; i++) {
    int ret = db__prepare(db, pr_sql[i], &slots[i], e);

    if (ret < 0)
      return ret;
  }
  return 0;
}

/* The current row of st as a db_price, strings borrowed. */
static void
read_price(sqlite3_stmt *st, struct db_price *p)
{
  p->site = db__col_borrow(st, 0);
  p->gpu_type = db__col_borrow(st, 1);
  p->kind = db__col_borrow(st, 2);
  p->valid_from_ms = sqlite3_column_int64(st, 3);
  p->rate_micro = sqlite3_column_type(st, 4) == SQLITE_NULL
                      ? DB_PRICE_WITHDRAWN
                      : sqlite3_column_int64(st, 4);
  if (strcmp(db__col_borrow(st, 5), "admin") == 0)
    p->admin = DB_PRICE_ADMIN;
  else if (strcmp(db__col_borrow(st, 5), "provider") == 0)
    p->admin = DB_PRICE_PROVIDER;
  else
    p->admin = 0;
}

int
db_price_insert(struct db *db, const struct db_price *p, struct err *e)
{
  sqlite3_stmt *st = stmt(db, PR_INSERT);
  int rc = SQLITE_OK;

  db__bind_text(st, 1, p->site, &rc);
  db__bind_text(st, 2, p->gpu_type, &rc);
  db__bind_text(st, 3, p->kind, &rc);
  db__bind_int64(st, 4, p->valid_from_ms, &rc);
  if (p->rate_micro == DB_PRICE_WITHDRAWN) {
    if (rc == SQLITE_OK)
      rc = sqlite3_bind_null(st, 5);
  } else {
    db__bind_int64(st, 5, p->rate_micro, &rc);
  }
  db__bind_text(st, 6,
                p->admin == DB_PRICE_PROVIDER ? "provider"
                : p->admin != 0               ? "admin"
                                              : "config",
                &rc);
  return db__step_write(db, st, rc, "recording a price", e);
}

static int
read_rate(sqlite3_stmt *st, void *out, struct err *e)
{
  struct db_price p;

  (void)e;
  read_price(st, &p);
  *(int64_t *)out = p.rate_micro;
  return 0;
}

int
db_price_last_config(struct db *db, const char *site, const char *gpu_type,
                     const char *kind, int64_t *rate, int *found,
                     struct err *e)
{
  sqlite3_stmt *st = stmt(db, PR_LAST_CONFIG);
  int rc = SQLITE_OK;

  db__bind_text(st, 1, site, &rc);
  db__bind_text(st, 2, gpu_type, &rc);
  db__bind_text(st, 3, kind, &rc);
  return db__get_one(db, st, rc, "reading a price", read_rate, rate, found,
                     e);
}

struct visit {
  db_price_cb cb;
  void *arg;
};

static int
visit_price(sqlite3_stmt *st, void *arg, struct err *e)
{
  struct visit *v = arg;
  struct db_price p;

  (void)e;
  read_price(st, &p);
  return v->cb(&p, v->arg);
}

int
db_price_current(struct db *db, int64_t now_ms, db_price_cb cb, void *arg,
                 struct err *e)
{
  sqlite3_stmt *st = stmt(db, PR_CURRENT);
  struct visit v = {cb, arg};
  int rc = SQLITE_OK;
  int ret = db__take_for_callbacks(st, "db_price_current", e);

  if (ret < 0)
    return ret;
  db__bind_int64(st, 1, now_ms, &rc);
  return db__each_row(db, st, rc, "listing prices", visit_price, &v, e);
}

int
db_price_history(struct db *db, const char *site, const char *gpu_type,
                 const char *kind, db_price_cb cb, void *arg, struct err *e)
{
  sqlite3_stmt *st = stmt(db, PR_HISTORY);
  struct visit v = {cb, arg};
  int rc = SQLITE_OK;
  int ret = db__take_for_callbacks(st, "db_price_history", e);

  if (ret < 0)
    return ret;
  db__bind_text(st, 1, site, &rc);
  db__bind_text(st, 2, gpu_type, &rc);
  db__bind_text(st, 3, kind, &rc);
  return db__each_row(db, st, rc, "reading price history", visit_price, &v,
                      e);
}
