/*
 * Tests for db/: the migrator, the job store and its queries, events,
 * placements, the workload catalog and API tokens, on real SQLite files in
 * a temporary directory (mkdtemp under /tmp, removed at the end).
 *
 * Each test opens a fresh database.  Where db.h has no reader (placements,
 * the journal mode, user_version) the test looks at the file through a
 * second, raw SQLite connection, which WAL lets it do while db has it
 * open; db_internal.h gives the migrator on its own and the query plans.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <inttypes.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db/db.h"
#include "db/db_internal.h"
#include "util/buf.h"

#define MAX_IDS 4096

static char tmpdir[64];
static unsigned db_counter;

struct fx {
  char path[PATH_MAX];
  struct db *db;
};

/* ---- helpers ---- */

static void
remove_db_files(const char *path)
{
  static const char *const suffix[] = {"", "-wal", "-shm", "-journal"};
  char p[PATH_MAX + 16];
  size_t i;

  for (i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
    snprintf(p, sizeof(p), "%s%s", path, suffix[i]);
    unlink(p);
  }
}

static int
group_setup(void **state)
{
  snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_db.XXXXXX");
  if (mkdtemp(tmpdir) == NULL)
    return -1;
  return 0;
}

static int
group_teardown(void **state)
{
  char p[PATH_MAX + 256];
  struct dirent *d;
  DIR *dir = opendir(tmpdir);

  if (dir != NULL) {
    for (d = readdir(dir); d != NULL; d = readdir(dir)) {
      if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0)
        continue;
      snprintf(p, sizeof(p), "%s/%s", tmpdir, d->d_name);
      unlink(p);
    }
    closedir(dir);
  }
  return rmdir(tmpdir);
}

static void
new_path(char *out, size_t n)
{
  snprintf(out, n, "%s/t%u.db", tmpdir, db_counter++);
}

static int
setup(void **state)
{
  struct fx *fx = calloc(1, sizeof(*fx));
  struct err e = {0};

  if (fx == NULL)
    return -1;
  new_path(fx->path, sizeof(fx->path));
  if (db_open(fx->path, &fx->db, &e) != 0) {
    fprintf(stderr, "db_open: %s\n", e.msg);
    free(fx);
    return -1;
  }
  *state = fx;
  return 0;
}

static int
teardown(void **state)
{
  struct fx *fx = *state;

  db_close(fx->db);
  remove_db_files(fx->path);
  free(fx);
  return 0;
}

static void
reopen(struct fx *fx)
{
  struct err e = {0};

  db_close(fx->db);
  fx->db = NULL;
  assert_int_equal(db_open(fx->path, &fx->db, &e), 0);
}

static sqlite3 *
raw_open(const char *path)
{
  sqlite3 *h = NULL;

  assert_int_equal(sqlite3_open_v2(path, &h, SQLITE_OPEN_READWRITE, NULL),
                   SQLITE_OK);
  sqlite3_busy_timeout(h, 5000);
  return h;
}

/* First column of the first row of sql as an integer (-1 when none). */
static int64_t
raw_int(sqlite3 *h, const char *sql)
{
  sqlite3_stmt *st = NULL;
  int64_t v = -1;

  assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
  if (sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

/* First column of the first row of sql as new text ("(none)" if none). */
static char *
raw_text(sqlite3 *h, const char *sql)
{
  sqlite3_stmt *st = NULL;
  const unsigned char *t = NULL;
  char *v;

  assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
  if (sqlite3_step(st) == SQLITE_ROW)
    t = sqlite3_column_text(st, 0);
  v = strdup(t != NULL ? (const char *)t : "(none)");
  sqlite3_finalize(st);
  assert_non_null(v);
  return v;
}

static void
raw_exec(sqlite3 *h, const char *sql)
{
  assert_int_equal(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
}

/* A job pointing at string literals (never released). */
static struct db_job
job(const char *name, const char *project, const char *site,
    enum job_state state, int hold)
{
  struct db_job j;

  db_job_init(&j);
  j.name = (char *)name;
  j.project = (char *)project;
  j.site = (char *)site;
  j.spec_json = (char *)"{}";
  j.state = state;
  j.hold = hold;
  j.gpus = 1;
  j.created_ms = 1000;
  j.updated_ms = 1000;
  return j;
}

static int64_t
insert(struct db *db, const char *name, const char *project,
       const char *site, enum job_state state, int hold)
{
  struct db_job j = job(name, project, site, state, hold);
  struct err e = {0};

  assert_int_equal(db_job_insert(db, &j, &e), 0);
  assert_true(j.id > 0);
  return j.id;
}

struct ids {
  int64_t v[MAX_IDS];
  size_t n;
  int stop_after; /* return 7 once this many rows were seen (0: never) */
};

static int
collect_cb(const struct db_job *j, void *arg)
{
  struct ids *ids = arg;

  assert_true(ids->n < MAX_IDS);
  ids->v[ids->n++] = j->id;
  if (ids->stop_after > 0 && (int)ids->n == ids->stop_after)
    return 7;
  return 0;
}

static void
list_ids(struct db *db, const struct db_job_filter *f, struct ids *out)
{
  struct err e = {0};

  out->n = 0;
  out->stop_after = 0;
  assert_int_equal(db_job_list(db, f, collect_cb, out, &e), 0);
}

static int
str_in(const char *s, char *const *v)
{
  size_t i;

  for (i = 0; v[i] != NULL; i++) {
    if (strcmp(v[i], s) == 0)
      return 1;
  }
  return 0;
}

static int
str_eq(const char *a, const char *b)
{
  if (a == NULL || b == NULL)
    return a == b;
  return strcmp(a, b) == 0;
}

/* ---- migrations ---- */

static void
test_fresh_open_migrates_to_the_latest_version(void **state)
{
  struct fx *fx = *state;
  sqlite3 *h = raw_open(fx->path);
  char *mode = raw_text(h, "PRAGMA journal_mode");

  assert_true(db__migration_count >= 1);
  assert_int_equal(db_schema_version(fx->db), (int)db__migration_count);
  assert_int_equal(raw_int(h, "PRAGMA user_version"),
                   (int64_t)db__migration_count);
  assert_string_equal(mode, "wal");
  assert_int_equal(raw_int(h, "SELECT count(*) FROM sqlite_schema WHERE "
                              "type = 'table' AND name IN ('jobs', "
                              "'job_events', 'placements', 'workloads', "
                              "'api_tokens', 'api_token_projects')"),
                   6);
  free(mode);
  sqlite3_close(h);
}

static void
test_connection_is_durable_and_checks_foreign_keys(void **state)
{
  struct fx *fx = *state;
  struct err e = {0};
  char v[32];

  assert_int_equal(db__setting(fx->db, "journal_mode", v, sizeof(v), &e), 0);
  assert_string_equal(v, "wal");
  assert_int_equal(db__setting(fx->db, "synchronous", v, sizeof(v), &e), 0);
  assert_string_equal(v, "2"); /* FULL */
  assert_int_equal(db__setting(fx->db, "foreign_keys", v, sizeof(v), &e), 0);
  assert_string_equal(v, "1");
  assert_int_equal(db__setting(fx->db, "busy_timeout", v, sizeof(v), &e), 0);
  assert_string_equal(v, "5000");
}

static void
test_open_in_a_missing_directory_fails_naming_the_path(void **state)
{
  struct db *db = NULL;
  struct err e = {0};
  char path[128];

  snprintf(path, sizeof(path), "%s/no/such/dir/x.db", tmpdir);
  assert_int_equal(db_open(path, &db, &e), ERR_DB);
  assert_null(db);
  assert_non_null(strstr(e.msg, path));
  assert_int_equal(db_open("", &db, &e), ERR_INVALID);
  db_close(NULL);
}

static void
test_reopen_is_idempotent_and_keeps_rows(void **state)
{
  struct fx *fx = *state;
  struct db_job got;
  struct err e = {0};
  int64_t id = insert(fx->db, "a", "p", NULL, JOB_QUEUED, 0);

  reopen(fx);
  reopen(fx);
  assert_int_equal(db_schema_version(fx->db), (int)db__migration_count);
  db_job_init(&got);
  assert_int_equal(db_job_get(fx->db, id, &got, &e), 0);
  assert_string_equal(got.name, "a");
  db_job_release(&got);
  /* The second job gets a new id: the schema was not re-created. */
  assert_true(insert(fx->db, "b", "p", NULL, JOB_QUEUED, 0) > id);
}

static void
test_newer_schema_version_is_refused_saying_so(void **state)
{
  struct fx *fx = *state;
  static char sentinel;
  struct db *db2 = (struct db *)(void *)&sentinel;
  struct err e = {0};
  char sql[64];
  sqlite3 *h;

  db_close(fx->db);
  fx->db = NULL;
  h = raw_open(fx->path);
  snprintf(sql, sizeof(sql), "PRAGMA user_version = %d",
           (int)db__migration_count + 1);
  raw_exec(h, sql);
  sqlite3_close(h);

  assert_int_equal(db_open(fx->path, &db2, &e), ERR_DB);
  assert_null(db2);
  assert_int_equal(e.code, ERR_DB);
  assert_non_null(strstr(e.msg, "newer"));
  assert_non_null(strstr(e.msg, fx->path));

  /* The file was left alone. */
  h = raw_open(fx->path);
  assert_int_equal(raw_int(h, "PRAGMA user_version"),
                   (int64_t)db__migration_count + 1);
  sqlite3_close(h);
}

static void
test_migrations_with_a_gap_or_a_duplicate_are_refused(void **state)
{
  static const struct db_migration ok[] = {
    {1, "001_a", "CREATE TABLE a (x);"}, {2, "002_b", "CREATE TABLE b (x);"}};
  static const struct db_migration dup[] = {
    {1, "001_a", "CREATE TABLE a (x);"},
    {2, "002_b", "CREATE TABLE b (x);"},
    {2, "002_c", "CREATE TABLE c (x);"}};
  static const struct db_migration gap[] = {
    {1, "001_a", "CREATE TABLE a (x);"}, {3, "003_c", "CREATE TABLE c (x);"}};
  static const struct db_migration late[] = {
    {2, "002_b", "CREATE TABLE b (x);"}};
  struct err e = {0};
  sqlite3 *h = NULL;
  int version = -1;

  assert_int_equal(db__migrations_check(ok, 2, &e), 0);
  assert_int_equal(db__migrations_check(db__migrations, db__migration_count,
                                        &e),
                   0);
  assert_int_equal(db__migrations_check(dup, 3, &e), ERR_INTERNAL);
  assert_non_null(strstr(e.msg, "'002_c'"));
  assert_non_null(strstr(e.msg, "duplicates"));
  assert_int_equal(db__migrations_check(gap, 2, &e), ERR_INTERNAL);
  assert_non_null(strstr(e.msg, "'003_c'"));
  assert_non_null(strstr(e.msg, "gap"));
  assert_int_equal(db__migrations_check(late, 1, &e), ERR_INTERNAL);

  /* The migrator refuses before touching the database. */
  assert_int_equal(sqlite3_open(":memory:", &h), SQLITE_OK);
  assert_int_equal(db__migrate_with(h, gap, 2, &version, &e), ERR_INTERNAL);
  assert_int_equal(raw_int(h, "PRAGMA user_version"), 0);
  assert_int_equal(raw_int(h, "SELECT count(*) FROM sqlite_schema"), 0);
  sqlite3_close(h);
}

static void
test_failed_migration_leaves_the_previous_version_intact(void **state)
{
  static const struct db_migration bad[] = {
    {1, "001_a", "CREATE TABLE a (x);"},
    {2, "002_b", "CREATE TABLE b (x); INSERT INTO nosuch VALUES (1);"}};
  static const struct db_migration good[] = {
    {1, "001_a", "CREATE TABLE a (x);"},
    {2, "002_b", "CREATE TABLE b (x); INSERT INTO b VALUES (1);"}};
  char path[PATH_MAX];
  struct err e = {0};
  sqlite3 *h = NULL;
  int version = -1;

  new_path(path, sizeof(path));
  assert_int_equal(sqlite3_open(path, &h), SQLITE_OK);
  assert_int_equal(db__migrate_with(h, bad, 2, &version, &e), ERR_DB);
  assert_non_null(strstr(e.msg, "migration '002_b'"));
  assert_non_null(strstr(e.msg, "nosuch"));
  assert_int_equal(version, 1);
  assert_int_equal(raw_int(h, "PRAGMA user_version"), 1);
  assert_int_equal(raw_int(h, "SELECT count(*) FROM sqlite_schema "
                              "WHERE name = 'a'"),
                   1);
  /* Migration 2 is all or nothing: its CREATE TABLE was rolled back. */
  assert_int_equal(raw_int(h, "SELECT count(*) FROM sqlite_schema "
                              "WHERE name = 'b'"),
                   0);

  assert_int_equal(db__migrate_with(h, good, 2, &version, &e), 0);
  assert_int_equal(version, 2);
  assert_int_equal(raw_int(h, "SELECT count(*) FROM b"), 1);
  /* Applied once: running it again changes nothing. */
  assert_int_equal(db__migrate_with(h, good, 2, &version, &e), 0);
  assert_int_equal(raw_int(h, "SELECT count(*) FROM b"), 1);
  sqlite3_close(h);
  remove_db_files(path);
}

/*
 * A database left at version 2 (001 + 002) by an older tenbind, with
 * jobs, their events and placements, and an AUTOINCREMENT high-water
 * mark above the newest id (a job was deleted).
 */
static void
make_version_2(const char *path)
{
  sqlite3 *h = NULL;
  struct err e = {0};
  int version = -1;

  assert_int_equal(sqlite3_open(path, &h), SQLITE_OK);
  raw_exec(h, "PRAGMA foreign_keys = ON");
  assert_int_equal(db__migrate_with(h, db__migrations, 2, &version, &e), 0);
  assert_int_equal(version, 2);
  raw_exec(h, "INSERT INTO jobs (state, name, project, spec_json, gpus, "
              "hold, idem_key, created_ms, updated_ms) VALUES "
              "('running', 'a', 'p', '{}', 2, 0, 'k1', 1, 1), "
              "('queued', 'b', 'p', '{}', 0, 1, NULL, 2, 2), "
              "('succeeded', 'c', 'q', '{}', 1, 0, NULL, 3, 3), "
              "('lost', 'd', 'q', '{}', 1, 0, NULL, 4, 4)");
  raw_exec(h, "INSERT INTO job_events (job_id, at_ms, from_state, "
              "to_state, detail) VALUES (1, 1, NULL, 'queued', 'x'), "
              "(1, 2, 'queued', 'running', NULL), (2, 2, NULL, 'queued', "
              "NULL), (3, 3, NULL, 'queued', NULL), (4, 4, NULL, 'queued', "
              "NULL)");
  raw_exec(h, "INSERT INTO placements (job_id, at_ms, verdict, site) "
              "VALUES (1, 1, 'now', 'local'), (3, 3, 'now', 'local')");
  /* Job 5 existed once: its id must never come back. */
  raw_exec(h, "INSERT INTO jobs (id, state, name, project, spec_json, "
              "gpus, created_ms, updated_ms) VALUES (5, 'failed', 'e', "
              "'p', '{}', 0, 5, 5)");
  raw_exec(h, "DELETE FROM jobs WHERE id = 5");
  sqlite3_close(h);
}

static void
test_migration_3_keeps_jobs_events_placements_and_foreign_keys(
    void **state)
{
  char path[PATH_MAX];
  struct db *db = NULL;
  struct db_job j;
  struct err e = {0};
  sqlite3 *h;
  int64_t id;

  (void)state;
  new_path(path, sizeof(path));
  make_version_2(path);
  assert_int_equal(db_open(path, &db, &e), 0);
  assert_int_equal(db_schema_version(db), (int)db__migration_count);

  h = raw_open(path);
  raw_exec(h, "PRAGMA foreign_keys = ON");
  assert_int_equal(raw_int(h, "SELECT count(*) FROM jobs"), 4);
  assert_int_equal(raw_int(h, "SELECT count(*) FROM job_events"), 5);
  assert_int_equal(raw_int(h, "SELECT count(*) FROM placements"), 2);
  assert_int_equal(raw_int(h, "SELECT count(*) FROM pragma_foreign_key_"
                              "check"),
                   0);
  /* Rows came across whole. */
  db_job_init(&j);
  assert_int_equal(db_job_get(db, 1, &j, &e), 0);
  assert_int_equal(j.state, JOB_RUNNING);
  assert_int_equal(j.gpus, 2);
  assert_string_equal(j.idem_key, "k1");
  db_job_release(&j);
  assert_int_equal(db_job_get(db, 2, &j, &e), 0);
  assert_int_equal(j.hold, 1);
  db_job_release(&j);
  /* The indexes are back (the unique key among them). */
  assert_int_equal(raw_int(h, "SELECT count(*) FROM sqlite_schema WHERE "
                              "type = 'index' AND tbl_name = 'jobs' AND "
                              "name IN ('jobs_idem', 'jobs_runnable', "
                              "'jobs_active', 'jobs_project', "
                              "'jobs_state', 'jobs_site_state')"),
                   6);
  j = job("dup", "p", NULL, JOB_QUEUED, 0);
  j.idem_key = (char *)"k1";
  assert_int_equal(db_job_insert(db, &j, &e), ERR_CONFLICT);
  /* The new state is allowed, and ids continue past the deleted 5. */
  id = insert(db, "s", "p", "aws", JOB_STAGING, 0);
  assert_int_equal(id, 6);
  /* job_events and placements still reference the (new) jobs table: a
   * delete cascades, an orphan is refused. */
  raw_exec(h, "DELETE FROM jobs WHERE id = 1");
  assert_int_equal(raw_int(h, "SELECT count(*) FROM job_events WHERE "
                              "job_id = 1"),
                   0);
  assert_int_equal(raw_int(h, "SELECT count(*) FROM placements WHERE "
                              "job_id = 1"),
                   0);
  assert_int_equal(raw_int(h, "SELECT count(*) FROM job_events"), 3);
  assert_int_not_equal(sqlite3_exec(h, "INSERT INTO job_events (job_id, "
                                       "at_ms, to_state) VALUES (99, 1, "
                                       "'queued')",
                                    NULL, NULL, NULL),
                       SQLITE_OK);
  sqlite3_close(h);
  db_close(db);
  remove_db_files(path);
}

/*
 * A database at version 3 with a dataset, a replica 003 marked failed
 * for being superseded, one that really failed, and one complete.
 */
static void
make_version_3(const char *path)
{
  sqlite3 *h = NULL;
  struct err e = {0};
  int version = -1;

  assert_int_equal(sqlite3_open(path, &h), SQLITE_OK);
  raw_exec(h, "PRAGMA foreign_keys = ON");
  assert_int_equal(db__migrate_with(h, db__migrations, 3, &version, &e), 0);
  assert_int_equal(version, 3);
  raw_exec(h, "INSERT INTO datasets (name, source_site, path, created_ms) "
              "VALUES ('c4', 'src', 'c4', 1)");
  raw_exec(h, "INSERT INTO dataset_versions (dataset, version, files, "
              "bytes, created_ms, published_ms) VALUES "
              "('c4', 'a', 1, 10, 1, 1), ('c4', 'b', 1, 10, 2, 2)");
  raw_exec(h, "INSERT INTO replicas (dataset, version, site, state, "
              "bytes_wire, error, path, updated_ms) VALUES "
              "('c4', 'a', 'src', 'failed', 0, 'superseded at the source "
              "by version bbbb (its files changed)', '/d/c4', 3), "
              "('c4', 'a', 'aws', 'failed', 7, 'disk full', NULL, 3), "
              "('c4', 'b', 'src', 'complete', 0, NULL, '/d/c4', 3)");
  sqlite3_close(h);
}

static void
test_migration_4_marks_superseded_replicas_and_leaves_datasets_admin_only(
    void **state)
{
  char path[PATH_MAX];
  struct db *db = NULL;
  struct db_replica r;
  struct db_dataset d;
  struct err e = {0};
  sqlite3 *h;

  (void)state;
  new_path(path, sizeof(path));
  make_version_3(path);
  assert_int_equal(db_open(path, &db, &e), 0);
  assert_int_equal(db_schema_version(db), (int)db__migration_count);
  assert_int_equal(db_replica_get(db, "c4", "a", "src", &r, &e), 0);
  assert_string_equal(db_replica_state_name(r.state), "superseded");
  assert_non_null(strstr(r.error, "superseded"));
  db_replica_release(&r);
  /* A real failure stays one, with its counters. */
  assert_int_equal(db_replica_get(db, "c4", "a", "aws", &r, &e), 0);
  assert_int_equal(r.state, DB_REPLICA_FAILED);
  assert_int_equal(r.bytes_wire, 7);
  assert_string_equal(r.error, "disk full");
  assert_int_equal(r.next_try_ms, 0);
  db_replica_release(&r);
  assert_int_equal(db_replica_get(db, "c4", "b", "src", &r, &e), 0);
  assert_int_equal(r.state, DB_REPLICA_COMPLETE);
  db_replica_release(&r);
  /* A dataset from before projects has none: admins only. */
  assert_int_equal(db_dataset_get(db, "c4", &d, &e), 0);
  assert_null(d.project);
  db_dataset_release(&d);
  h = raw_open(path);
  raw_exec(h, "PRAGMA foreign_keys = ON");
  assert_int_equal(raw_int(h, "SELECT count(*) FROM pragma_foreign_key_"
                              "check"),
                   0);
  assert_int_equal(raw_int(h, "SELECT count(*) FROM sqlite_schema WHERE "
                              "type = 'index' AND name = "
                              "'replicas_active'"),
                   1);
  /* Deleting a version still cascades into its replicas. */
  raw_exec(h, "DELETE FROM dataset_versions WHERE version = 'a'");
  assert_int_equal(raw_int(h, "SELECT count(*) FROM replicas"), 1);
  sqlite3_close(h);
  db_close(db);
  remove_db_files(path);
}

static void
test_migration_leaving_a_dangling_foreign_key_is_rolled_back(void **state)
{
  static const struct db_migration m[] = {
    {1, "001_a", "CREATE TABLE p (id INTEGER PRIMARY KEY);"
                 "CREATE TABLE c (pid INTEGER REFERENCES p(id));"},
    {2, "002_b", "INSERT INTO c VALUES (42);"}};
  char path[PATH_MAX];
  struct err e = {0};
  sqlite3 *h = NULL;
  int version = -1;

  (void)state;
  new_path(path, sizeof(path));
  assert_int_equal(sqlite3_open(path, &h), SQLITE_OK);
  raw_exec(h, "PRAGMA foreign_keys = ON");
  assert_int_equal(db__migrate_with(h, m, 2, &version, &e), ERR_DB);
  assert_non_null(strstr(e.msg, "migration '002_b'"));
  assert_non_null(strstr(e.msg, "'c'"));
  assert_int_equal(version, 1);
  assert_int_equal(raw_int(h, "SELECT count(*) FROM c"), 0);
  /* Enforcement is back on for the connection afterwards. */
  assert_int_equal(raw_int(h, "PRAGMA foreign_keys"), 1);
  sqlite3_close(h);
  remove_db_files(path);
}

/* Opcodes of EXPLAIN sql that are OpenEphemeral (a b-tree built while
 * the statement runs). */
static int64_t
ephemeral_tables(sqlite3 *h, const char *sql)
{
  sqlite3_stmt *st = NULL;
  char text[1024];
  int64_t n = 0;

  snprintf(text, sizeof(text), "EXPLAIN %s", sql);
  assert_int_equal(sqlite3_prepare_v2(h, text, -1, &st, NULL), SQLITE_OK);
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (strcmp((const char *)sqlite3_column_text(st, 1), "OpenEphemeral") ==
        0)
      n++;
  }
  sqlite3_finalize(st);
  return n;
}

static void
test_writing_jobs_and_replicas_builds_no_ephemeral_table(void **state)
{
  struct fx *fx = *state;
  sqlite3 *h = raw_open(fx->path);

  /* The CHECKs and partial index WHEREs are OR chains: an IN list would
   * build a b-tree on every write (001_init's did, twice per insert). */
  assert_int_equal(ephemeral_tables(h, "INSERT INTO jobs (state, name, "
                                       "project, spec_json, gpus, hold, "
                                       "created_ms, updated_ms) VALUES "
                                       "(?, ?, ?, ?, ?, ?, ?, ?)"),
                   0);
  assert_int_equal(ephemeral_tables(h, "UPDATE jobs SET state = ?2, "
                                       "hold = ?3 WHERE id = ?1"),
                   0);
  assert_int_equal(ephemeral_tables(h, "INSERT INTO replicas (dataset, "
                                       "version, site, state, updated_ms) "
                                       "VALUES (?, ?, ?, ?, ?)"),
                   0);
  assert_int_equal(ephemeral_tables(h, "INSERT INTO transfers (dataset, "
                                       "version, from_site, to_site, "
                                       "state, started_ms) VALUES (?, ?, "
                                       "?, ?, ?, ?)"),
                   0);
  sqlite3_close(h);
}

/* ---- jobs ---- */

static void
test_job_round_trip_keeps_strings_verbatim(void **state)
{
  struct fx *fx = *state;
  struct db_job j;
  struct db_job got;
  struct err e = {0};

  db_job_init(&j);
  j.state = JOB_RUNNING;
  j.name = (char *)"it's a \"job\"; --";
  j.project = (char *)"'; DROP TABLE jobs; --";
  j.workload = (char *)"ワークロード ✓ 🚀";
  j.site = (char *)"site\\with\\backslashes %s %n";
  j.spec_json = (char *)"{\"argv\":[\"echo\",\"a'b\\\"c\"],\"x\":\"\\u00e9\"}";
  j.gpus = 4096;
  j.gpu_type = (char *)"";
  j.hold = 1;
  j.idem_key = (char *)"owner:key with ' and \"";
  j.idem_hash = (char *)"0123abcd";
  j.remote_id = (char *)"12345";
  j.alloc = (char *)"0,1";
  j.reason = (char *)"line one\nline two\ttab";
  j.log_path = (char *)"/var/log/é/out.log";
  j.exit_code = 3;
  j.signal = 9;
  j.created_ms = INT64_C(1700000000123);
  j.updated_ms = INT64_C(1700000000456);
  j.started_ms = INT64_C(1700000000789);
  j.ended_ms = INT64_MAX;
  assert_int_equal(db_job_insert(fx->db, &j, &e), 0);

  db_job_init(&got);
  assert_int_equal(db_job_get(fx->db, j.id, &got, &e), 0);
  assert_int_equal(got.id, j.id);
  assert_int_equal(got.state, JOB_RUNNING);
  assert_string_equal(got.name, j.name);
  assert_string_equal(got.project, j.project);
  assert_string_equal(got.workload, j.workload);
  assert_string_equal(got.site, j.site);
  assert_string_equal(got.spec_json, j.spec_json);
  assert_int_equal(got.gpus, 4096);
  assert_non_null(got.gpu_type);
  assert_string_equal(got.gpu_type, "");
  assert_int_equal(got.hold, 1);
  assert_string_equal(got.idem_key, j.idem_key);
  assert_string_equal(got.idem_hash, j.idem_hash);
  assert_string_equal(got.remote_id, j.remote_id);
  assert_string_equal(got.alloc, j.alloc);
  assert_string_equal(got.reason, j.reason);
  assert_string_equal(got.log_path, j.log_path);
  assert_int_equal(got.exit_code, 3);
  assert_int_equal(got.signal, 9);
  assert_int_equal(got.created_ms, j.created_ms);
  assert_int_equal(got.updated_ms, j.updated_ms);
  assert_int_equal(got.started_ms, j.started_ms);
  assert_int_equal(got.ended_ms, INT64_MAX);
  /* Filling an already filled struct frees what it held (no leak). */
  assert_int_equal(db_job_get(fx->db, j.id, &got, &e), 0);
  db_job_release(&got);
  assert_null(got.name);

  /* The injection-looking project is only data: it lists as such. */
  {
    struct db_job_filter f = {.project = j.project, .limit = 10};
    struct ids ids;

    list_ids(fx->db, &f, &ids);
    assert_int_equal(ids.n, 1);
    assert_int_equal(ids.v[0], j.id);
  }
}

static void
test_unset_optional_fields_stay_null(void **state)
{
  struct fx *fx = *state;
  struct db_job got;
  struct err e = {0};
  int64_t id = insert(fx->db, "n", "p", NULL, JOB_QUEUED, 0);

  db_job_init(&got);
  assert_int_equal(db_job_get(fx->db, id, &got, &e), 0);
  assert_null(got.workload);
  assert_null(got.site);
  assert_null(got.gpu_type);
  assert_null(got.idem_key);
  assert_null(got.idem_hash);
  assert_null(got.remote_id);
  assert_null(got.alloc);
  assert_null(got.reason);
  assert_null(got.log_path);
  assert_int_equal(got.exit_code, -1);
  assert_int_equal(got.signal, 0);
  assert_int_equal(got.started_ms, 0);
  assert_int_equal(got.ended_ms, 0);
  db_job_release(&got);
}

static void
test_every_job_state_is_stored_and_read_back(void **state)
{
  struct fx *fx = *state;
  struct db_job got;
  struct err e = {0};
  int s;

  db_job_init(&got);
  for (s = 0; s < JOB_STATE_COUNT; s++) {
    int64_t id = insert(fx->db, "s", "p", NULL, (enum job_state)s, 0);

    assert_int_equal(db_job_get(fx->db, id, &got, &e), 0);
    assert_int_equal(got.state, s);
    db_job_release(&got);
  }
}

static void
test_stored_state_names_are_job_state_name(void **state)
{
  struct fx *fx = *state;
  sqlite3 *h = raw_open(fx->path);
  char sql[96];
  char *stored;
  int s;

  for (s = 0; s < JOB_STATE_COUNT; s++) {
    int64_t id = insert(fx->db, "s", "p", NULL, (enum job_state)s, 0);

    snprintf(sql, sizeof(sql), "SELECT state FROM jobs WHERE id = %" PRId64,
             id);
    stored = raw_text(h, sql);
    assert_string_equal(stored, job_state_name((enum job_state)s));
    free(stored);
  }
  sqlite3_close(h);
}

static void
test_job_with_an_unknown_state_or_no_name_is_invalid(void **state)
{
  struct fx *fx = *state;
  struct db_job j = job("x", "p", NULL, JOB_QUEUED, 0);
  struct err e = {0};

  j.state = JOB_STATE_COUNT;
  assert_int_equal(db_job_insert(fx->db, &j, &e), ERR_INVALID);
  j.state = JOB_QUEUED;
  j.name = NULL;
  assert_int_equal(db_job_insert(fx->db, &j, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "jobs.name"));
  j.name = (char *)"x";
  j.gpus = -1;
  assert_int_equal(db_job_insert(fx->db, &j, &e), ERR_INVALID);
}

static void
test_job_update_writes_back_only_the_mutable_columns(void **state)
{
  struct fx *fx = *state;
  struct db_job j = job("orig", "proj", NULL, JOB_QUEUED, 1);
  struct db_job got;
  struct err e = {0};

  assert_int_equal(db_job_insert(fx->db, &j, &e), 0);
  j.state = JOB_FAILED;
  j.site = (char *)"aws's \"site\"";
  j.remote_id = (char *)"r-1";
  j.alloc = (char *)"2,3";
  j.reason = (char *)"'; DELETE FROM jobs; --";
  j.log_path = (char *)"/tmp/x.log";
  j.exit_code = 137;
  j.signal = 9;
  j.hold = 0;
  j.updated_ms = 2000;
  j.started_ms = 1500;
  j.ended_ms = 2000;
  /* Immutable: must not be written. */
  j.name = (char *)"changed";
  j.project = (char *)"changed";
  j.gpus = 99;
  assert_int_equal(db_job_update(fx->db, &j, &e), 0);

  db_job_init(&got);
  assert_int_equal(db_job_get(fx->db, j.id, &got, &e), 0);
  assert_int_equal(got.state, JOB_FAILED);
  assert_string_equal(got.site, j.site);
  assert_string_equal(got.remote_id, "r-1");
  assert_string_equal(got.alloc, "2,3");
  assert_string_equal(got.reason, j.reason);
  assert_string_equal(got.log_path, "/tmp/x.log");
  assert_int_equal(got.exit_code, 137);
  assert_int_equal(got.signal, 9);
  assert_int_equal(got.hold, 0);
  assert_int_equal(got.updated_ms, 2000);
  assert_int_equal(got.started_ms, 1500);
  assert_int_equal(got.ended_ms, 2000);
  assert_string_equal(got.name, "orig");
  assert_string_equal(got.project, "proj");
  assert_int_equal(got.gpus, 1);
  assert_int_equal(got.created_ms, 1000);
  db_job_release(&got);

  /* Back to NULL. */
  j.site = NULL;
  j.reason = NULL;
  assert_int_equal(db_job_update(fx->db, &j, &e), 0);
  assert_int_equal(db_job_get(fx->db, j.id, &got, &e), 0);
  assert_null(got.site);
  assert_null(got.reason);
  db_job_release(&got);
}

static void
test_missing_job_is_not_found_naming_its_id(void **state)
{
  struct fx *fx = *state;
  struct db_job j = job("x", "p", NULL, JOB_QUEUED, 0);
  struct db_job got;
  struct err e = {0};

  db_job_init(&got);
  assert_int_equal(db_job_get(fx->db, 424242, &got, &e), ERR_NOT_FOUND);
  assert_string_equal(e.msg, "job 424242 not found");
  assert_null(got.name);
  j.id = 42;
  assert_int_equal(db_job_update(fx->db, &j, &e), ERR_NOT_FOUND);
  assert_string_equal(e.msg, "job 42 not found");
}

static void
test_duplicate_idem_key_conflicts_and_get_by_idem_finds_the_first(
    void **state)
{
  struct fx *fx = *state;
  struct db_job a = job("first", "p", NULL, JOB_QUEUED, 0);
  struct db_job b = job("second", "p", NULL, JOB_QUEUED, 0);
  struct db_job got;
  struct err e = {0};

  a.idem_key = (char *)"tok1:k'1";
  b.idem_key = (char *)"tok1:k'1";
  assert_int_equal(db_job_insert(fx->db, &a, &e), 0);
  assert_int_equal(db_job_insert(fx->db, &b, &e), ERR_CONFLICT);
  assert_non_null(strstr(e.msg, "'tok1:k'1'"));

  db_job_init(&got);
  assert_int_equal(db_job_get_by_idem(fx->db, "tok1:k'1", &got, &e), 0);
  assert_int_equal(got.id, a.id);
  assert_string_equal(got.name, "first");
  db_job_release(&got);
  assert_int_equal(db_job_get_by_idem(fx->db, "tok1:other", &got, &e),
                   ERR_NOT_FOUND);
  assert_non_null(strstr(e.msg, "'tok1:other'"));

  /* Jobs without a key never collide. */
  insert(fx->db, "nokey1", "p", NULL, JOB_QUEUED, 0);
  insert(fx->db, "nokey2", "p", NULL, JOB_QUEUED, 0);
  /* The key is scoped by the caller, so another owner may reuse it. */
  b.idem_key = (char *)"tok2:k'1";
  assert_int_equal(db_job_insert(fx->db, &b, &e), 0);
}

/* The data set for the list and count tests. */
#define NJOBS 60
static const char *const projects[] = {"alpha", "beta", "gamma"};
static const char *const sites[] = {"local", "aws", NULL};

struct dataset {
  int64_t id[NJOBS];
  const char *project[NJOBS];
  const char *site[NJOBS];
  enum job_state state[NJOBS];
  int hold[NJOBS];
};

static void
fill(struct db *db, struct dataset *ds)
{
  struct err e = {0};
  int i;

  assert_int_equal(db_begin(db, &e), 0);
  for (i = 0; i < NJOBS; i++) {
    ds->project[i] = projects[i % 3];
    ds->site[i] = sites[(i / 3) % 3];
    ds->state[i] = (enum job_state)((i * 5) % JOB_STATE_COUNT);
    ds->hold[i] = ds->state[i] == JOB_QUEUED && i % 4 == 0;
    ds->id[i] = insert(db, "j", ds->project[i], ds->site[i], ds->state[i],
                       ds->hold[i]);
  }
  assert_int_equal(db_commit(db, &e), 0);
}

static const char *const state_str[JOB_STATE_COUNT] = {
  "queued", "placed", "submitted", "running",
  "succeeded", "failed", "cancelled", "lost", "staging"};

static int
matches(const struct dataset *ds, int i, const struct db_job_filter *f)
{
  if (f->state != NULL && strcmp(f->state, state_str[ds->state[i]]) != 0)
    return 0;
  if (f->project != NULL && strcmp(f->project, ds->project[i]) != 0)
    return 0;
  if (f->site != NULL && !str_eq(f->site, ds->site[i]))
    return 0;
  if (f->site != NULL && ds->site[i] == NULL)
    return 0;
  if (f->projects != NULL && !str_in(ds->project[i], f->projects))
    return 0;
  if (f->before_id > 0 && ds->id[i] >= f->before_id)
    return 0;
  return 1;
}

static void
check_filter(struct db *db, const struct dataset *ds,
             struct db_job_filter f)
{
  struct ids got;
  size_t n = 0;
  int i;

  f.limit = 1000;
  list_ids(db, &f, &got);
  for (i = NJOBS - 1; i >= 0; i--) {
    if (!matches(ds, i, &f))
      continue;
    assert_true(n < got.n);
    assert_int_equal(got.v[n], ds->id[i]);
    n++;
  }
  assert_int_equal(got.n, n);
}

static void
test_list_filters_select_exactly_the_matching_jobs_newest_first(
    void **state)
{
  struct fx *fx = *state;
  struct dataset ds;
  char *ag[] = {(char *)"alpha", (char *)"gamma", NULL};
  char *b[] = {(char *)"beta", NULL};
  char *quote[] = {(char *)"al\"pha", (char *)"x\\y", NULL};
  char *none[] = {NULL};
  struct ids got;

  fill(fx->db, &ds);
  check_filter(fx->db, &ds, (struct db_job_filter){0});
  check_filter(fx->db, &ds, (struct db_job_filter){.state = "queued"});
  check_filter(fx->db, &ds, (struct db_job_filter){.state = "lost"});
  check_filter(fx->db, &ds, (struct db_job_filter){.project = "beta"});
  check_filter(fx->db, &ds, (struct db_job_filter){.site = "aws"});
  check_filter(fx->db, &ds, (struct db_job_filter){.projects = ag});
  check_filter(fx->db, &ds, (struct db_job_filter){.projects = b});
  check_filter(fx->db, &ds,
               (struct db_job_filter){.state = "running", .project = "gamma"});
  check_filter(fx->db, &ds,
               (struct db_job_filter){.state = "placed", .site = "local"});
  check_filter(fx->db, &ds,
               (struct db_job_filter){.project = "beta", .projects = ag});
  check_filter(fx->db, &ds,
               (struct db_job_filter){.project = "alpha", .projects = ag,
                                      .site = "local", .state = "queued"});
  check_filter(fx->db, &ds,
               (struct db_job_filter){.projects = ag, .before_id = ds.id[30]});
  check_filter(fx->db, &ds, (struct db_job_filter){.site = "nowhere"});
  /* Quotes and backslashes in the allow-list reach json_each intact. */
  check_filter(fx->db, &ds, (struct db_job_filter){.projects = quote});
  insert(fx->db, "q", "al\"pha", NULL, JOB_QUEUED, 0);
  insert(fx->db, "q", "x\\y", NULL, JOB_QUEUED, 0);
  list_ids(fx->db, &(struct db_job_filter){.projects = quote, .limit = 10},
           &got);
  assert_int_equal(got.n, 2);

  /* An empty allow-list is a scope with no project: nothing, not all. */
  list_ids(fx->db, &(struct db_job_filter){.projects = none, .limit = 100},
           &got);
  assert_int_equal(got.n, 0);
}

static void
test_cursor_pagination_covers_every_row_exactly_once(void **state)
{
  struct fx *fx = *state;
  struct dataset ds;
  char *scope[] = {(char *)"alpha", (char *)"beta", NULL};
  const struct db_job_filter filters[] = {
    {.limit = 7},
    {.limit = 1},
    {.limit = 5, .project = "gamma"},
    {.limit = 4, .projects = scope},
    {.limit = 3, .state = "queued"},
  };
  size_t k;

  fill(fx->db, &ds);
  for (k = 0; k < sizeof(filters) / sizeof(filters[0]); k++) {
    struct db_job_filter f = filters[k];
    struct ids page;
    int64_t seen[NJOBS];
    size_t nseen = 0;
    size_t i;
    int j;

    for (;;) {
      list_ids(fx->db, &f, &page);
      assert_true(page.n <= (size_t)f.limit);
      for (i = 0; i < page.n; i++) {
        assert_true(nseen < NJOBS);
        /* Strictly descending across pages: no row twice. */
        if (nseen > 0)
          assert_true(page.v[i] < seen[nseen - 1]);
        seen[nseen++] = page.v[i];
      }
      if (page.n < (size_t)f.limit)
        break;
      f.before_id = page.v[page.n - 1];
    }
    /* ... and every matching row once. */
    f.before_id = 0;
    i = 0;
    for (j = NJOBS - 1; j >= 0; j--) {
      if (!matches(&ds, j, &f))
        continue;
      assert_true(i < nseen);
      assert_int_equal(seen[i], ds.id[j]);
      i++;
    }
    assert_int_equal(i, nseen);
  }
}

static void
test_list_limit_outside_1_to_1000_is_invalid(void **state)
{
  struct fx *fx = *state;
  struct ids got = {.n = 0};
  struct err e = {0};
  const int bad[] = {0, -1, 1001, INT_MAX};
  size_t i;

  insert(fx->db, "a", "p", NULL, JOB_QUEUED, 0);
  for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    struct db_job_filter f = {.limit = bad[i]};

    assert_int_equal(db_job_list(fx->db, &f, collect_cb, &got, &e),
                     ERR_INVALID);
    assert_non_null(strstr(e.msg, "limit"));
  }
  assert_int_equal(got.n, 0);
  assert_int_equal(db_job_list(fx->db,
                               &(struct db_job_filter){.limit = 1000},
                               collect_cb, &got, &e),
                   0);
  assert_int_equal(got.n, 1);
  assert_int_equal(db_job_list(fx->db,
                               &(struct db_job_filter){.limit = 5,
                                                       .state = "bogus"},
                               collect_cb, &got, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "'bogus'"));
  assert_int_equal(db_job_list(fx->db,
                               &(struct db_job_filter){.limit = 5,
                                                       .before_id = -3},
                               collect_cb, &got, &e),
                   ERR_INVALID);
}

static void
test_list_callback_stops_early_with_its_value(void **state)
{
  struct fx *fx = *state;
  struct db_job_filter f = {.limit = 100};
  struct ids got = {.n = 0, .stop_after = 2};
  struct err e = {0};
  int i;

  for (i = 0; i < 5; i++)
    insert(fx->db, "a", "p", NULL, JOB_QUEUED, 0);
  assert_int_equal(db_job_list(fx->db, &f, collect_cb, &got, &e), 7);
  assert_int_equal(got.n, 2);
  got = (struct ids){.n = 0, .stop_after = 1};
  assert_int_equal(db_job_list_active(fx->db, 1, collect_cb, &got, &e), 7);
  got = (struct ids){.n = 0, .stop_after = 1};
  assert_int_equal(db_job_list_runnable(fx->db, 10, collect_cb, &got, &e),
                   7);
  /* The statements were reset: a full list works afterwards. */
  list_ids(fx->db, &f, &got);
  assert_int_equal(got.n, 5);
}

struct reenter {
  struct db *db;
  int inner;     /* result of the nested call */
  int got_name;  /* the nested db_job_get found the row */
};

static int
reenter_cb(const struct db_job *j, void *arg)
{
  struct reenter *r = arg;
  struct db_job_filter f = {.limit = 10};
  struct ids ids = {.n = 0};
  struct db_job got;
  struct err e = {0};

  r->inner = db_job_list(r->db, &f, collect_cb, &ids, &e);
  db_job_init(&got);
  /* Another statement is fine, and the borrowed row is still intact. */
  if (db_job_get(r->db, j->id, &got, &e) == 0)
    r->got_name = strcmp(got.name, j->name) == 0;
  db_job_release(&got);
  return 1;
}

static void
test_list_callback_may_not_reenter_its_own_list(void **state)
{
  struct fx *fx = *state;
  struct reenter r = {.db = fx->db};
  struct db_job_filter f = {.limit = 10};
  struct err e = {0};

  insert(fx->db, "a'b", "p", NULL, JOB_QUEUED, 0);
  assert_int_equal(db_job_list(fx->db, &f, reenter_cb, &r, &e), 1);
  assert_int_equal(r.inner, ERR_INTERNAL);
  assert_int_equal(r.got_name, 1);
}

static void
test_runnable_scan_is_oldest_first_and_skips_held_and_non_queued(
    void **state)
{
  struct fx *fx = *state;
  struct ids got = {.n = 0};
  struct err e = {0};
  int64_t q1 = insert(fx->db, "q1", "p", NULL, JOB_QUEUED, 0);
  int64_t held = insert(fx->db, "held", "p", NULL, JOB_QUEUED, 1);
  int64_t q2;
  int64_t q3;
  struct db_job j;

  insert(fx->db, "running", "p", "local", JOB_RUNNING, 0);
  q2 = insert(fx->db, "q2", "p", NULL, JOB_QUEUED, 0);
  insert(fx->db, "placed", "p", "local", JOB_PLACED, 0);
  insert(fx->db, "done", "p", "local", JOB_SUCCEEDED, 0);
  q3 = insert(fx->db, "q3", "p", NULL, JOB_QUEUED, 0);

  assert_int_equal(db_job_list_runnable(fx->db, 100, collect_cb, &got, &e),
                   0);
  assert_int_equal(got.n, 3);
  assert_int_equal(got.v[0], q1);
  assert_int_equal(got.v[1], q2);
  assert_int_equal(got.v[2], q3);

  got.n = 0;
  assert_int_equal(db_job_list_runnable(fx->db, 2, collect_cb, &got, &e), 0);
  assert_int_equal(got.n, 2);
  assert_int_equal(got.v[1], q2);
  assert_int_equal(db_job_list_runnable(fx->db, 0, collect_cb, &got, &e),
                   ERR_INVALID);

  /* Releasing the hold makes it runnable in its place by age. */
  j = job("held", "p", NULL, JOB_QUEUED, 0);
  j.id = held;
  assert_int_equal(db_job_update(fx->db, &j, &e), 0);
  got.n = 0;
  assert_int_equal(db_job_list_runnable(fx->db, 100, collect_cb, &got, &e),
                   0);
  assert_int_equal(got.n, 4);
  assert_int_equal(got.v[1], held);
}

static void
test_active_list_is_oldest_first_with_held_only_when_asked(void **state)
{
  struct fx *fx = *state;
  struct ids got = {.n = 0};
  struct err e = {0};
  int64_t want[JOB_STATE_COUNT];
  size_t nwant = 0;
  int64_t held;
  int s;

  for (s = JOB_STATE_COUNT - 1; s >= 0; s--) {
    int64_t id = insert(fx->db, "a", "p", "local", (enum job_state)s, 0);

    if (!job_state_is_final((enum job_state)s))
      want[nwant++] = id;
  }
  held = insert(fx->db, "h", "p", NULL, JOB_QUEUED, 1);

  assert_int_equal(db_job_list_active(fx->db, 0, collect_cb, &got, &e), 0);
  assert_int_equal(got.n, nwant);
  assert_memory_equal(got.v, want, nwant * sizeof(want[0]));

  got.n = 0;
  assert_int_equal(db_job_list_active(fx->db, 1, collect_cb, &got, &e), 0);
  assert_int_equal(got.n, nwant + 1);
  assert_memory_equal(got.v, want, nwant * sizeof(want[0]));
  assert_int_equal(got.v[nwant], held);
}

/* ---- events ---- */

struct events {
  int64_t id[8];
  char *to[8];
  char *from[8];
  char *detail[8];
  int64_t at[8];
  size_t n;
};

static char *
dup_or_null(const char *s)
{
  return s != NULL ? strdup(s) : NULL;
}

static int
event_cb(const struct db_event *ev, void *arg)
{
  struct events *evs = arg;

  assert_true(evs->n < 8);
  evs->id[evs->n] = ev->id;
  evs->at[evs->n] = ev->at_ms;
  evs->from[evs->n] = dup_or_null(ev->from_state);
  evs->to[evs->n] = dup_or_null(ev->to_state);
  evs->detail[evs->n] = dup_or_null(ev->detail);
  evs->n++;
  return 0;
}

static void
events_free(struct events *evs)
{
  size_t i;

  for (i = 0; i < evs->n; i++) {
    free(evs->from[i]);
    free(evs->to[i]);
    free(evs->detail[i]);
  }
  evs->n = 0;
}

static void
test_events_are_listed_in_order_per_job(void **state)
{
  struct fx *fx = *state;
  struct events evs = {.n = 0};
  struct err e = {0};
  int64_t a = insert(fx->db, "a", "p", NULL, JOB_QUEUED, 0);
  int64_t b = insert(fx->db, "b", "p", NULL, JOB_QUEUED, 0);

  assert_int_equal(db_event_append(fx->db, a, 10, NULL, "queued",
                                   "submitted by 'tok'", &e),
                   0);
  assert_int_equal(db_event_append(fx->db, b, 11, NULL, "queued", NULL, &e),
                   0);
  assert_int_equal(db_event_append(fx->db, a, 12, "queued", "placed",
                                   "site \"local\"; ✓", &e),
                   0);
  assert_int_equal(db_event_append(fx->db, a, 12, "placed", "running", NULL,
                                   &e),
                   0);

  assert_int_equal(db_event_list(fx->db, a, event_cb, &evs, &e), 0);
  assert_int_equal(evs.n, 3);
  assert_true(evs.id[0] < evs.id[1] && evs.id[1] < evs.id[2]);
  assert_null(evs.from[0]);
  assert_string_equal(evs.to[0], "queued");
  assert_string_equal(evs.detail[0], "submitted by 'tok'");
  assert_int_equal(evs.at[0], 10);
  assert_string_equal(evs.from[1], "queued");
  assert_string_equal(evs.to[1], "placed");
  assert_string_equal(evs.detail[1], "site \"local\"; ✓");
  assert_string_equal(evs.to[2], "running");
  assert_null(evs.detail[2]);
  events_free(&evs);

  assert_int_equal(db_event_list(fx->db, b, event_cb, &evs, &e), 0);
  assert_int_equal(evs.n, 1);
  events_free(&evs);
  assert_int_equal(db_event_list(fx->db, 999, event_cb, &evs, &e), 0);
  assert_int_equal(evs.n, 0);

  assert_int_equal(db_event_append(fx->db, 999, 1, NULL, "queued", NULL, &e),
                   ERR_NOT_FOUND);
  assert_string_equal(e.msg, "job 999 not found");
}

/* ---- placements ---- */

static int
placement_line(const struct db_placement *p, void *arg)
{
  snprintf(arg, 256, "%s|%s|%lld|%lld|%s|%s", p->verdict,
           p->site ? p->site : "-", (long long)p->at_ms,
           (long long)p->start_ms, p->reason ? p->reason : "-",
           p->candidates);
  return 0;
}

static void
test_placement_put_replaces_the_previous_decision(void **state)
{
  struct fx *fx = *state;
  struct err e = {0};
  int64_t id = insert(fx->db, "a", "p", NULL, JOB_QUEUED, 0);
  struct db_placement p = {id, 100, "wait", NULL, 5000, "aws is full",
                           "[{\"site\":\"aws\",\"why\":\"it's full\"}]"};
  char line[256] = "";
  int found = 1;

  assert_int_equal(db_placement_get(fx->db, id, placement_line, line,
                                    &found, &e), 0);
  assert_false(found);
  assert_int_equal(db_placement_put(fx->db, &p, &e), 0);
  assert_int_equal(db_placement_get(fx->db, id, placement_line, line,
                                    &found, &e), 0);
  assert_true(found);
  assert_string_equal(line, "wait|-|100|5000|aws is full|"
                            "[{\"site\":\"aws\",\"why\":\"it's full\"}]");
  p = (struct db_placement){id, 200, "now", "local", 0, NULL,
                            "[{\"site\":\"local\"}]"};
  assert_int_equal(db_placement_put(fx->db, &p, &e), 0);
  assert_int_equal(db_placement_get(fx->db, id, placement_line, line,
                                    &found, &e), 0);
  assert_string_equal(line, "now|local|200|0|-|[{\"site\":\"local\"}]");

  p = (struct db_placement){id, 300, "maybe", NULL, 0, NULL, "[]"};
  assert_int_equal(db_placement_put(fx->db, &p, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "'maybe'"));
  p = (struct db_placement){777, 300, "never", NULL, 0, NULL, "[]"};
  assert_int_equal(db_placement_put(fx->db, &p, &e), ERR_NOT_FOUND);
  assert_string_equal(e.msg, "job 777 not found");
}

/* ---- workloads ---- */

struct names {
  char *name[8];
  char *json[8];
  size_t n;
};

static int
workload_cb(const char *name, const char *json, void *arg)
{
  struct names *w = arg;

  assert_true(w->n < 8);
  w->name[w->n] = strdup(name);
  w->json[w->n] = strdup(json);
  w->n++;
  return 0;
}

static void
test_workloads_put_replace_get_and_list(void **state)
{
  struct fx *fx = *state;
  struct names w = {.n = 0};
  struct err e = {0};
  char *json = NULL;
  int created = -1;
  size_t i;

  assert_int_equal(db_workload_put(fx->db, "train", "{\"v\":1}", 10,
                                   &created, &e),
                   0);
  assert_int_equal(created, 1);
  assert_int_equal(db_workload_put(fx->db, "train", "{\"v\":2}", 20,
                                   &created, &e),
                   0);
  assert_int_equal(created, 0);
  assert_int_equal(db_workload_put(fx->db, "a'; DROP TABLE workloads; --",
                                   "{\"q\":\"\\\"'\"}", 30, NULL, &e),
                   0);
  assert_int_equal(db_workload_put(fx->db, "éval", "{}", 40, &created, &e),
                   0);
  assert_int_equal(created, 1);

  assert_int_equal(db_workload_get(fx->db, "train", &json, &e), 0);
  assert_string_equal(json, "{\"v\":2}");
  free(json);
  assert_int_equal(db_workload_get(fx->db, "a'; DROP TABLE workloads; --",
                                   &json, &e),
                   0);
  assert_string_equal(json, "{\"q\":\"\\\"'\"}");
  free(json);
  json = (char *)"sentinel";
  assert_int_equal(db_workload_get(fx->db, "nope", &json, &e),
                   ERR_NOT_FOUND);
  assert_null(json);
  assert_string_equal(e.msg, "workload 'nope' not found");

  assert_int_equal(db_workload_list(fx->db, workload_cb, &w, &e), 0);
  assert_int_equal(w.n, 3);
  /* By name (byte order). */
  assert_string_equal(w.name[0], "a'; DROP TABLE workloads; --");
  assert_string_equal(w.name[1], "train");
  assert_string_equal(w.json[1], "{\"v\":2}");
  assert_string_equal(w.name[2], "éval");
  for (i = 0; i < w.n; i++) {
    free(w.name[i]);
    free(w.json[i]);
  }
}

/* ---- tokens ---- */

static void
test_tokens_insert_and_find_with_and_without_projects(void **state)
{
  struct fx *fx = *state;
  char *scope[] = {(char *)"beta", (char *)"al'pha", (char *)"beta", NULL};
  char *empty[] = {NULL};
  struct db_token t;
  struct err e = {0};
  int64_t id1 = 0;
  int64_t id2 = 0;
  int64_t id3 = 0;
  int64_t n = -1;

  assert_int_equal(db_token_count(fx->db, &n, &e), 0);
  assert_int_equal(n, 0);
  assert_int_equal(db_token_insert(fx->db, "hash1", "ci's token", "admin",
                                   NULL, 100, &id1, &e),
                   0);
  assert_int_equal(db_token_insert(fx->db, "hash2", NULL, "viewer", scope,
                                   200, &id2, &e),
                   0);
  assert_int_equal(db_token_insert(fx->db, "hash3", "none", "submitter",
                                   empty, 300, &id3, &e),
                   0);
  assert_true(id1 > 0 && id2 > id1 && id3 > id2);

  assert_int_equal(db_token_find(fx->db, "hash1", &t, &e), 0);
  assert_int_equal(t.id, id1);
  assert_string_equal(t.name, "ci's token");
  assert_string_equal(t.role, "admin");
  assert_null(t.projects);
  assert_int_equal(t.created_ms, 100);
  db_token_release(&t);

  assert_int_equal(db_token_find(fx->db, "hash2", &t, &e), 0);
  assert_int_equal(t.id, id2);
  assert_null(t.name);
  assert_string_equal(t.role, "viewer");
  assert_non_null(t.projects);
  assert_string_equal(t.projects[0], "al'pha");
  assert_string_equal(t.projects[1], "beta");
  assert_null(t.projects[2]);
  db_token_release(&t);

  /* An empty scope stays empty: it must not read as every project. */
  assert_int_equal(db_token_find(fx->db, "hash3", &t, &e), 0);
  assert_non_null(t.projects);
  assert_null(t.projects[0]);
  db_token_release(&t);

  assert_int_equal(db_token_find(fx->db, "nope", &t, &e), ERR_NOT_FOUND);
  assert_null(t.role);
  assert_int_equal(db_token_count(fx->db, &n, &e), 0);
  assert_int_equal(n, 3);
}

static void
test_token_insert_failure_stores_nothing_and_spares_the_transaction(
    void **state)
{
  struct fx *fx = *state;
  char *scope[] = {(char *)"p", NULL};
  struct db_token t;
  struct err e = {0};
  int64_t n = -1;

  assert_int_equal(db_begin(fx->db, &e), 0);
  assert_int_equal(db_token_insert(fx->db, "h1", "a", "admin", NULL, 1,
                                   NULL, &e),
                   0);
  assert_int_equal(db_token_insert(fx->db, "h2", "b", "root", scope, 1,
                                   NULL, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "'root'"));
  assert_int_equal(db_token_insert(fx->db, "h1", "c", "viewer", scope, 1,
                                   NULL, &e),
                   ERR_CONFLICT);
  assert_int_equal(db_commit(fx->db, &e), 0);

  assert_int_equal(db_token_count(fx->db, &n, &e), 0);
  assert_int_equal(n, 1);
  assert_int_equal(db_token_find(fx->db, "h1", &t, &e), 0);
  assert_string_equal(t.name, "a");
  assert_null(t.projects);
  db_token_release(&t);
  assert_int_equal(db_token_find(fx->db, "h2", &t, &e), ERR_NOT_FOUND);
}

/* ---- counts ---- */

struct counts {
  int64_t n[3][JOB_STATE_COUNT]; /* by site index in sites[] */
  int rows;
};

static void
count_cb(const char *site, enum job_state st, int64_t count, void *arg)
{
  struct counts *c = arg;
  int s;

  for (s = 0; s < 3; s++) {
    if (str_eq(site, sites[s] != NULL ? sites[s] : ""))
      break;
  }
  assert_true(s < 3);
  assert_int_equal(c->n[s][st], 0);
  c->n[s][st] = count;
  c->rows++;
}

static void
test_counts_group_by_site_and_state(void **state)
{
  struct fx *fx = *state;
  struct dataset ds;
  struct counts got;
  struct counts want;
  struct err e = {0};
  int i;
  int s;

  memset(&got, 0, sizeof(got));
  memset(&want, 0, sizeof(want));
  assert_int_equal(db_job_counts(fx->db, count_cb, &got, &e), 0);
  assert_int_equal(got.rows, 0);

  fill(fx->db, &ds);
  for (i = 0; i < NJOBS; i++) {
    for (s = 0; s < 3; s++) {
      if (str_eq(ds.site[i], sites[s]))
        break;
    }
    want.n[s][ds.state[i]]++;
  }
  assert_int_equal(db_job_counts(fx->db, count_cb, &got, &e), 0);
  assert_memory_equal(got.n, want.n, sizeof(want.n));
}

/* A row the reader refuses (a state this build does not know, written
 * past the CHECK by another program) stops every reader in the middle,
 * reports ERR_DB naming it, and leaves the statements reusable. */
static void
test_a_bad_row_stops_a_list_midway_and_reports_it(void **state)
{
  struct fx *fx = *state;
  struct db_job_filter f = {.limit = 100};
  struct ids got = {.n = 0};
  struct counts counted;
  struct db_job j;
  struct err e = {0};
  sqlite3 *h;
  int64_t bad;

  insert(fx->db, "a", "p", NULL, JOB_QUEUED, 0);
  bad = insert(fx->db, "b", "p", NULL, JOB_QUEUED, 0);
  insert(fx->db, "c", "p", NULL, JOB_QUEUED, 0);
  h = raw_open(fx->path);
  raw_exec(h, "PRAGMA ignore_check_constraints = ON");
  raw_exec(h, "UPDATE jobs SET state = 'zombie' WHERE name = 'b'");
  sqlite3_close(h);

  /* Newest first: "c" is handed over, then "b" stops the list. */
  assert_int_equal(db_job_list(fx->db, &f, collect_cb, &got, &e), ERR_DB);
  assert_int_equal(got.n, 1);
  assert_non_null(strstr(e.msg, "unknown state 'zombie'"));

  /* Counts come by (site, state): "queued" is handed over first. */
  memset(&counted, 0, sizeof(counted));
  e = (struct err){0};
  assert_int_equal(db_job_counts(fx->db, count_cb, &counted, &e), ERR_DB);
  assert_int_equal(counted.rows, 1);
  assert_non_null(strstr(e.msg, "unknown state 'zombie'"));

  /* A single read refuses it too, and leaves nothing to release. */
  db_job_init(&j);
  e = (struct err){0};
  assert_int_equal(db_job_get(fx->db, bad, &j, &e), ERR_DB);
  assert_null(j.name);

  /* The statements were reset: the good rows still read. */
  assert_int_equal(db_job_get(fx->db, bad + 1, &j, &e), 0);
  assert_string_equal(j.name, "c");
  db_job_release(&j);
  got.n = 0;
  f.before_id = bad;
  assert_int_equal(db_job_list(fx->db, &f, collect_cb, &got, &e), 0);
  assert_int_equal(got.n, 1);
}

/* ---- transactions ---- */

static void
test_committed_batch_survives_reopen_and_rolled_back_one_does_not(
    void **state)
{
  struct fx *fx = *state;
  struct db_job_filter f = {.limit = 1000};
  struct ids got;
  struct err e = {0};
  int64_t last = 0;
  int i;

  assert_int_equal(db_begin(fx->db, &e), 0);
  assert_int_equal(db_begin(fx->db, &e), ERR_INTERNAL);
  for (i = 0; i < 100; i++)
    last = insert(fx->db, "kept", "p", NULL, JOB_QUEUED, 0);
  assert_int_equal(db_event_append(fx->db, last, 1, NULL, "queued", NULL,
                                   &e),
                   0);
  assert_int_equal(db_commit(fx->db, &e), 0);

  assert_int_equal(db_begin(fx->db, &e), 0);
  for (i = 0; i < 50; i++)
    insert(fx->db, "dropped", "p", NULL, JOB_QUEUED, 0);
  assert_int_equal(db_workload_put(fx->db, "w", "{}", 1, NULL, &e), 0);
  db_rollback(fx->db);
  db_rollback(fx->db); /* nothing open: a no-op */
  assert_int_equal(db_commit(fx->db, &e), ERR_INTERNAL);

  /* An open transaction at close is rolled back too. */
  assert_int_equal(db_begin(fx->db, &e), 0);
  insert(fx->db, "dropped", "p", NULL, JOB_QUEUED, 0);
  reopen(fx);

  list_ids(fx->db, &f, &got);
  assert_int_equal(got.n, 100);
  assert_int_equal(got.v[0], last);
  assert_int_equal(db_workload_get(fx->db, "w", &(char *){NULL}, &e),
                   ERR_NOT_FOUND);
  /* AUTOINCREMENT: ids of rolled-back rows may be skipped, never reused
   * below the kept ones. */
  assert_true(insert(fx->db, "next", "p", NULL, JOB_QUEUED, 0) > last);
}

static void
test_second_handle_sees_commits_of_the_first(void **state)
{
  struct fx *fx = *state;
  struct db *other = NULL;
  struct db_job got;
  struct err e = {0};
  int64_t id;
  int64_t n = -1;

  assert_int_equal(db_open(fx->path, &other, &e), 0);
  id = insert(fx->db, "a", "p", NULL, JOB_QUEUED, 0);
  assert_int_equal(db_token_insert(other, "h", NULL, "admin", NULL, 1, NULL,
                                   &e),
                   0);
  db_job_init(&got);
  assert_int_equal(db_job_get(other, id, &got, &e), 0);
  db_job_release(&got);
  assert_int_equal(db_token_count(fx->db, &n, &e), 0);
  assert_int_equal(n, 1);
  db_close(other);
}

/* ---- datasets ---- */

#define VA "aaaa000000000000000000000000000000000000000000000000000000000000"
#define VB "bbbb000000000000000000000000000000000000000000000000000000000000"

static void
put_version(struct db *db, const char *dataset, const char *v,
            int64_t published_ms, int *created)
{
  struct db_dataset_version dv = {
      .dataset = (char *)dataset, .version = (char *)v, .files = 2,
      .bytes = 100, .created_ms = published_ms,
      .published_ms = published_ms};
  struct err e = {0};

  if (db_dataset_version_put(db, &dv, created, &e) < 0)
    fail_msg("version put: %s", e.msg);
}

static void
add_dataset(struct db *db, const char *name)
{
  struct db_dataset d = {.name = (char *)name, .source_site = (char *)"src",
                         .path = (char *)"data/x", .created_ms = 10};
  struct err e = {0};

  assert_int_equal(db_dataset_insert(db, &d, &e), 0);
}

static int
count_dataset_cb(const struct db_dataset *d, void *arg)
{
  char *names = arg;
  size_t used = strlen(names);

  snprintf(names + used, 64 - used, "%s ", d->name);
  return 0;
}

static void
test_datasets_insert_get_list_and_refuse_a_duplicate(void **state)
{
  struct fx *fx = *state;
  struct db_dataset d = {.name = (char *)"imagenet",
                         .source_site = (char *)"onprem",
                         .path = (char *)"sets/imagenet", .created_ms = 7};
  struct db_dataset got;
  struct err e = {0};
  char names[64] = "";

  assert_int_equal(db_dataset_insert(fx->db, &d, &e), 0);
  assert_int_equal(db_dataset_insert(fx->db, &d, &e), ERR_CONFLICT);
  assert_string_equal(e.msg, "dataset 'imagenet' already exists");
  add_dataset(fx->db, "c4");
  assert_int_equal(db_dataset_get(fx->db, "imagenet", &got, &e), 0);
  assert_string_equal(got.source_site, "onprem");
  assert_string_equal(got.path, "sets/imagenet");
  assert_int_equal(got.created_ms, 7);
  db_dataset_release(&got);
  assert_int_equal(db_dataset_get(fx->db, "nope", &got, &e), ERR_NOT_FOUND);
  assert_string_equal(e.msg, "dataset 'nope' not found");
  assert_int_equal(db_dataset_list(fx->db, count_dataset_cb, names, &e), 0);
  assert_string_equal(names, "c4 imagenet ");
}

static void
test_latest_version_is_the_one_published_last(void **state)
{
  struct fx *fx = *state;
  struct db_dataset_version v;
  struct err e = {0};
  int created = -1;

  add_dataset(fx->db, "c4");
  assert_int_equal(db_dataset_version_latest(fx->db, "c4", &v, &e),
                   ERR_NOT_FOUND);
  assert_non_null(strstr(e.msg, "no published version"));
  put_version(fx->db, "c4", VA, 100, &created);
  assert_int_equal(created, 1);
  put_version(fx->db, "c4", VB, 200, &created);
  assert_int_equal(created, 1);
  assert_int_equal(db_dataset_version_latest(fx->db, "c4", &v, &e), 0);
  assert_string_equal(v.version, VB);
  db_dataset_version_release(&v);
  /* The source went back to the content of VA: it is latest again, and
   * keeps its first creation time. */
  put_version(fx->db, "c4", VA, 300, &created);
  assert_int_equal(created, 0);
  assert_int_equal(db_dataset_version_latest(fx->db, "c4", &v, &e), 0);
  assert_string_equal(v.version, VA);
  assert_int_equal(v.created_ms, 100);
  assert_int_equal(v.published_ms, 300);
  db_dataset_version_release(&v);
  assert_int_equal(db_dataset_version_get(fx->db, "c4", VB, &v, &e), 0);
  assert_int_equal(v.files, 2);
  assert_int_equal(v.bytes, 100);
  db_dataset_version_release(&v);
  assert_int_equal(db_dataset_version_get(fx->db, "c4", "ffff", &v, &e),
                   ERR_NOT_FOUND);
  /* A version of a dataset that does not exist is refused. */
  {
    struct db_dataset_version dv = {.dataset = (char *)"ghost",
                                    .version = (char *)VA};

    assert_int_equal(db_dataset_version_put(fx->db, &dv, NULL, &e),
                     ERR_NOT_FOUND);
    assert_string_equal(e.msg, "dataset 'ghost' not found");
  }
}

struct text {
  char text[512];
};

static int
version_name_cb(const struct db_dataset_version *v, void *arg)
{
  struct text *n = arg;
  size_t used = strlen(n->text);

  snprintf(n->text + used, sizeof(n->text) - used, "%.4s ", v->version);
  return 0;
}

static int
replica_name_cb(const struct db_replica *r, void *arg)
{
  struct text *n = arg;
  size_t used = strlen(n->text);

  snprintf(n->text + used, sizeof(n->text) - used, "%.4s@%s:%s ",
           r->version, r->site, db_replica_state_name(r->state));
  return 0;
}

static int
transfer_name_cb(const struct db_transfer *t, void *arg)
{
  struct text *n = arg;
  size_t used = strlen(n->text);

  snprintf(n->text + used, sizeof(n->text) - used, "%lld:%s:%lld ",
           (long long)t->id, t->state, (long long)t->bytes_wire);
  return 0;
}

static struct db_replica
replica(const char *v, const char *site, enum db_replica_state st)
{
  struct db_replica r = {.dataset = (char *)"c4", .version = (char *)v,
                         .site = (char *)site, .state = st,
                         .updated_ms = 1};

  return r;
}

static void
test_publishing_supersedes_only_the_source_paths_other_versions(void **state)
{
  struct fx *fx = *state;
  struct db_replica r;
  struct db_replica got;
  struct err e = {0};

  add_dataset(fx->db, "c4");
  put_version(fx->db, "c4", VA, 100, NULL);
  put_version(fx->db, "c4", VB, 200, NULL);
  r = replica(VA, "src", DB_REPLICA_COMPLETE);
  r.path = (char *)"/data/c4";
  assert_int_equal(db_replica_put(fx->db, &r, &e), 0);
  r = replica(VA, "aws", DB_REPLICA_COMPLETE);
  r.path = (char *)"/agent/.tenbin/data/c4/aaaa";
  assert_int_equal(db_replica_put(fx->db, &r, &e), 0);
  r = replica(VB, "src", DB_REPLICA_COMPLETE);
  r.path = (char *)"/data/c4";
  assert_int_equal(db_replica_put(fx->db, &r, &e), 0);

  assert_int_equal(db_replica_supersede(fx->db, "c4", "src", "/data/c4", VB,
                                        9, &e), 0);
  assert_int_equal(db_replica_get(fx->db, "c4", VA, "src", &got, &e), 0);
  assert_int_equal(got.state, DB_REPLICA_SUPERSEDED);
  assert_string_equal(db_replica_state_name(got.state), "superseded");
  assert_non_null(strstr(got.error, "superseded"));
  db_replica_release(&got);
  /* The new version at the source and a real copy elsewhere stay. */
  assert_int_equal(db_replica_get(fx->db, "c4", VB, "src", &got, &e), 0);
  assert_int_equal(got.state, DB_REPLICA_COMPLETE);
  db_replica_release(&got);
  assert_int_equal(db_replica_get(fx->db, "c4", VA, "aws", &got, &e), 0);
  assert_int_equal(got.state, DB_REPLICA_COMPLETE);
  db_replica_release(&got);
}

static void
test_datasets_keep_their_project_and_replicas_their_next_try(void **state)
{
  struct fx *fx = *state;
  struct db_dataset d = {.name = (char *)"owned", .source_site = (char *)"src",
                         .path = (char *)"research/owned", .created_ms = 5,
                         .project = (char *)"research"};
  struct db_dataset got;
  struct db_replica r;
  struct db_replica rgot;
  struct err e = {0};

  assert_int_equal(db_dataset_insert(fx->db, &d, &e), 0);
  add_dataset(fx->db, "c4");
  assert_int_equal(db_dataset_get(fx->db, "owned", &got, &e), 0);
  assert_string_equal(got.project, "research");
  db_dataset_release(&got);
  assert_int_equal(db_dataset_get(fx->db, "c4", &got, &e), 0);
  assert_null(got.project);
  db_dataset_release(&got);
  put_version(fx->db, "c4", VA, 100, NULL);
  r = replica(VA, "aws", DB_REPLICA_PENDING);
  r.error = (char *)"agent down; trying again in 4 s";
  r.next_try_ms = 123456;
  assert_int_equal(db_replica_put(fx->db, &r, &e), 0);
  assert_int_equal(db_replica_get(fx->db, "c4", VA, "aws", &rgot, &e), 0);
  assert_int_equal(rgot.next_try_ms, 123456);
  assert_string_equal(rgot.error, "agent down; trying again in 4 s");
  db_replica_release(&rgot);
  r.next_try_ms = 0;
  r.error = NULL;
  assert_int_equal(db_replica_put(fx->db, &r, &e), 0);
  assert_int_equal(db_replica_get(fx->db, "c4", VA, "aws", &rgot, &e), 0);
  assert_int_equal(rgot.next_try_ms, 0);
  assert_null(rgot.error);
  db_replica_release(&rgot);
}

static void
test_replicas_put_get_list_and_active_list(void **state)
{
  struct fx *fx = *state;
  struct db_replica r;
  struct db_replica got;
  struct text n = {""};
  struct err e = {0};
  struct buf plan;

  add_dataset(fx->db, "c4");
  put_version(fx->db, "c4", VA, 100, NULL);
  put_version(fx->db, "c4", VB, 200, NULL);
  assert_int_equal(db_dataset_version_list(fx->db, "c4", version_name_cb,
                                           &n, &e),
                   0);
  assert_string_equal(n.text, "bbbb aaaa ");

  r = replica(VA, "src", DB_REPLICA_COMPLETE);
  r.path = (char *)"/data/c4";
  r.bytes_total = r.bytes_done = 100;
  assert_int_equal(db_replica_put(fx->db, &r, &e), 0);
  r = replica(VA, "aws", DB_REPLICA_PENDING);
  assert_int_equal(db_replica_put(fx->db, &r, &e), 0);
  r = replica(VB, "gcp", DB_REPLICA_SYNCING);
  assert_int_equal(db_replica_put(fx->db, &r, &e), 0);
  r = replica(VB, "azure", DB_REPLICA_FAILED);
  r.error = (char *)"disk full";
  assert_int_equal(db_replica_put(fx->db, &r, &e), 0);

  /* The put replaces a row: progress on the pending one. */
  r = replica(VA, "aws", DB_REPLICA_SYNCING);
  r.bytes_total = 100;
  r.bytes_done = 40;
  r.bytes_wire = 12;
  r.bytes_saved = 60;
  r.files_total = 2;
  r.files_done = 1;
  r.started_ms = 5;
  r.updated_ms = 6;
  assert_int_equal(db_replica_put(fx->db, &r, &e), 0);
  assert_int_equal(db_replica_get(fx->db, "c4", VA, "aws", &got, &e), 0);
  assert_int_equal(got.state, DB_REPLICA_SYNCING);
  assert_int_equal(got.bytes_done, 40);
  assert_int_equal(got.bytes_wire, 12);
  assert_int_equal(got.bytes_saved, 60);
  assert_int_equal(got.files_done, 1);
  assert_int_equal(got.started_ms, 5);
  assert_null(got.path);
  db_replica_release(&got);
  assert_int_equal(db_replica_get(fx->db, "c4", VA, "src", &got, &e), 0);
  assert_string_equal(got.path, "/data/c4");
  db_replica_release(&got);
  assert_int_equal(db_replica_get(fx->db, "c4", VB, "src", &got, &e),
                   ERR_NOT_FOUND);

  assert_int_equal(db_replica_list(fx->db, "c4", replica_name_cb, &n, &e),
                   0);
  assert_string_equal(n.text, "bbbb aaaa aaaa@aws:syncing "
                              "aaaa@src:complete bbbb@azure:failed "
                              "bbbb@gcp:syncing ");
  n.text[0] = '\0';
  assert_int_equal(db_replica_list_active(fx->db, replica_name_cb, &n, &e),
                   0);
  assert_string_equal(n.text, "aaaa@aws:syncing bbbb@gcp:syncing ");

  /* Only versions that exist may have replicas. */
  r = replica("cccc", "aws", DB_REPLICA_PENDING);
  assert_int_equal(db_replica_put(fx->db, &r, &e), ERR_NOT_FOUND);
  r = replica(VA, "aws", DB_REPLICA_STATE_COUNT);
  assert_int_equal(db_replica_put(fx->db, &r, &e), ERR_INVALID);

  buf_init(&plan, 1 << 16);
  assert_int_equal(db__plan_replicas_active(fx->db, &plan, &e), 0);
  if (strstr(buf_str(&plan), "USING INDEX replicas_active") == NULL)
    fail_msg("plan:\n%s", buf_str(&plan));
  buf_release(&plan);
}

static void
test_transfers_insert_update_find_running_and_list_newest_first(
    void **state)
{
  struct fx *fx = *state;
  struct db_transfer t = {.dataset = (char *)"c4", .version = (char *)VA,
                          .from_site = (char *)"src",
                          .to_site = (char *)"aws",
                          .state = (char *)"running", .started_ms = 10};
  struct db_transfer got;
  struct text n = {""};
  struct err e = {0};
  int64_t first;

  assert_int_equal(db_transfer_insert(fx->db, &t, &e), 0);
  first = t.id;
  t.bytes_wire = 500;
  t.state = (char *)"failed";
  t.error = (char *)"source gone";
  t.finished_ms = 20;
  assert_int_equal(db_transfer_update(fx->db, &t, &e), 0);
  assert_int_equal(db_transfer_running(fx->db, "c4", VA, "aws", &got, &e),
                   ERR_NOT_FOUND);

  t.state = (char *)"running";
  t.bytes_wire = 0;
  t.error = NULL;
  t.finished_ms = 0;
  assert_int_equal(db_transfer_insert(fx->db, &t, &e), 0);
  assert_true(t.id > first);
  assert_int_equal(db_transfer_running(fx->db, "c4", VA, "aws", &got, &e),
                   0);
  assert_int_equal(got.id, t.id);
  assert_string_equal(got.from_site, "src");
  db_transfer_release(&got);
  assert_int_equal(db_transfer_running(fx->db, "c4", VA, "gcp", &got, &e),
                   ERR_NOT_FOUND);

  assert_int_equal(db_transfer_list(fx->db, "c4", 10, transfer_name_cb, &n,
                                    &e),
                   0);
  snprintf(n.text + 200, 64, "%lld:running:0 %lld:failed:500 ",
           (long long)t.id, (long long)first);
  assert_string_equal(n.text, n.text + 200);
  n.text[0] = '\0';
  assert_int_equal(db_transfer_list(fx->db, "c4", 1, transfer_name_cb, &n,
                                    &e),
                   0);
  assert_non_null(strstr(n.text, ":running:"));
  t.id = 9999;
  assert_int_equal(db_transfer_update(fx->db, &t, &e), ERR_NOT_FOUND);
  t.state = (char *)"paused";
  assert_int_equal(db_transfer_insert(fx->db, &t, &e), ERR_INVALID);
}

/* ---- query plans ---- */

static void
plan_of_list(struct db *db, struct db_job_filter f, struct buf *out)
{
  struct err e = {0};

  f.limit = 10;
  buf_reset(out);
  assert_int_equal(db__plan_job_list(db, &f, out, &e), 0);
}

static void
plan_of(struct db *db, enum db_plan_query q, struct buf *out)
{
  struct err e = {0};

  buf_reset(out);
  assert_int_equal(db__plan(db, q, out, &e), 0);
}

static void
assert_plan(const struct buf *plan, const char *want, int sorts)
{
  if (strstr(buf_str(plan), want) == NULL)
    fail_msg("plan lacks '%s':\n%s", want, buf_str(plan));
  if (!sorts && strstr(buf_str(plan), "TEMP B-TREE") != NULL)
    fail_msg("plan sorts:\n%s", buf_str(plan));
}

static void
test_common_queries_use_an_index(void **state)
{
  struct fx *fx = *state;
  char *scope[] = {(char *)"a", (char *)"b", NULL};
  struct buf plan;

  buf_init(&plan, 1 << 16);
  plan_of(fx->db, DB_PLAN_JOB_GET, &plan);
  assert_plan(&plan, "USING INTEGER PRIMARY KEY", 0);
  plan_of(fx->db, DB_PLAN_BY_IDEM, &plan);
  assert_plan(&plan, "USING INDEX jobs_idem", 0);
  plan_of(fx->db, DB_PLAN_RUNNABLE, &plan);
  assert_plan(&plan, "USING INDEX jobs_runnable", 0);
  plan_of(fx->db, DB_PLAN_ACTIVE, &plan);
  assert_plan(&plan, "USING INDEX jobs_active", 0);
  plan_of(fx->db, DB_PLAN_COUNTS, &plan);
  assert_plan(&plan, "USING COVERING INDEX jobs_site_state", 0);
  plan_of(fx->db, DB_PLAN_EVENTS, &plan);
  assert_plan(&plan, "USING INDEX job_events_job", 0);

  /* Unfiltered: the table backwards from the cursor. */
  plan_of_list(fx->db, (struct db_job_filter){0}, &plan);
  assert_plan(&plan, "USING INTEGER PRIMARY KEY (rowid<?)", 0);
  plan_of_list(fx->db, (struct db_job_filter){.state = "running"}, &plan);
  assert_plan(&plan, "USING INDEX jobs_state (state=? AND rowid<?)", 0);
  plan_of_list(fx->db, (struct db_job_filter){.project = "a"}, &plan);
  assert_plan(&plan, "USING INDEX jobs_project (project=? AND rowid<?)", 0);
  plan_of_list(fx->db,
               (struct db_job_filter){.site = "aws", .state = "running"},
               &plan);
  assert_plan(&plan, "USING INDEX jobs_site_state (site=? AND state=?", 0);
  plan_of_list(fx->db, (struct db_job_filter){.site = "aws"}, &plan);
  assert_plan(&plan, "USING INDEX jobs_site_state (site=?", 1);
  plan_of_list(fx->db, (struct db_job_filter){.projects = scope}, &plan);
  assert_plan(&plan, "USING INDEX jobs_project (project=?", 1);
  plan_of_list(fx->db, (struct db_job_filter){.project = "a",
                                              .projects = scope},
               &plan);
  assert_plan(&plan, "USING INDEX jobs_project (project=?", 0);
  buf_release(&plan);
}

/* ---- prices ---- */

#define PRICE_LINES 2048

/* Appends "site/gpu_type/kind@from=rate(admin);" to arg (PRICE_LINES
 * bytes). */
static int
price_line(const struct db_price *p, void *arg)
{
  size_t n = strlen(arg);

  snprintf((char *)arg + n, PRICE_LINES - n, "%s/%s/%s@%lld=%lld%s;",
           p->site, p->gpu_type, p->kind, (long long)p->valid_from_ms,
           (long long)p->rate_micro, p->admin ? "(admin)" : "");
  return 0;
}

static void
test_prices_keep_every_period_and_list_those_in_force(void **state)
{
  struct fx *fx = *state;
  struct err e = {0};
  char out[PRICE_LINES] = "";
  int64_t rate = 0;
  int found = 1;
  struct db_price p = {"aws", "h100", "on_demand", 1000, 6880000, 0};

  assert_int_equal(db_price_last_config(fx->db, "aws", "h100", "on_demand",
                                        &rate, &found, &e), 0);
  assert_false(found);
  assert_int_equal(db_price_insert(fx->db, &p, &e), 0);
  p.valid_from_ms = 5000; /* an admin's change */
  p.rate_micro = 6500000;
  p.admin = 1;
  assert_int_equal(db_price_insert(fx->db, &p, &e), 0);
  p.valid_from_ms = 9000; /* the config stops giving one */
  p.rate_micro = DB_PRICE_WITHDRAWN;
  p.admin = 0;
  assert_int_equal(db_price_insert(fx->db, &p, &e), 0);
  p = (struct db_price){"onprem", "*", "sunk", 2000, 1905817, 0};
  assert_int_equal(db_price_insert(fx->db, &p, &e), 0);
  p.rate_micro = 1905818; /* the same millisecond replaces */
  assert_int_equal(db_price_insert(fx->db, &p, &e), 0);

  /* the newest config row, admin rows aside */
  assert_int_equal(db_price_last_config(fx->db, "aws", "h100", "on_demand",
                                        &rate, &found, &e), 0);
  assert_true(found);
  assert_int_equal(rate, DB_PRICE_WITHDRAWN);
  /* in force at a time: the newest row of each key from no later */
  assert_int_equal(db_price_current(fx->db, 6000, price_line, out, &e), 0);
  assert_string_equal(out, "aws/h100/on_demand@5000=6500000(admin);"
                           "onprem/*/sunk@2000=1905818;");
  out[0] = '\0';
  assert_int_equal(db_price_current(fx->db, 1500, price_line, out, &e), 0);
  assert_string_equal(out, "aws/h100/on_demand@1000=6880000;");
  /* every period, oldest first */
  out[0] = '\0';
  assert_int_equal(db_price_history(fx->db, "aws", "h100", "on_demand",
                                    price_line, out, &e), 0);
  assert_string_equal(out, "aws/h100/on_demand@1000=6880000;"
                           "aws/h100/on_demand@5000=6500000(admin);"
                           "aws/h100/on_demand@9000=-1;");
}

/* ---- the usage ledger ---- */

/* Appends "project/site/type/day:gpu_ms,jobs,billed,sunk,marginal,
 * egress_bytes,egress;" (keys not grouped by as "-") to arg. */
static int
sum_line(const struct db_usage_sum *l, void *arg)
{
  size_t n = strlen(arg);

  snprintf((char *)arg + n, PRICE_LINES - n,
           "%s/%s/%s/%s:%lld,%lld,%lld,%lld,%lld,%lld,%lld;",
           l->project ? l->project : "-", l->site ? l->site : "-",
           l->gpu_type ? l->gpu_type : "-", l->day ? l->day : "-",
           (long long)l->gpu_ms, (long long)l->jobs,
           (long long)l->billed_micro, (long long)l->sunk_micro,
           (long long)l->marginal_micro, (long long)l->egress_bytes,
           (long long)l->egress_micro);
  return 0;
}

static int
open_line(const struct db_usage *u, void *arg)
{
  size_t n = strlen(arg);

  snprintf((char *)arg + n, PRICE_LINES - n, "%lld@%lld+%lld;",
           (long long)u->job_id, (long long)u->from_ms,
           (long long)(u->to_ms - u->from_ms));
  return 0;
}

static struct db_usage
piece(int64_t from, int64_t to, const char *day, const char *project,
      const char *site, int64_t billed, int open, const char *outcome)
{
  return (struct db_usage){.from_ms = from, .to_ms = to,
                           .billed_ms = to - from, .open = open,
                           .day = day, .project = project, .site = site,
                           .gpu_type = "h100", .gpus = 2,
                           .kind = "on_demand", .billed_rate = 6880000,
                           .sunk_rate = DB_NO_RATE,
                           .marginal_rate = DB_NO_RATE,
                           .billed_micro = billed, .outcome = outcome};
}

static void
test_ledger_replaces_holds_whole_and_sums_them_by_any_grouping(
    void **state)
{
  struct fx *fx = *state;
  struct err e = {0};
  char out[PRICE_LINES] = "";
  char *scope[] = {(char *)"nlp", NULL};
  struct db_usage two[2] = {
      piece(100, 200, "2026-11-26", "vision", "aws", 10, 0, NULL),
      piece(200, 350, "2026-11-27", "vision", "aws", 15, 1, NULL)};
  struct db_usage nlp = piece(0, 50, "2026-11-27", "nlp", "gcp", 7, 0,
                              "failed");

  assert_int_equal(db_usage_replace(fx->db, 1, 100, two, 2, &e), 0);
  assert_int_equal(db_usage_replace(fx->db, 2, 0, &nlp, 1, &e), 0);
  assert_int_equal(db_usage_open(fx->db, NULL, open_line, out, &e), 0);
  assert_string_equal(out, "1@200+150;");
  /* the hold rewritten through later: its old pieces are gone */
  two[1].to_ms = 400;
  two[1].billed_micro = 20;
  two[1].open = 0;
  two[1].outcome = "succeeded";
  assert_int_equal(db_usage_replace(fx->db, 1, 100, two, 2, &e), 0);
  out[0] = '\0';
  assert_int_equal(db_usage_open(fx->db, NULL, open_line, out, &e), 0);
  assert_string_equal(out, "");
  assert_int_equal(db_egress_insert(fx->db,
                                    &(struct db_egress){9, 300, "2026-11-27",
                                                        "vision", "aws",
                                                        "gcp", "ds", 2000,
                                                        90000, 180},
                                    &e),
                   0);
  /* a second charge of the same transfer changes nothing */
  assert_int_equal(db_egress_insert(fx->db,
                                    &(struct db_egress){9, 300, "2026-11-27",
                                                        "vision", "aws",
                                                        "gcp", "ds", 2000,
                                                        90000, 180},
                                    &e),
                   0);
  /* by day: the hold begun on the 26th counts as a job that day */
  assert_int_equal(db_usage_report(fx->db, "2026-11-01", "2026-11-30",
                                   DB_BY_PROJECT | DB_BY_DAY, NULL,
                                   sum_line, out, &e), 0);
  assert_string_equal(out, "nlp/-/-/2026-11-27:100,1,7,0,0,0,0;"
                           "vision/-/-/2026-11-26:200,1,10,0,0,0,0;"
                           "vision/-/-/2026-11-27:400,0,20,0,0,2000,180;");
  /* a job counts where its hold began: once, whatever it spans */
  out[0] = '\0';
  assert_int_equal(db_usage_report(fx->db, "2026-11-01", "2026-11-30", 0,
                                   NULL, sum_line, out, &e), 0);
  assert_string_equal(out, "-/-/-/-:700,2,37,0,0,2000,180;");
  /* a day range, and a scope */
  out[0] = '\0';
  assert_int_equal(db_usage_report(fx->db, "2026-11-26", "2026-11-26",
                                   DB_BY_SITE, NULL, sum_line, out, &e), 0);
  assert_string_equal(out, "-/aws/-/-:200,1,10,0,0,0,0;");
  out[0] = '\0';
  assert_int_equal(db_usage_report(fx->db, "2026-11-01", "2026-11-30",
                                   DB_BY_PROJECT, scope, sum_line, out, &e),
                   0);
  assert_string_equal(out, "nlp/-/-/-:100,1,7,0,0,0,0;");
  /* the totals the triggers keep match, after the rewrite too */
  out[0] = '\0';
  assert_int_equal(db_usage_totals(fx->db, sum_line, out, &e), 0);
  assert_string_equal(out, "nlp/gcp/h100/-:100,0,7,0,0,0,0;"
                           "vision/aws//-:0,0,180,0,0,0,0;"
                           "vision/aws/h100/-:600,0,30,0,0,0,0;");
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(
        test_ledger_replaces_holds_whole_and_sums_them_by_any_grouping,
        setup, teardown),
    cmocka_unit_test_setup_teardown(
        test_fresh_open_migrates_to_the_latest_version, setup, teardown),
    cmocka_unit_test_setup_teardown(
        test_connection_is_durable_and_checks_foreign_keys, setup, teardown),
    cmocka_unit_test(test_open_in_a_missing_directory_fails_naming_the_path),
    cmocka_unit_test_setup_teardown(test_reopen_is_idempotent_and_keeps_rows,
                                    setup, teardown),
    cmocka_unit_test_setup_teardown(
        test_newer_schema_version_is_refused_saying_so, setup, teardown),
    cmocka_unit_test(test_migrations_with_a_gap_or_a_duplicate_are_refused),
    cmocka_unit_test(
        test_failed_migration_leaves_the_previous_version_intact),
    cmocka_unit_test(
        test_migration_3_keeps_jobs_events_placements_and_foreign_keys),
    cmocka_unit_test(
        test_migration_leaving_a_dangling_foreign_key_is_rolled_back),
    cmocka_unit_test_setup_teardown(
        test_writing_jobs_and_replicas_builds_no_ephemeral_table, setup,
        teardown),
    cmocka_unit_test_setup_teardown(
        test_job_round_trip_keeps_strings_verbatim, setup, teardown),
    cmocka_unit_test_setup_teardown(test_unset_optional_fields_stay_null,
                                    setup, teardown),
    cmocka_unit_test_setup_teardown(
        test_every_job_state_is_stored_and_read_back, setup, teardown),
    cmocka_unit_test_setup_teardown(
        test_stored_state_names_are_job_state_name, setup, teardown),
    cmocka_unit_test_setup_teardown(
        test_job_with_an_unknown_state_or_no_name_is_invalid, setup,
        teardown),
    cmocka_unit_test_setup_teardown(
        test_job_update_writes_back_only_the_mutable_columns, setup,
        teardown),
    cmocka_unit_test_setup_teardown(
        test_missing_job_is_not_found_naming_its_id, setup, teardown),
    cmocka_unit_test_setup_teardown(
        test_duplicate_idem_key_conflicts_and_get_by_idem_finds_the_first,
        setup, teardown),
    cmocka_unit_test_setup_teardown(
        test_list_filters_select_exactly_the_matching_jobs_newest_first,
        setup, teardown),
    cmocka_unit_test_setup_teardown(
        test_cursor_pagination_covers_every_row_exactly_once, setup,
        teardown),
    cmocka_unit_test_setup_teardown(
        test_list_limit_outside_1_to_1000_is_invalid, setup, teardown),
    cmocka_unit_test_setup_teardown(
        test_list_callback_stops_early_with_its_value, setup, teardown),
    cmocka_unit_test_setup_teardown(
        test_a_bad_row_stops_a_list_midway_and_reports_it, setup, teardown),
    cmocka_unit_test_setup_teardown(
        test_list_callback_may_not_reenter_its_own_list, setup, teardown),
    cmocka_unit_test_setup_teardown(
        test_runnable_scan_is_oldest_first_and_skips_held_and_non_queued,
        setup, teardown),
    cmocka_unit_test_setup_teardown(
        test_active_list_is_oldest_first_with_held_only_when_asked, setup,
        teardown),
    cmocka_unit_test_setup_teardown(test_events_are_listed_in_order_per_job,
                                    setup, teardown),
    cmocka_unit_test_setup_teardown(
        test_placement_put_replaces_the_previous_decision, setup, teardown),
    cmocka_unit_test_setup_teardown(test_workloads_put_replace_get_and_list,
                                    setup, teardown),
    cmocka_unit_test_setup_teardown(
        test_tokens_insert_and_find_with_and_without_projects, setup,
        teardown),
    cmocka_unit_test_setup_teardown(
        test_token_insert_failure_stores_nothing_and_spares_the_transaction,
        setup, teardown),
    cmocka_unit_test_setup_teardown(test_counts_group_by_site_and_state,
                                    setup, teardown),
    cmocka_unit_test_setup_teardown(
        test_committed_batch_survives_reopen_and_rolled_back_one_does_not,
        setup, teardown),
    cmocka_unit_test_setup_teardown(
        test_second_handle_sees_commits_of_the_first, setup, teardown),
    cmocka_unit_test_setup_teardown(
        test_datasets_insert_get_list_and_refuse_a_duplicate, setup,
        teardown),
    cmocka_unit_test_setup_teardown(
        test_latest_version_is_the_one_published_last, setup, teardown),
    cmocka_unit_test_setup_teardown(
        test_replicas_put_get_list_and_active_list, setup, teardown),
    cmocka_unit_test_setup_teardown(
        test_publishing_supersedes_only_the_source_paths_other_versions,
        setup, teardown),
    cmocka_unit_test_setup_teardown(
        test_datasets_keep_their_project_and_replicas_their_next_try,
        setup, teardown),
    cmocka_unit_test(
        test_migration_4_marks_superseded_replicas_and_leaves_datasets_admin_only),
    cmocka_unit_test_setup_teardown(
        test_transfers_insert_update_find_running_and_list_newest_first,
        setup, teardown),
    cmocka_unit_test_setup_teardown(test_common_queries_use_an_index, setup,
                                    teardown),
    cmocka_unit_test_setup_teardown(
        test_prices_keep_every_period_and_list_those_in_force, setup,
        teardown),
  };

  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
