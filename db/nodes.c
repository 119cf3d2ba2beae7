/*
 * The nodes of elastic sites (db.h "nodes"; schema in 009_nodes.sql).
 * Same rules as prices.c: statements prepared once at open, values
 * always bound, rows handed to callbacks borrowed.
 */
#include <sqlite3.h>
#include <stdint.h>

#include "db/db.h"
#include "db/db_internal.h"

#define NODE_COLS                                                         \
  "id, site, shape, zone, spot, attempt, state, vm_id, gpus, gpu_type, " \
  "price_micro, created_ms, launched_ms, registered_ms, seen_ms, "       \
  "ended_ms, reason, idle_gpus, idle_from_ms"

enum nd_stmt {
  ND_INSERT,
  ND_UPDATE,
  ND_TOKEN,
  ND_BY_TOKEN,
  ND_LIST,
  ND_SCALE_ADD,
  ND_SCALE_LIST,
  ND_SCALE_PRUNE,
  ND_COUNT
};

_Static_assert(ND_COUNT <= DB__ND_MAX, "struct db has too few nd slots");

static const char *const nd_sql[ND_COUNT] = {
    [ND_INSERT] = "INSERT INTO nodes (site, shape, zone, spot, attempt, "
                  "state, vm_id, gpus, gpu_type, price_micro, created_ms, "
                  "launched_ms, registered_ms, seen_ms, ended_ms, reason, "
                  "idle_gpus, idle_from_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
                  "?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)",
    [ND_UPDATE] = "UPDATE nodes SET shape = ?2, zone = ?3, spot = ?4, "
                  "attempt = ?5, state = ?6, vm_id = ?7, gpus = ?8, "
                  "gpu_type = ?9, price_micro = ?10, launched_ms = ?11, "
                  "registered_ms = ?12, seen_ms = ?13, ended_ms = ?14, "
                  "reason = ?15, idle_gpus = ?16, idle_from_ms = ?17 "
                  "WHERE id = ?1",
    [ND_TOKEN] = "UPDATE nodes SET token_hash = ?2 WHERE id = ?1",
    [ND_BY_TOKEN] = "SELECT " NODE_COLS " FROM nodes WHERE token_hash = ?1",
    [ND_LIST] = "SELECT " NODE_COLS " FROM nodes WHERE (?1 IS NULL OR "
                "site = ?1) AND (ended_ms = 0 OR ended_ms >= ?2) "
                "ORDER BY id",
    [ND_SCALE_ADD] = "INSERT INTO autoscaler_log (at_ms, site, action, "
                     "reason, launched, released, live_nodes, "
                     "wanted_nodes, demand_gpus, forecast_gpus, "
                     "spend_micro, detail) VALUES (?1, ?2, ?3, ?4, ?5, "
                     "?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    [ND_SCALE_LIST] = "SELECT id, at_ms, site, action, reason, launched, "
                      "released, live_nodes, wanted_nodes, demand_gpus, "
                      "forecast_gpus, spend_micro, detail FROM "
                      "autoscaler_log WHERE (?1 IS NULL OR site = ?1) AND "
                      "(?2 = 0 OR id < ?2) ORDER BY id DESC LIMIT ?3",
    [ND_SCALE_PRUNE] = "DELETE FROM autoscaler_log WHERE at_ms < ?1",
};

static sqlite3_stmt *
stmt(struct db *db, enum nd_stmt i)
{
  return db__nd_stmts(db)[i];
}

int
db__nd_prepare(struct db *db, struct err *e)
{
  sqlite3_stmt **slots = db__nd_stmts(db);

  for (unsigned i = 0; i < ND_COUNT; i++) {
    int ret = db__prepare(db, nd_sql[i], &slots[i], e);

    if (ret < 0)
      return ret;
  }
  return 0;
}

static void
read_node(sqlite3_stmt *st, struct db_node *n)
{
  n->id = sqlite3_column_int64(st, 0);
  n->site = db__col_borrow(st, 1);
  n->shape = db__col_borrow(st, 2);
  n->zone = db__col_borrow(st, 3);
  n->spot = sqlite3_column_int(st, 4);
  n->attempt = sqlite3_column_int(st, 5);
  n->state = db__col_borrow(st, 6);
  n->vm_id = db__col_borrow(st, 7);
  n->gpus = sqlite3_column_int64(st, 8);
  n->gpu_type = db__col_borrow(st, 9);
  n->price_micro = sqlite3_column_int64(st, 10);
  n->created_ms = sqlite3_column_int64(st, 11);
  n->launched_ms = sqlite3_column_int64(st, 12);
  n->registered_ms = sqlite3_column_int64(st, 13);
  n->seen_ms = sqlite3_column_int64(st, 14);
  n->ended_ms = sqlite3_column_int64(st, 15);
  n->reason = db__col_borrow(st, 16);
  n->idle_gpus = sqlite3_column_int64(st, 17);
  n->idle_from_ms = sqlite3_column_int64(st, 18);
}

/* The fields both insert and update bind, from first on. */
static void
bind_mutable(sqlite3_stmt *st, int first, const struct db_node *n, int *rc)
{
  db__bind_text(st, first, n->shape, rc);
  db__bind_text(st, first + 1, n->zone, rc);
  db__bind_int64(st, first + 2, n->spot, rc);
  db__bind_int64(st, first + 3, n->attempt, rc);
  db__bind_text(st, first + 4, n->state, rc);
  db__bind_text(st, first + 5, n->vm_id, rc);
  db__bind_int64(st, first + 6, n->gpus, rc);
  db__bind_text(st, first + 7, n->gpu_type, rc);
  db__bind_int64(st, first + 8, n->price_micro, rc);
}

int
db_node_insert(struct db *db, struct db_node *n, struct err *e)
{
  sqlite3_stmt *st = stmt(db, ND_INSERT);
  int rc = SQLITE_OK;
  int ret;

  db__bind_text(st, 1, n->site, &rc);
  bind_mutable(st, 2, n, &rc);
  db__bind_int64(st, 11, n->created_ms, &rc);
  db__bind_int64(st, 12, n->launched_ms, &rc);
  db__bind_int64(st, 13, n->registered_ms, &rc);
  db__bind_int64(st, 14, n->seen_ms, &rc);
  db__bind_int64(st, 15, n->ended_ms, &rc);
  db__bind_text(st, 16, n->reason, &rc);
  db__bind_int64(st, 17, n->idle_gpus, &rc);
  db__bind_int64(st, 18, n->idle_from_ms, &rc);
  ret = db__step_write(db, st, rc, "recording a node", e);
  if (ret == 0)
    n->id = sqlite3_last_insert_rowid(db__conn(db));
  return ret;
}

int
db_node_update(struct db *db, const struct db_node *n, struct err *e)
{
  sqlite3_stmt *st = stmt(db, ND_UPDATE);
  int rc = SQLITE_OK;

  db__bind_int64(st, 1, n->id, &rc);
  bind_mutable(st, 2, n, &rc);
  db__bind_int64(st, 11, n->launched_ms, &rc);
  db__bind_int64(st, 12, n->registered_ms, &rc);
  db__bind_int64(st, 13, n->seen_ms, &rc);
  db__bind_int64(st, 14, n->ended_ms, &rc);
  db__bind_text(st, 15, n->reason, &rc);
  db__bind_int64(st, 16, n->idle_gpus, &rc);
  db__bind_int64(st, 17, n->idle_from_ms, &rc);
  return db__step_write(db, st, rc, "updating a node", e);
}

int
db_node_set_token(struct db *db, int64_t id, const char *hash_hex,
                  struct err *e)
{
  sqlite3_stmt *st = stmt(db, ND_TOKEN);
  int rc = SQLITE_OK;

  db__bind_int64(st, 1, id, &rc);
  db__bind_text(st, 2, hash_hex, &rc);
  return db__step_write(db, st, rc, "recording a node's token", e);
}

struct visit {
  db_node_cb cb;
  void *arg;
};

static int
visit_node(sqlite3_stmt *st, void *arg, struct err *e)
{
  struct visit *v = arg;
  struct db_node n;

  (void)e;
  read_node(st, &n);
  return v->cb(&n, v->arg);
}

int
db_node_by_token(struct db *db, const char *hash_hex, db_node_cb cb,
                 void *arg, int *found, struct err *e)
{
  sqlite3_stmt *st = stmt(db, ND_BY_TOKEN);
  struct visit v = {cb, arg};
  int rc = SQLITE_OK;

  db__bind_text(st, 1, hash_hex, &rc);
  return db__get_one(db, st, rc, "reading a node", visit_node, &v, found,
                     e);
}

int
db_node_list(struct db *db, const char *site, int64_t ended_since_ms,
             db_node_cb cb, void *arg, struct err *e)
{
  sqlite3_stmt *st = stmt(db, ND_LIST);
  struct visit v = {cb, arg};
  int rc = SQLITE_OK;
  int ret = db__take_for_callbacks(st, "db_node_list", e);

  if (ret < 0)
    return ret;
  db__bind_text(st, 1, site, &rc);
  db__bind_int64(st, 2, ended_since_ms, &rc);
  return db__each_row(db, st, rc, "listing nodes", visit_node, &v, e);
}

int
db_scale_add(struct db *db, struct db_scale *r, struct err *e)
{
  sqlite3_stmt *st = stmt(db, ND_SCALE_ADD);
  int rc = SQLITE_OK;
  int ret;

  db__bind_int64(st, 1, r->at_ms, &rc);
  db__bind_text(st, 2, r->site, &rc);
  db__bind_text(st, 3, r->action, &rc);
  db__bind_text(st, 4, r->reason, &rc);
  db__bind_int64(st, 5, r->launched, &rc);
  db__bind_int64(st, 6, r->released, &rc);
  db__bind_int64(st, 7, r->live_nodes, &rc);
  db__bind_int64(st, 8, r->wanted_nodes, &rc);
  db__bind_int64(st, 9, r->demand_gpus, &rc);
  db__bind_int64(st, 10, r->forecast_gpus, &rc);
  db__bind_int64(st, 11, r->spend_micro, &rc);
  db__bind_text(st, 12, r->detail, &rc);
  ret = db__step_write(db, st, rc, "recording an autoscaler decision", e);
  if (ret == 0)
    r->id = sqlite3_last_insert_rowid(db__conn(db));
  return ret;
}

struct scale_visit {
  db_scale_cb cb;
  void *arg;
};

static int
visit_scale(sqlite3_stmt *st, void *arg, struct err *e)
{
  struct scale_visit *v = arg;
  struct db_scale r = {
      .id = sqlite3_column_int64(st, 0),
      .at_ms = sqlite3_column_int64(st, 1),
      .site = db__col_borrow(st, 2),
      .action = db__col_borrow(st, 3),
      .reason = db__col_borrow(st, 4),
      .launched = sqlite3_column_int64(st, 5),
      .released = sqlite3_column_int64(st, 6),
      .live_nodes = sqlite3_column_int64(st, 7),
      .wanted_nodes = sqlite3_column_int64(st, 8),
      .demand_gpus = sqlite3_column_int64(st, 9),
      .forecast_gpus = sqlite3_column_int64(st, 10),
      .spend_micro = sqlite3_column_int64(st, 11),
      .detail = db__col_borrow(st, 12)};

  (void)e;
  return v->cb(&r, v->arg);
}

int
db_scale_list(struct db *db, const char *site, int64_t before_id,
              int64_t limit, db_scale_cb cb, void *arg, struct err *e)
{
  sqlite3_stmt *st = stmt(db, ND_SCALE_LIST);
  struct scale_visit v = {cb, arg};
  int rc = SQLITE_OK;
  int ret = db__take_for_callbacks(st, "db_scale_list", e);

  if (ret < 0)
    return ret;
  db__bind_text(st, 1, site, &rc);
  db__bind_int64(st, 2, before_id, &rc);
  db__bind_int64(st, 3, limit, &rc);
  return db__each_row(db, st, rc, "listing autoscaler decisions",
                      visit_scale, &v, e);
}

int
db_scale_prune(struct db *db, int64_t before_ms, struct err *e)
{
  sqlite3_stmt *st = stmt(db, ND_SCALE_PRUNE);
  int rc = SQLITE_OK;

  db__bind_int64(st, 1, before_ms, &rc);
  return db__step_write(db, st, rc, "pruning autoscaler decisions", e);
}
