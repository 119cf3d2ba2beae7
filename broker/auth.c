/*
 * API tokens and the principal of a request.
 *
 * A token is 256 random bits shown once at creation; only its SHA-256 is
 * stored, so a copy of the database does not leak usable credentials.
 * Looking a token up by its hash needs no constant-time compare: the
 * attacker does not control the hash's prefix.
 */
#include <stdlib.h>
#include <string.h>

#include "broker/broker_internal.h"
#include "util/alloc.h"
#include "util/hash.h"
#include "util/timeutil.h"

static const char *const role_names[] = {"viewer", "submitter", "admin"};

const char *
broker_role_name(enum broker_role r)
{
  if ((unsigned)r > ROLE_ADMIN)
    return "unknown";
  return role_names[r];
}

int
broker_role_parse(const char *s, enum broker_role *out)
{
  for (int i = 0; i <= ROLE_ADMIN; i++) {
    if (strcmp(s, role_names[i]) == 0) {
      *out = (enum broker_role)i;
      return 0;
    }
  }
  return ERR_INVALID;
}

void
principal_release(struct principal *p)
{
  if (p == NULL)
    return;
  strv_free(p->projects);
  p->projects = NULL;
}

int
principal_has_project(const struct principal *p, const char *project)
{
  if (p->projects == NULL)
    return 1;
  for (char *const *q = p->projects; *q != NULL; q++) {
    if (strcmp(*q, project) == 0)
      return 1;
  }
  return 0;
}

int
broker_authenticate(struct broker *b, const char *token,
                    struct principal *p, struct err *e)
{
  struct db_token t = {0};
  char hash[65];
  int rc;

  hash_sha256_hex(token, strlen(token), hash);
  rc = db_token_find(b->db, hash, &t, NULL);
  if (rc == ERR_NOT_FOUND)
    return err_set(e, ERR_UNAUTHORIZED, "invalid token");
  if (rc < 0)
    return err_set(e, rc, "cannot look up token");
  memset(p, 0, sizeof(*p));
  if (broker_role_parse(t.role, &p->role) < 0) {
    db_token_release(&t);
    return err_set(e, ERR_INTERNAL, "token %lld has unknown role '%s'",
                   (long long)t.id, t.role);
  }
  p->token_id = t.id;
  p->projects = t.projects;
  t.projects = NULL;
  snprintf(p->name, sizeof(p->name), "token %lld%s%.32s%s",
           (long long)t.id, t.name ? " (" : "", t.name ? t.name : "",
           t.name ? ")" : "");
  db_token_release(&t);
  return 0;
}

int
broker_token_create(const char *db_path, enum broker_role role,
                    char *const *projects, const char *name, char *out,
                    size_t outlen, struct err *e)
{
  struct db *db = NULL;
  char hash[65];
  int64_t id;
  int rc;

  rc = hash_random_token("tbn_", out, outlen);
  if (rc < 0) {
    rc = err_set(e, rc, "cannot generate a token");
    goto out;
  }
  hash_sha256_hex(out, strlen(out), hash);
  rc = db_open(db_path, &db, e);
  if (rc == 0)
    rc = db_token_insert(db, hash, name, broker_role_name(role), projects,
                         time_now_ms(), &id, e);
out:
  /* A token that was not stored must not be shown. */
  if (rc < 0)
    memset(out, 0, outlen);
  db_close(db);
  return rc;
}
