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
 * Foreign keys are not enforced while migrations run and are checked as
 * a whole before each commit (PRAGMA foreign_key_check), steps 1, 10 and
 * 12 of SQLite's documented table rebuild ("Making Other Kinds Of Table
 * Schema Changes"): a migration that rebuilds a parent table (003 does
 * jobs) drops the old one, and with enforcement on that DROP deletes
 * every child row through ON DELETE CASCADE.  PRAGMA foreign_keys is a
 * no-op inside a transaction, hence here, around it; defer_foreign_keys
 * would not help, it defers the checks but not the cascades.
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

/* ERR_DB naming the first row whose foreign key points nowhere. */
static int
foreign_key_check(sqlite3 *h, const char *what, struct err *e)
{
  sqlite3_stmt *st = NULL;
  int rc;
  int ret = 0;

  rc = sqlite3_prepare_v2(h, "PRAGMA foreign_key_check", -1, &st, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    const unsigned char *table = sqlite3_column_text(st, 0);
    const unsigned char *parent = sqlite3_column_text(st, 2);

    ret = err_set(e, ERR_DB, "%s: row %lld of '%s' refers to a missing "
                  "row of '%s'", what,
                  (long long)sqlite3_column_int64(st, 1),
                  table != NULL ? (const char *)table : "?",
                  parent != NULL ? (const char *)parent : "?");
  } else if (rc != SQLITE_DONE) {
    ret = err_set(e, ERR_DB, "%s: checking foreign keys: %s", what,
                  sqlite3_errmsg(h));
  }
  sqlite3_finalize(st);
  return ret;
}

/* PRAGMA foreign_keys as 0 or 1 into *on. */
static int
read_foreign_keys(sqlite3 *h, int *on, struct err *e)
{
  sqlite3_stmt *st = NULL;
  int rc;
  int ret = 0;

  rc = sqlite3_prepare_v2(h, "PRAGMA foreign_keys", -1, &st, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_step(st);
  if (rc == SQLITE_ROW)
    *on = sqlite3_column_int(st, 0) != 0;
  else
    ret = err_set(e, ERR_DB, "reading foreign_keys: %s", sqlite3_errmsg(h));
  sqlite3_finalize(st);
  return ret;
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
  ret = foreign_key_check(h, what, e);
  if (ret < 0)
    goto fail;
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
  int fk_on = 0;
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
  if (version < latest) {
    ret = read_foreign_keys(h, &fk_on, e);
    if (ret == 0 && fk_on)
      ret = exec(h, "PRAGMA foreign_keys = OFF", "migrations", e);
    if (ret < 0)
      return ret;
  }
  for (i = 0; i < n && ret == 0; i++) {
    if (m[i].version > version)
      ret = apply_one(h, &m[i], latest, &version, e);
  }
  /* Whatever happened: the connection is used after this. */
  if (fk_on && exec(h, "PRAGMA foreign_keys = ON", "migrations", NULL) < 0 &&
      ret == 0)
    ret = err_set(e, ERR_DB, "migrations: cannot enable foreign keys "
                  "again");
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
