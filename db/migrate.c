/*
 * The schema migrator: brings a database to the newest of the migrations
 * compiled into the binary (db/migrations/NNN_name.sql, embedded by
 * embed_migrations.cmake), tracking the applied version in PRAGMA
 * user_version.
 *
 * Each migration runs together with its user_version bump in one
 * BEGIN IMMEDIATE transaction, so a crash or an error leaves the file at
 * the previous version with none of the migration applied, and two
 * processes opening a fresh file at once (tenbind and `tenbind token
 * create`) serialise on the write lock and apply each migration once.
 *
 * NEEDSWORK: a future migration that rebuilds a table (SQLite's 12-step
 * ALTER) cannot turn foreign_keys off inside this transaction (the pragma
 * is a no-op there); it has to use PRAGMA defer_foreign_keys and end with
 * PRAGMA foreign_key_check.
 */
#include "db/db_internal.h"

#include <sqlite3.h>
#include <stdio.h>

int
db__migrations_check(const struct db_migration *m, size_t n, struct err *e)
{
  size_t i;

  for (i = 0; i < n; i++) {
    const char *name = m[i].name != NULL ? m[i].name : "(unnamed)";

    if (m[i].sql == NULL)
      return err_set(e, ERR_INTERNAL, "migration '%s': no script", name);
    if (i > 0 && m[i].version == m[i - 1].version)
      return err_set(e, ERR_INTERNAL,
                     "migration '%s': version %d duplicates migration '%s'",
                     name, m[i].version,
                     m[i - 1].name != NULL ? m[i - 1].name : "(unnamed)");
    if (m[i].version != (int)i + 1)
      return err_set(e, ERR_INTERNAL,
                     "migration '%s': version %d where %d was expected "
                     "(versions must run 1, 2, 3 ... without a gap)",
                     name, m[i].version, (int)i + 1);
  }
  return 0;
}

static int
read_user_version(sqlite3 *h, int *out, struct err *e)
{
  sqlite3_stmt *st = NULL;
  int rc;
  int ret = 0;

  rc = sqlite3_prepare_v2(h, "PRAGMA user_version", -1, &st, NULL);
  if (rc != SQLITE_OK) {
    ret = err_set(e, ERR_DB, "reading the schema version: %s",
                  sqlite3_errmsg(h));
    goto out;
  }
  rc = sqlite3_step(st);
  if (rc != SQLITE_ROW) {
    ret = err_set(e, ERR_DB, "reading the schema version: %s",
                  sqlite3_errmsg(h));
    goto out;
  }
  *out = sqlite3_column_int(st, 0);
out:
  sqlite3_finalize(st);
  return ret;
}

static int
exec(sqlite3 *h, const char *sql, const char *what, struct err *e)
{
  char *msg = NULL;
  int rc;
  int ret = 0;

  rc = sqlite3_exec(h, sql, NULL, NULL, &msg);
  if (rc != SQLITE_OK) {
    ret = err_set(e, (rc & 0xff) == SQLITE_BUSY ? ERR_UNAVAILABLE : ERR_DB,
                  "%s: %s", what, msg != NULL ? msg : sqlite3_errstr(rc));
  }
  sqlite3_free(msg);
  return ret;
}

static int
refuse_newer(sqlite3 *h, int version, int latest, struct err *e)
{
  const char *path = sqlite3_db_filename(h, "main");

  return err_set(e, ERR_DB,
                 "database '%s': schema version %d is newer than the "
                 "newest this binary knows (%d); use a newer tenbin",
                 path != NULL && path[0] != '\0' ? path : ":memory:",
                 version, latest);
}

/* Apply m (version *version + 1, unless another process got there first)
 * in its own transaction; *version is updated. */
static int
apply_one(sqlite3 *h, const struct db_migration *m, int latest, int *version,
          struct err *e)
{
  char what[128];
  char bump[64];
  int ret;

  snprintf(what, sizeof(what), "migration '%s'", m->name);
  ret = exec(h, "BEGIN IMMEDIATE", what, e);
  if (ret < 0)
    return ret;
  /* Re-read under the write lock: the version may have moved since. */
  ret = read_user_version(h, version, e);
  if (ret < 0)
    goto fail;
  if (*version > latest) {
    ret = refuse_newer(h, *version, latest, e);
    goto fail;
  }
  if (*version >= m->version)
    return exec(h, "COMMIT", what, e);
  if (*version != m->version - 1) {
    ret = err_set(e, ERR_INTERNAL, "%s: database is at version %d, not %d",
                  what, *version, m->version - 1);
    goto fail;
  }
  ret = exec(h, m->sql, what, e);
  if (ret < 0)
    goto fail;
  /* A script that ended the transaction would leave the bump outside it. */
  if (sqlite3_get_autocommit(h)) {
    return err_set(e, ERR_INTERNAL,
                   "%s: the script must not begin or end transactions",
                   what);
  }
  snprintf(bump, sizeof(bump), "PRAGMA user_version = %d", m->version);
  ret = exec(h, bump, what, e);
  if (ret < 0)
    goto fail;
  ret = exec(h, "COMMIT", what, e);
  if (ret < 0)
    goto fail;
  *version = m->version;
  return 0;

fail:
  if (!sqlite3_get_autocommit(h))
    sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL);
  return ret;
}

int
db__migrate_with(struct sqlite3 *h, const struct db_migration *m, size_t n,
                 int *version_out, struct err *e)
{
  int latest = (int)n;
  int version = 0;
  size_t i;
  int ret;

  ret = db__migrations_check(m, n, e);
  if (ret < 0)
    return ret;
  ret = read_user_version(h, &version, e);
  if (ret < 0)
    return ret;
  if (version > latest)
    return refuse_newer(h, version, latest, e);
  for (i = 0; i < n && ret == 0; i++) {
    if (m[i].version > version)
      ret = apply_one(h, &m[i], latest, &version, e);
  }
  if (version_out != NULL)
    *version_out = version;
  return ret;
}

int
db__migrate(struct sqlite3 *h, int *version_out, struct err *e)
{
  return db__migrate_with(h, db__migrations, db__migration_count,
                          version_out, e);
}
