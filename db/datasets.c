/*
 * The dataset tables (db.h "datasets"; schema in 003_datasets.sql):
 * datasets, their versions, replicas at sites and transfers.
 *
 * Same rules as db.c, whose helpers it shares through db_internal.h:
 * statements prepared once at open into struct db's slots for this file,
 * values always bound, rows handed to list callbacks borrowed.
 *
 * EXPLAIN QUERY PLAN for the statements the broker runs often:
 *   DS_REPLICA_GET     SEARCH replicas USING PRIMARY KEY (dataset=? AND
 *                      version=? AND site=?)   (every scheduling pass)
 *   DS_REPLICA_ACTIVE  SCAN replicas USING INDEX replicas_active
 *                      (every stager round; test_db keeps it so)
 *   DS_VERSION_LATEST  SEARCH dataset_versions USING INDEX
 *                      dataset_versions_published (dataset=?)
 */
#include <inttypes.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "db/db.h"
#include "db/db_internal.h"

#define DATASET_COLS "name, source_site, path, created_ms, project"
#define VERSION_COLS                                                       \
  "dataset, version, files, bytes, created_ms, published_ms"
#define REPLICA_COLS                                                       \
  "dataset, version, site, state, bytes_total, bytes_done, bytes_wire, "  \
  "bytes_saved, files_total, files_done, error, path, started_ms, "       \
  "finished_ms, updated_ms, next_try_ms, project"
#define TRANSFER_COLS                                                      \
  "id, dataset, version, from_site, to_site, bytes_wire, state, error, "  \
  "started_ms, finished_ms"

/* As stored; the schema's CHECK on replicas.state lists the same. */
static const char *const replica_states[DB_REPLICA_STATE_COUNT] = {
    "pending", "syncing", "complete", "failed", "superseded"};

enum ds_stmt {
  DS_DATASET_INSERT,
  DS_DATASET_GET,
  DS_DATASET_LIST,
  DS_VERSION_INSERT,
  DS_VERSION_TOUCH,
  DS_VERSION_GET,
  DS_VERSION_LATEST,
  DS_VERSION_LIST,
  DS_REPLICA_PUT,
  DS_REPLICA_GET,
  DS_REPLICA_LIST,
  DS_REPLICA_ACTIVE,
  DS_REPLICA_SUPERSEDE,
  DS_TRANSFER_INSERT,
  DS_TRANSFER_UPDATE,
  DS_TRANSFER_RUNNING,
  DS_TRANSFER_LIST,
  DS_COUNT
};

_Static_assert(DS_COUNT <= DB__DS_MAX, "struct db has too few ds slots");

static const char *const ds_sql[DS_COUNT] = {
    [DS_DATASET_INSERT] = "INSERT INTO datasets (" DATASET_COLS ") "
                          "VALUES (?1, ?2, ?3, ?4, ?5)",
    [DS_DATASET_GET] = "SELECT " DATASET_COLS " FROM datasets "
                       "WHERE name = ?1",
    [DS_DATASET_LIST] = "SELECT " DATASET_COLS " FROM datasets "
                        "ORDER BY name",
    /* Insert-if-absent, then changes() tells a new version from a
     * republished one (as db_workload_put does). */
    [DS_VERSION_INSERT] = "INSERT INTO dataset_versions (" VERSION_COLS ") "
                          "VALUES (?1, ?2, ?3, ?4, ?5, ?6) "
                          "ON CONFLICT (dataset, version) DO NOTHING",
    [DS_VERSION_TOUCH] = "UPDATE dataset_versions SET published_ms = ?3 "
                         "WHERE dataset = ?1 AND version = ?2",
    [DS_VERSION_GET] = "SELECT " VERSION_COLS " FROM dataset_versions "
                       "WHERE dataset = ?1 AND version = ?2",
    /* version breaks a tie of two publishes in one millisecond; the
     * index holds it (the key of a WITHOUT ROWID table ends every
     * index), so neither query sorts. */
    [DS_VERSION_LATEST] = "SELECT " VERSION_COLS " FROM dataset_versions "
                          "WHERE dataset = ?1 ORDER BY published_ms DESC, "
                          "version DESC LIMIT 1",
    [DS_VERSION_LIST] = "SELECT " VERSION_COLS " FROM dataset_versions "
                        "WHERE dataset = ?1 ORDER BY published_ms DESC, "
                        "version DESC",
    [DS_REPLICA_PUT] =
        "INSERT INTO replicas (" REPLICA_COLS ") VALUES (?1, ?2, ?3, ?4, "
        "?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17) "
        "ON CONFLICT (dataset, version, site) DO UPDATE SET "
        "state = excluded.state, bytes_total = excluded.bytes_total, "
        "bytes_done = excluded.bytes_done, "
        "bytes_wire = excluded.bytes_wire, "
        "bytes_saved = excluded.bytes_saved, "
        "files_total = excluded.files_total, "
        "files_done = excluded.files_done, error = excluded.error, "
        "path = excluded.path, started_ms = excluded.started_ms, "
        "finished_ms = excluded.finished_ms, "
        "updated_ms = excluded.updated_ms, "
        "next_try_ms = excluded.next_try_ms, project = excluded.project",
    [DS_REPLICA_GET] = "SELECT " REPLICA_COLS " FROM replicas WHERE "
                       "dataset = ?1 AND version = ?2 AND site = ?3",
    [DS_REPLICA_LIST] = "SELECT " REPLICA_COLS " FROM replicas WHERE "
                        "dataset = ?1 ORDER BY version, site",
    /* The terms of the replicas_active index's WHERE clause, verbatim,
     * and INDEXED BY so that a drift fails at open (as in db.c). */
    [DS_REPLICA_ACTIVE] = "SELECT " REPLICA_COLS " FROM replicas "
                          "INDEXED BY replicas_active WHERE "
                          "(state = 'pending' OR state = 'syncing') "
                          "ORDER BY dataset, version, site",
    [DS_REPLICA_SUPERSEDE] = "UPDATE replicas SET state = 'superseded', "
                             "error = ?5, updated_ms = ?6 WHERE "
                             "dataset = ?1 AND site = ?2 AND path = ?3 AND "
                             "version <> ?4 AND state = 'complete'",
    [DS_TRANSFER_INSERT] =
        "INSERT INTO transfers (dataset, version, from_site, to_site, "
        "bytes_wire, state, error, started_ms, finished_ms) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    [DS_TRANSFER_UPDATE] = "UPDATE transfers SET bytes_wire = ?2, "
                           "state = ?3, error = ?4, finished_ms = ?5 "
                           "WHERE id = ?1",
    [DS_TRANSFER_RUNNING] = "SELECT " TRANSFER_COLS " FROM transfers WHERE "
                            "dataset = ?1 AND version = ?2 AND "
                            "to_site = ?3 AND state = 'running' "
                            "ORDER BY id DESC LIMIT 1",
    [DS_TRANSFER_LIST] = "SELECT " TRANSFER_COLS " FROM transfers WHERE "
                         "dataset = ?1 ORDER BY id DESC LIMIT ?2",
};

static sqlite3_stmt *
stmt(struct db *db, enum ds_stmt id)
{
  return db__ds_stmts(db)[id];
}

int
db__ds_prepare(struct db *db, struct err *e)
{
  sqlite3_stmt **slots = db__ds_stmts(db);
  int ret;

  for (unsigned i = 0; i < DS_COUNT; i++) {
    ret = db__prepare(db, ds_sql[i], &slots[i], e);
    if (ret < 0)
      return ret;
  }
  return 0;
}

int
db__plan_replicas_active(struct db *db, struct buf *out, struct err *e)
{
  return db__explain(db, stmt(db, DS_REPLICA_ACTIVE), out, e);
}

/* A list callback and its argument, for the visit_* functions
 * (db__row_fn). */
struct visit {
  union {
    db_dataset_cb dataset;
    db_dataset_version_cb version;
    db_replica_cb replica;
    db_transfer_cb transfer;
  } cb;
  void *arg;
};

/* ---- datasets ---- */

void
db_dataset_release(struct db_dataset *d)
{
  if (d == NULL)
    return;
  free(d->name);
  free(d->source_site);
  free(d->path);
  free(d->project);
  memset(d, 0, sizeof(*d));
}

static void
read_dataset_with(sqlite3_stmt *st, struct db_dataset *d,
                  char *(*text)(struct sqlite3_stmt *, int))
{
  d->name = text(st, 0);
  d->source_site = text(st, 1);
  d->path = text(st, 2);
  d->created_ms = sqlite3_column_int64(st, 3);
  d->project = text(st, 4);
}

static int
read_dataset_copy(sqlite3_stmt *st, void *out, struct err *e)
{
  (void)e;
  read_dataset_with(st, out, db__col_copy);
  return 0;
}

static int
visit_dataset(sqlite3_stmt *st, void *arg, struct err *e)
{
  const struct visit *v = arg;
  struct db_dataset row;

  (void)e;
  read_dataset_with(st, &row, db__col_borrow);
  return v->cb.dataset(&row, v->arg);
}

int
db_dataset_insert(struct db *db, const struct db_dataset *d, struct err *e)
{
  sqlite3_stmt *st = stmt(db, DS_DATASET_INSERT);
  int rc = SQLITE_OK;
  int ret;

  db__bind_text(st, 1, d->name, &rc);
  db__bind_text(st, 2, d->source_site, &rc);
  db__bind_text(st, 3, d->path, &rc);
  db__bind_int64(st, 4, d->created_ms, &rc);
  db__bind_text(st, 5, d->project, &rc);
  ret = db__step_write(db, st, rc, "inserting dataset", e);
  if (ret == ERR_CONFLICT)
    return err_set(e, ret, "dataset '%s' already exists",
                   d->name != NULL ? d->name : "");
  return ret;
}

int
db_dataset_get(struct db *db, const char *name, struct db_dataset *out,
               struct err *e)
{
  sqlite3_stmt *st = stmt(db, DS_DATASET_GET);
  int rc = SQLITE_OK;
  int found;
  int ret;

  memset(out, 0, sizeof(*out));
  db__bind_text(st, 1, name, &rc);
  ret = db__get_one(db, st, rc, "reading dataset", read_dataset_copy, out,
                    &found, e);
  if (ret == 0 && !found)
    ret = err_set(e, ERR_NOT_FOUND, "dataset '%s' not found",
                  name != NULL ? name : "");
  return ret;
}

int
db_dataset_list(struct db *db, db_dataset_cb cb, void *arg, struct err *e)
{
  sqlite3_stmt *st = stmt(db, DS_DATASET_LIST);
  struct visit v = {.cb.dataset = cb, .arg = arg};
  int ret = db__take_for_callbacks(st, "db_dataset_list", e);

  if (ret < 0)
    return ret;
  return db__each_row(db, st, SQLITE_OK, "listing datasets", visit_dataset,
                      &v, e);
}

/* ---- versions ---- */

void
db_dataset_version_release(struct db_dataset_version *v)
{
  if (v == NULL)
    return;
  free(v->dataset);
  free(v->version);
  memset(v, 0, sizeof(*v));
}

static void
read_version_with(sqlite3_stmt *st, struct db_dataset_version *v,
                  char *(*text)(struct sqlite3_stmt *, int))
{
  v->dataset = text(st, 0);
  v->version = text(st, 1);
  v->files = sqlite3_column_int64(st, 2);
  v->bytes = sqlite3_column_int64(st, 3);
  v->created_ms = sqlite3_column_int64(st, 4);
  v->published_ms = sqlite3_column_int64(st, 5);
}

static int
read_version_copy(sqlite3_stmt *st, void *out, struct err *e)
{
  (void)e;
  read_version_with(st, out, db__col_copy);
  return 0;
}

static int
visit_version(sqlite3_stmt *st, void *arg, struct err *e)
{
  const struct visit *v = arg;
  struct db_dataset_version row;

  (void)e;
  read_version_with(st, &row, db__col_borrow);
  return v->cb.version(&row, v->arg);
}

int
db_dataset_version_put(struct db *db, const struct db_dataset_version *v,
                       int *created, struct err *e)
{
  sqlite3_stmt *st = stmt(db, DS_VERSION_INSERT);
  int rc = SQLITE_OK;
  int ret;

  if (created != NULL)
    *created = 0;
  db__bind_text(st, 1, v->dataset, &rc);
  db__bind_text(st, 2, v->version, &rc);
  db__bind_int64(st, 3, v->files, &rc);
  db__bind_int64(st, 4, v->bytes, &rc);
  db__bind_int64(st, 5, v->created_ms, &rc);
  db__bind_int64(st, 6, v->published_ms, &rc);
  ret = db__step_write(db, st, rc, "inserting version", e);
  /* The foreign key on dataset_versions.dataset. */
  if (ret == ERR_NOT_FOUND)
    return err_set(e, ret, "dataset '%s' not found",
                   v->dataset != NULL ? v->dataset : "");
  if (ret < 0)
    return err_prefix(e, "dataset '%s'",
                      v->dataset != NULL ? v->dataset : "");
  if (sqlite3_changes(db__conn(db)) > 0) {
    if (created != NULL)
      *created = 1;
    return 0;
  }
  st = stmt(db, DS_VERSION_TOUCH);
  db__bind_text(st, 1, v->dataset, &rc);
  db__bind_text(st, 2, v->version, &rc);
  db__bind_int64(st, 3, v->published_ms, &rc);
  return db__step_write(db, st, rc, "updating version", e);
}

static int
version_one(struct db *db, enum ds_stmt id, const char *dataset,
            const char *version, struct db_dataset_version *out, int *found,
            struct err *e)
{
  sqlite3_stmt *st = stmt(db, id);
  int rc = SQLITE_OK;

  memset(out, 0, sizeof(*out));
  db__bind_text(st, 1, dataset, &rc);
  if (version != NULL)
    db__bind_text(st, 2, version, &rc);
  return db__get_one(db, st, rc, "reading version", read_version_copy, out,
                     found, e);
}

int
db_dataset_version_get(struct db *db, const char *dataset,
                       const char *version, struct db_dataset_version *out,
                       struct err *e)
{
  int found;
  int ret;

  if (dataset == NULL || version == NULL)
    return err_set(e, ERR_INVALID, "version: dataset or id missing");
  ret = version_one(db, DS_VERSION_GET, dataset, version, out, &found, e);
  if (ret == 0 && !found)
    ret = err_set(e, ERR_NOT_FOUND, "version '%s' of dataset '%s' not "
                  "found", version, dataset);
  return ret;
}

int
db_dataset_version_latest(struct db *db, const char *dataset,
                          struct db_dataset_version *out, struct err *e)
{
  int found;
  int ret;

  if (dataset == NULL)
    return err_set(e, ERR_INVALID, "version: dataset missing");
  ret = version_one(db, DS_VERSION_LATEST, dataset, NULL, out, &found, e);
  if (ret == 0 && !found)
    ret = err_set(e, ERR_NOT_FOUND, "dataset '%s' has no published "
                  "version", dataset);
  return ret;
}

int
db_dataset_version_list(struct db *db, const char *dataset,
                        db_dataset_version_cb cb, void *arg, struct err *e)
{
  sqlite3_stmt *st = stmt(db, DS_VERSION_LIST);
  struct visit v = {.cb.version = cb, .arg = arg};
  int rc = SQLITE_OK;
  int ret = db__take_for_callbacks(st, "db_dataset_version_list", e);

  if (ret < 0)
    return ret;
  db__bind_text(st, 1, dataset, &rc);
  return db__each_row(db, st, rc, "listing versions", visit_version, &v, e);
}

/* ---- replicas ---- */

const char *
db_replica_state_name(enum db_replica_state s)
{
  if ((unsigned)s >= DB_REPLICA_STATE_COUNT)
    return "unknown";
  return replica_states[s];
}

static enum db_replica_state
replica_state_parse(const unsigned char *name)
{
  for (unsigned i = 0; name != NULL && i < DB_REPLICA_STATE_COUNT; i++) {
    if (strcmp((const char *)name, replica_states[i]) == 0)
      return (enum db_replica_state)i;
  }
  /* The CHECK constraint admits nothing else. */
  return DB_REPLICA_FAILED;
}

void
db_replica_release(struct db_replica *r)
{
  if (r == NULL)
    return;
  free(r->dataset);
  free(r->version);
  free(r->site);
  free(r->error);
  free(r->path);
  free(r->project);
  memset(r, 0, sizeof(*r));
}

static void
read_replica_with(sqlite3_stmt *st, struct db_replica *r,
                  char *(*text)(struct sqlite3_stmt *, int))
{
  r->dataset = text(st, 0);
  r->version = text(st, 1);
  r->site = text(st, 2);
  r->state = replica_state_parse(sqlite3_column_text(st, 3));
  r->bytes_total = sqlite3_column_int64(st, 4);
  r->bytes_done = sqlite3_column_int64(st, 5);
  r->bytes_wire = sqlite3_column_int64(st, 6);
  r->bytes_saved = sqlite3_column_int64(st, 7);
  r->files_total = sqlite3_column_int64(st, 8);
  r->files_done = sqlite3_column_int64(st, 9);
  r->error = text(st, 10);
  r->path = text(st, 11);
  r->started_ms = sqlite3_column_int64(st, 12);
  r->finished_ms = sqlite3_column_int64(st, 13);
  r->updated_ms = sqlite3_column_int64(st, 14);
  r->next_try_ms = sqlite3_column_int64(st, 15);
  r->project = text(st, 16);
}

static int
read_replica_copy(sqlite3_stmt *st, void *out, struct err *e)
{
  (void)e;
  read_replica_with(st, out, db__col_copy);
  return 0;
}

static int
visit_replica(sqlite3_stmt *st, void *arg, struct err *e)
{
  const struct visit *v = arg;
  struct db_replica row;

  (void)e;
  read_replica_with(st, &row, db__col_borrow);
  return v->cb.replica(&row, v->arg);
}

int
db_replica_put(struct db *db, const struct db_replica *r, struct err *e)
{
  sqlite3_stmt *st = stmt(db, DS_REPLICA_PUT);
  int rc = SQLITE_OK;
  int ret;

  if ((unsigned)r->state >= DB_REPLICA_STATE_COUNT)
    return err_set(e, ERR_INVALID, "replica: unknown state %d",
                   (int)r->state);
  db__bind_text(st, 1, r->dataset, &rc);
  db__bind_text(st, 2, r->version, &rc);
  db__bind_text(st, 3, r->site, &rc);
  db__bind_text(st, 4, replica_states[r->state], &rc);
  db__bind_int64(st, 5, r->bytes_total, &rc);
  db__bind_int64(st, 6, r->bytes_done, &rc);
  db__bind_int64(st, 7, r->bytes_wire, &rc);
  db__bind_int64(st, 8, r->bytes_saved, &rc);
  db__bind_int64(st, 9, r->files_total, &rc);
  db__bind_int64(st, 10, r->files_done, &rc);
  db__bind_text(st, 11, r->error, &rc);
  db__bind_text(st, 12, r->path, &rc);
  db__bind_int64(st, 13, r->started_ms, &rc);
  db__bind_int64(st, 14, r->finished_ms, &rc);
  db__bind_int64(st, 15, r->updated_ms, &rc);
  db__bind_int64(st, 16, r->next_try_ms, &rc);
  db__bind_text(st, 17, r->project, &rc);
  ret = db__step_write(db, st, rc, "storing replica", e);
  if (ret == ERR_NOT_FOUND)
    return err_set(e, ret, "version '%s' of dataset '%s' not found",
                   r->version != NULL ? r->version : "",
                   r->dataset != NULL ? r->dataset : "");
  if (ret < 0)
    return err_prefix(e, "replica of '%s' at site '%s'",
                      r->dataset != NULL ? r->dataset : "",
                      r->site != NULL ? r->site : "");
  return 0;
}

int
db_replica_supersede(struct db *db, const char *dataset, const char *site,
                     const char *path, const char *version, int64_t now_ms,
                     struct err *e)
{
  sqlite3_stmt *st = stmt(db, DS_REPLICA_SUPERSEDE);
  char why[160];
  int rc = SQLITE_OK;

  snprintf(why, sizeof(why), "superseded at the source by version %.12s "
           "(its files changed)", version);
  db__bind_text(st, 1, dataset, &rc);
  db__bind_text(st, 2, site, &rc);
  db__bind_text(st, 3, path, &rc);
  db__bind_text(st, 4, version, &rc);
  db__bind_text(st, 5, why, &rc);
  db__bind_int64(st, 6, now_ms, &rc);
  return db__step_write(db, st, rc, "superseding source replicas", e);
}

int
db_replica_get(struct db *db, const char *dataset, const char *version,
               const char *site, struct db_replica *out, struct err *e)
{
  sqlite3_stmt *st = stmt(db, DS_REPLICA_GET);
  int rc = SQLITE_OK;
  int found;
  int ret;

  memset(out, 0, sizeof(*out));
  db__bind_text(st, 1, dataset, &rc);
  db__bind_text(st, 2, version, &rc);
  db__bind_text(st, 3, site, &rc);
  ret = db__get_one(db, st, rc, "reading replica", read_replica_copy, out,
                    &found, e);
  if (ret == 0 && !found)
    ret = err_set(e, ERR_NOT_FOUND, "no replica of %s@%.12s at site '%s'",
                  dataset != NULL ? dataset : "",
                  version != NULL ? version : "", site != NULL ? site : "");
  return ret;
}

int
db_replica_list(struct db *db, const char *dataset, db_replica_cb cb,
                void *arg, struct err *e)
{
  sqlite3_stmt *st = stmt(db, DS_REPLICA_LIST);
  struct visit v = {.cb.replica = cb, .arg = arg};
  int rc = SQLITE_OK;
  int ret = db__take_for_callbacks(st, "db_replica_list", e);

  if (ret < 0)
    return ret;
  db__bind_text(st, 1, dataset, &rc);
  return db__each_row(db, st, rc, "listing replicas", visit_replica, &v, e);
}

int
db_replica_list_active(struct db *db, db_replica_cb cb, void *arg,
                       struct err *e)
{
  sqlite3_stmt *st = stmt(db, DS_REPLICA_ACTIVE);
  struct visit v = {.cb.replica = cb, .arg = arg};
  int ret = db__take_for_callbacks(st, "db_replica_list_active", e);

  if (ret < 0)
    return ret;
  return db__each_row(db, st, SQLITE_OK, "listing active replicas",
                      visit_replica, &v, e);
}

/* ---- transfers ---- */

void
db_transfer_release(struct db_transfer *t)
{
  if (t == NULL)
    return;
  free(t->dataset);
  free(t->version);
  free(t->from_site);
  free(t->to_site);
  free(t->state);
  free(t->error);
  memset(t, 0, sizeof(*t));
}

static void
read_transfer_with(sqlite3_stmt *st, struct db_transfer *t,
                   char *(*text)(struct sqlite3_stmt *, int))
{
  t->id = sqlite3_column_int64(st, 0);
  t->dataset = text(st, 1);
  t->version = text(st, 2);
  t->from_site = text(st, 3);
  t->to_site = text(st, 4);
  t->bytes_wire = sqlite3_column_int64(st, 5);
  t->state = text(st, 6);
  t->error = text(st, 7);
  t->started_ms = sqlite3_column_int64(st, 8);
  t->finished_ms = sqlite3_column_int64(st, 9);
}

static int
read_transfer_copy(sqlite3_stmt *st, void *out, struct err *e)
{
  (void)e;
  read_transfer_with(st, out, db__col_copy);
  return 0;
}

static int
visit_transfer(sqlite3_stmt *st, void *arg, struct err *e)
{
  const struct visit *v = arg;
  struct db_transfer row;

  (void)e;
  read_transfer_with(st, &row, db__col_borrow);
  return v->cb.transfer(&row, v->arg);
}

int
db_transfer_insert(struct db *db, struct db_transfer *t, struct err *e)
{
  sqlite3_stmt *st = stmt(db, DS_TRANSFER_INSERT);
  int rc = SQLITE_OK;
  int ret;

  db__bind_text(st, 1, t->dataset, &rc);
  db__bind_text(st, 2, t->version, &rc);
  db__bind_text(st, 3, t->from_site, &rc);
  db__bind_text(st, 4, t->to_site, &rc);
  db__bind_int64(st, 5, t->bytes_wire, &rc);
  db__bind_text(st, 6, t->state, &rc);
  db__bind_text(st, 7, t->error, &rc);
  db__bind_int64(st, 8, t->started_ms, &rc);
  db__bind_int64(st, 9, t->finished_ms, &rc);
  ret = db__step_write(db, st, rc, "inserting transfer", e);
  if (ret < 0)
    return ret;
  t->id = sqlite3_last_insert_rowid(db__conn(db));
  return 0;
}

int
db_transfer_update(struct db *db, const struct db_transfer *t,
                   struct err *e)
{
  sqlite3_stmt *st = stmt(db, DS_TRANSFER_UPDATE);
  int rc = SQLITE_OK;
  int ret;

  db__bind_int64(st, 1, t->id, &rc);
  db__bind_int64(st, 2, t->bytes_wire, &rc);
  db__bind_text(st, 3, t->state, &rc);
  db__bind_text(st, 4, t->error, &rc);
  db__bind_int64(st, 5, t->finished_ms, &rc);
  ret = db__step_write(db, st, rc, "updating transfer", e);
  if (ret < 0)
    return err_prefix(e, "transfer %" PRId64, t->id);
  if (sqlite3_changes(db__conn(db)) == 0)
    return err_set(e, ERR_NOT_FOUND, "transfer %" PRId64 " not found",
                   t->id);
  return 0;
}

int
db_transfer_running(struct db *db, const char *dataset, const char *version,
                    const char *to_site, struct db_transfer *out,
                    struct err *e)
{
  sqlite3_stmt *st = stmt(db, DS_TRANSFER_RUNNING);
  int rc = SQLITE_OK;
  int found;
  int ret;

  memset(out, 0, sizeof(*out));
  db__bind_text(st, 1, dataset, &rc);
  db__bind_text(st, 2, version, &rc);
  db__bind_text(st, 3, to_site, &rc);
  ret = db__get_one(db, st, rc, "reading transfer", read_transfer_copy,
                    out, &found, e);
  if (ret == 0 && !found)
    ret = err_set(e, ERR_NOT_FOUND, "no running transfer of %s@%.12s to "
                  "site '%s'", dataset != NULL ? dataset : "",
                  version != NULL ? version : "",
                  to_site != NULL ? to_site : "");
  return ret;
}

int
db_transfer_list(struct db *db, const char *dataset, int limit,
                 db_transfer_cb cb, void *arg, struct err *e)
{
  sqlite3_stmt *st = stmt(db, DS_TRANSFER_LIST);
  struct visit v = {.cb.transfer = cb, .arg = arg};
  int rc = SQLITE_OK;
  int ret = db__take_for_callbacks(st, "db_transfer_list", e);

  if (ret < 0)
    return ret;
  if (limit < 1)
    return err_set(e, ERR_INVALID, "limit %d: must be at least 1", limit);
  db__bind_text(st, 1, dataset, &rc);
  db__bind_int64(st, 2, limit, &rc);
  return db__each_row(db, st, rc, "listing transfers", visit_transfer, &v,
                      e);
}
