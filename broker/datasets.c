/*
 * Datasets (docs/SYNC.md "tenbind REST API"): registering a dataset at
 * its source site, publishing versions through the source site's agent,
 * asking for replicas at other sites, and the JSON views of all of it.
 * Also what jobs need: resolving a job's "dataset" at submit and the
 * environment that points a job at its replica.
 *
 * The pulls themselves are the stager's (stager.c); this file only
 * creates the pending replica rows it works from.
 *
 * Datasets are scoped like jobs.  A dataset belongs to a project, and a
 * principal sees it (lists, reads, publishes, replicates, names it in a
 * job) only with that project in its scope; otherwise it is "not found",
 * exactly as an unknown name, so that a name tells nothing about other
 * projects.  A dataset without a project (registered before datasets had
 * one, or by an admin who gave none) is an admin's: only an admin of
 * every project sees it.  Registering a path needs an admin, or a root
 * the source site's agent config allows the project ("projects" in its
 * "agent" block, broker__dataset_roots_check).
 */
#include <stdlib.h>
#include <string.h>

#include "broker/broker_internal.h"
#include "util/alloc.h"
#include "util/grow.h"
#include "util/jsonx.h"
#include "util/log.h"
#include "util/timeutil.h"

#define DATASET_PATH_MAX 4096
/* Transfers shown by GET /v1/datasets/{name}: the newest ones. */
#define TRANSFERS_SHOWN 100

/* A publish waiting for the source agent's answer. */
struct publish_op {
  struct publish_op *next;
  struct broker *b;
  char name[BROKER_DS_NAME];
  char site[BROKER_DS_NAME + 8];
  broker_publish_cb cb;
  void *arg;
  int detached;              /* answered by broker__publish_flush */
};

/* ---- names, paths, versions ---- */

static int
valid_path(const char *p)
{
  size_t n = strlen(p);
  const char *c = p;

  if (n == 0 || n > DATASET_PATH_MAX || p[0] == '/')
    return 0;
  for (size_t i = 0; i < n; i++) {
    if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f)
      return 0;
  }
  /* No ".." component: the agent would refuse it anyway, and a path that
   * climbs out of the agent's root is a mistake worth naming here. */
  while (*c != '\0') {
    size_t len = strcspn(c, "/");

    if (len == 2 && c[0] == '.' && c[1] == '.')
      return 0;
    c += len;
    while (*c == '/')
      c++;
  }
  return 1;
}

/* The next component of *p (empty and "." ones skipped): its length,
 * with *p moved past it; 0 at the end. */
static size_t
next_component(const char **p, const char **start)
{
  for (;;) {
    size_t len;

    while (**p == '/')
      (*p)++;
    len = strcspn(*p, "/");
    *start = *p;
    *p += len;
    if (len == 0 || !(len == 1 && (*start)[0] == '.'))
      return len;
  }
}

/* Whether path is root or below it, component by component: "a/b" is
 * under "a" and "./a/", not under "ab". */
static int
path_under(const char *path, const char *root)
{
  const char *pc;
  const char *rc;

  for (;;) {
    size_t rl = next_component(&root, &rc);
    size_t pl;

    if (rl == 0)
      return 1;
    pl = next_component(&path, &pc);
    if (pl != rl || memcmp(pc, rc, rl) != 0)
      return 0;
  }
}

int
broker__dataset_roots_check(const json_t *projects, const json_t *allowed,
                            const char *where, struct err *e)
{
  const char *project;
  json_t *roots;

  if (!json_is_object(projects))
    return err_set(e, ERR_CONFIG, "field '%sprojects' must be an object "
                   "{\"PROJECT\": [\"PATH\", ...]}", where);
  json_object_foreach((json_t *)projects, project, roots) {
    size_t i;
    size_t k;
    json_t *v;
    int known = allowed == NULL;

    if (!agentc_valid_name(project))
      return err_set(e, ERR_CONFIG, "field '%sprojects': project '%.64s' "
                     "must match [A-Za-z0-9][A-Za-z0-9._-]{0,63}", where,
                     project);
    json_array_foreach(allowed, k, v) {
      if (strcmp(json_string_value(v), project) == 0)
        known = 1;
    }
    if (!known)
      return err_set(e, ERR_CONFIG, "field '%sprojects': unknown project "
                     "'%s' (not in 'projects')", where, project);
    if (!json_is_array(roots))
      return err_set(e, ERR_CONFIG, "field '%sprojects.%s' must be an "
                     "array of paths", where, project);
    json_array_foreach(roots, i, v) {
      if (!json_is_string(v) || !valid_path(json_string_value(v)))
        return err_set(e, ERR_CONFIG, "field '%sprojects.%s[%zu]': a "
                       "directory relative to the agent's root (or "
                       "\".\"), without '..' or control characters",
                       where, project, i);
    }
  }
  return 0;
}

/* Whether project may register path at site s (admins aside). */
static int
root_allowed(const struct site *s, const char *project, const char *path)
{
  const json_t *roots = json_object_get(s->agent_projects, project);
  size_t i;
  json_t *v;

  json_array_foreach(roots, i, v) {
    if (path_under(path, json_string_value(v)))
      return 1;
  }
  return 0;
}

/* Whether p sees d: d's project is in p's scope; a dataset without one
 * is for admins of every project. */
static int
may_see(const struct principal *p, const struct db_dataset *d)
{
  if (d->project == NULL)
    return p->role == ROLE_ADMIN && p->projects == NULL;
  return principal_has_project(p, d->project);
}

/* db_dataset_get for p: one it may not see is not found, as an unknown
 * name (same message), so that names do not leak across projects. */
static int
visible_get(struct broker *b, const struct principal *p, const char *name,
            struct db_dataset *out, struct err *e)
{
  int rc = db_dataset_get(b->db, name, out, e);

  if (rc == 0 && !may_see(p, out)) {
    db_dataset_release(out);
    rc = err_set(e, ERR_NOT_FOUND, "dataset '%s' not found", name);
  }
  return rc;
}

int
broker__dataset_split(const char *ds, char *name, char *version,
                      struct err *e)
{
  const char *at = ds != NULL ? strchr(ds, '@') : NULL;
  size_t n;

  if (at == NULL)
    return err_set(e, ERR_INVALID, "dataset '%s' is not NAME@VERSION",
                   ds != NULL ? ds : "");
  n = (size_t)(at - ds);
  if (n == 0 || n >= BROKER_DS_NAME || strlen(at + 1) >= BROKER_DS_VERSION)
    return err_set(e, ERR_INVALID, "dataset '%.140s' is not NAME@VERSION",
                   ds);
  memcpy(name, ds, n);
  name[n] = '\0';
  snprintf(version, BROKER_DS_VERSION, "%s", at + 1);
  return 0;
}

int
broker__dataset_resolve(struct broker *b, const struct principal *p,
                        struct job_spec *spec, struct err *e)
{
  struct db_dataset_version v;
  struct db_dataset d;
  char name[BROKER_DS_NAME];
  const char *at;
  const char *want = NULL;
  size_t n;
  char *resolved;
  int rc;

  if (spec->dataset == NULL)
    return 0;
  at = strchr(spec->dataset, '@');
  n = at != NULL ? (size_t)(at - spec->dataset) : strlen(spec->dataset);
  if (n == 0 || n >= sizeof(name))
    return err_set(e, ERR_INVALID, "field 'dataset': '%.140s' is not NAME "
                   "or NAME@VERSION", spec->dataset);
  memcpy(name, spec->dataset, n);
  name[n] = '\0';
  if (at != NULL && strcmp(at + 1, "latest") != 0)
    want = at + 1;
  memset(&v, 0, sizeof(v));
  rc = visible_get(b, p, name, &d, e);
  if (rc == ERR_NOT_FOUND)
    return err_set(e, ERR_UNPROCESSABLE, "field 'dataset': unknown "
                   "dataset '%s'", name);
  if (rc < 0)
    return rc;
  /* A job reads its own project's data only: what it writes to its
   * output and logs goes to that project's readers. */
  if (d.project != NULL && strcmp(d.project, spec->project) != 0) {
    rc = err_set(e, ERR_UNPROCESSABLE, "field 'dataset': dataset '%s' "
                 "belongs to project '%s', not to the job's project '%s'",
                 name, d.project, spec->project);
    db_dataset_release(&d);
    return rc;
  }
  db_dataset_release(&d);
  if (want == NULL) {
    rc = db_dataset_version_latest(b->db, name, &v, e);
    if (rc == ERR_NOT_FOUND)
      return err_set(e, ERR_UNPROCESSABLE, "field 'dataset': dataset '%s' "
                     "has no published version yet", name);
  } else {
    rc = db_dataset_version_get(b->db, name, want, &v, e);
    if (rc == ERR_NOT_FOUND)
      return err_set(e, ERR_UNPROCESSABLE, "field 'dataset': dataset '%s' "
                     "has no version '%.64s'", name, want);
  }
  if (rc < 0)
    return rc;
  n = strlen(name) + strlen(v.version) + 2;
  resolved = xmalloc(n);
  snprintf(resolved, n, "%s@%s", name, v.version);
  free(spec->dataset);
  spec->dataset = resolved;
  db_dataset_version_release(&v);
  return 0;
}

/* ---- replicas ---- */

static void
replica_row(struct db_replica *r, const char *name, const char *version,
            const char *site, const char *project, int64_t now)
{
  memset(r, 0, sizeof(*r));
  r->dataset = xstrdup(name);
  r->version = xstrdup(version);
  r->site = xstrdup(site);
  r->project = xstrdup(project);
  r->state = DB_REPLICA_PENDING;
  r->updated_ms = now;
}

int
broker__replica_want(struct broker *b, const char *name,
                     const char *version, const char *site,
                     const char *project, int retry_failed,
                     struct db_replica *out, struct err *e)
{
  struct db_replica r;
  struct site *s = broker__site(b, site);
  int rc;

  rc = db_replica_get(b->db, name, version, site, &r, e);
  if (rc < 0 && rc != ERR_NOT_FOUND)
    return rc;
  if (rc == 0 && ((r.state != DB_REPLICA_FAILED &&
                   r.state != DB_REPLICA_SUPERSEDED) ||
                  !retry_failed))
    goto out;
  if (s == NULL || s->agent == NULL) {
    db_replica_release(&r);
    return err_set(e, ERR_UNPROCESSABLE, "site '%s' has no agent to pull "
                   "dataset %s with", site, name);
  }
  /* New, or failed and asked for again: from scratch. */
  db_replica_release(&r);
  replica_row(&r, name, version, site, project, time_now_ms());
  rc = db_replica_put(b->db, &r, e);
  if (rc < 0) {
    db_replica_release(&r);
    return rc;
  }
  log_info("replica of %s@%.12s at site '%s' asked for", name, version,
           site);
  broker__stager_kick(b);
out:
  if (out != NULL)
    *out = r;
  else
    db_replica_release(&r);
  return 0;
}

void
broker__env_set(char ***env, const char *key, const char *value)
{
  size_t klen = strlen(key);
  size_t n = strlen(key) + strlen(value) + 2;
  char *kv = xmalloc(n);
  size_t i;

  snprintf(kv, n, "%s=%s", key, value);
  for (i = 0; *env != NULL && (*env)[i] != NULL; i++) {
    if (strncmp((*env)[i], key, klen) == 0 && (*env)[i][klen] == '=') {
      free((*env)[i]);
      (*env)[i] = kv;
      return;
    }
  }
  strv_push(env, kv);
  free(kv);
}

int
broker__dataset_env(struct broker *b, const struct db_job *j,
                    struct job_spec *spec, struct err *e)
{
  char name[BROKER_DS_NAME];
  char version[BROKER_DS_VERSION];
  struct db_replica r;
  int rc;

  if (spec->dataset == NULL || j->site == NULL)
    return 0;
  rc = broker__dataset_split(spec->dataset, name, version, e);
  if (rc < 0)
    return rc;
  rc = db_replica_get(b->db, name, version, j->site, &r, e);
  if (rc == 0 && (r.state != DB_REPLICA_COMPLETE || r.path == NULL))
    rc = err_set(e, ERR_BAD_STATE, "dataset %s@%.12s is not complete at "
                 "site '%s'", name, version, j->site);
  if (rc == 0) {
    broker__env_set(&spec->env, "TENBIN_DATASET_DIR", r.path);
    broker__env_set(&spec->env, "TENBIN_DATASET", spec->dataset);
  }
  db_replica_release(&r);
  return rc;
}

int
broker__dataset_source(struct broker *b, struct job_spec *spec,
                       struct dataset_source *out, struct err *e)
{
  struct db_dataset d;
  const struct site *src;
  int rc;

  memset(out, 0, sizeof(*out));
  if (spec->dataset == NULL)
    return 0;
  rc = broker__dataset_split(spec->dataset, out->name, out->version, e);
  if (rc < 0)
    return rc;
  rc = db_dataset_get(b->db, out->name, &d, e);
  if (rc < 0)
    return rc;
  /* The source, as the stager pulls from it: the one site sure to hold
   * every version it published. */
  src = broker__site(b, d.source_site);
  if (src == NULL || src->agent_url == NULL)
    rc = err_set(e, ERR_UNPROCESSABLE, "dataset %s: its source site '%s' "
                 "has no agent to pull from", out->name, d.source_site);
  db_dataset_release(&d);
  if (rc < 0)
    return rc;
  out->ds.name = out->name;
  out->ds.version = out->version;
  out->ds.url = src->agent_url;
  out->ds.token = src->agent_token;
  broker__env_set(&spec->env, "TENBIN_DATASET", spec->dataset);
  return 0;
}

/* ---- views ---- */

void
dataset_version_view_init(struct dataset_version_view *v)
{
  memset(v, 0, sizeof(*v));
}

void
dataset_version_view_release(struct dataset_version_view *v)
{
  if (v == NULL)
    return;
  free(v->dataset);
  free(v->version);
  dataset_version_view_init(v);
}

void
replica_view_init(struct replica_view *r)
{
  memset(r, 0, sizeof(*r));
}

void
replica_view_release(struct replica_view *r)
{
  if (r == NULL)
    return;
  free(r->dataset);
  free(r->version);
  free(r->site);
  free(r->error);
  free(r->path);
  replica_view_init(r);
}

static void
transfer_view_release(struct transfer_view *t)
{
  free(t->from_site);
  free(t->to_site);
  free(t->version);
  free(t->state);
  free(t->error);
  memset(t, 0, sizeof(*t));
}

void
dataset_view_init(struct dataset_view *d)
{
  memset(d, 0, sizeof(*d));
}

void
dataset_view_release(struct dataset_view *d)
{
  if (d == NULL)
    return;
  free(d->name);
  free(d->source_site);
  free(d->path);
  free(d->project);
  free(d->latest);
  for (int64_t i = 0; d->versions != NULL && i < d->nversions; i++)
    dataset_version_view_release(&d->versions[i]);
  free(d->versions);
  for (size_t i = 0; i < d->nreplicas; i++)
    replica_view_release(&d->replicas[i]);
  free(d->replicas);
  for (size_t i = 0; i < d->ntransfers; i++)
    transfer_view_release(&d->transfers[i]);
  free(d->transfers);
  dataset_view_init(d);
}

static char *
dup_or_null(const char *s)
{
  return s != NULL ? xstrdup(s) : NULL;
}

/* Copy row v into view out (uninitialised). */
static void
version_view_of(struct dataset_version_view *out,
                const struct db_dataset_version *v)
{
  out->dataset = dup_or_null(v->dataset);
  out->version = dup_or_null(v->version);
  out->files = v->files;
  out->bytes = v->bytes;
  out->created_ms = v->created_ms;
  out->published_ms = v->published_ms;
}

/* Copy row r into view out (uninitialised). */
static void
replica_view_of(struct replica_view *out, const struct db_replica *r)
{
  out->dataset = dup_or_null(r->dataset);
  out->version = dup_or_null(r->version);
  out->site = dup_or_null(r->site);
  out->state = db_replica_state_name(r->state);
  out->bytes_total = r->bytes_total;
  out->bytes_done = r->bytes_done;
  out->bytes_wire = r->bytes_wire;
  out->bytes_saved = r->bytes_saved;
  out->files_total = r->files_total;
  out->files_done = r->files_done;
  out->error = dup_or_null(r->error);
  out->path = dup_or_null(r->path);
  out->started_ms = r->started_ms;
  out->finished_ms = r->finished_ms;
  out->updated_ms = r->updated_ms;
  out->next_try_ms = r->next_try_ms;
}

/* Copy row t into view out (uninitialised). */
static void
transfer_view_of(struct transfer_view *out, const struct db_transfer *t)
{
  out->id = t->id;
  out->from_site = dup_or_null(t->from_site);
  out->to_site = dup_or_null(t->to_site);
  out->version = dup_or_null(t->version);
  out->bytes_wire = t->bytes_wire;
  out->state = dup_or_null(t->state);
  out->error = dup_or_null(t->error);
  out->started_ms = t->started_ms;
  out->finished_ms = t->finished_ms;
}

static int
count_cb(const struct db_dataset_version *v, void *arg)
{
  (void)v;
  (*(int64_t *)arg)++;
  return 0;
}

/* Fill out (initialised) with d's own fields, "latest" and the number of
 * versions. */
static int
dataset_view_of(struct broker *b, const struct db_dataset *d,
                struct dataset_view *out, struct err *e)
{
  struct db_dataset_version latest;
  int64_t n = 0;
  int rc;

  memset(&latest, 0, sizeof(latest));
  rc = db_dataset_version_list(b->db, d->name, count_cb, &n, e);
  if (rc < 0)
    return rc;
  rc = db_dataset_version_latest(b->db, d->name, &latest, e);
  if (rc < 0 && rc != ERR_NOT_FOUND)
    return rc;
  dataset_view_release(out);
  out->name = xstrdup(d->name);
  out->source_site = xstrdup(d->source_site);
  out->path = xstrdup(d->path);
  out->project = dup_or_null(d->project);
  out->latest = rc == 0 ? dup_or_null(latest.version) : NULL;
  out->created_ms = d->created_ms;
  out->nversions = n;
  db_dataset_version_release(&latest);
  return 0;
}

struct list_ctx {
  struct broker *b;
  const struct principal *p;
  dataset_view_cb cb;
  void *arg;
  struct err *e;
};

static int
list_dataset_cb(const struct db_dataset *d, void *arg)
{
  struct list_ctx *l = arg;
  struct dataset_view v;
  int rc;

  if (!may_see(l->p, d))
    return 0;
  dataset_view_init(&v);
  rc = dataset_view_of(l->b, d, &v, l->e);
  if (rc == 0)
    rc = l->cb(&v, l->arg);
  dataset_view_release(&v);
  return rc;
}

int
broker_dataset_list(struct broker *b, const struct principal *p,
                    dataset_view_cb cb, void *arg, struct err *e)
{
  struct list_ctx l = {b, p, cb, arg, e};

  return db_dataset_list(b->db, list_dataset_cb, &l, e);
}

/* The detailed parts of a dataset view, as the rows come. */
struct detail {
  struct dataset_view *d;
  size_t vcap;
  size_t rcap;
  size_t tcap;
};

static int
add_version_cb(const struct db_dataset_version *v, void *arg)
{
  struct detail *x = arg;
  size_t n = (size_t)x->d->nversions;

  GROW(x->d->versions, n + 1, x->vcap);
  version_view_of(&x->d->versions[n], v);
  x->d->nversions++;
  return 0;
}

static int
add_replica_cb(const struct db_replica *r, void *arg)
{
  struct detail *x = arg;

  GROW(x->d->replicas, x->d->nreplicas + 1, x->rcap);
  replica_view_of(&x->d->replicas[x->d->nreplicas++], r);
  return 0;
}

static int
add_transfer_cb(const struct db_transfer *t, void *arg)
{
  struct detail *x = arg;

  GROW(x->d->transfers, x->d->ntransfers + 1, x->tcap);
  transfer_view_of(&x->d->transfers[x->d->ntransfers++], t);
  return 0;
}

int
broker_dataset_get(struct broker *b, const struct principal *p,
                   const char *name, struct dataset_view *out,
                   struct err *e)
{
  struct db_dataset d;
  struct detail x = {out, 0, 0, 0};
  int rc;

  rc = visible_get(b, p, name, &d, e);
  if (rc < 0)
    return rc;
  rc = dataset_view_of(b, &d, out, e);
  /* The count becomes the versions themselves. */
  out->nversions = 0;
  out->detailed = 1;
  if (rc == 0)
    rc = db_dataset_version_list(b->db, name, add_version_cb, &x, e);
  if (rc == 0)
    rc = db_replica_list(b->db, name, add_replica_cb, &x, e);
  if (rc == 0)
    rc = db_transfer_list(b->db, name, TRANSFERS_SHOWN, add_transfer_cb,
                          &x, e);
  db_dataset_release(&d);
  if (rc < 0)
    dataset_view_release(out);
  return rc;
}

/* ---- register ---- */

static int
may_write(const struct principal *p, const char *what, struct err *e)
{
  if (p->role < ROLE_SUBMITTER)
    return err_set(e, ERR_FORBIDDEN, "role '%s' may not %s",
                   broker_role_name(p->role), what);
  return 0;
}

/* The site named for a dataset's field: configured, with an agent. */
static int
agent_site(struct broker *b, const char *field, const char *name,
           struct site **out, struct err *e)
{
  struct site *s = broker__site(b, name);

  if (s == NULL)
    return err_set(e, ERR_UNPROCESSABLE, "field '%s': unknown site '%s'",
                   field, name);
  if (s->agent == NULL)
    return err_set(e, ERR_UNPROCESSABLE, "field '%s': site '%s' has no "
                   "agent (add \"agent\" to its config)", field, name);
  *out = s;
  return 0;
}

/* The project a dataset is registered for: one p acts for and tenbind
 * knows; none only from an admin of every project. */
static int
register_scope(struct broker *b, const struct principal *p,
               const char *project, struct err *e)
{
  size_t i;
  json_t *v;
  int known = b->projects == NULL;

  if (project == NULL) {
    if (p->role == ROLE_ADMIN && p->projects == NULL)
      return 0;
    return err_set(e, ERR_INVALID, "field 'project': required (only an "
                   "admin of every project may register a dataset "
                   "without one)");
  }
  if (!agentc_valid_name(project))
    return err_set(e, ERR_INVALID, "field 'project': must match "
                   "[A-Za-z0-9][A-Za-z0-9._-]{0,63}");
  if (!principal_has_project(p, project))
    return err_set(e, ERR_FORBIDDEN, "no access to project '%s'", project);
  json_array_foreach(b->projects, i, v) {
    if (strcmp(json_string_value(v), project) == 0)
      known = 1;
  }
  if (!known)
    return err_set(e, ERR_UNPROCESSABLE, "field 'project': unknown "
                   "project '%s'", project);
  return 0;
}

int
broker_dataset_register(struct broker *b, const struct principal *p,
                        const json_t *body, struct dataset_view *out,
                        struct err *e)
{
  static const struct jsonx_field fields[] = {{"name", JX_STRING},
                                              {"source_site", JX_STRING},
                                              {"path", JX_STRING},
                                              {"project", JX_STRING},
                                              {NULL, 0}};
  const char *name = jsonx_str(body, "name");
  const char *site = jsonx_str(body, "source_site");
  const char *path = jsonx_str(body, "path");
  const char *project = jsonx_str(body, "project");
  struct db_dataset d;
  struct site *s;
  int rc;

  rc = may_write(p, "register datasets", e);
  if (rc == 0)
    rc = jsonx_check(body, fields, "", e);
  if (rc < 0)
    return rc;
  if (name == NULL || !agentc_valid_name(name))
    return err_set(e, ERR_INVALID, "field 'name': required, must match "
                   "[A-Za-z0-9][A-Za-z0-9._-]{0,63}");
  if (site == NULL)
    return err_set(e, ERR_INVALID, "field 'source_site': required");
  if (path == NULL || !valid_path(path))
    return err_set(e, ERR_INVALID, "field 'path': required, a directory "
                   "relative to the source agent's root (or \".\") of at "
                   "most %d bytes, without '..' or control characters",
                   DATASET_PATH_MAX);
  rc = register_scope(b, p, project, e);
  if (rc < 0)
    return rc;
  rc = agent_site(b, "source_site", site, &s, e);
  if (rc < 0)
    return rc;
  /* Any directory of the agent's root is an admin's to give; others
   * register only under the roots the site allows their project. */
  if (p->role != ROLE_ADMIN && !root_allowed(s, project, path))
    return err_set(e, ERR_FORBIDDEN, "field 'path': project '%s' may not "
                   "register '%.200s' at site '%s' (an admin may, or the "
                   "site's agent.projects lists the roots it may)",
                   project, path, s->name);
  memset(&d, 0, sizeof(d));
  d.name = (char *)name;
  d.source_site = (char *)site;
  d.path = (char *)path;
  d.project = (char *)project;
  d.created_ms = time_now_ms();
  rc = db_dataset_insert(b->db, &d, e);
  if (rc < 0)
    return rc;
  log_info("dataset '%s' registered at site '%s', path '%s', project "
           "'%s' (by %s)", name, site, path,
           project != NULL ? project : "(admins)", p->name);
  return dataset_view_of(b, &d, out, e);
}

/* ---- publish ---- */

static void
publish_unlink(struct broker *b, struct publish_op *op)
{
  for (struct publish_op **q = &b->publishes; *q != NULL; q = &(*q)->next) {
    if (*q == op) {
      *q = op->next;
      return;
    }
  }
}

/* Record the version and the source's complete replica, in one
 * transaction; *created says whether the version is new here. */
static int
publish_record(struct broker *b, const char *name, const char *site,
               const struct agentc_version *av, int *created,
               struct db_dataset_version *out, struct err *e)
{
  int64_t now = time_now_ms();
  struct db_dataset_version v = {
      .dataset = (char *)name, .version = (char *)av->version,
      .files = av->files, .bytes = av->bytes, .created_ms = now,
      .published_ms = now};
  struct db_replica r = {
      .dataset = (char *)name, .version = (char *)av->version,
      .site = (char *)site, .state = DB_REPLICA_COMPLETE,
      .bytes_total = av->bytes, .bytes_done = av->bytes,
      .files_total = av->files, .files_done = av->files,
      .path = (char *)av->path, .started_ms = now, .finished_ms = now,
      .updated_ms = now};
  int rc;

  rc = db_begin(b->db, e);
  if (rc == 0)
    rc = db_dataset_version_put(b->db, &v, created, e);
  if (rc == 0)
    rc = db_replica_put(b->db, &r, e);
  /* The source's files are now this version's: the older versions are
   * no longer complete there (jobs needing them stage elsewhere). */
  if (rc == 0)
    rc = db_replica_supersede(b->db, name, site, av->path, av->version,
                              now, e);
  if (rc == 0)
    rc = db_dataset_version_get(b->db, name, av->version, out, e);
  if (rc == 0)
    rc = db_commit(b->db, e);
  if (rc < 0)
    db_rollback(b->db);
  return rc;
}

/*
 * An agent's refusal in the API's terms: no answer is UNAVAILABLE, a
 * publish already running there stays BAD_STATE, anything else the
 * agent refused is UNPROCESSABLE (its own NOT_FOUND, say, must not read
 * as "no such dataset" here), and its internal errors are SITE.
 */
static int
agent_refusal(const struct publish_op *op, int rc, const struct err *ae,
              struct err *e)
{
  int code = ERR_UNPROCESSABLE;

  if (rc == ERR_UNAVAILABLE || rc == ERR_TIMEOUT)
    code = ERR_UNAVAILABLE;
  else if (rc == ERR_BAD_STATE)
    code = ERR_BAD_STATE;
  else if (agentc_transient(rc))
    code = ERR_SITE;
  return err_set(e, code, "agent of site '%s': %s", op->site, err_msg(ae));
}

static void
on_published(void *arg, int rc, const struct agentc_version *av,
             const struct err *ae)
{
  struct publish_op *op = arg;
  struct broker *b = op->b;
  struct db_dataset_version v;
  struct dataset_version_view vv;
  struct err e = {0};
  int created = 0;

  publish_unlink(b, op);
  memset(&v, 0, sizeof(v));
  dataset_version_view_init(&vv);
  if (rc < 0) {
    rc = agent_refusal(op, rc, ae, &e);
    log_warn("publish of dataset '%s': %s", op->name, e.msg);
  } else if (b->closing) {
    rc = err_set(&e, ERR_UNAVAILABLE, "tenbind is shutting down");
  } else {
    rc = publish_record(b, op->name, op->site, av, &created, &v, &e);
    if (rc == 0) {
      version_view_of(&vv, &v);
      free(vv.dataset);
      vv.dataset = xstrdup(op->name);
      log_info("dataset %s@%.12s published at site '%s': %lld files, "
               "%lld bytes%s", op->name, av->version, op->site,
               (long long)av->files, (long long)av->bytes,
               created ? "" : " (known version)");
    }
  }
  if (!op->detached)
    op->cb(op->arg, rc, created, rc == 0 ? &vv : NULL,
           rc == 0 ? av->path : NULL, rc < 0 ? &e : NULL);
  dataset_version_view_release(&vv);
  db_dataset_version_release(&v);
  free(op);
}

int
broker_dataset_publish(struct broker *b, const struct principal *p,
                       const char *name, broker_publish_cb cb, void *arg,
                       struct err *e)
{
  struct publish_op *op;
  struct db_dataset d;
  struct site *s;
  int rc;

  rc = may_write(p, "publish datasets", e);
  if (rc < 0)
    return rc;
  if (b->closing)
    return err_set(e, ERR_UNAVAILABLE, "tenbind is shutting down");
  rc = visible_get(b, p, name, &d, e);
  if (rc < 0)
    return rc;
  rc = agent_site(b, "source_site", d.source_site, &s, e);
  if (rc < 0) {
    db_dataset_release(&d);
    return err_prefix(e, "dataset '%s'", name);
  }
  op = xcalloc(1, sizeof(*op));
  op->b = b;
  snprintf(op->name, sizeof(op->name), "%s", d.name);
  snprintf(op->site, sizeof(op->site), "%s", s->name);
  op->cb = cb;
  op->arg = arg;
  rc = agentc_publish(s->agent, d.name, d.path, on_published, op, e);
  db_dataset_release(&d);
  if (rc < 0) {
    free(op);
    return rc;
  }
  op->next = b->publishes;
  b->publishes = op;
  return 0;
}

void
broker__publish_flush(struct broker *b)
{
  struct err e = {0};

  err_set(&e, ERR_UNAVAILABLE, "tenbind is shutting down; the publish "
          "may finish at the agent: publish again to record it");
  for (struct publish_op *op = b->publishes; op != NULL; op = op->next) {
    if (op->detached)
      continue;
    op->detached = 1;
    op->cb(op->arg, ERR_UNAVAILABLE, 0, NULL, NULL, &e);
  }
}

/* ---- replicate ---- */

int
broker_dataset_replicate(struct broker *b, const struct principal *p,
                         const char *name, const json_t *body,
                         struct replica_view *out, struct err *e)
{
  static const struct jsonx_field fields[] = {
      {"site", JX_STRING}, {"version", JX_STRING}, {NULL, 0}};
  const char *site = jsonx_str(body, "site");
  const char *want = jsonx_str(body, "version");
  struct db_dataset_version v;
  struct db_dataset d;
  struct db_replica r;
  int rc;

  memset(&v, 0, sizeof(v));
  rc = may_write(p, "replicate datasets", e);
  if (rc == 0)
    rc = jsonx_check(body, fields, "", e);
  if (rc < 0)
    return rc;
  rc = visible_get(b, p, name, &d, e);
  if (rc < 0)
    return rc;
  if (site == NULL) {
    rc = err_set(e, ERR_INVALID, "field 'site': required");
    goto out;
  }
  if (broker__site(b, site) == NULL) {
    rc = err_set(e, ERR_UNPROCESSABLE, "field 'site': unknown site '%s'",
                 site);
    goto out;
  }
  if (want == NULL || strcmp(want, "latest") == 0) {
    rc = db_dataset_version_latest(b->db, name, &v, e);
    if (rc == ERR_NOT_FOUND)
      rc = err_set(e, ERR_UNPROCESSABLE, "field 'version': dataset '%s' "
                   "has no published version yet", name);
  } else {
    rc = db_dataset_version_get(b->db, name, want, &v, e);
    if (rc == ERR_NOT_FOUND)
      rc = err_set(e, ERR_UNPROCESSABLE, "field 'version': dataset '%s' "
                   "has no version '%.64s'", name, want);
  }
  if (rc < 0)
    goto out;
  rc = broker__replica_want(b, name, v.version, site, NULL, 1, &r, e);
  if (rc == ERR_UNPROCESSABLE)
    rc = err_set(e, rc, "field 'site': site '%s' has no agent (add "
                 "\"agent\" to its config)", site);
  if (rc < 0)
    goto out;
  replica_view_release(out);
  replica_view_of(out, &r);
  db_replica_release(&r);
out:
  db_dataset_release(&d);
  db_dataset_version_release(&v);
  return rc;
}
