/*
 * The NCCL baseline's probes and their nodes' reports (db.h "probes";
 * schema in 012_probes.sql).  Same rules as nodes.c: statements prepared
 * once at open, values always bound, rows handed to callbacks borrowed.
 */
#include <sqlite3.h>
#include <stdint.h>

#include "db/db.h"
#include "db/db_internal.h"

#define PROBE_COLS                                                        \
  "id, site, nodes, state, why, job_id, bundle, nccl_id, gpus_per_node, " \
  "created_ms, finished_ms, reason"

enum pb_stmt {
  PB_INSERT,
  PB_UPDATE,
  PB_GET,
  PB_LIST,
  PB_BY_JOB,
  PB_REPORT_PUT,
  PB_REPORTS,
  PB_COUNT
};

_Static_assert(PB_COUNT <= DB__PB_MAX, "struct db has too few pb slots");

static const char *const pb_sql[PB_COUNT] = {
    [PB_INSERT] = "INSERT INTO probes (site, nodes, state, why, job_id, "
                  "bundle, nccl_id, gpus_per_node, created_ms, "
                  "finished_ms, reason) VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
                  "?7, ?8, ?9, ?10, ?11)",
    [PB_UPDATE] = "UPDATE probes SET state = ?2, job_id = ?3, bundle = ?4, "
                  "nccl_id = ?5, gpus_per_node = ?6, finished_ms = ?7, "
                  "reason = ?8 WHERE id = ?1",
    [PB_GET] = "SELECT " PROBE_COLS " FROM probes WHERE id = ?1",
    [PB_LIST] = "SELECT " PROBE_COLS " FROM probes WHERE (?1 IS NULL OR "
                "site = ?1) AND (?2 IS NULL OR state = ?2) ORDER BY id "
                "DESC LIMIT ?3",
    [PB_BY_JOB] = "SELECT " PROBE_COLS " FROM probes WHERE job_id = ?1",
    [PB_REPORT_PUT] = "INSERT OR REPLACE INTO probe_reports (probe_id, "
                      "node_rank, doc, at_ms) VALUES (?1, ?2, ?3, ?4)",
    [PB_REPORTS] = "SELECT node_rank, doc, at_ms FROM probe_reports WHERE "
                   "probe_id = ?1 ORDER BY node_rank",
};

static sqlite3_stmt *
stmt(struct db *db, enum pb_stmt i)
{
  return db__pb_stmts(db)[i];
}

int
db__pb_prepare(struct db *db, struct err *e)
{
  sqlite3_stmt **slots = db__pb_stmts(db);

  for (unsigned i = 0; i < PB_COUNT; i++) {
    int ret = db__prepare(db, pb_sql[i], &slots[i], e);

    if (ret < 0)
      return ret;
  }
  return 0;
}

/* Binds of the columns insert and update share (?3 on), after id or
 * site in ?1 (and nodes in ?2 for an insert). */
static void
bind_probe(sqlite3_stmt *st, const struct db_probe *p, int insert, int *rc)
{
  int k = insert ? 3 : 2;

  db__bind_text(st, k++, p->state, rc);
  if (insert)
    db__bind_text(st, k++, p->why, rc);
  if (p->job_id > 0)
    db__bind_int64(st, k++, p->job_id, rc);
  else
    db__bind_text(st, k++, NULL, rc);
  db__bind_text(st, k++, p->bundle, rc);
  db__bind_text(st, k++, p->nccl_id, rc);
  db__bind_int64(st, k++, p->gpus_per_node, rc);
  if (insert)
    db__bind_int64(st, k++, p->created_ms, rc);
  db__bind_int64(st, k++, p->finished_ms, rc);
  db__bind_text(st, k, p->reason, rc);
}

int
db_probe_add(struct db *db, struct db_probe *p, struct err *e)
{
  sqlite3_stmt *st = stmt(db, PB_INSERT);
  int rc = SQLITE_OK;
  int ret;

  db__bind_text(st, 1, p->site, &rc);
  db__bind_int64(st, 2, p->nodes, &rc);
  bind_probe(st, p, 1, &rc);
  ret = db__step_write(db, st, rc, "recording a probe", e);
  if (ret == 0)
    p->id = sqlite3_last_insert_rowid(db__conn(db));
  return ret;
}

int
db_probe_update(struct db *db, const struct db_probe *p, struct err *e)
{
  sqlite3_stmt *st = stmt(db, PB_UPDATE);
  int rc = SQLITE_OK;

  db__bind_int64(st, 1, p->id, &rc);
  bind_probe(st, p, 0, &rc);
  return db__step_write(db, st, rc, "updating a probe", e);
}

struct probe_visit {
  db_probe_cb cb;
  void *arg;
};

static int
visit_probe(sqlite3_stmt *st, void *arg, struct err *e)
{
  struct probe_visit *v = arg;
  struct db_probe p = {
      .id = sqlite3_column_int64(st, 0),
      .site = db__col_borrow(st, 1),
      .nodes = sqlite3_column_int64(st, 2),
      .state = db__col_borrow(st, 3),
      .why = db__col_borrow(st, 4),
      .job_id = sqlite3_column_int64(st, 5),
      .bundle = db__col_borrow(st, 6),
      .nccl_id = db__col_borrow(st, 7),
      .gpus_per_node = sqlite3_column_int64(st, 8),
      .created_ms = sqlite3_column_int64(st, 9),
      .finished_ms = sqlite3_column_int64(st, 10),
      .reason = db__col_borrow(st, 11),
  };

  (void)e;
  return v->cb(&p, v->arg);
}

int
db_probe_get(struct db *db, int64_t id, db_probe_cb cb, void *arg,
             int *found, struct err *e)
{
  sqlite3_stmt *st = stmt(db, PB_GET);
  struct probe_visit v = {cb, arg};
  int rc = SQLITE_OK;

  db__bind_int64(st, 1, id, &rc);
  return db__get_one(db, st, rc, "reading a probe", visit_probe, &v, found,
                     e);
}

int
db_probe_by_job(struct db *db, int64_t job_id, db_probe_cb cb, void *arg,
                int *found, struct err *e)
{
  sqlite3_stmt *st = stmt(db, PB_BY_JOB);
  struct probe_visit v = {cb, arg};
  int rc = SQLITE_OK;

  db__bind_int64(st, 1, job_id, &rc);
  return db__get_one(db, st, rc, "reading a job's probe", visit_probe, &v,
                     found, e);
}

int
db_probe_list(struct db *db, const char *site, const char *state,
              int64_t limit, db_probe_cb cb, void *arg, struct err *e)
{
  sqlite3_stmt *st = stmt(db, PB_LIST);
  struct probe_visit v = {cb, arg};
  int rc = SQLITE_OK;
  int ret = db__take_for_callbacks(st, "db_probe_list", e);

  if (ret < 0)
    return ret;
  db__bind_text(st, 1, site, &rc);
  db__bind_text(st, 2, state, &rc);
  db__bind_int64(st, 3, limit, &rc);
  return db__each_row(db, st, rc, "listing probes", visit_probe, &v, e);
}

int
db_probe_report_put(struct db *db, int64_t probe_id, int64_t node_rank,
                    const char *doc, int64_t at_ms, struct err *e)
{
  sqlite3_stmt *st = stmt(db, PB_REPORT_PUT);
  int rc = SQLITE_OK;

  db__bind_int64(st, 1, probe_id, &rc);
  db__bind_int64(st, 2, node_rank, &rc);
  db__bind_text(st, 3, doc, &rc);
  db__bind_int64(st, 4, at_ms, &rc);
  return db__step_write(db, st, rc, "recording a probe report", e);
}

struct report_visit {
  db_probe_report_cb cb;
  void *arg;
};

static int
visit_report(sqlite3_stmt *st, void *arg, struct err *e)
{
  struct report_visit *v = arg;

  (void)e;
  return v->cb(sqlite3_column_int64(st, 0), db__col_borrow(st, 1),
               sqlite3_column_int64(st, 2), v->arg);
}

int
db_probe_reports(struct db *db, int64_t probe_id, db_probe_report_cb cb,
                 void *arg, struct err *e)
{
  sqlite3_stmt *st = stmt(db, PB_REPORTS);
  struct report_visit v = {cb, arg};
  int rc = SQLITE_OK;
  int ret = db__take_for_callbacks(st, "db_probe_reports", e);

  if (ret < 0)
    return ret;
  db__bind_int64(st, 1, probe_id, &rc);
  return db__each_row(db, st, rc, "reading probe reports", visit_report, &v,
                      e);
}
