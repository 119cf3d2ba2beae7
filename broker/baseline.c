/*
 * The NCCL baseline (docs/BASELINE.md, DESIGN.md "NCCL baseline").
 *
 * A probe is tenbin-probe run as an ordinary job at a site, under the
 * baseline's project.  Its row is stored before its job is submitted
 * (with an Idempotency-Key of the probe's id, so a restart submits it
 * once); every node of it posts its document with a token derived from
 * the probe's id, and the probe is done when all have.  The newest done
 * probe of a site is its result; policies/baseline.h judges it against
 * the reference site's, and a job that requires the baseline is kept
 * from a site that fails (placement_site.closed, through the scheduler).
 *
 * Probes also start on their own: at sites named for it, when the last
 * is older than every_s, and when the software bundle (a dataset, which
 * the job stages like any other) has a version the site was not probed
 * with.
 */
#include <inttypes.h>
#include <openssl/crypto.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker/broker_internal.h"
#include "broker/config_fields.h"
#include "policies/baseline.h"
#include "spec/probe_doc.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/fault.h"
#include "util/hash.h"
#include "util/jsonx.h"
#include "util/log.h"
#include "util/timeutil.h"

#define PROBE_TOKEN_PREFIX "tbprobe_"
#define PROBE_TOKEN_LEN 96
#define PROBE_MAX_ARGS 32
/* How often the schedule and the bundle are looked at. */
#define BASELINE_TICK_MS 10000
/* ncclUniqueId is 128 bytes. */
#define NCCL_ID_HEX 256

struct bl_site {
  int auto_probe;               /* on schedule and on bundle change */
  int64_t probe_id;             /* the result's probe, 0: none */
  char *bundle;                 /* that probe's bundle, or NULL */
  struct probe_doc **docs;      /* by rank, owned */
  size_t ndocs;
  struct baseline_kv *kv;       /* node 0's, borrowed from docs[0] */
  struct baseline_point *points;
  struct baseline_probe view;
  struct baseline_verdict verdict;
  char bars[BASELINE_MESSAGE_LEN + 128]; /* why it is closed to jobs
                                            that require the baseline,
                                            "" if not */
};

struct broker_baseline {
  json_t *cfg;                  /* owned copy; strings below borrow it */
  const char *reference;
  size_t ref;                   /* its index in b->sites */
  char *probe;                  /* tenbin-probe's path at the sites */
  const char *bundle;           /* dataset name, or NULL */
  const char *project;
  char *server;                 /* URL the probes reach tenbind at */
  int64_t every_ms;             /* 0: no schedule */
  int64_t time_limit_s;
  const json_t *args;           /* extra probe arguments, or NULL */
  struct baseline_rules rules;
  struct bl_site *sites;        /* b->nsites of them */
  int64_t ticked_ms;
  int resubmitted;              /* the first tick looked for probes a
                                   stop left unsubmitted */
};

const struct jsonx_field broker_baseline_fields[] = {
    {"reference", JX_STRING}, {"probe", JX_STRING},
    {"bundle", JX_STRING},    {"server", JX_STRING},
    {"project", JX_STRING},   {"every_s", JX_INT},
    {"sites", JX_ARRAY},      {"time_limit_s", JX_INT},
    {"probe_args", JX_ARRAY}, {"rules", JX_OBJECT},
    {NULL, 0}};

const struct jsonx_field broker_baseline_rules_fields[] = {
    {"off", JX_ARRAY},           {"nccl_version", JX_STRING},
    {"cuda_runtime", JX_STRING}, {"driver_min", JX_STRING},
    {"driver_max", JX_STRING},   {"env_ignore", JX_ARRAY},
    {"busbw_tolerance_pct", JX_NUMBER}, {"busbw_min_bytes", JX_INT},
    {"max_age_s", JX_INT},       {"class_scale", JX_OBJECT},
    {NULL, 0}};

/* ---- configuration ---- */

static int
match_level(const json_t *rules, const char *key, enum baseline_match *out,
            struct err *e)
{
  const char *v = jsonx_str(rules, key);
  int m;

  if (v == NULL)
    return 0;
  m = baseline_match_from_name(v);
  if (m < 0)
    return err_set(e, ERR_CONFIG, "field 'baseline.rules.%s': '%.32s' is "
                   "not one of major, major.minor, exact, any", key, v);
  *out = (enum baseline_match)m;
  return 0;
}

static int
read_rules(struct broker_baseline *bl, const json_t *rules, struct err *e)
{
  struct baseline_rules *r = &bl->rules;
  const json_t *v;
  size_t i;
  int64_t n;
  int rc;

  baseline_rules_default(r);
  if (rules == NULL || json_is_null(rules))
    return 0;
  rc = jsonx_check(rules, broker_baseline_rules_fields, "baseline.rules.", e);
  if (rc < 0)
    return err_recode(e, ERR_CONFIG);
  json_array_foreach(json_object_get(rules, "off"), i, v) {
    int rule = json_is_string(v)
                   ? baseline_rule_from_name(json_string_value(v)) : -1;

    if (rule < 0)
      return err_set(e, ERR_CONFIG, "field 'baseline.rules.off[%zu]': not "
                     "a rule name (probed, gpu_model, nccl_version, ...)",
                     i);
    r->enabled &= ~(1u << rule);
  }
  rc = match_level(rules, "nccl_version", &r->nccl, e);
  if (rc == 0)
    rc = match_level(rules, "cuda_runtime", &r->cuda, e);
  if (rc < 0)
    return rc;
  r->driver_min = jsonx_str(rules, "driver_min");
  r->driver_max = jsonx_str(rules, "driver_max");
  v = json_object_get(rules, "env_ignore");
  if (v != NULL && !json_is_null(v)) {
    const json_t *name;

    if (json_array_size(v) >= BASELINE_MAX_IGNORE)
      return err_set(e, ERR_CONFIG, "field 'baseline.rules.env_ignore': at "
                     "most %d names", BASELINE_MAX_IGNORE - 1);
    memset(r->env_ignore, 0, sizeof(r->env_ignore));
    json_array_foreach(v, i, name) {
      if (!json_is_string(name))
        return err_set(e, ERR_CONFIG, "field 'baseline.rules.env_ignore[%zu]'"
                       ": must be a string", i);
      r->env_ignore[i] = json_string_value(name);
    }
  }
  v = json_object_get(rules, "busbw_tolerance_pct");
  if (v != NULL && !json_is_null(v)) {
    double pct = json_number_value(v);

    if (!(pct >= 0 && pct < 100))
      return err_set(e, ERR_CONFIG, "field 'baseline.rules."
                     "busbw_tolerance_pct': must be at least 0 and below "
                     "100");
    r->busbw_tolerance = pct / 100;
  }
  rc = jsonx_int(rules, "busbw_min_bytes", 1, (int64_t)1 << 40,
                 r->busbw_min_bytes, &r->busbw_min_bytes, "baseline.rules.",
                 e);
  if (rc == 0)
    rc = jsonx_int(rules, "max_age_s", 0, INT64_MAX / 1000,
                   r->max_age_ms / 1000, &n, "baseline.rules.", e);
  if (rc < 0)
    return err_recode(e, ERR_CONFIG);
  r->max_age_ms = n * 1000;
  v = json_object_get(rules, "class_scale");
  if (v != NULL && !json_is_null(v)) {
    const char *k;
    const json_t *x;

    if (json_object_size(v) > BASELINE_MAX_CLASSES)
      return err_set(e, ERR_CONFIG, "field 'baseline.rules.class_scale': at "
                     "most %d classes", BASELINE_MAX_CLASSES);
    json_object_foreach((json_t *)v, k, x) {
      double s = json_number_value(x);

      if (!json_is_number(x) || !(s > 0 && s <= 100))
        return err_set(e, ERR_CONFIG, "field 'baseline.rules.class_scale."
                       "%.32s': must be a number above 0", k);
      r->classes[r->nclasses].name = k;
      r->classes[r->nclasses++].scale = s;
    }
  }
  return 0;
}

/* tenbin-probe beside tenbind's own executable when it is there (a
 * local or test site on this host), else the one on the site's PATH. */
static char *
default_probe(const char *self_exe)
{
  const char *slash = self_exe != NULL ? strrchr(self_exe, '/') : NULL;
  struct buf p;
  char *out;

  if (slash == NULL)
    return xstrdup("tenbin-probe");
  buf_init(&p, 4096);
  if (buf_add(&p, self_exe, (size_t)(slash - self_exe) + 1) < 0 ||
      buf_addf(&p, "tenbin-probe") < 0 || access(buf_str(&p), X_OK) != 0) {
    buf_release(&p);
    return xstrdup("tenbin-probe");
  }
  out = xstrdup(buf_str(&p));
  buf_release(&p);
  return out;
}

static int
read_sites(struct broker *b, struct broker_baseline *bl, struct err *e)
{
  const json_t *names = json_object_get(bl->cfg, "sites");
  const json_t *v;
  size_t i;

  if (names == NULL || json_is_null(names)) {
    /* A scheduled probe must not launch VMs nobody asked for. */
    for (i = 0; i < b->nsites; i++)
      bl->sites[i].auto_probe = !adapter_is_elastic(b->sites[i].ops);
    return 0;
  }
  json_array_foreach(names, i, v) {
    struct site *s = json_is_string(v)
                         ? broker__site(b, json_string_value(v)) : NULL;

    if (s == NULL)
      return err_set(e, ERR_CONFIG, "field 'baseline.sites[%zu]': no such "
                     "site", i);
    bl->sites[s - b->sites].auto_probe = 1;
  }
  return 0;
}

static int
read_args(struct broker_baseline *bl, struct err *e)
{
  const json_t *v;
  size_t i;

  bl->args = json_object_get(bl->cfg, "probe_args");
  if (bl->args == NULL || json_is_null(bl->args)) {
    bl->args = NULL;
    return 0;
  }
  if (json_array_size(bl->args) > PROBE_MAX_ARGS)
    return err_set(e, ERR_CONFIG, "field 'baseline.probe_args': at most %d "
                   "arguments", PROBE_MAX_ARGS);
  json_array_foreach(bl->args, i, v) {
    if (!json_is_string(v) || json_string_length(v) > 256)
      return err_set(e, ERR_CONFIG, "field 'baseline.probe_args[%zu]': "
                     "must be a string of at most 256 bytes", i);
  }
  return 0;
}

static void bl_site_clear(struct bl_site *s);

const char *
broker__baseline_url(const struct broker *b)
{
  return b->baseline != NULL ? b->baseline->server : NULL;
}

void
broker_baseline_set_url(struct broker *b, const char *url)
{
  struct broker_baseline *bl = b->baseline;
  size_t n;

  if (bl == NULL || bl->server != NULL)
    return;
  bl->server = xstrdup(url);
  n = strlen(bl->server);
  while (n > 0 && bl->server[n - 1] == '/')
    bl->server[--n] = '\0';
}

void
broker__baseline_free(struct broker *b)
{
  struct broker_baseline *bl = b->baseline;

  if (bl == NULL)
    return;
  for (size_t i = 0; i < b->nsites; i++)
    bl_site_clear(&bl->sites[i]);
  free(bl->sites);
  free(bl->probe);
  free(bl->server);
  json_decref(bl->cfg);
  free(bl);
  b->baseline = NULL;
}

static int load_site(struct broker *b, size_t i, struct err *e);
static void judge_all(struct broker *b, int64_t now);

int
broker__baseline_open(struct broker *b, const json_t *cfg, struct err *e)
{
  struct broker_baseline *bl;
  const char *project, *server, *probe;
  struct site *ref;
  int64_t every_s;
  int rc;

  if (cfg == NULL || json_is_null(cfg))
    return 0;
  if (!json_is_object(cfg))
    return err_set(e, ERR_CONFIG, "field 'baseline' must be an object");
  bl = xcalloc(1, sizeof(*bl));
  b->baseline = bl;
  bl->cfg = json_deep_copy(cfg);
  bl->sites = xcalloc(b->nsites, sizeof(*bl->sites));
  rc = jsonx_check(bl->cfg, broker_baseline_fields, "baseline.", e);
  if (rc < 0)
    return err_recode(e, ERR_CONFIG);
  bl->reference = jsonx_str(bl->cfg, "reference");
  ref = bl->reference != NULL ? broker__site(b, bl->reference) : NULL;
  if (ref == NULL)
    return err_set(e, ERR_CONFIG, "field 'baseline.reference': %s",
                   bl->reference == NULL ? "required: the site whose probe "
                   "result is the baseline" : "no such site");
  bl->ref = (size_t)(ref - b->sites);
  project = jsonx_str(bl->cfg, "project");
  bl->project = project != NULL ? project : "baseline";
  if (jobspec_ident_problem(bl->project) != NULL ||
      !broker__project_allowed(b, bl->project))
    return err_set(e, ERR_CONFIG, "field 'baseline.project': '%.64s' is not "
                   "a project jobs may use (probes run as its jobs)",
                   bl->project);
  bl->bundle = jsonx_str(bl->cfg, "bundle");
  if (bl->bundle != NULL && jobspec_ident_problem(bl->bundle) != NULL)
    return err_set(e, ERR_CONFIG, "field 'baseline.bundle': not a dataset "
                   "name");
  probe = jsonx_str(bl->cfg, "probe");
  if (probe != NULL && (probe[0] == '\0' || strlen(probe) > 1024 ||
                        strchr(probe, '\'') != NULL))
    return err_set(e, ERR_CONFIG, "field 'baseline.probe': a path of 1 to "
                   "1024 bytes without quotes");
  if (probe != NULL && probe[0] != '/' && bl->bundle == NULL &&
      strchr(probe, '/') != NULL)
    return err_set(e, ERR_CONFIG, "field 'baseline.probe': a relative path "
                   "is inside the bundle, and there is no 'bundle'");
  bl->probe = probe != NULL ? xstrdup(probe) : default_probe(b->self_exe);
  server = jsonx_str(bl->cfg, "server");
  if (server != NULL && strncmp(server, "http://", 7) != 0 &&
      strncmp(server, "https://", 8) != 0)
    return err_set(e, ERR_CONFIG, "field 'baseline.server': an http:// or "
                   "https:// URL");
  if (server != NULL)
    broker_baseline_set_url(b, server);
  rc = jsonx_int(bl->cfg, "every_s", 0, 365LL * 86400, 86400, &every_s,
                 "baseline.", e);
  if (rc == 0)
    rc = jsonx_int(bl->cfg, "time_limit_s", 60, 7LL * 86400, 1800,
                   &bl->time_limit_s, "baseline.", e);
  if (rc < 0)
    return err_recode(e, ERR_CONFIG);
  bl->every_ms = every_s * 1000;
  rc = read_sites(b, bl, e);
  if (rc == 0)
    rc = read_args(bl, e);
  if (rc == 0)
    rc = read_rules(bl, json_object_get(bl->cfg, "rules"), e);
  for (size_t i = 0; rc == 0 && i < b->nsites; i++)
    rc = load_site(b, i, e);
  if (rc < 0)
    return rc;
  judge_all(b, time_now_ms());
  return 0;
}

/* ---- a site's result, as the newest done probe left it ---- */

static void
bl_site_clear(struct bl_site *s)
{
  for (size_t i = 0; i < s->ndocs; i++)
    probe_doc_free(s->docs[i]);
  free(s->docs);
  free(s->kv);
  free(s->points);
  free(s->bundle);
  s->docs = NULL;
  s->kv = NULL;
  s->points = NULL;
  s->bundle = NULL;
  s->ndocs = 0;
  s->probe_id = 0;
  memset(&s->view, 0, sizeof(s->view));
}

static int
cmp_point(const void *a, const void *b)
{
  const struct baseline_point *x = a, *y = b;

  return (x->bytes > y->bytes) - (x->bytes < y->bytes);
}

/* The first fingerprint key in which node d differs from node 0's
 * view, or NULL when it has node 0's fingerprint. */
static const char *
node_differs(const struct baseline_probe *node0, const struct probe_doc *d)
{
  const struct probe_doc_kv *kv;
  struct baseline_probe other = {0};
  struct baseline_kv *tmp;
  struct baseline_row *rows;
  const char *key = NULL;
  size_t n, nrows, j;

  kv = probe_doc_kv(d, &n);
  tmp = xcalloc(n + 1, sizeof(*tmp));
  for (j = 0; j < n; j++)
    tmp[j] = (struct baseline_kv){kv[j].key, kv[j].value};
  other.kv = tmp;
  other.nkv = n;
  nrows = baseline_diff(NULL, node0, &other, NULL, 0);
  rows = xcalloc(nrows + 1, sizeof(*rows));
  (void)baseline_diff(NULL, node0, &other, rows, nrows);
  for (j = 0; j < nrows && key == NULL; j++)
    if (rows[j].differs)
      key = rows[j].key;
  free(rows);
  free(tmp);
  return key;
}

/* The policy's view of docs[0] (the flattened fingerprint borrowed from
 * it), and how many other nodes differ from it. */
static void
build_view(struct bl_site *s, int64_t nodes)
{
  const struct probe_doc *d = s->docs[0];
  const struct probe_doc_kv *kv;
  const struct probe_result *r;
  size_t n, nr, k;
  int correct = 1;

  kv = probe_doc_kv(d, &n);
  s->kv = xcalloc(n + 1, sizeof(*s->kv));
  for (k = 0; k < n; k++)
    s->kv[k] = (struct baseline_kv){kv[k].key, kv[k].value};
  r = probe_doc_results(d, &nr);
  s->points = xcalloc(nr + 1, sizeof(*s->points));
  s->view.npoints = 0;
  for (k = 0; k < nr; k++) {
    correct &= r[k].correct != 0;
    if (r[k].collective == PROBE_ALL_REDUCE)
      s->points[s->view.npoints++] =
          (struct baseline_point){r[k].bytes, r[k].busbw_gbps};
  }
  qsort(s->points, s->view.npoints, sizeof(*s->points), cmp_point);
  s->view.kv = s->kv;
  s->view.nkv = n;
  s->view.measured = probe_doc_measured(d) == PROBE_MEASURE_DONE;
  s->view.skipped = s->view.measured ? NULL : probe_doc_reason(d);
  s->view.allreduce = s->points;
  s->view.all_correct = correct;
  s->view.nodes = (int)nodes;
  s->view.time_ms = probe_doc_time_ms(d);
  for (k = 1; k < s->ndocs; k++) {
    const char *key = node_differs(&s->view, s->docs[k]);

    if (key != NULL) {
      s->view.nodes_differing++;
      if (s->view.differing_key == NULL)
        s->view.differing_key = key;
    }
  }
}

struct docs_read {
  struct bl_site *s;
  int64_t nodes;
  struct err *e;
  int rc;
};

static int
doc_cb(int64_t rank, const char *text, int64_t at_ms, void *arg)
{
  struct docs_read *r = arg;
  struct probe_doc *d = NULL;

  (void)at_ms;
  if (rank < 0 || rank >= r->nodes || (size_t)rank != r->s->ndocs)
    return 0;
  r->rc = probe_doc_parse(text, strlen(text), &d, r->e);
  if (r->rc < 0)
    return 1;
  r->s->docs[r->s->ndocs++] = d;
  return 0;
}

struct probe_copy {
  int found;
  int64_t id, nodes, job_id, created_ms, finished_ms, gpus_per_node;
  char state[16];
  char why[16];
  char bundle[BROKER_DS_NAME + BROKER_DS_VERSION + 2];
  char reason[256];
  char nccl_id[NCCL_ID_HEX + 1];
  char site[SITE_NAME_LEN];
};

static int
probe_copy_cb(const struct db_probe *p, void *arg)
{
  struct probe_copy *c = arg;

  c->found = 1;
  c->id = p->id;
  c->nodes = p->nodes;
  c->job_id = p->job_id;
  c->created_ms = p->created_ms;
  c->finished_ms = p->finished_ms;
  c->gpus_per_node = p->gpus_per_node;
  snprintf(c->state, sizeof(c->state), "%s", p->state);
  snprintf(c->why, sizeof(c->why), "%s", p->why);
  snprintf(c->bundle, sizeof(c->bundle), "%s", p->bundle ? p->bundle : "");
  snprintf(c->reason, sizeof(c->reason), "%s", p->reason ? p->reason : "");
  snprintf(c->nccl_id, sizeof(c->nccl_id), "%s",
           p->nccl_id ? p->nccl_id : "");
  snprintf(c->site, sizeof(c->site), "%s", p->site);
  return 0;
}

/* Read site i's newest done probe into its cache. */
static int
load_site(struct broker *b, size_t i, struct err *e)
{
  struct bl_site *s = &b->baseline->sites[i];
  struct probe_copy c = {0};
  struct docs_read r = {s, 0, e, 0};
  int rc;

  bl_site_clear(s);
  rc = db_probe_list(b->db, b->sites[i].name, "done", 1, probe_copy_cb, &c,
                     e);
  if (rc < 0)
    return rc;
  if (!c.found)
    return 0;
  s->docs = xcalloc((size_t)c.nodes, sizeof(*s->docs));
  r.nodes = c.nodes;
  rc = db_probe_reports(b->db, c.id, doc_cb, &r, e);
  if (rc < 0 || r.rc < 0) {
    bl_site_clear(s);
    return rc < 0 ? rc : r.rc;
  }
  if (s->ndocs != (size_t)c.nodes) {
    /* Done means every node reported: a gap is a broken database. */
    log_warn("probe %" PRId64 " of site '%s' is done with %zu of %" PRId64
             " reports; ignored", c.id, b->sites[i].name, s->ndocs, c.nodes);
    bl_site_clear(s);
    return 0;
  }
  s->probe_id = c.id;
  s->bundle = c.bundle[0] != '\0' ? xstrdup(c.bundle) : NULL;
  build_view(s, c.nodes);
  return 0;
}

/* ---- the verdicts ---- */

static void
judge_all(struct broker *b, int64_t now)
{
  struct broker_baseline *bl = b->baseline;
  const struct bl_site *ref = &bl->sites[bl->ref];

  for (size_t i = 0; i < b->nsites; i++) {
    struct bl_site *s = &bl->sites[i];
    const struct baseline_finding *f;

    baseline_check(&bl->rules, ref->ndocs > 0 ? &ref->view : NULL,
                   s->ndocs > 0 ? &s->view : NULL, now, &s->verdict);
    s->bars[0] = '\0';
    if (!s->verdict.drifted)
      continue;
    f = &s->verdict.findings[0];
    snprintf(s->bars, sizeof(s->bars), "not at the baseline of '%.64s': "
             "%s: %s%s", bl->reference, baseline_rule_name(f->rule), f->message,
             s->verdict.nfindings + s->verdict.nmore > 1 ? " (and more)" : "");
  }
}

const char *
broker__baseline_bars(const struct broker *b, size_t site)
{
  const struct broker_baseline *bl = b->baseline;

  if (bl == NULL || site >= b->nsites || bl->sites[site].bars[0] == '\0')
    return NULL;
  return bl->sites[site].bars;
}

int
broker__baseline_configured(const struct broker *b)
{
  return b->baseline != NULL;
}

/* ---- starting a probe ---- */

static void
probe_token(const struct broker *b, int64_t id, char *out, size_t outlen)
{
  broker__derive_token(b, "tenbin-probe:", id, PROBE_TOKEN_PREFIX, out,
                       outlen);
}

int
broker__baseline_job_env(struct broker *b, const struct db_job *j,
                         struct job_spec *spec, struct err *e)
{
  struct probe_copy c = {0};
  char token[PROBE_TOKEN_LEN];
  int found = 0;
  int rc;

  if (b->baseline == NULL || strcmp(j->project, b->baseline->project) != 0)
    return 0;
  /* Only the job a probe row names gets its token: a job merely named
   * like a probe in the same project gets nothing. */
  rc = db_probe_by_job(b->db, j->id, probe_copy_cb, &c, &found, e);
  if (rc < 0 || !found)
    return rc;
  probe_token(b, c.id, token, sizeof(token));
  broker__env_set(&spec->env, "TENBIN_PROBE_TOKEN", token);
  OPENSSL_cleanse(token, sizeof(token));
  return 0;
}

/* s quoted for sh, appended to out. */
static int
add_quoted(struct buf *out, const char *s)
{
  int rc = buf_addf(out, "'");

  for (; rc == 0 && *s != '\0'; s++)
    rc = *s == '\'' ? buf_addf(out, "'\\''") : buf_add(out, s, 1);
  return rc == 0 ? buf_addf(out, "'") : rc;
}

/* The job script: one probe process per node (srun on a Slurm site). */
static int
probe_script(const struct broker_baseline *bl, const struct site *s,
             int64_t id, int64_t nodes, struct buf *out)
{
  const json_t *v;
  size_t i;
  int rc = buf_addf(out, "#!/bin/sh\n# tenbin baseline probe %" PRId64
                    " of site %s\n", id, s->name);

  if (rc == 0 && bl->bundle != NULL)
    rc = buf_addf(out, "export TENBIN_BUNDLE_DIR=\"$TENBIN_DATASET_DIR\"\n");
  if (rc == 0)
    rc = buf_addf(out, "exec ");
  if (rc == 0 && nodes > 1)
    rc = buf_addf(out, "srun --nodes=%" PRId64 " --ntasks-per-node=1 ",
                  nodes);
  if (rc == 0 && bl->bundle != NULL && bl->probe[0] != '/' &&
      strchr(bl->probe, '/') != NULL)
    rc = buf_addf(out, "\"$TENBIN_DATASET_DIR\"/");
  if (rc == 0)
    rc = add_quoted(out, bl->probe);
  if (rc == 0)
    rc = buf_addf(out, " --nodes %" PRId64, nodes);
  json_array_foreach(bl->args, i, v) {
    if (rc == 0)
      rc = buf_addf(out, " ");
    if (rc == 0)
      rc = add_quoted(out, json_string_value(v));
  }
  return rc == 0 ? buf_addf(out, "\n") : rc;
}

/* GPUs of the site's largest node: the probe takes a whole node. */
static int64_t
node_gpus(const struct site *s)
{
  struct adapter_capacity c;
  int64_t most = 0;

  memset(&c, 0, sizeof(c));
  s->ops->capacity(s->ctx, &c);
  for (int k = 0; k < c.npools && k < ADAPTER_MAX_POOLS; k++)
    if (c.pools[k].per_node > most)
      most = c.pools[k].per_node;
  return most;
}

static int
probe_body(struct broker *b, const struct site *s, int64_t id,
           int64_t nodes, const char *bundle, json_t **out, struct err *e)
{
  struct broker_baseline *bl = b->baseline;
  char name[64];
  int64_t gpn = node_gpus(s);
  struct buf url, script;
  json_t *body, *env;
  int rc;

  if (bl->server == NULL)
    return err_set(e, ERR_UNAVAILABLE, "baseline: tenbind's own URL is not "
                   "known yet (set baseline.server)");
  buf_init(&url, 2048);
  buf_init(&script, 16384);
  rc = buf_addf(&url, "%s/v1/probes/%" PRId64, bl->server, id);
  if (rc == 0)
    rc = probe_script(bl, s, id, nodes, &script);
  if (rc < 0) {
    rc = err_set(e, ERR_CONFIG, "baseline: the probe's URL or script is "
                 "too long");
    goto out;
  }
  snprintf(name, sizeof(name), "baseline-probe-%" PRId64, id);
  /* The token is not in the stored spec (job views show it): it joins
   * the environment at dispatch (broker__baseline_job_env). */
  env = json_pack("{s:s}", "TENBIN_PROBE_URL", buf_str(&url));
  body = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:o}", "name", name,
                   "project", bl->project, "site", s->name, "script",
                   buf_str(&script), "nodes", (json_int_t)nodes, "gpus",
                   (json_int_t)(gpn * nodes), "time_limit",
                   (json_int_t)bl->time_limit_s, "env", env);
  if (gpn > 0)
    json_object_set_new(body, "gpus_per_node", json_integer(gpn));
  if (bundle != NULL)
    json_object_set_new(body, "dataset", json_string(bundle));
  *out = body;
out:
  buf_release(&url);
  buf_release(&script);
  return rc;
}

static int
probe_set(struct broker *b, const struct probe_copy *c, struct err *e)
{
  struct db_probe p = {
      .id = c->id,
      .state = c->state,
      .job_id = c->job_id,
      .bundle = c->bundle[0] != '\0' ? c->bundle : NULL,
      .nccl_id = c->nccl_id[0] != '\0' ? c->nccl_id : NULL,
      .gpus_per_node = c->gpus_per_node,
      .finished_ms = c->finished_ms,
      .reason = c->reason[0] != '\0' ? c->reason : NULL,
  };

  return db_probe_update(b->db, &p, e);
}

static int
probe_read(struct broker *b, int64_t id, struct probe_copy *c,
           struct err *e)
{
  int found = 0;
  int rc = db_probe_get(b->db, id, probe_copy_cb, c, &found, e);

  if (rc == 0 && !found)
    rc = err_set(e, ERR_NOT_FOUND, "no probe %" PRId64, id);
  return rc;
}

static void
probe_fail(struct broker *b, int64_t id, const char *why)
{
  struct probe_copy c = {0};
  struct err e = {0};

  if (probe_read(b, id, &c, &e) == 0 && (strcmp(c.state, "pending") == 0 ||
                                         strcmp(c.state, "running") == 0)) {
    snprintf(c.state, sizeof(c.state), "failed");
    snprintf(c.reason, sizeof(c.reason), "%s", why);
    c.finished_ms = time_now_ms();
    if (probe_set(b, &c, &e) == 0)
      log_warn("baseline: probe %" PRId64 " failed: %s", id, why);
  }
  if (e.code != 0)
    log_warn("baseline: probe %" PRId64 ": %s", id, e.msg);
}

/* What a submission callback needs: the broker and the probe. */
struct submitting {
  struct broker *b;
  int64_t id;
};

static void
probe_submitted(void *arg, int rc, const struct job_view *job,
                char *const *warnings, int replayed, const struct err *e)
{
  struct submitting *sub = arg;
  struct probe_copy c = {0};
  struct err e2 = {0};

  (void)warnings;
  (void)replayed;
  if (rc < 0) {
    probe_fail(sub->b, sub->id, e != NULL ? e->msg : "submission failed");
    goto out;
  }
  if (probe_read(sub->b, sub->id, &c, &e2) == 0 &&
      strcmp(c.state, "pending") == 0) {
    c.job_id = job->id;
    snprintf(c.state, sizeof(c.state), "running");
    /* A replayed job may have ended while tenbind was down. */
    if (job_state_is_final(job->state)) {
      snprintf(c.state, sizeof(c.state), "failed");
      snprintf(c.reason, sizeof(c.reason), "its job %" PRId64 " had ended "
               "(%s) before the probe knew it", job->id,
               job_state_name(job->state));
      c.finished_ms = time_now_ms();
    }
    (void)probe_set(sub->b, &c, &e2);
  }
  if (e2.code != 0)
    log_warn("baseline: probe %" PRId64 ": %s", sub->id, e2.msg);
out:
  free(sub);
}

/* Submit probe id's job; a restart submits it again under the same
 * Idempotency-Key, which answers with the job already stored. */
static int
probe_submit(struct broker *b, const struct site *s, int64_t id,
             int64_t nodes, const char *bundle, struct err *e)
{
  struct principal p = {.role = ROLE_ADMIN};
  struct submitting *sub;
  char key[48], hash[65];
  json_t *body = NULL;
  char *text = NULL;
  int rc;

  snprintf(p.name, sizeof(p.name), "baseline");
  rc = probe_body(b, s, id, nodes, bundle, &body, e);
  if (rc < 0)
    goto out;
  text = jsonx_dump(body);
  hash_sha256_hex(text, strlen(text), hash);
  snprintf(key, sizeof(key), "tenbin-probe-%" PRId64, id);
  sub = xcalloc(1, sizeof(*sub));
  sub->b = b;
  sub->id = id;
  rc = broker_submit(b, &p, body, key, hash, probe_submitted, sub, e);
  if (rc < 0)
    free(sub);
out:
  if (rc < 0)
    probe_fail(b, id, e != NULL ? e->msg : "submission failed");
  free(text);
  json_decref(body);
  return rc;
}

/* The bundle's newest version as "NAME@VERSION" into out; "" when
 * there is no bundle or no version of it yet. */
static int
bundle_latest(struct broker *b, char *out, size_t outlen, struct err *e)
{
  struct db_dataset_version v;
  int rc;

  out[0] = '\0';
  if (b->baseline->bundle == NULL)
    return 0;
  memset(&v, 0, sizeof(v));
  rc = db_dataset_version_latest(b->db, b->baseline->bundle, &v, e);
  if (rc == ERR_NOT_FOUND) {
    err_clear(e);
    return 0;
  }
  if (rc == 0)
    snprintf(out, outlen, "%s@%s", b->baseline->bundle, v.version);
  db_dataset_version_release(&v);
  return rc;
}

static int
probe_start(struct broker *b, size_t i, int64_t nodes, const char *why,
            int64_t *id, struct err *e)
{
  const struct site *s = &b->sites[i];
  char bundle[BROKER_DS_NAME + BROKER_DS_VERSION + 2];
  struct db_probe p = {0};
  int rc = bundle_latest(b, bundle, sizeof(bundle), e);

  if (rc < 0)
    return rc;
  if (b->baseline->bundle != NULL && bundle[0] == '\0')
    return err_set(e, ERR_UNPROCESSABLE, "baseline bundle '%s' has no "
                   "version yet: publish one first",
                   b->baseline->bundle);
  p.site = s->name;
  p.nodes = nodes;
  p.state = "pending";
  p.why = why;
  p.bundle = bundle[0] != '\0' ? bundle : NULL;
  p.created_ms = time_now_ms();
  rc = db_probe_add(b->db, &p, e);
  if (rc < 0)
    return rc;
  *id = p.id;
  /* A stop here leaves the probe pending: the next start submits it. */
  fault_point("baseline-probe-stored");
  log_info("baseline: probe %" PRId64 " of site '%s' (%s, %" PRId64
           " node%s)", p.id, s->name, why, nodes, nodes == 1 ? "" : "s");
  return probe_submit(b, s, p.id, nodes, p.bundle, e);
}

struct pending_list {
  int64_t ids[64];
  size_t n;
};

static int
pending_cb(const struct db_probe *p, void *arg)
{
  struct pending_list *l = arg;

  if (p->job_id == 0 && l->n < 64)
    l->ids[l->n++] = p->id;
  return 0;
}

/* Probes stored but not known to be submitted when tenbind stopped. */
static int
resubmit_pending(struct broker *b, struct err *e)
{
  struct pending_list l = {{0}, 0};
  int rc = db_probe_list(b->db, NULL, "pending", 64, pending_cb, &l, e);

  for (size_t k = 0; rc == 0 && k < l.n; k++) {
    struct probe_copy c = {0};
    struct site *s;
    struct err e2 = {0};

    rc = probe_read(b, l.ids[k], &c, e);
    if (rc < 0)
      break;
    s = broker__site(b, c.site);
    if (s == NULL) {
      probe_fail(b, c.id, "its site is no longer configured");
      continue;
    }
    /* A failure is the probe's, not the start's. */
    (void)probe_submit(b, s, c.id, c.nodes,
                       c.bundle[0] != '\0' ? c.bundle : NULL, &e2);
  }
  return rc;
}

/* ---- the schedule and the bundle ---- */

void
broker__baseline_tick(struct broker *b)
{
  struct broker_baseline *bl = b->baseline;
  int64_t now = time_now_ms();
  char bundle[BROKER_DS_NAME + BROKER_DS_VERSION + 2];
  struct err e = {0};

  if (bl == NULL || b->closing || now - bl->ticked_ms < BASELINE_TICK_MS)
    return;
  bl->ticked_ms = now;
  if (!bl->resubmitted) {
    bl->resubmitted = 1;
    if (resubmit_pending(b, &e) < 0)
      log_warn("baseline: %s", e.msg);
    err_clear(&e);
  }
  judge_all(b, now);
  if (bundle_latest(b, bundle, sizeof(bundle), &e) < 0) {
    log_warn("baseline: %s", e.msg);
    return;
  }
  for (size_t i = 0; i < b->nsites; i++) {
    struct probe_copy c = {0};
    const char *why = NULL;
    int64_t id;

    if (!bl->sites[i].auto_probe || b->sites[i].ctx == NULL)
      continue;
    if (db_probe_list(b->db, b->sites[i].name, NULL, 1, probe_copy_cb, &c,
                      &e) < 0)
      break;
    if (c.found && (strcmp(c.state, "pending") == 0 ||
                    strcmp(c.state, "running") == 0))
      continue;
    if (bundle[0] != '\0' && (!c.found || strcmp(c.bundle, bundle) != 0))
      why = "bundle";
    else if (bl->every_ms > 0 &&
             (!c.found || now - c.created_ms >= bl->every_ms))
      why = "schedule";
    if (why != NULL && probe_start(b, i, 1, why, &id, &e) < 0)
      log_warn("baseline: site '%s': %s", b->sites[i].name, e.msg);
    err_clear(&e);
  }
  if (e.code != 0)
    log_warn("baseline: %s", e.msg);
}

/* ---- the probe's end ---- */

static int
count_cb(int64_t rank, const char *doc, int64_t at_ms, void *arg)
{
  (void)rank;
  (void)doc;
  (void)at_ms;
  (*(int64_t *)arg)++;
  return 0;
}

int
broker__baseline_job_ended(struct broker *b, const struct db_job *j,
                           struct err *e)
{
  struct probe_copy c = {0};
  int64_t got = 0;
  int found = 0;
  int rc;

  if (b->baseline == NULL || strcmp(j->project, b->baseline->project) != 0)
    return 0;
  rc = db_probe_by_job(b->db, j->id, probe_copy_cb, &c, &found, e);
  if (rc < 0 || !found || (strcmp(c.state, "running") != 0 &&
                           strcmp(c.state, "pending") != 0))
    return rc;
  rc = db_probe_reports(b->db, c.id, count_cb, &got, e);
  if (rc < 0)
    return rc;
  snprintf(c.state, sizeof(c.state), "failed");
  snprintf(c.reason, sizeof(c.reason), "its job %" PRId64 " ended (%s) with "
           "%" PRId64 " of %" PRId64 " node reports%s%.160s", j->id,
           job_state_name(j->state), got, c.nodes,
           j->reason != NULL ? ": " : "", j->reason != NULL ? j->reason : "");
  c.finished_ms = time_now_ms();
  log_warn("baseline: probe %" PRId64 " failed: %s", c.id, c.reason);
  return probe_set(b, &c, e);
}

/* ---- what the probes call ---- */

/* Probe id's row, once token proves the caller is one of its nodes. */
static int
probe_of(struct broker *b, const char *token, int64_t id,
         struct probe_copy *c, struct err *e)
{
  char want[PROBE_TOKEN_LEN];
  int ok;

  if (b->baseline == NULL)
    return err_set(e, ERR_NOT_FOUND, "no baseline is configured");
  probe_token(b, id, want, sizeof(want));
  ok = token != NULL && strlen(token) == strlen(want) &&
       CRYPTO_memcmp(token, want, strlen(want)) == 0;
  OPENSSL_cleanse(want, sizeof(want));
  if (!ok)
    return err_set(e, ERR_UNAUTHORIZED, "not probe %" PRId64 "'s token", id);
  if (probe_read(b, id, c, e) < 0)
    return ERR_UNAUTHORIZED;
  if (strcmp(c->state, "running") != 0 && strcmp(c->state, "pending") != 0)
    return err_set(e, ERR_CONFLICT, "probe %" PRId64 " is %s", id, c->state);
  return 0;
}

int
broker_probe_nccl_id_put(struct broker *b, const char *token, int64_t id,
                         const json_t *body, struct err *e)
{
  static const struct jsonx_field fields[] = {
      {"id", JX_STRING}, {"gpus_per_node", JX_INT}, {NULL, 0}};
  struct probe_copy c = {0};
  const char *hex = jsonx_str(body, "id");
  int64_t gpn;
  int rc = probe_of(b, token, id, &c, e);

  if (rc < 0)
    return rc;
  if (jsonx_check(body, fields, "", e) < 0 ||
      jsonx_int(body, "gpus_per_node", 1, PROBE_DOC_MAX_GPUS, -1, &gpn, "",
                e) < 0)
    return ERR_INVALID;
  if (gpn < 0)
    return err_set(e, ERR_INVALID, "field 'gpus_per_node': required");
  if (hex == NULL || strlen(hex) != NCCL_ID_HEX ||
      strspn(hex, "0123456789abcdef") != NCCL_ID_HEX)
    return err_set(e, ERR_INVALID, "field 'id': %d lowercase hex digits "
                   "(a 128-byte ncclUniqueId)", NCCL_ID_HEX);
  if (c.nccl_id[0] != '\0')
    return strcmp(c.nccl_id, hex) == 0 && c.gpus_per_node == gpn
               ? 0
               : err_set(e, ERR_CONFLICT, "probe %" PRId64 " has its NCCL "
                         "id already", id);
  snprintf(c.nccl_id, sizeof(c.nccl_id), "%s", hex);
  c.gpus_per_node = gpn;
  return probe_set(b, &c, e);
}

int
broker_probe_nccl_id_get(struct broker *b, const char *token, int64_t id,
                         json_t **out, struct err *e)
{
  struct probe_copy c = {0};
  int rc = probe_of(b, token, id, &c, e);

  if (rc < 0)
    return rc;
  if (c.nccl_id[0] == '\0')
    return err_set(e, ERR_NOT_FOUND, "node 0 of probe %" PRId64 " has not "
                   "put its NCCL id yet", id);
  *out = json_pack("{s:s, s:I}", "id", c.nccl_id, "gpus_per_node",
                   (json_int_t)c.gpus_per_node);
  return 0;
}

int
broker_probe_report(struct broker *b, const char *token, int64_t id,
                    const char *text, size_t len, struct err *e)
{
  struct probe_copy c = {0};
  struct probe_doc *d = NULL;
  struct site *s;
  char *stored = NULL;
  int64_t got = 0, rank;
  int rc = probe_of(b, token, id, &c, e);

  if (rc < 0)
    return rc;
  rc = probe_doc_parse(text, len, &d, e);
  if (rc < 0)
    goto out;
  rank = probe_doc_node_rank(d);
  if (probe_doc_nodes(d) != c.nodes || rank >= c.nodes) {
    rc = err_set(e, ERR_INVALID, "field 'nodes': node %" PRId64 " of %d, "
                 "but probe %" PRId64 " runs on %" PRId64, rank,
                 probe_doc_nodes(d), id, c.nodes);
    goto out;
  }
  stored = jsonx_dump(probe_doc_json(d));
  rc = db_begin(b->db, e);
  if (rc < 0)
    goto out;
  rc = db_probe_report_put(b->db, id, rank, stored, time_now_ms(), e);
  if (rc == 0)
    rc = db_probe_reports(b->db, id, count_cb, &got, e);
  if (rc == 0 && got == c.nodes) {
    snprintf(c.state, sizeof(c.state), "done");
    c.finished_ms = time_now_ms();
    rc = probe_set(b, &c, e);
  }
  rc = rc == 0 ? db_commit(b->db, e) : (db_rollback(b->db), rc);
  if (rc < 0 || got != c.nodes)
    goto out;
  s = broker__site(b, c.site);
  log_info("baseline: probe %" PRId64 " of site '%s' done", id, c.site);
  if (s != NULL) {
    struct err e2 = {0};

    if (load_site(b, (size_t)(s - b->sites), &e2) < 0)
      log_warn("baseline: site '%s': %s", c.site, e2.msg);
    judge_all(b, time_now_ms());
    /* Jobs held for the baseline may go now. */
    broker__kick(b);
  }
out:
  free(stored);
  probe_doc_free(d);
  return rc;
}

/* ---- what operators see ---- */

static json_t *
probe_json(const struct probe_copy *c)
{
  json_t *v = json_object();

  json_object_set_new(v, "id", json_integer(c->id));
  jsonx_set_str(v, "site", c->site);
  jsonx_set_str(v, "state", c->state);
  jsonx_set_str(v, "why", c->why);
  json_object_set_new(v, "nodes", json_integer(c->nodes));
  json_object_set_new(v, "job_id", c->job_id > 0 ? json_integer(c->job_id)
                                                 : json_null());
  jsonx_set_str(v, "bundle", c->bundle[0] != '\0' ? c->bundle : NULL);
  jsonx_set_time(v, "created", c->created_ms);
  jsonx_set_time(v, "finished", c->finished_ms);
  jsonx_set_str(v, "reason", c->reason[0] != '\0' ? c->reason : NULL);
  return v;
}

int
broker_baseline_run(struct broker *b, const char *site, int64_t nodes,
                    json_t **out, struct err *e)
{
  struct probe_copy c = {0};
  struct site *s = broker__site(b, site);
  int64_t id = 0;
  int rc;

  if (s == NULL)
    return err_set(e, ERR_NOT_FOUND, "no site '%.64s'", site);
  if (b->baseline == NULL)
    return err_set(e, ERR_UNPROCESSABLE, "no baseline is configured: add "
                   "a 'baseline' block naming the reference site");
  if (nodes < 1 || nodes > PROBE_DOC_MAX_NODES)
    return err_set(e, ERR_INVALID, "field 'nodes': 1 to %d",
                   PROBE_DOC_MAX_NODES);
  if (nodes > 1 && strcmp(s->kind, "slurm") != 0)
    return err_set(e, ERR_UNPROCESSABLE, "field 'nodes': a %s site runs "
                   "one-node probes only (multi-node probes need srun)",
                   s->kind);
  if (b->closing)
    return err_set(e, ERR_UNAVAILABLE, "tenbind is shutting down");
  rc = db_probe_list(b->db, site, NULL, 1, probe_copy_cb, &c, e);
  if (rc < 0)
    return rc;
  if (c.found && (strcmp(c.state, "pending") == 0 ||
                  strcmp(c.state, "running") == 0))
    return err_set(e, ERR_CONFLICT, "probe %" PRId64 " of site '%s' is "
                   "still %s", c.id, site, c.state);
  rc = probe_start(b, (size_t)(s - b->sites), nodes, "manual", &id, e);
  if (id == 0)
    return rc;
  /* Stored: a failed submission is the probe's state, shown with it. */
  memset(&c, 0, sizeof(c));
  rc = probe_read(b, id, &c, e);
  if (rc == 0)
    *out = json_pack("{s:o}", "probe", probe_json(&c));
  return rc;
}

static json_t *
findings_json(const struct baseline_verdict *v)
{
  json_t *a = json_array();

  for (size_t k = 0; k < v->nfindings; k++)
    json_array_append_new(a, json_pack("{s:s, s:s}", "rule",
                                       baseline_rule_name(v->findings[k].rule),
                                       "message", v->findings[k].message));
  return a;
}

static json_t *
diff_json(const struct baseline_rules *r, const struct baseline_probe *ref,
          const struct baseline_probe *site)
{
  size_t n = baseline_diff(r, ref, site, NULL, 0);
  struct baseline_row *rows = xcalloc(n + 1, sizeof(*rows));
  size_t nb = baseline_bw_diff(r, ref, site, NULL, 0);
  struct baseline_bw_row *bw = xcalloc(nb + 1, sizeof(*bw));
  json_t *a = json_array(), *bwa = json_array();
  size_t k;

  (void)baseline_diff(r, ref, site, rows, n);
  for (k = 0; k < n; k++) {
    json_t *row = json_object();

    jsonx_set_str(row, "key", rows[k].key);
    jsonx_set_str(row, "reference", rows[k].ref);
    jsonx_set_str(row, "site", rows[k].site);
    json_object_set_new(row, "differs", json_boolean(rows[k].differs));
    jsonx_set_str(row, "rule", rows[k].rule >= 0
                                   ? baseline_rule_name(rows[k].rule)
                                   : NULL);
    json_array_append_new(a, row);
  }
  (void)baseline_bw_diff(r, ref, site, bw, nb);
  for (k = 0; k < nb; k++) {
    json_t *row = json_pack("{s:I}", "bytes", (json_int_t)bw[k].bytes);

    json_object_set_new(row, "reference_gbps", bw[k].ref_gbps >= 0
                                                   ? json_real(bw[k].ref_gbps)
                                                   : json_null());
    json_object_set_new(row, "site_gbps", bw[k].site_gbps >= 0
                                              ? json_real(bw[k].site_gbps)
                                              : json_null());
    json_object_set_new(row, "pct", bw[k].pct >= 0 ? json_real(bw[k].pct)
                                                   : json_null());
    json_object_set_new(row, "judged", json_boolean(bw[k].judged));
    json_array_append_new(bwa, row);
  }
  free(rows);
  free(bw);
  return json_pack("{s:o, s:o}", "fingerprint", a, "bandwidth", bwa);
}

int
broker_baseline_view(struct broker *b, const char *site, const char *against,
                     json_t **out, struct err *e)
{
  struct broker_baseline *bl = b->baseline;
  struct site *s = broker__site(b, site), *a;
  const struct bl_site *bs, *as;
  struct baseline_verdict *v = NULL;
  struct probe_copy c = {0};
  const struct baseline_probe *ref, *mine;
  json_t *o;
  int rc;

  if (s == NULL)
    return err_set(e, ERR_NOT_FOUND, "no site '%.64s'", site);
  if (bl == NULL)
    return err_set(e, ERR_NOT_FOUND, "no baseline is configured");
  a = against != NULL ? broker__site(b, against) : &b->sites[bl->ref];
  if (a == NULL)
    return err_set(e, ERR_NOT_FOUND, "query 'against': no site '%.64s'",
                   against);
  bs = &bl->sites[s - b->sites];
  as = &bl->sites[a - b->sites];
  rc = db_probe_list(b->db, site, NULL, 1, probe_copy_cb, &c, e);
  if (rc < 0)
    return rc;
  ref = as->ndocs > 0 ? &as->view : NULL;
  mine = bs->ndocs > 0 ? &bs->view : NULL;
  v = xcalloc(1, sizeof(*v));
  baseline_check(&bl->rules, ref, mine, time_now_ms(), v);
  o = json_object();
  jsonx_set_str(o, "site", s->name);
  jsonx_set_str(o, "reference", bl->reference);
  jsonx_set_str(o, "against", a->name);
  jsonx_set_str(o, "status", mine == NULL ? "never_probed"
                             : v->drifted ? "drifted" : "at_baseline");
  json_object_set_new(o, "findings", findings_json(v));
  json_object_set_new(o, "more_findings", json_integer((json_int_t)v->nmore));
  json_object_set_new(o, "latest_probe", c.found ? probe_json(&c)
                                                  : json_null());
  json_object_set_new(o, "probe_id", bs->probe_id > 0
                                         ? json_integer(bs->probe_id)
                                         : json_null());
  jsonx_set_str(o, "bundle", bs->bundle);
  json_object_set_new(o, "result", mine != NULL
                                       ? json_deep_copy(
                                             probe_doc_json(bs->docs[0]))
                                       : json_null());
  json_object_set_new(o, "nodes_differing",
                      json_integer(mine != NULL ? mine->nodes_differing : 0));
  json_object_set_new(o, "diff", ref != NULL || mine != NULL
                                     ? diff_json(&bl->rules, ref, mine)
                                     : json_null());
  free(v);
  *out = o;
  return 0;
}

int
broker_baseline_metrics(struct broker *b, struct buf *out)
{
  struct broker_baseline *bl = b->baseline;
  int rc = 0;

  if (bl == NULL)
    return 0;
  rc = buf_addf(out, "# HELP tenbin_baseline_drift 1 when the site fails "
                "the rule against the reference site's NCCL baseline\n"
                "# TYPE tenbin_baseline_drift gauge\n");
  for (size_t i = 0; rc == 0 && i < b->nsites; i++) {
    const struct baseline_verdict *v = &bl->sites[i].verdict;

    for (int r = 0; rc == 0 && r < BASELINE_NRULES; r++) {
      int failed = 0;

      for (size_t k = 0; k < v->nfindings; k++)
        failed |= v->findings[k].rule == (enum baseline_rule)r;
      rc = buf_addf(out, "tenbin_baseline_drift{site=\"%s\",rule=\"%s\"} "
                    "%d\n", b->sites[i].name,
                    baseline_rule_name((enum baseline_rule)r), failed);
    }
  }
  if (rc == 0)
    rc = buf_addf(out, "# HELP tenbin_allreduce_busbw_gbps All-reduce bus "
                  "bandwidth of the site's newest probe, GB/s (10^9 "
                  "bytes/s, as nccl-tests), by message size in bytes\n"
                  "# TYPE tenbin_allreduce_busbw_gbps gauge\n");
  for (size_t i = 0; rc == 0 && i < b->nsites; i++) {
    const struct baseline_probe *p = &bl->sites[i].view;

    for (size_t k = 0; rc == 0 && k < p->npoints; k++)
      rc = buf_addf(out, "tenbin_allreduce_busbw_gbps{site=\"%s\",size=\""
                    "%" PRId64 "\"} %.3f\n", b->sites[i].name,
                    p->allreduce[k].bytes, p->allreduce[k].busbw_gbps);
  }
  return rc;
}

json_t *
broker_baseline_summary(struct broker *b, const char *site)
{
  struct broker_baseline *bl = b->baseline;
  struct site *s = broker__site(b, site);
  const struct bl_site *bs;
  json_t *o;

  if (bl == NULL || s == NULL)
    return NULL;
  bs = &bl->sites[s - b->sites];
  o = json_object();
  jsonx_set_str(o, "reference", bl->reference);
  jsonx_set_str(o, "status", bs->ndocs == 0          ? "never_probed"
                             : bs->verdict.drifted ? "drifted"
                                                   : "at_baseline");
  jsonx_set_str(o, "reason", bs->bars[0] != '\0' ? bs->bars : NULL);
  json_object_set_new(o, "probe_id", bs->probe_id > 0
                                         ? json_integer(bs->probe_id)
                                         : json_null());
  jsonx_set_time(o, "probed", bs->ndocs > 0 ? bs->view.time_ms : 0);
  return o;
}
