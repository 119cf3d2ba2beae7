/*
 * The state store (db.h): the connection and its settings, the statement
 * cache, and the mapping between rows and the db_* structs.
 *
 * Every statement is prepared once, when the handle opens (so a typo in
 * any of them fails db_open, not some later request), with
 * SQLITE_PREPARE_PERSISTENT, and is reset with its bindings cleared after
 * each use.  The hot paths (db_job_insert in the broker's batches,
 * db_job_get behind GET /v1/jobs/{id}) therefore compile no SQL and
 * allocate nothing but the strings of the row they return.  Strings are
 * bound with SQLITE_STATIC: they are the caller's for the duration of the
 * call, and SQLite is done with them when the statement is reset.
 *
 * Rows handed to list callbacks are borrowed: their strings point into
 * SQLite's column buffers, which stay valid until the next step, so
 * listing allocates nothing per row.  A callback may call other db
 * functions, but not the list function it is called from (that would
 * reuse the running statement; it is refused with ERR_INTERNAL).
 *
 * Measured (RelWithDebInfo without sanitizers, file on an ext4 disk, the
 * shared 2-core development VM): 10,000 db_job_insert, each with an
 * idempotency key, in one transaction take 115-125 ms (~80,000 jobs/s;
 * ~70,000/s with a db_event_append per job); 100 transactions of 100
 * inserts take ~1.4 ms per commit (the WAL fsync); db_job_get on random
 * ids runs at ~270,000/s.  That is several times the broker's 10,000
 * inserts/s and 20,000 gets/s.
 */
#include "db/db.h"

#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/db_internal.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/grow.h"

/* A second process (`tenbind token create`) may hold the write lock for
 * a moment while the daemon runs; wait for it rather than fail. */
#define DB_BUSY_TIMEOUT_MS 5000
#define DB_LIST_MAX 1000
/* The JSON text of a token's project allow-list; a scope is a handful of
 * names, so this only bounds a runaway. */
#define DB_ALLOW_LIST_MAX (1 << 20)

/*
 * The names that the schema's CHECK on jobs.state accepts, by enum
 * job_state.  db keeps its own table rather than calling
 * job_state_name(): this text is the on-disk format, fixed by 001_init,
 * and must not follow a rename elsewhere.
 */
static const char *const state_names[] = {
  [JOB_QUEUED] = "queued",       [JOB_PLACED] = "placed",
  [JOB_SUBMITTED] = "submitted", [JOB_RUNNING] = "running",
  [JOB_SUCCEEDED] = "succeeded", [JOB_FAILED] = "failed",
  [JOB_CANCELLED] = "cancelled", [JOB_LOST] = "lost",
  /* Since 003_datasets. */
  [JOB_STAGING] = "staging",
};
_Static_assert(sizeof(state_names) / sizeof(state_names[0]) ==
                   JOB_STATE_COUNT,
               "every job state needs its stored name");

/* The columns of struct db_job, in the order of enum job_col. */
#define JOB_COLS                                                           \
  "id, state, name, project, workload, site, spec_json, gpus, gpu_type, " \
  "hold, idem_key, idem_hash, remote_id, alloc, reason, log_path, "       \
  "exit_code, signal, created_ms, updated_ms, started_ms, ended_ms, "   \
  "restarts"

enum job_col {
  JC_ID,
  JC_STATE,
  JC_NAME,
  JC_PROJECT,
  JC_WORKLOAD,
  JC_SITE,
  JC_SPEC_JSON,
  JC_GPUS,
  JC_GPU_TYPE,
  JC_HOLD,
  JC_IDEM_KEY,
  JC_IDEM_HASH,
  JC_REMOTE_ID,
  JC_ALLOC,
  JC_REASON,
  JC_LOG_PATH,
  JC_EXIT_CODE,
  JC_SIGNAL,
  JC_CREATED_MS,
  JC_UPDATED_MS,
  JC_STARTED_MS,
  JC_ENDED_MS,
  JC_RESTARTS
};

/* Must match the WHERE clause of the jobs_active index (003_datasets.sql)
 * term for term, or the planner will not use that index.  An OR chain,
 * not IN (...): see 003_datasets.sql. */
#define NON_FINAL                                                          \
  "(state = 'queued' OR state = 'placed' OR state = 'submitted' OR "      \
  "state = 'running' OR state = 'staging')"

enum stmt_id {
  ST_BEGIN,
  ST_COMMIT,
  ST_ROLLBACK,
  ST_SAVEPOINT,
  ST_RELEASE,
  ST_ROLLBACK_TO,
  ST_USER_VERSION,
  ST_JOB_INSERT,
  ST_JOB_GET,
  ST_JOB_BY_IDEM,
  ST_JOB_UPDATE,
  ST_JOB_ACTIVE,
  ST_JOB_RUNNABLE,
  ST_JOB_COUNTS,
  ST_EVENT_APPEND,
  ST_EVENT_LIST,
  ST_PLACEMENT_PUT,
  ST_PLACEMENT_GET,
  ST_WORKLOAD_INSERT,
  ST_WORKLOAD_UPDATE,
  ST_WORKLOAD_GET,
  ST_META_GET,
  ST_WORKLOAD_LIST,
  ST_TOKEN_INSERT,
  ST_TOKEN_ADD_PROJECT,
  ST_TOKEN_FIND,
  ST_TOKEN_PROJECTS,
  ST_TOKEN_COUNT,
  ST_COUNT
};

/*
 * EXPLAIN QUERY PLAN (no ANALYZE statistics, as in production) gives, for
 * the statements that matter:
 *   ST_JOB_GET        SEARCH jobs USING INTEGER PRIMARY KEY (rowid=?)
 *   ST_JOB_BY_IDEM    SEARCH jobs USING INDEX jobs_idem (idem_key=?)
 *   ST_JOB_RUNNABLE   SCAN jobs USING INDEX jobs_runnable
 *   ST_JOB_ACTIVE     SCAN jobs USING INDEX jobs_active
 *   ST_JOB_COUNTS     SCAN jobs USING COVERING INDEX jobs_site_state
 *   ST_EVENT_LIST     SEARCH job_events USING INDEX job_events_job
 *                     (job_id=?)
 * and tests/unit/test_db.c keeps them so.
 */
static const char *const stmt_sql[ST_COUNT] = {
  [ST_BEGIN] = "BEGIN IMMEDIATE",
  [ST_COMMIT] = "COMMIT",
  [ST_ROLLBACK] = "ROLLBACK",
  /* db_token_insert writes two tables; a savepoint makes it atomic both
   * inside a caller's transaction and on its own. */
  [ST_SAVEPOINT] = "SAVEPOINT db_token_insert",
  [ST_RELEASE] = "RELEASE db_token_insert",
  [ST_ROLLBACK_TO] = "ROLLBACK TO db_token_insert",
  [ST_USER_VERSION] = "PRAGMA user_version",
  [ST_JOB_INSERT] =
      "INSERT INTO jobs (state, name, project, workload, site, spec_json, "
      "gpus, gpu_type, hold, idem_key, idem_hash, remote_id, alloc, "
      "reason, log_path, exit_code, signal, created_ms, updated_ms, "
      "started_ms, ended_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
      "?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)",
  [ST_JOB_GET] = "SELECT " JOB_COLS " FROM jobs WHERE id = ?1",
  [ST_JOB_BY_IDEM] = "SELECT " JOB_COLS " FROM jobs WHERE idem_key = ?1",
  [ST_JOB_UPDATE] =
      "UPDATE jobs SET state = ?2, site = ?3, remote_id = ?4, alloc = ?5, "
      "reason = ?6, log_path = ?7, exit_code = ?8, signal = ?9, "
      "hold = ?10, updated_ms = ?11, started_ms = ?12, ended_ms = ?13, "
      "restarts = ?14 WHERE id = ?1",
  /*
   * INDEXED BY: left to itself the planner prefers jobs_state (state=?)
   * here, which for the runnable scan walks held jobs too and for the
   * active list adds a sort.  INDEXED BY pins the partial indexes, and
   * makes preparing the statement (so db_open) fail, rather than the
   * scheduler slow down, if a later schema change breaks that plan.
   */
  [ST_JOB_ACTIVE] =
      "SELECT " JOB_COLS " FROM jobs INDEXED BY jobs_active WHERE "
      NON_FINAL " AND (?1 OR state <> 'queued' OR hold = 0) ORDER BY id",
  /* Terms of the jobs_runnable index's WHERE clause, verbatim. */
  [ST_JOB_RUNNABLE] =
      "SELECT " JOB_COLS " FROM jobs INDEXED BY jobs_runnable "
      "WHERE state = 'queued' AND hold = 0 ORDER BY id LIMIT ?1",
  [ST_JOB_COUNTS] =
      "SELECT site, state, count(*) FROM jobs GROUP BY site, state",
  [ST_EVENT_APPEND] =
      "INSERT INTO job_events (job_id, at_ms, from_state, to_state, detail)"
      " VALUES (?1, ?2, ?3, ?4, ?5)",
  [ST_EVENT_LIST] = "SELECT id, job_id, at_ms, from_state, to_state, detail"
                    " FROM job_events WHERE job_id = ?1 ORDER BY id",
  [ST_PLACEMENT_PUT] =
      "INSERT INTO placements (job_id, at_ms, verdict, site, candidates, "
      "start_ms, reason) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) "
      "ON CONFLICT (job_id) DO UPDATE SET "
      "at_ms = excluded.at_ms, verdict = excluded.verdict, "
      "site = excluded.site, candidates = excluded.candidates, "
      "start_ms = excluded.start_ms, reason = excluded.reason",
  [ST_PLACEMENT_GET] =
      "SELECT job_id, at_ms, verdict, site, start_ms, reason, candidates "
      "FROM placements WHERE job_id = ?1",
  /* Insert-if-absent first, so that changes() tells a new name from a
   * replaced one without a read beforehand. */
  [ST_WORKLOAD_INSERT] =
      "INSERT INTO workloads (name, json, created_ms, updated_ms) "
      "VALUES (?1, ?2, ?3, ?3) ON CONFLICT (name) DO NOTHING",
  [ST_WORKLOAD_UPDATE] =
      "UPDATE workloads SET json = ?2, updated_ms = ?3 WHERE name = ?1",
  [ST_WORKLOAD_GET] = "SELECT json FROM workloads WHERE name = ?1",
  [ST_META_GET] = "SELECT value FROM meta WHERE key = ?1",
  [ST_WORKLOAD_LIST] = "SELECT name, json FROM workloads ORDER BY name",
  [ST_TOKEN_INSERT] =
      "INSERT INTO api_tokens (hash, name, role, scoped, created_ms) "
      "VALUES (?1, ?2, ?3, ?4, ?5)",
  [ST_TOKEN_ADD_PROJECT] =
      "INSERT INTO api_token_projects (token_id, project) VALUES (?1, ?2) "
      "ON CONFLICT DO NOTHING",
  [ST_TOKEN_FIND] = "SELECT id, name, role, scoped, created_ms "
                    "FROM api_tokens WHERE hash = ?1",
  [ST_TOKEN_PROJECTS] = "SELECT project FROM api_token_projects "
                        "WHERE token_id = ?1 ORDER BY project",
  [ST_TOKEN_COUNT] = "SELECT count(*) FROM api_tokens",
};

/*
 * db_job_list keeps one cached statement per combination of filters
 * (state, project, site, allow-list: 16), built at open from fixed
 * fragments; values are always bound.  A single statement with
 * "(?1 IS NULL OR state = ?1)" terms plans as "SEARCH jobs USING INTEGER
 * PRIMARY KEY (rowid<?)" whatever is bound: SQLite plans it before the
 * values are known and cannot use an index for such a term, so a filter
 * on a rare state or a small project walks the whole table.  Per
 * combination, EXPLAIN QUERY PLAN gives:
 *   no filter        SEARCH jobs USING INTEGER PRIMARY KEY (rowid<?):
 *                    the table itself, backwards from the cursor
 *   state            SEARCH jobs USING INDEX jobs_state (state=? AND rowid<?)
 *   project          SEARCH jobs USING INDEX jobs_project
 *                    (project=? AND rowid<?)
 *   site + state     SEARCH jobs USING INDEX jobs_site_state (site=? AND
 *                    state=? AND rowid<?)
 *   state + project  SEARCH jobs USING INDEX jobs_state (state=? AND rowid<?)
 * All of these read rows newest first and stop at the limit.  Two read
 * every match and then sort (a top-N sort, bounded by the limit):
 *   site alone       SEARCH jobs USING INDEX jobs_site_state (site=?)
 *   allow-list       SEARCH jobs USING INDEX jobs_project (project=? AND
 *                    rowid<?), once per listed project
 * NEEDSWORK: if scoped tokens over very large projects make the second
 * case slow, list each project newest first and merge (k * limit rows).
 * Each filter column is bound to its own parameter number in every
 * combination: ?1 state, ?2 project, ?3 site, ?4 allow-list (JSON array),
 * ?5 before_id, ?6 limit.
 */
#define LIST_STATE 1
#define LIST_PROJECT 2
#define LIST_SITE 4
#define LIST_ALLOW 8
#define LIST_VARIANTS 16

struct db {
  sqlite3 *h;
  sqlite3_stmt *st[ST_COUNT];
  sqlite3_stmt *list[LIST_VARIANTS];
  sqlite3_stmt *ds[DB__DS_MAX];  /* datasets.c's */
  sqlite3_stmt *pr[DB__PR_MAX];  /* prices.c's */
  sqlite3_stmt *lg[DB__LG_MAX];  /* ledger.c's */
  sqlite3_stmt *nd[DB__ND_MAX];  /* nodes.c's */
  sqlite3_stmt *pb[DB__PB_MAX];  /* probes.c's */
};

/* ---- errors ---- */

/* ERR_UNAVAILABLE when another process held the lock past the busy
 * timeout, ERR_DB otherwise; the message is "what: sqlite's message".
 * Call before resetting the statement (the reset may change it). */
static int
fail(struct db *db, int rc, struct err *e, const char *what)
{
  int code = ERR_DB;

  if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED)
    code = ERR_UNAVAILABLE;
  else if (rc == SQLITE_NOMEM)
    code = ERR_NOMEM;
  return err_set(e, code, "%s: %s", what, sqlite3_errmsg(db->h));
}

/* For a failed write: the ERR_* of a constraint violation, or 0. */
static int
constraint_code(int rc)
{
  switch (rc) {
  case SQLITE_CONSTRAINT_UNIQUE:
  case SQLITE_CONSTRAINT_PRIMARYKEY:
    return ERR_CONFLICT;
  case SQLITE_CONSTRAINT_FOREIGNKEY:
    return ERR_NOT_FOUND;
  case SQLITE_CONSTRAINT_CHECK:
  case SQLITE_CONSTRAINT_NOTNULL:
  case SQLITE_CONSTRAINT_DATATYPE:
    return ERR_INVALID;
  }
  return 0;
}

/* ---- statements ---- */

static void
finish(sqlite3_stmt *st)
{
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
}

/* The bind helpers keep the first error in *rc and do nothing after one,
 * so a run of binds is checked once. */
static void
bind_text(sqlite3_stmt *st, int i, const char *s, int *rc)
{
  if (*rc != SQLITE_OK)
    return;
  if (s == NULL)
    *rc = sqlite3_bind_null(st, i);
  else
    *rc = sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
}

static void
bind_int64(sqlite3_stmt *st, int i, int64_t v, int *rc)
{
  if (*rc == SQLITE_OK)
    *rc = sqlite3_bind_int64(st, i, v);
}

/* A cached statement for a function that runs callbacks, refused if a
 * callback re-entered the function while the statement is stepping. */
static int
take_for_callbacks(sqlite3_stmt *st, const char *fn, struct err *e)
{
  if (sqlite3_stmt_busy(st))
    return err_set(e, ERR_INTERNAL, "%s: called again from its own "
                   "callback", fn);
  return 0;
}

/*
 * The one way to read rows (db_internal.h): step, check, hand over,
 * finish.  rc is the result of the binds; a failed bind skips the step and
 * is reported as a failed read.
 */
int
db__get_one(struct db *db, sqlite3_stmt *st, int rc, const char *what,
            db__row_fn *read, void *out, int *found, struct err *e)
{
  int ret = 0;

  *found = 0;
  if (rc == SQLITE_OK)
    rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    *found = 1;
    ret = read(st, out, e);
  } else if (rc != SQLITE_DONE) {
    ret = fail(db, rc, e, what);
  }
  finish(st);
  return ret;
}

int
db__each_row(struct db *db, sqlite3_stmt *st, int rc, const char *what,
             db__row_fn *visit, void *arg, struct err *e)
{
  int ret = 0;

  while (rc == SQLITE_OK || rc == SQLITE_ROW) {
    rc = sqlite3_step(st);
    if (rc != SQLITE_ROW)
      break;
    ret = visit(st, arg, e);
    if (ret != 0)
      break;
  }
  /* A visitor's non-zero result is the answer; only a failed step is
   * ours to report. */
  if (ret == 0 && rc != SQLITE_DONE)
    ret = fail(db, rc, e, what);
  finish(st);
  return ret;
}

/*
 * Run a bound write statement (rc: the result of its binds) and reset it.
 * A constraint violation gives its constraint_code() and any other
 * failure fail()'s; either way e says "what: sqlite's message", which
 * callers reword where they know the subject better.
 */
static int
step_write(struct db *db, sqlite3_stmt *st, int rc, const char *what,
           struct err *e)
{
  int ret = 0;

  if (rc == SQLITE_OK)
    rc = sqlite3_step(st);
  if (rc != SQLITE_DONE) {
    ret = fail(db, rc, e, what);
    if (constraint_code(rc) != 0)
      ret = err_set(e, constraint_code(rc), "%s: %s", what,
                    sqlite3_errmsg(db->h));
  }
  finish(st);
  return ret;
}

static int
prepare(sqlite3 *h, const char *sql, sqlite3_stmt **out, struct err *e)
{
  int rc = sqlite3_prepare_v3(h, sql, -1, SQLITE_PREPARE_PERSISTENT, out,
                              NULL);

  if (rc != SQLITE_OK)
    return err_set(e, ERR_DB, "preparing '%.80s': %s", sql,
                   sqlite3_errmsg(h));
  return 0;
}

static void
list_sql(unsigned mask, char *out, size_t outlen)
{
  snprintf(out, outlen,
           "SELECT " JOB_COLS " FROM jobs WHERE id < ?5%s%s%s%s "
           "ORDER BY id DESC LIMIT ?6",
           (mask & LIST_STATE) ? " AND state = ?1" : "",
           (mask & LIST_PROJECT) ? " AND project = ?2" : "",
           (mask & LIST_SITE) ? " AND site = ?3" : "",
           (mask & LIST_ALLOW)
               ? " AND project IN (SELECT value FROM json_each(?4))"
               : "");
}

static int
prepare_all(struct db *db, struct err *e)
{
  char sql[1024];
  unsigned i;
  int ret;

  for (i = 0; i < ST_COUNT; i++) {
    ret = prepare(db->h, stmt_sql[i], &db->st[i], e);
    if (ret < 0)
      return ret;
  }
  for (i = 0; i < LIST_VARIANTS; i++) {
    list_sql(i, sql, sizeof(sql));
    ret = prepare(db->h, sql, &db->list[i], e);
    if (ret < 0)
      return ret;
  }
  return 0;
}

/* ---- open and close ---- */

/* Run a pragma and return its first column as text in out ("" if it
 * returns no row). */
static int
pragma(sqlite3 *h, const char *sql, char *out, size_t outlen, struct err *e)
{
  sqlite3_stmt *st = NULL;
  const unsigned char *t;
  int rc;
  int ret = 0;

  out[0] = '\0';
  rc = sqlite3_prepare_v2(h, sql, -1, &st, NULL);
  if (rc == SQLITE_OK) {
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
      t = sqlite3_column_text(st, 0);
      snprintf(out, outlen, "%s", t != NULL ? (const char *)t : "");
      rc = SQLITE_DONE;
    }
  }
  if (rc != SQLITE_DONE)
    ret = err_set(e, (rc & 0xff) == SQLITE_BUSY ? ERR_UNAVAILABLE : ERR_DB,
                  "'%s': %s", sql, sqlite3_errmsg(h));
  sqlite3_finalize(st);
  return ret;
}

static int
configure(sqlite3 *h, const char *path, struct err *e)
{
  char val[32];
  int ret;

  sqlite3_extended_result_codes(h, 1);
  sqlite3_busy_timeout(h, DB_BUSY_TIMEOUT_MS);
  /* No "double-quoted string literals": a misspelt column is an error,
   * not a string. */
  sqlite3_db_config(h, SQLITE_DBCONFIG_DQS_DML, 0, NULL);
  sqlite3_db_config(h, SQLITE_DBCONFIG_DQS_DDL, 0, NULL);
  sqlite3_db_config(h, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);

  /* WAL: readers never block the writer; synchronous=FULL makes every
   * commit fsync the WAL, so a commit survives power loss (NORMAL would
   * only survive a crash of the process). */
  ret = pragma(h, "PRAGMA journal_mode = WAL", val, sizeof(val), e);
  if (ret < 0)
    return ret;
  /* An in-memory database answers "memory"; it has nothing to keep. */
  if (strcmp(val, "wal") != 0 && strcmp(val, "memory") != 0)
    return err_set(e, ERR_DB, "database '%s': cannot use WAL (journal "
                   "mode is '%s')", path, val);
  ret = pragma(h, "PRAGMA synchronous = FULL", val, sizeof(val), e);
  if (ret < 0)
    return ret;
  ret = pragma(h, "PRAGMA foreign_keys = ON", val, sizeof(val), e);
  if (ret < 0)
    return ret;
  /* A library built without foreign keys ignores the pragma silently. */
  ret = pragma(h, "PRAGMA foreign_keys", val, sizeof(val), e);
  if (ret < 0)
    return ret;
  if (strcmp(val, "1") != 0)
    return err_set(e, ERR_DB, "database '%s': foreign keys cannot be "
                   "enabled", path);
  return 0;
}

int
db_open(const char *path, struct db **out, struct err *e)
{
  struct db *db = NULL;
  int rc;
  int ret;

  *out = NULL;
  if (path == NULL || path[0] == '\0')
    return err_set(e, ERR_INVALID, "database path is empty");
  db = xcalloc(1, sizeof(*db));
  rc = sqlite3_open_v2(path, &db->h,
                       SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                           SQLITE_OPEN_NOMUTEX,
                       NULL);
  if (rc != SQLITE_OK) {
    ret = err_set(e, ERR_DB, "database '%s': cannot open: %s", path,
                  db->h != NULL ? sqlite3_errmsg(db->h)
                                : sqlite3_errstr(rc));
    goto out;
  }
  ret = configure(db->h, path, e);
  if (ret < 0)
    goto out;
  ret = db__migrate(db->h, NULL, e);
  if (ret < 0)
    goto out;
  ret = prepare_all(db, e);
  if (ret < 0)
    goto out;
  ret = db__ds_prepare(db, e);
  if (ret == 0)
    ret = db__pr_prepare(db, e);
  if (ret == 0)
    ret = db__lg_prepare(db, e);
  if (ret == 0)
    ret = db__nd_prepare(db, e);
  if (ret == 0)
    ret = db__pb_prepare(db, e);
  if (ret < 0)
    goto out;
  *out = db;
  db = NULL;
out:
  db_close(db);
  return ret;
}

void
db_close(struct db *db)
{
  unsigned i;

  if (db == NULL)
    return;
  for (i = 0; i < ST_COUNT; i++)
    sqlite3_finalize(db->st[i]);
  for (i = 0; i < LIST_VARIANTS; i++)
    sqlite3_finalize(db->list[i]);
  for (i = 0; i < DB__DS_MAX; i++)
    sqlite3_finalize(db->ds[i]);
  for (i = 0; i < DB__PR_MAX; i++)
    sqlite3_finalize(db->pr[i]);
  for (i = 0; i < DB__LG_MAX; i++)
    sqlite3_finalize(db->lg[i]);
  for (i = 0; i < DB__ND_MAX; i++)
    sqlite3_finalize(db->nd[i]);
  for (i = 0; i < DB__PB_MAX; i++)
    sqlite3_finalize(db->pb[i]);
  /* An open transaction is rolled back by the close. */
  sqlite3_close(db->h);
  free(db);
}

int
db_schema_version(struct db *db)
{
  sqlite3_stmt *st = db->st[ST_USER_VERSION];
  int version = -1;

  if (sqlite3_step(st) == SQLITE_ROW)
    version = sqlite3_column_int(st, 0);
  finish(st);
  return version;
}

/* ---- transactions ---- */

/* Step a statement that returns no row (transaction control). */
static int
step_control(struct db *db, enum stmt_id id, const char *what,
             struct err *e)
{
  sqlite3_stmt *st = db->st[id];
  int rc = sqlite3_step(st);
  int ret = 0;

  if (rc != SQLITE_DONE)
    ret = fail(db, rc, e, what);
  finish(st);
  return ret;
}

int
db_begin(struct db *db, struct err *e)
{
  if (!sqlite3_get_autocommit(db->h))
    return err_set(e, ERR_INTERNAL, "begin: a transaction is already open");
  /* IMMEDIATE: take the write lock now, while the busy timeout can still
   * wait for it; a deferred transaction that reads and then writes would
   * fail with SQLITE_BUSY_SNAPSHOT instead of waiting. */
  return step_control(db, ST_BEGIN, "begin", e);
}

int
db_commit(struct db *db, struct err *e)
{
  if (sqlite3_get_autocommit(db->h))
    return err_set(e, ERR_INTERNAL, "commit: no transaction is open");
  return step_control(db, ST_COMMIT, "commit", e);
}

void
db_rollback(struct db *db)
{
  if (!sqlite3_get_autocommit(db->h))
    (void)step_control(db, ST_ROLLBACK, "rollback", NULL);
}

/* ---- jobs ---- */

static const char *
state_name(enum job_state s)
{
  if ((unsigned)s >= JOB_STATE_COUNT)
    return NULL;
  return state_names[s];
}

static int
state_parse(const char *name, enum job_state *out)
{
  unsigned i;

  if (name == NULL)
    return -1;
  for (i = 0; i < JOB_STATE_COUNT; i++) {
    if (strcmp(name, state_names[i]) == 0) {
      *out = (enum job_state)i;
      return 0;
    }
  }
  return -1;
}

void
db_job_init(struct db_job *j)
{
  memset(j, 0, sizeof(*j));
  j->state = JOB_QUEUED;
  j->exit_code = -1;
}

void
db_job_release(struct db_job *j)
{
  if (j == NULL)
    return;
  free(j->name);
  free(j->project);
  free(j->workload);
  free(j->site);
  free(j->spec_json);
  free(j->gpu_type);
  free(j->idem_key);
  free(j->idem_hash);
  free(j->remote_id);
  free(j->alloc);
  free(j->reason);
  free(j->log_path);
  db_job_init(j);
}

/* Column readers: a new copy of a text column, or a pointer into SQLite's
 * buffer (valid until the next step), NULL for SQL NULL either way. */
typedef char *(*col_text_fn)(sqlite3_stmt *st, int i);

static char *
col_copy(sqlite3_stmt *st, int i)
{
  const unsigned char *t;

  if (sqlite3_column_type(st, i) == SQLITE_NULL)
    return NULL;
  t = sqlite3_column_text(st, i);
  if (t == NULL)
    return NULL;
  return xstrndup((const char *)t, (size_t)sqlite3_column_bytes(st, i));
}

static char *
col_borrow(sqlite3_stmt *st, int i)
{
  if (sqlite3_column_type(st, i) == SQLITE_NULL)
    return NULL;
  return (char *)sqlite3_column_text(st, i);
}

/* Fill j (initialised) from the current row of a JOB_COLS statement. */
static int
read_job(sqlite3_stmt *st, struct db_job *j, col_text_fn text,
         struct err *e)
{
  const char *state = (const char *)sqlite3_column_text(st, JC_STATE);

  j->id = sqlite3_column_int64(st, JC_ID);
  /* Before any allocation, so a bad row leaks nothing. */
  if (state_parse(state, &j->state) < 0)
    return err_set(e, ERR_DB, "job %" PRId64 ": unknown state '%s' stored",
                   j->id, state != NULL ? state : "(null)");
  j->name = text(st, JC_NAME);
  j->project = text(st, JC_PROJECT);
  j->workload = text(st, JC_WORKLOAD);
  j->site = text(st, JC_SITE);
  j->spec_json = text(st, JC_SPEC_JSON);
  j->gpus = sqlite3_column_int64(st, JC_GPUS);
  j->gpu_type = text(st, JC_GPU_TYPE);
  j->hold = sqlite3_column_int(st, JC_HOLD);
  j->idem_key = text(st, JC_IDEM_KEY);
  j->idem_hash = text(st, JC_IDEM_HASH);
  j->remote_id = text(st, JC_REMOTE_ID);
  j->alloc = text(st, JC_ALLOC);
  j->reason = text(st, JC_REASON);
  j->log_path = text(st, JC_LOG_PATH);
  j->exit_code = sqlite3_column_int(st, JC_EXIT_CODE);
  j->signal = sqlite3_column_int(st, JC_SIGNAL);
  j->created_ms = sqlite3_column_int64(st, JC_CREATED_MS);
  j->updated_ms = sqlite3_column_int64(st, JC_UPDATED_MS);
  j->started_ms = sqlite3_column_int64(st, JC_STARTED_MS);
  j->ended_ms = sqlite3_column_int64(st, JC_ENDED_MS);
  j->restarts = sqlite3_column_int(st, JC_RESTARTS);
  return 0;
}

int
db_job_insert(struct db *db, struct db_job *j, struct err *e)
{
  sqlite3_stmt *st = db->st[ST_JOB_INSERT];
  const char *state = state_name(j->state);
  int rc = SQLITE_OK;
  int ret;

  if (state == NULL)
    return err_set(e, ERR_INVALID, "job: unknown state %d", (int)j->state);
  bind_text(st, 1, state, &rc);
  bind_text(st, 2, j->name, &rc);
  bind_text(st, 3, j->project, &rc);
  bind_text(st, 4, j->workload, &rc);
  bind_text(st, 5, j->site, &rc);
  bind_text(st, 6, j->spec_json, &rc);
  bind_int64(st, 7, j->gpus, &rc);
  bind_text(st, 8, j->gpu_type, &rc);
  bind_int64(st, 9, j->hold ? 1 : 0, &rc);
  bind_text(st, 10, j->idem_key, &rc);
  bind_text(st, 11, j->idem_hash, &rc);
  bind_text(st, 12, j->remote_id, &rc);
  bind_text(st, 13, j->alloc, &rc);
  bind_text(st, 14, j->reason, &rc);
  bind_text(st, 15, j->log_path, &rc);
  bind_int64(st, 16, j->exit_code, &rc);
  bind_int64(st, 17, j->signal, &rc);
  bind_int64(st, 18, j->created_ms, &rc);
  bind_int64(st, 19, j->updated_ms, &rc);
  bind_int64(st, 20, j->started_ms, &rc);
  bind_int64(st, 21, j->ended_ms, &rc);
  ret = step_write(db, st, rc, "inserting job", e);
  /* jobs_idem is the only unique key a new row can collide with. */
  if (ret == ERR_CONFLICT)
    return err_set(e, ret, "idempotency key '%s' already used",
                   j->idem_key != NULL ? j->idem_key : "");
  if (ret < 0)
    return ret;
  j->id = sqlite3_last_insert_rowid(db->h);
  return 0;
}

/* db__row_fn: the row into out (a struct db_job), copied. */
static int
read_job_copy(sqlite3_stmt *st, void *out, struct err *e)
{
  int ret = read_job(st, out, col_copy, e);

  if (ret < 0)
    db_job_release(out);
  return ret;
}

int
db_job_get(struct db *db, int64_t id, struct db_job *out, struct err *e)
{
  sqlite3_stmt *st = db->st[ST_JOB_GET];
  int rc = SQLITE_OK;
  int found;
  int ret;

  db_job_release(out);
  bind_int64(st, 1, id, &rc);
  ret = db__get_one(db, st, rc, "reading job", read_job_copy, out, &found,
                    e);
  if (ret == 0 && !found)
    ret = err_set(e, ERR_NOT_FOUND, "job %" PRId64 " not found", id);
  return ret;
}

int
db_job_get_by_idem(struct db *db, const char *idem_key, struct db_job *out,
                   struct err *e)
{
  sqlite3_stmt *st = db->st[ST_JOB_BY_IDEM];
  int rc = SQLITE_OK;
  int found;
  int ret;

  db_job_release(out);
  if (idem_key == NULL)
    return err_set(e, ERR_INVALID, "idempotency key missing");
  bind_text(st, 1, idem_key, &rc);
  ret = db__get_one(db, st, rc, "reading job", read_job_copy, out, &found,
                    e);
  if (ret == 0 && !found)
    ret = err_set(e, ERR_NOT_FOUND,
                  "job with idempotency key '%s' not found", idem_key);
  return ret;
}

int
db_job_update(struct db *db, const struct db_job *j, struct err *e)
{
  sqlite3_stmt *st = db->st[ST_JOB_UPDATE];
  const char *state = state_name(j->state);
  int rc = SQLITE_OK;
  int ret;

  if (state == NULL)
    return err_set(e, ERR_INVALID, "job %" PRId64 ": unknown state %d",
                   j->id, (int)j->state);
  bind_int64(st, 1, j->id, &rc);
  bind_text(st, 2, state, &rc);
  bind_text(st, 3, j->site, &rc);
  bind_text(st, 4, j->remote_id, &rc);
  bind_text(st, 5, j->alloc, &rc);
  bind_text(st, 6, j->reason, &rc);
  bind_text(st, 7, j->log_path, &rc);
  bind_int64(st, 8, j->exit_code, &rc);
  bind_int64(st, 9, j->signal, &rc);
  bind_int64(st, 10, j->hold ? 1 : 0, &rc);
  bind_int64(st, 11, j->updated_ms, &rc);
  bind_int64(st, 12, j->started_ms, &rc);
  bind_int64(st, 13, j->ended_ms, &rc);
  bind_int64(st, 14, j->restarts, &rc);
  ret = step_write(db, st, rc, "update", e);
  if (ret < 0) {
    err_prefix(e, "job %" PRId64, j->id);
    return ret;
  }
  if (sqlite3_changes(db->h) == 0)
    return err_set(e, ERR_NOT_FOUND, "job %" PRId64 " not found", j->id);
  return 0;
}

/* A list function's callback and its argument, for the visit_*
 * functions (db__row_fn). */
struct visit {
  union {
    db_job_cb job;
    db_event_cb event;
    db_workload_cb workload;
    db_count_cb count;
  } cb;
  void *arg;
};

/* The row to v's db_job_cb as a borrowed job. */
static int
visit_job(sqlite3_stmt *st, void *arg, struct err *e)
{
  const struct visit *v = arg;
  struct db_job j;
  int ret;

  db_job_init(&j);
  ret = read_job(st, &j, col_borrow, e);
  if (ret == 0)
    ret = v->cb.job(&j, v->arg);
  return ret;
}

/* Step st (bound with result rc, taken) through its rows, handing each
 * to cb as a borrowed job; resets st. */
static int
each_job(struct db *db, sqlite3_stmt *st, int rc, const char *what,
         db_job_cb cb, void *arg, struct err *e)
{
  struct visit v = {.cb.job = cb, .arg = arg};

  return db__each_row(db, st, rc, what, visit_job, &v, e);
}

/* The allow-list as a JSON array of strings into b, for json_each(). */
int
db__allow_list_json(char *const *projects, struct buf *b, struct err *e)
{
  const unsigned char *p;
  size_t i;
  int ret = buf_adds(b, "[");

  for (i = 0; ret == 0 && projects[i] != NULL; i++) {
    ret = buf_adds(b, i == 0 ? "\"" : ",\"");
    for (p = (const unsigned char *)projects[i]; ret == 0 && *p; p++) {
      if (*p == '"' || *p == '\\')
        ret = buf_addf(b, "\\%c", *p);
      else if (*p < 0x20)
        ret = buf_addf(b, "\\u%04x", *p);
      else
        ret = buf_add(b, p, 1);
    }
    if (ret == 0)
      ret = buf_adds(b, "\"");
  }
  if (ret == 0)
    ret = buf_adds(b, "]");
  if (ret < 0)
    return err_set(e, ERR_TOO_LARGE, "project allow-list too large");
  return 0;
}

static int
list_check(const struct db_job_filter *f, unsigned *mask, struct err *e)
{
  enum job_state s;

  if (f == NULL)
    return err_set(e, ERR_INVALID, "job list: no filter");
  if (f->limit < 1 || f->limit > DB_LIST_MAX)
    return err_set(e, ERR_INVALID, "limit %d: must be between 1 and %d",
                   f->limit, DB_LIST_MAX);
  if (f->before_id < 0)
    return err_set(e, ERR_INVALID, "cursor %" PRId64 ": must not be "
                   "negative", f->before_id);
  if (f->state != NULL && state_parse(f->state, &s) < 0)
    return err_set(e, ERR_INVALID, "state '%s': unknown", f->state);
  *mask = (f->state != NULL ? LIST_STATE : 0u) |
          (f->project != NULL ? LIST_PROJECT : 0u) |
          (f->site != NULL ? LIST_SITE : 0u) |
          (f->projects != NULL ? LIST_ALLOW : 0u);
  return 0;
}

int
db_job_list(struct db *db, const struct db_job_filter *f, db_job_cb cb,
            void *arg, struct err *e)
{
  struct buf allow;
  sqlite3_stmt *st;
  unsigned mask;
  int rc = SQLITE_OK;
  int ret;

  buf_init(&allow, DB_ALLOW_LIST_MAX);
  ret = list_check(f, &mask, e);
  if (ret < 0)
    goto out;
  st = db->list[mask];
  ret = take_for_callbacks(st, "db_job_list", e);
  if (ret < 0)
    goto out;
  if (f->projects != NULL) {
    ret = db__allow_list_json(f->projects, &allow, e);
    if (ret < 0)
      goto out;
    bind_text(st, 4, buf_str(&allow), &rc);
  }
  if (f->state != NULL)
    bind_text(st, 1, f->state, &rc);
  if (f->project != NULL)
    bind_text(st, 2, f->project, &rc);
  if (f->site != NULL)
    bind_text(st, 3, f->site, &rc);
  bind_int64(st, 5, f->before_id > 0 ? f->before_id : INT64_MAX, &rc);
  bind_int64(st, 6, f->limit, &rc);
  ret = each_job(db, st, rc, "listing jobs", cb, arg, e);
out:
  buf_release(&allow);
  return ret;
}

int
db_job_list_active(struct db *db, int with_held, db_job_cb cb, void *arg,
                   struct err *e)
{
  sqlite3_stmt *st = db->st[ST_JOB_ACTIVE];
  int rc = SQLITE_OK;
  int ret;

  ret = take_for_callbacks(st, "db_job_list_active", e);
  if (ret < 0)
    return ret;
  bind_int64(st, 1, with_held ? 1 : 0, &rc);
  return each_job(db, st, rc, "listing active jobs", cb, arg, e);
}

int
db_job_list_runnable(struct db *db, int limit, db_job_cb cb, void *arg,
                     struct err *e)
{
  sqlite3_stmt *st = db->st[ST_JOB_RUNNABLE];
  int rc = SQLITE_OK;
  int ret;

  if (limit < 1)
    return err_set(e, ERR_INVALID, "limit %d: must be at least 1", limit);
  ret = take_for_callbacks(st, "db_job_list_runnable", e);
  if (ret < 0)
    return ret;
  bind_int64(st, 1, limit, &rc);
  return each_job(db, st, rc, "listing runnable jobs", cb, arg, e);
}

/* The (site, state, count) row to v's db_count_cb. */
static int
visit_count(sqlite3_stmt *st, void *arg, struct err *e)
{
  const struct visit *v = arg;
  const char *site = (const char *)sqlite3_column_text(st, 0);
  const char *state = (const char *)sqlite3_column_text(st, 1);
  enum job_state s;

  if (state_parse(state, &s) < 0)
    return err_set(e, ERR_DB, "counting jobs: unknown state '%s' stored",
                   state != NULL ? state : "(null)");
  v->cb.count(site != NULL ? site : "", s, sqlite3_column_int64(st, 2),
              v->arg);
  return 0;
}

int
db_job_counts(struct db *db, db_count_cb cb, void *arg, struct err *e)
{
  sqlite3_stmt *st = db->st[ST_JOB_COUNTS];
  struct visit v = {.cb.count = cb, .arg = arg};
  int ret = take_for_callbacks(st, "db_job_counts", e);

  if (ret < 0)
    return ret;
  return db__each_row(db, st, SQLITE_OK, "counting jobs", visit_count, &v,
                      e);
}

/* ---- job events ---- */

void
db_event_release(struct db_event *ev)
{
  if (ev == NULL)
    return;
  free(ev->from_state);
  free(ev->to_state);
  free(ev->detail);
  memset(ev, 0, sizeof(*ev));
}

int
db_event_append(struct db *db, int64_t job_id, int64_t at_ms,
                const char *from_state, const char *to_state,
                const char *detail, struct err *e)
{
  sqlite3_stmt *st = db->st[ST_EVENT_APPEND];
  int rc = SQLITE_OK;
  int ret;

  bind_int64(st, 1, job_id, &rc);
  bind_int64(st, 2, at_ms, &rc);
  bind_text(st, 3, from_state, &rc);
  bind_text(st, 4, to_state, &rc);
  bind_text(st, 5, detail, &rc);
  ret = step_write(db, st, rc, "appending event", e);
  /* The foreign key on job_events.job_id. */
  if (ret == ERR_NOT_FOUND)
    return err_set(e, ret, "job %" PRId64 " not found", job_id);
  return ret;
}

/* The row to v's db_event_cb as a borrowed event. */
static int
visit_event(sqlite3_stmt *st, void *arg, struct err *e)
{
  const struct visit *v = arg;
  struct db_event ev;

  (void)e;
  ev.id = sqlite3_column_int64(st, 0);
  ev.job_id = sqlite3_column_int64(st, 1);
  ev.at_ms = sqlite3_column_int64(st, 2);
  ev.from_state = col_borrow(st, 3);
  ev.to_state = col_borrow(st, 4);
  ev.detail = col_borrow(st, 5);
  return v->cb.event(&ev, v->arg);
}

int
db_event_list(struct db *db, int64_t job_id, db_event_cb cb, void *arg,
              struct err *e)
{
  sqlite3_stmt *st = db->st[ST_EVENT_LIST];
  struct visit v = {.cb.event = cb, .arg = arg};
  int rc = SQLITE_OK;
  int ret = take_for_callbacks(st, "db_event_list", e);

  if (ret < 0)
    return ret;
  bind_int64(st, 1, job_id, &rc);
  return db__each_row(db, st, rc, "listing events", visit_event, &v, e);
}

/* ---- placements ---- */

int
db_placement_put(struct db *db, const struct db_placement *p, struct err *e)
{
  sqlite3_stmt *st = db->st[ST_PLACEMENT_PUT];
  int64_t job_id = p->job_id;
  const char *verdict = p->verdict;
  int rc = SQLITE_OK;
  int ret;

  bind_int64(st, 1, job_id, &rc);
  bind_int64(st, 2, p->at_ms, &rc);
  bind_text(st, 3, verdict, &rc);
  bind_text(st, 4, p->site, &rc);
  bind_text(st, 5, p->candidates, &rc);
  if (p->start_ms > 0)
    bind_int64(st, 6, p->start_ms, &rc);
  else if (rc == SQLITE_OK)
    rc = sqlite3_bind_null(st, 6);
  bind_text(st, 7, p->reason, &rc);
  ret = step_write(db, st, rc, "recording placement", e);
  if (ret == ERR_NOT_FOUND)
    return err_set(e, ret, "job %" PRId64 " not found", job_id);
  /* The CHECK on verdict (the only other constraint on the row). */
  if (ret == ERR_INVALID)
    return err_set(e, ret, "placement of job %" PRId64 ": verdict '%s': "
                   "must be now, wait or never", job_id,
                   verdict != NULL ? verdict : "(null)");
  return ret;
}

struct placement_read {
  db_placement_cb cb;
  void *arg;
};

static int
read_placement(sqlite3_stmt *st, void *arg, struct err *e)
{
  struct placement_read *r = arg;
  struct db_placement p = {.job_id = sqlite3_column_int64(st, 0),
                           .at_ms = sqlite3_column_int64(st, 1),
                           .verdict = db__col_borrow(st, 2),
                           .site = db__col_borrow(st, 3),
                           .start_ms = sqlite3_column_int64(st, 4),
                           .reason = db__col_borrow(st, 5),
                           .candidates = db__col_borrow(st, 6)};

  (void)e;
  return r->cb(&p, r->arg);
}

int
db_placement_get(struct db *db, int64_t job_id, db_placement_cb cb,
                 void *arg, int *found, struct err *e)
{
  sqlite3_stmt *st = db->st[ST_PLACEMENT_GET];
  struct placement_read r = {cb, arg};
  int rc = SQLITE_OK;

  bind_int64(st, 1, job_id, &rc);
  return db__get_one(db, st, rc, "reading placement", read_placement, &r,
                     found, e);
}

/* ---- workloads ---- */

int
db_workload_put(struct db *db, const char *name, const char *json,
                int64_t now_ms, int *created, struct err *e)
{
  sqlite3_stmt *st = db->st[ST_WORKLOAD_INSERT];
  int rc = SQLITE_OK;
  int ret;
  int inserted;

  if (created != NULL)
    *created = 0;
  if (name == NULL || json == NULL)
    return err_set(e, ERR_INVALID, "workload '%s': %s missing",
                   name != NULL ? name : "", name == NULL ? "name" : "json");
  bind_text(st, 1, name, &rc);
  bind_text(st, 2, json, &rc);
  bind_int64(st, 3, now_ms, &rc);
  ret = step_write(db, st, rc, "insert", e);
  if (ret < 0) {
    err_prefix(e, "workload '%s'", name);
    return ret;
  }
  inserted = sqlite3_changes(db->h) > 0;
  if (!inserted) {
    st = db->st[ST_WORKLOAD_UPDATE];
    bind_text(st, 1, name, &rc);
    bind_text(st, 2, json, &rc);
    bind_int64(st, 3, now_ms, &rc);
    ret = step_write(db, st, rc, "replace", e);
    if (ret < 0) {
      err_prefix(e, "workload '%s'", name);
      return ret;
    }
  }
  if (created != NULL)
    *created = inserted;
  return 0;
}

/* db__row_fn: the row's first column, copied, into out (a char **). */
static int
read_text_copy(sqlite3_stmt *st, void *out, struct err *e)
{
  (void)e;
  *(char **)out = col_copy(st, 0);
  return 0;
}

int
db_workload_get(struct db *db, const char *name, char **json_out,
                struct err *e)
{
  sqlite3_stmt *st = db->st[ST_WORKLOAD_GET];
  int rc = SQLITE_OK;
  int found;
  int ret;

  *json_out = NULL;
  if (name == NULL)
    return err_set(e, ERR_INVALID, "workload name missing");
  bind_text(st, 1, name, &rc);
  ret = db__get_one(db, st, rc, "reading workload", read_text_copy,
                    json_out, &found, e);
  if (ret == 0 && !found)
    ret = err_set(e, ERR_NOT_FOUND, "workload '%s' not found", name);
  return ret;
}

int
db_meta_get(struct db *db, const char *key, char **value_out, struct err *e)
{
  sqlite3_stmt *st = db->st[ST_META_GET];
  int rc = SQLITE_OK;
  int found;
  int ret;

  *value_out = NULL;
  bind_text(st, 1, key, &rc);
  ret = db__get_one(db, st, rc, "reading meta", read_text_copy, value_out,
                    &found, e);
  if (ret == 0 && !found)
    ret = err_set(e, ERR_NOT_FOUND, "no '%s' in meta", key);
  return ret;
}

/* The (name, json) row to v's db_workload_cb, borrowed. */
static int
visit_workload(sqlite3_stmt *st, void *arg, struct err *e)
{
  const struct visit *v = arg;

  (void)e;
  return v->cb.workload((const char *)sqlite3_column_text(st, 0),
                        (const char *)sqlite3_column_text(st, 1), v->arg);
}

int
db_workload_list(struct db *db, db_workload_cb cb, void *arg, struct err *e)
{
  sqlite3_stmt *st = db->st[ST_WORKLOAD_LIST];
  struct visit v = {.cb.workload = cb, .arg = arg};
  int ret = take_for_callbacks(st, "db_workload_list", e);

  if (ret < 0)
    return ret;
  return db__each_row(db, st, SQLITE_OK, "listing workloads",
                      visit_workload, &v, e);
}

/* ---- API tokens ---- */

void
db_token_release(struct db_token *t)
{
  size_t i;

  if (t == NULL)
    return;
  free(t->name);
  free(t->role);
  if (t->projects != NULL) {
    for (i = 0; t->projects[i] != NULL; i++)
      free(t->projects[i]);
    free(t->projects);
  }
  memset(t, 0, sizeof(*t));
}

/* The token row and its projects, inside the savepoint. */
static int
token_insert_rows(struct db *db, const char *hash_hex, const char *name,
                  const char *role, char *const *projects, int64_t now_ms,
                  int64_t *id, struct err *e)
{
  sqlite3_stmt *st = db->st[ST_TOKEN_INSERT];
  int rc = SQLITE_OK;
  size_t i;
  int ret;

  bind_text(st, 1, hash_hex, &rc);
  bind_text(st, 2, name, &rc);
  bind_text(st, 3, role, &rc);
  bind_int64(st, 4, projects != NULL ? 1 : 0, &rc);
  bind_int64(st, 5, now_ms, &rc);
  ret = step_write(db, st, rc, "storing token", e);
  if (ret == ERR_CONFLICT)
    return err_set(e, ret, "token already stored (same hash)");
  if (ret == ERR_INVALID)
    return err_set(e, ret, "token role '%s': must be admin, submitter or "
                   "viewer", role);
  if (ret < 0)
    return ret;
  *id = sqlite3_last_insert_rowid(db->h);

  st = db->st[ST_TOKEN_ADD_PROJECT];
  for (i = 0; projects != NULL && projects[i] != NULL; i++) {
    bind_int64(st, 1, *id, &rc);
    bind_text(st, 2, projects[i], &rc);
    ret = step_write(db, st, rc, "storing token scope", e);
    if (ret < 0)
      return ret;
  }
  return 0;
}

int
db_token_insert(struct db *db, const char *hash_hex, const char *name,
                const char *role, char *const *projects, int64_t now_ms,
                int64_t *id_out, struct err *e)
{
  int64_t id = 0;
  int ret;

  if (hash_hex == NULL || role == NULL)
    return err_set(e, ERR_INVALID, "token %s missing",
                   hash_hex == NULL ? "hash" : "role");
  ret = step_control(db, ST_SAVEPOINT, "storing token", e);
  if (ret < 0)
    return ret;
  ret = token_insert_rows(db, hash_hex, name, role, projects, now_ms, &id,
                          e);
  if (ret == 0)
    ret = step_control(db, ST_RELEASE, "storing token", e);
  if (ret < 0) {
    /* RELEASE also after ROLLBACK TO, which leaves the savepoint open. */
    (void)step_control(db, ST_ROLLBACK_TO, "storing token", NULL);
    (void)step_control(db, ST_RELEASE, "storing token", NULL);
    return ret;
  }
  if (id_out != NULL)
    *id_out = id;
  return 0;
}

/* A NULL-terminated vector of strings being filled by visit_string. */
struct strings {
  char **v;
  size_t n;
  size_t cap;
};

/* The row's first column, copied, onto the strings at arg. */
static int
visit_string(sqlite3_stmt *st, void *arg, struct err *e)
{
  struct strings *s = arg;

  (void)e;
  GROW(s->v, s->n + 2, s->cap);
  s->v[s->n++] = col_copy(st, 0);
  s->v[s->n] = NULL;
  return 0;
}

/* The token's projects as a new NULL-terminated vector. */
static int
token_projects(struct db *db, int64_t id, char ***out, struct err *e)
{
  sqlite3_stmt *st = db->st[ST_TOKEN_PROJECTS];
  struct strings s = {.v = xcalloc(1, sizeof(char *)), .cap = 1};
  int rc = SQLITE_OK;
  int ret;

  bind_int64(st, 1, id, &rc);
  ret = db__each_row(db, st, rc, "reading token scope", visit_string, &s,
                     e);
  if (ret < 0) {
    while (s.n > 0)
      free(s.v[--s.n]);
    free(s.v);
    s.v = NULL;
  }
  *out = s.v;
  return ret;
}

/* A token row being read by read_token_copy: whether it has a project
 * list is a column of its own, not a field of struct db_token. */
struct token_row {
  struct db_token *t;
  int scoped;
};

/* db__row_fn: the token row into out (a struct token_row), copied. */
static int
read_token_copy(sqlite3_stmt *st, void *out, struct err *e)
{
  struct token_row *r = out;

  (void)e;
  r->t->id = sqlite3_column_int64(st, 0);
  r->t->name = col_copy(st, 1);
  r->t->role = col_copy(st, 2);
  r->scoped = sqlite3_column_int(st, 3);
  r->t->created_ms = sqlite3_column_int64(st, 4);
  return 0;
}

int
db_token_find(struct db *db, const char *hash_hex, struct db_token *out,
              struct err *e)
{
  sqlite3_stmt *st = db->st[ST_TOKEN_FIND];
  struct token_row r = {.t = out, .scoped = 0};
  int rc = SQLITE_OK;
  int found;
  int ret;

  memset(out, 0, sizeof(*out));
  if (hash_hex == NULL)
    return err_set(e, ERR_INVALID, "token hash missing");
  bind_text(st, 1, hash_hex, &rc);
  ret = db__get_one(db, st, rc, "reading token", read_token_copy, &r,
                    &found, e);
  if (ret == 0 && !found)
    ret = err_set(e, ERR_NOT_FOUND, "token not found");
  if (ret == 0 && r.scoped)
    ret = token_projects(db, out->id, &out->projects, e);
  if (ret < 0)
    db_token_release(out);
  return ret;
}

int
db_token_count(struct db *db, int64_t *count, struct err *e)
{
  sqlite3_stmt *st = db->st[ST_TOKEN_COUNT];
  int rc = sqlite3_step(st);
  int ret = 0;

  *count = 0;
  if (rc == SQLITE_ROW)
    *count = sqlite3_column_int64(st, 0);
  else
    ret = fail(db, rc, e, "counting tokens");
  finish(st);
  return ret;
}

/* ---- test hooks (db_internal.h) ---- */

/* A row of EXPLAIN QUERY PLAN: its "detail" as a line of out (a struct
 * buf). */
static int
visit_plan_line(sqlite3_stmt *st, void *out, struct err *e)
{
  int ret = buf_addf(out, "%s\n", (const char *)sqlite3_column_text(st, 3));

  if (ret < 0)
    return err_set(e, ret, "explain: plan too long");
  return 0;
}

static int
explain(struct db *db, sqlite3_stmt *cached, struct buf *out, struct err *e)
{
  sqlite3_stmt *st = NULL;
  struct buf sql;
  int rc;
  int ret;

  buf_init(&sql, 16384);
  ret = buf_addf(&sql, "EXPLAIN QUERY PLAN %s", sqlite3_sql(cached));
  if (ret < 0) {
    ret = err_set(e, ret, "explain: statement too long");
    goto out;
  }
  rc = sqlite3_prepare_v2(db->h, buf_str(&sql), -1, &st, NULL);
  if (rc != SQLITE_OK) {
    ret = fail(db, rc, e, "explain");
    goto out;
  }
  ret = db__each_row(db, st, SQLITE_OK, "explain", visit_plan_line, out, e);
out:
  sqlite3_finalize(st);
  buf_release(&sql);
  return ret;
}

/* ---- shared with datasets.c (db_internal.h) ---- */

sqlite3 *
db__conn(struct db *db)
{
  return db->h;
}

sqlite3_stmt **
db__ds_stmts(struct db *db)
{
  return db->ds;
}

sqlite3_stmt **
db__pr_stmts(struct db *db)
{
  return db->pr;
}

sqlite3_stmt **
db__lg_stmts(struct db *db)
{
  return db->lg;
}

sqlite3_stmt **
db__nd_stmts(struct db *db)
{
  return db->nd;
}

sqlite3_stmt **
db__pb_stmts(struct db *db)
{
  return db->pb;
}

int
db__prepare(struct db *db, const char *sql, sqlite3_stmt **out,
            struct err *e)
{
  return prepare(db->h, sql, out, e);
}

int
db__fail(struct db *db, int rc, struct err *e, const char *what)
{
  return fail(db, rc, e, what);
}

int
db__step_write(struct db *db, sqlite3_stmt *st, int rc, const char *what,
               struct err *e)
{
  return step_write(db, st, rc, what, e);
}

void
db__finish(sqlite3_stmt *st)
{
  finish(st);
}

void
db__bind_text(sqlite3_stmt *st, int i, const char *s, int *rc)
{
  bind_text(st, i, s, rc);
}

void
db__bind_int64(sqlite3_stmt *st, int i, int64_t v, int *rc)
{
  bind_int64(st, i, v, rc);
}

char *
db__col_copy(sqlite3_stmt *st, int i)
{
  return col_copy(st, i);
}

char *
db__col_borrow(sqlite3_stmt *st, int i)
{
  return col_borrow(st, i);
}

int
db__take_for_callbacks(sqlite3_stmt *st, const char *fn, struct err *e)
{
  return take_for_callbacks(st, fn, e);
}

int
db__explain(struct db *db, sqlite3_stmt *st, struct buf *out, struct err *e)
{
  return explain(db, st, out, e);
}

int
db__plan_job_list(struct db *db, const struct db_job_filter *f,
                  struct buf *out, struct err *e)
{
  unsigned mask;
  int ret = list_check(f, &mask, e);

  if (ret < 0)
    return ret;
  return explain(db, db->list[mask], out, e);
}

int
db__plan(struct db *db, enum db_plan_query q, struct buf *out,
         struct err *e)
{
  static const enum stmt_id ids[] = {
    [DB_PLAN_RUNNABLE] = ST_JOB_RUNNABLE, [DB_PLAN_ACTIVE] = ST_JOB_ACTIVE,
    [DB_PLAN_COUNTS] = ST_JOB_COUNTS,     [DB_PLAN_JOB_GET] = ST_JOB_GET,
    [DB_PLAN_BY_IDEM] = ST_JOB_BY_IDEM,   [DB_PLAN_EVENTS] = ST_EVENT_LIST,
  };

  if ((unsigned)q >= sizeof(ids) / sizeof(ids[0]))
    return err_set(e, ERR_INVALID, "explain: unknown query %d", (int)q);
  return explain(db, db->st[ids[q]], out, e);
}

int
db__setting(struct db *db, const char *name, char *out, size_t outlen,
            struct err *e)
{
  static const char *const known[] = {"journal_mode", "synchronous",
                                      "foreign_keys", "busy_timeout"};
  char sql[64];
  size_t i;

  /* Pragma names cannot be bound; accept only known ones. */
  for (i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
    if (strcmp(name, known[i]) == 0)
      break;
  }
  if (i == sizeof(known) / sizeof(known[0]))
    return err_set(e, ERR_INVALID, "setting '%s': unknown", name);
  snprintf(sql, sizeof(sql), "PRAGMA %s", known[i]);
  return pragma(db->h, sql, out, outlen, e);
}
