/*
 * The broker's lifecycle: open the database, the sites and the catalog,
 * recover jobs from a previous run, and close it all down in order.
 * Also the read-only views of sites and the metrics.
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/broker_internal.h"
#include "broker/config_fields.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/jsonx.h"
#include "util/log.h"
#include "util/secret.h"
#include "util/timeutil.h"

#define DEFAULT_TICK_MS 1000
#define DEFAULT_STAGE_POLL_MS 500
/* A token file holds one line; anything longer is not a token. */
#define TOKEN_FILE_MAX 8192

static int
valid_site_name(const char *s)
{
  size_t n = strlen(s);

  if (n == 0 || n > 64 || !isalnum((unsigned char)s[0]))
    return 0;
  for (size_t i = 0; i < n; i++) {
    if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_' &&
        s[i] != '.')
      return 0;
  }
  return 1;
}

/* The token in file path: its first line, trailing blanks dropped; the
 * file must be private to its owner (util/secret.h). */
static int
read_token_file(const char *path, const char *where, char **out,
                struct err *e)
{
  struct err se = {0};
  size_t len;

  *out = NULL;
  if (secret_read_file(path, SECRET_FIRST_LINE, out, &len, &se) < 0)
    return err_set(e, ERR_CONFIG, "field '%stoken_file': %s", where,
                   se.msg);
  if (len > TOKEN_FILE_MAX) {
    secret_free(*out);
    *out = NULL;
    return err_set(e, ERR_CONFIG, "field '%stoken_file': '%s' is longer "
                   "than %d bytes", where, path, TOKEN_FILE_MAX);
  }
  return 0;
}

/* A site's fields that are the broker's, not its adapter's: the adapter
 * never sees them (open_sites). */
const struct jsonx_field broker_site_fields[] = {
    {"agent", JX_OBJECT}, {"cost", JX_OBJECT}, {"job_env", JX_OBJECT},
    {NULL, 0}};

const struct jsonx_field broker_agent_fields[] = {
    {"url", JX_STRING}, {"token", JX_STRING}, {"token_file", JX_STRING},
    {"bwlimit", JX_INT}, {"projects", JX_OBJECT}, {NULL, 0}};

/*
 * The site's "agent": {"url", "token" | "token_file"} into s (checked
 * the way the agent client will use them), and "projects", the roots
 * under which each project may register datasets (allowed: the config's
 * project list, or NULL).  ERR_CONFIG naming the field.
 */
static int
site_agent(struct site *s, const json_t *agent, const json_t *allowed,
           size_t i, struct err *e)
{
  const json_t *projects = json_object_get(agent, "projects");
  const char *url = jsonx_str(agent, "url");
  const char *token = jsonx_str(agent, "token");
  const char *token_file = jsonx_str(agent, "token_file");
  struct agentc *check = NULL;
  char where[48];
  char *tok = NULL;
  int64_t bwlimit = 0;
  int rc;

  snprintf(where, sizeof(where), "sites[%zu].agent.", i);
  if (!json_is_object(agent))
    return err_set(e, ERR_CONFIG, "field 'sites[%zu].agent' must be an "
                   "object {\"url\", \"token\" or \"token_file\"}", i);
  rc = jsonx_check(agent, broker_agent_fields, where, e);
  if (rc < 0)
    goto out;
  if (url == NULL) {
    rc = err_set(e, ERR_CONFIG, "field '%surl': required (the agent's "
                 "http:// or https:// URL)", where);
    goto out;
  }
  /* What the site's pulls may take of its link, in bytes/s. */
  rc = jsonx_int(agent, "bwlimit", 0, (int64_t)1 << 40, 0, &bwlimit, where,
                 e);
  if (rc < 0)
    goto out;
  if (projects != NULL && !json_is_null(projects)) {
    rc = broker__dataset_roots_check(projects, allowed, where, e);
    if (rc < 0)
      goto out;
  }
  if ((token == NULL) == (token_file == NULL)) {
    rc = err_set(e, ERR_CONFIG, "field 'sites[%zu].agent': exactly one of "
                 "'token' and 'token_file' is required", i);
    goto out;
  }
  if (token_file != NULL) {
    rc = read_token_file(token_file, where, &tok, e);
    if (rc < 0)
      goto out;
  } else {
    tok = xstrdup(token);
  }
  rc = agentc_new(NULL, url, tok, &check, e);
  if (rc < 0) {
    /* The client's message says which of the two is wrong. */
    err_prefix(e, "field '%s%s'", where,
               strncmp(e != NULL ? e->msg : "", "agent url", 9) == 0
                   ? "url"
                   : token != NULL ? "token" : "token_file");
    goto out;
  }
  s->agent_url = xstrdup(url);
  s->agent_bwlimit = (uint64_t)bwlimit;
  s->agent_token = tok;
  tok = NULL;
  if (projects != NULL && !json_is_null(projects))
    s->agent_projects = json_deep_copy(projects);
out:
  agentc_free(check);
  free(tok);
  return rc < 0 ? err_recode(e, ERR_CONFIG) : 0;
}

/* The adapter of kind: from kinds (the config's, for tests) when given,
 * else the built-in ones. */
static const struct adapter_ops *
find_kind(const struct adapter_ops *const *kinds, const char *kind)
{
  if (kinds == NULL)
    return adapter_find(kind);
  for (size_t i = 0; kinds[i] != NULL; i++)
    if (strcmp(kinds[i]->kind, kind) == 0)
      return kinds[i];
  return NULL;
}

/* Environment variables a site gives every job (an image's NCCL
 * settings, say): names as a shell takes them, values capped. */
#define SITE_ENV_MAX 64
#define SITE_ENV_VALUE_MAX 4096

int
broker__site_job_env(char ***out, const json_t *env, size_t i,
                     struct err *e)
{
  const char *k;
  const json_t *v;

  if (!json_is_object(env) || json_object_size(env) > SITE_ENV_MAX)
    return err_set(e, ERR_CONFIG, "field 'sites[%zu].job_env': an object of "
                   "at most %d variables", i, SITE_ENV_MAX);
  json_object_foreach((json_t *)env, k, v) {
    struct buf kv;
    int rc;

    if (k[0] == '\0' || strlen(k) > 128 || isdigit((unsigned char)k[0]) ||
        strspn(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                  "0123456789_") != strlen(k) || strncmp(k, "TENBIN_", 7) == 0)
      return err_set(e, ERR_CONFIG, "field 'sites[%zu].job_env.%.64s': not a "
                     "variable name a site may set", i, k);
    if (!json_is_string(v) || json_string_length(v) > SITE_ENV_VALUE_MAX)
      return err_set(e, ERR_CONFIG, "field 'sites[%zu].job_env.%.64s': a "
                     "string of at most %d bytes", i, k, SITE_ENV_VALUE_MAX);
    buf_init(&kv, SITE_ENV_VALUE_MAX + 256);
    rc = buf_addf(&kv, "%s=%s", k, json_string_value(v));
    if (rc == 0)
      strv_push(out, buf_str(&kv));
    buf_release(&kv);
    if (rc < 0)
      return err_set(e, ERR_CONFIG, "field 'sites[%zu].job_env': too long",
                     i);
  }
  return 0;
}

void
broker__site_env(const struct site *site, struct job_spec *spec)
{
  for (size_t k = 0; site->job_env != NULL && site->job_env[k] != NULL;
       k++) {
    const char *kv = site->job_env[k];
    size_t n = strcspn(kv, "=");
    int set = 0;

    for (size_t j = 0; spec->env != NULL && spec->env[j] != NULL; j++)
      set |= strncmp(spec->env[j], kv, n) == 0 && spec->env[j][n] == '=';
    if (!set)
      strv_push(&spec->env, kv);
  }
}

static int
open_sites(struct broker *b, const json_t *sites,
           const struct adapter_ops *const *kinds, struct err *e)
{
  size_t i;
  json_t *cfg;

  if (!json_is_array(sites) || json_array_size(sites) == 0)
    return err_set(e, ERR_CONFIG, "field 'sites': at least one site is "
                   "required");
  if (json_array_size(sites) > PLACEMENT_MAX_SITES)
    return err_set(e, ERR_CONFIG, "field 'sites': at most %d sites",
                   PLACEMENT_MAX_SITES);
  b->sites = xcalloc(json_array_size(sites), sizeof(*b->sites));
  json_array_foreach(sites, i, cfg) {
    const char *name = jsonx_str(cfg, "name");
    const char *kind = jsonx_str(cfg, "kind");
    const json_t *agent = json_object_get(cfg, "agent");
    const json_t *cost = json_object_get(cfg, "cost");
    const json_t *job_env = json_object_get(cfg, "job_env");
    struct site *s = &b->sites[i];
    struct adapter_env env;
    json_t *adapter_cfg;
    int rc;

    if (!json_is_object(cfg))
      return err_set(e, ERR_CONFIG, "field 'sites[%zu]' must be an object",
                     i);
    if (name == NULL || !valid_site_name(name))
      return err_set(e, ERR_CONFIG, "field 'sites[%zu].name': required, 1 "
                     "to 64 of A-Z a-z 0-9 . _ -", i);
    if (broker__site(b, name) != NULL)
      return err_set(e, ERR_CONFIG, "field 'sites[%zu].name': duplicate "
                     "site '%s'", i, name);
    if (kind == NULL)
      return err_set(e, ERR_CONFIG, "field 'sites[%zu].kind': required", i);
    s->ops = find_kind(kinds, kind);
    if (s->ops == NULL)
      return err_set(e, ERR_CONFIG, "field 'sites[%zu].kind': unknown site "
                     "kind '%.32s'", i, kind);
    s->broker = b;
    s->config = json_deep_copy(cfg);
    s->name = xstrdup(name);
    s->kind = xstrdup(kind);
    b->nsites++;
    if (agent != NULL && !json_is_null(agent) && adapter_is_elastic(s->ops))
      return err_set(e, ERR_CONFIG, "field 'sites[%zu].agent': %s sites "
                     "have no agent of their own: their VMs pull a job's "
                     "dataset themselves", i, kind);
    if (agent != NULL && !json_is_null(agent)) {
      rc = site_agent(s, agent, b->projects, i, e);
      if (rc < 0)
        return rc;
    }
    if (cost != NULL && !json_is_null(cost)) {
      rc = broker__site_cost(&s->cost, cost, i, e);
      if (rc < 0)
        return rc;
    }
    if (job_env != NULL && !json_is_null(job_env)) {
      rc = broker__site_job_env(&s->job_env, job_env, i, e);
      if (rc < 0)
        return rc;
    }
    memset(&env, 0, sizeof(env));
    env.loop = b->loop;
    env.site_name = s->name;
    env.state_dir = b->state_dir;
    env.self_exe = b->self_exe;
    env.instance = b->instance;
    env.update = broker__on_update;
    env.update_arg = s;
    env.nodes = &broker__node_store;
    env.nodes_arg = s;
    /* The agent and the prices are the broker's business: the adapter
     * checks its own fields strictly and never sees them. */
    adapter_cfg = json_copy(cfg);
    for (const struct jsonx_field *f = broker_site_fields; f->name != NULL;
         f++)
      json_object_del(adapter_cfg, f->name);
    rc = s->ops->open(&env, adapter_cfg, &s->ctx, e);
    json_decref(adapter_cfg);
    if (rc < 0) {
      s->ctx = NULL;
      err_prefix(e, "sites[%zu]", i);
      /* Whatever the adapter says, it is a mistake in the config. */
      return err_recode(e, ERR_CONFIG);
    }
  }
  /* Egress to named sites names sites that exist. */
  for (i = 0; i < b->nsites; i++) {
    const struct site_cost *c = &b->sites[i].cost;

    for (size_t k = 0; k < c->negress_to; k++) {
      if (broker__site(b, c->egress_to[k].site) == NULL)
        return err_set(e, ERR_CONFIG, "field 'sites[%zu].cost.rented."
                       "egress_to_sites_per_gb.%s': no such site", i,
                       c->egress_to[k].site);
    }
  }
  return 0;
}

/* One http client for every agent, and each agent's client on it. */
static int
open_agents(struct broker *b, const struct broker_config *cfg,
            struct err *e)
{
  struct http_client_config hc;
  int any = 0;
  int rc;

  for (size_t i = 0; i < b->nsites; i++)
    any |= b->sites[i].agent_url != NULL;
  if (!any)
    return 0;
  memset(&hc, 0, sizeof(hc));
  hc.ca_file = cfg->ca_file;
  hc.allow_insecure_tokens = cfg->allow_insecure_tokens != 0;
  rc = http_client_new(b->loop, &hc, &b->agent_http, e);
  if (rc < 0)
    return err_prefix(e, "agents");
  for (size_t i = 0; i < b->nsites; i++) {
    struct site *s = &b->sites[i];

    if (s->agent_url == NULL)
      continue;
    /* Checked by site_agent(): cannot fail now. */
    rc = agentc_new(b->agent_http, s->agent_url, s->agent_token, &s->agent,
                    e);
    if (rc < 0)
      return rc;
  }
  return 0;
}

static void
sites_free(struct broker *b)
{
  broker__autoscaler_free(b);
  broker__baseline_free(b);
  for (size_t i = 0; i < b->nsites; i++) {
    free(b->sites[i].name);
    free(b->sites[i].kind);
    free(b->sites[i].agent_url);
    free(b->sites[i].agent_token);
    json_decref(b->sites[i].agent_projects);
    strv_free(b->sites[i].job_env);
    json_decref(b->sites[i].config);
    agentc_free(b->sites[i].agent);
    broker__site_cost_release(&b->sites[i].cost);
  }
  free(b->sites);
}

int
broker__workloads_load(struct broker *b, const json_t *workloads, size_t *n,
                       struct err *e)
{
  size_t i;
  json_t *w;

  *n = 0;
  if (workloads == NULL || json_is_null(workloads))
    return 0;
  if (!json_is_array(workloads))
    return err_set(e, ERR_CONFIG, "field 'workloads' must be an array");
  json_array_foreach(workloads, i, w) {
    int rc = broker_workload_put(b, w, NULL, e);

    if (rc < 0) {
      err_prefix(e, "workloads[%zu]", i);
      return err_recode(e, ERR_CONFIG);
    }
    (*n)++;
  }
  return 0;
}

int
broker__project_allowed(struct broker *b, const char *project)
{
  size_t i;
  json_t *v;

  if (b->projects == NULL)
    return 1;
  json_array_foreach(b->projects, i, v) {
    if (strcmp(json_string_value(v), project) == 0)
      return 1;
  }
  return 0;
}

/*
 * The placement policy the config names, else "cost" as soon as any site
 * is priced (first-fit otherwise), and the projects' wait values
 * ("policy": {"wait_value": {"default": D, "PROJECT": V}}, dollars per
 * GPU-hour of waiting).
 */
int
broker__choose_policy(struct broker *b, const struct broker_config *cfg,
                      struct err *e)
{
  const char *name = cfg->placement;
  const char *key;
  json_t *v;

  for (size_t i = 0; name == NULL && i < b->nsites; i++) {
    if (b->sites[i].cost.kind != SITE_UNPRICED)
      name = "cost";
  }
  b->policy = placement_policy_find(name != NULL ? name : "first-fit");
  if (b->policy == NULL)
    return err_set(e, ERR_CONFIG, "field 'policy.placement': unknown "
                   "policy '%s' (first-fit or cost)", name);
  b->wait_value_micro = DEFAULT_WAIT_VALUE_MICRO;
  if (cfg->wait_value == NULL || json_is_null(cfg->wait_value))
    return 0;
  if (!json_is_object(cfg->wait_value))
    return err_set(e, ERR_CONFIG, "field 'policy.wait_value' must be an "
                   "object of dollars per GPU-hour by project");
  b->wait_values = json_object();
  json_object_foreach((json_t *)cfg->wait_value, key, v) {
    int64_t micro;

    if (!json_is_number(v) ||
        price_dollars_to_micro(json_number_value(v), PRICE_MAX_MICRO,
                               &micro) < 0)
      return err_set(e, ERR_CONFIG, "field 'policy.wait_value.%s': must be "
                     "dollars per GPU-hour, 0 to 10000", key);
    if (strcmp(key, "default") == 0)
      b->wait_value_micro = micro;
    else if (!broker__project_allowed(b, key))
      return err_set(e, ERR_CONFIG, "field 'policy.wait_value.%s': unknown "
                     "project", key);
    else
      json_object_set_new(b->wait_values, key, json_integer(micro));
  }
  return 0;
}

/* Every open hold as its job stands: a price the config changed, or a
 * crash, may have left one behind. */
static int
ledger_catch_up(struct broker *b, struct err *e)
{
  int rc = db_begin(b->db, e);

  if (rc == 0)
    rc = broker__ledger_catch_up(b, time_now_ms(), 1, e);
  if (rc == 0)
    rc = db_commit(b->db, e);
  if (rc < 0)
    db_rollback(b->db);
  return rc;
}

int
broker_new(uv_loop_t *loop, const struct broker_config *cfg,
           struct broker **out, struct err *e)
{
  struct broker *b = xcalloc(1, sizeof(*b));
  size_t nworkloads;
  int rc;

  b->tag = BROKER_TAG;
  b->loop = loop;
  b->state_dir = xstrdup(cfg->state_dir);
  b->self_exe = xstrdup(cfg->self_exe);
  b->tick_ms = cfg->tick_ms > 0 ? cfg->tick_ms : DEFAULT_TICK_MS;
  b->stage_poll_ms = cfg->stage_poll_ms > 0 ? cfg->stage_poll_ms
                                            : DEFAULT_STAGE_POLL_MS;
  if (cfg->projects != NULL && !json_is_null(cfg->projects))
    b->projects = json_incref((json_t *)cfg->projects);
  rc = db_open(cfg->db_path, &b->db, e);
  if (rc < 0)
    goto fail;
  rc = db_meta_get(b->db, "instance", &b->instance, e);
  if (rc < 0)
    goto fail;
  if (cfg->time_zone != NULL &&
      time_zone_parse(cfg->time_zone, &b->tz_offset_min) < 0) {
    rc = err_set(e, ERR_CONFIG, "field 'time_zone': '%s' is not UTC or "
                 "an offset such as +09:00 or -05:00", cfg->time_zone);
    goto fail;
  }
  rc = broker__nodes_open(b, e);
  if (rc == 0)
    rc = open_sites(b, cfg->sites, cfg->adapters, e);
  if (rc == 0)
    rc = broker__choose_policy(b, cfg, e);
  if (rc == 0)
    rc = broker__prices_sync(b, time_now_ms(), e);
  if (rc == 0)
    rc = broker__autoscaler_open(b, cfg->burst, e);
  if (rc < 0)
    goto fail;
  rc = broker__workloads_load(b, cfg->workloads, &nworkloads, e);
  if (rc == 0)
    rc = ledger_catch_up(b, e);
  if (rc == 0)
    rc = broker__budgets_load(b, e);
  if (rc == 0)
    rc = broker__runtimes_load(b, e);
  if (rc < 0)
    goto fail;
  rc = open_agents(b, cfg, e);
  if (rc < 0)
    goto fail;
  broker__submit_init(b);
  broker__scheduler_init(b);
  broker__stager_init(b);
  broker__ledger_init(b);
  broker__prices_init(b);
  broker__autoscaler_start(b);
  rc = broker__baseline_open(b, cfg->baseline, e);
  if (rc == 0)
    rc = broker__recover(b, e);
  if (rc < 0) {
    /* The handles are live now: close the normal way. */
    broker_close(b, NULL, NULL);
    return rc;
  }
  broker__kick(b);
  *out = b;
  return 0;

fail:
  for (size_t i = 0; i < b->nsites; i++) {
    if (b->sites[i].ctx != NULL)
      b->sites[i].ops->close(b->sites[i].ctx, NULL, NULL);
  }
  /* Nothing was sent yet: the client closes with nothing to call. */
  if (b->agent_http != NULL)
    http_client_close(b->agent_http, NULL, NULL);
  sites_free(b);
  broker__budgets_free(b);
  broker__runtimes_free(b);
  db_close(b->db);
  json_decref(b->projects);
  json_decref(b->wait_values);
  free(b->state_dir);
  free(b->self_exe);
  free(b->instance);
  free(b);
  return rc;
}

static void
broker_finish(struct broker *b)
{
  void (*cb)(void *) = b->close_cb;
  void *arg = b->close_arg;

  broker__stager_free(b);
  broker__pass_cost_release(b->last_pass);
  free(b->last_pass);
  sites_free(b);
  broker__budgets_free(b);
  broker__runtimes_free(b);
  db_close(b->db);
  json_decref(b->projects);
  json_decref(b->wait_values);
  free(b->state_dir);
  free(b->self_exe);
  free(b->instance);
  b->tag = 0;
  free(b);
  if (cb != NULL)
    cb(arg);
}

static void
part_closed(struct broker *b)
{
  assert(b->handles_open > 0);
  if (--b->handles_open == 0)
    broker_finish(b);
}

static void
handle_closed_cb(uv_handle_t *h)
{
  part_closed(h->data);
}

static void
site_closed_cb(void *arg)
{
  part_closed(arg);
}

void
broker__close_handle(struct broker *b, uv_handle_t *h)
{
  assert(h->data == b);
  b->handles_open++;
  uv_close(h, handle_closed_cb);
}

void
broker_close(struct broker *b, void (*cb)(void *arg), void *arg)
{
  assert(b->tag == BROKER_TAG);
  broker__submit_flush(b);
  broker__publish_flush(b);
  b->closing = 1;
  b->close_cb = cb;
  b->close_arg = arg;
  /* broker_close's own count: a part that calls back at once cannot
   * free the broker while others are still to be closed. */
  assert(b->handles_open == 0);
  b->handles_open++;
  /* Requests in flight to agents call back (ERR_UNAVAILABLE, ignored
   * while closing) before the client's close callback runs. */
  if (b->agent_http != NULL) {
    b->handles_open++;
    http_client_close(b->agent_http, site_closed_cb, b);
    b->agent_http = NULL;
  }
  for (size_t i = 0; i < b->nsites; i++) {
    void *ctx = b->sites[i].ctx;

    b->sites[i].ctx = NULL;
    b->handles_open++;
    b->sites[i].ops->close(ctx, site_closed_cb, b);
  }
  broker__submit_close(b);
  broker__scheduler_close(b);
  broker__stager_close(b);
  broker__ledger_close(b);
  broker__prices_close(b);
  broker__autoscaler_close(b);
  part_closed(b);
}

struct db *
broker_db(struct broker *b)
{
  return b->db;
}

/* ---- views ---- */

struct site_counts {
  struct broker *b;
  int64_t (*by_site)[JOB_STATE_COUNT]; /* [nsites][state] */
  int64_t unplaced[JOB_STATE_COUNT];
};

static void
count_cb(const char *site, enum job_state state, int64_t count, void *arg)
{
  struct site_counts *c = arg;

  for (size_t i = 0; i < c->b->nsites; i++) {
    if (strcmp(c->b->sites[i].name, site) == 0) {
      c->by_site[i][state] += count;
      return;
    }
  }
  c->unplaced[state] += count;
}

static int
site_counts_load(struct broker *b, struct site_counts *c, struct err *e)
{
  memset(c, 0, sizeof(*c));
  c->b = b;
  c->by_site = xcalloc(b->nsites ? b->nsites : 1, sizeof(*c->by_site));
  return db_job_counts(b->db, count_cb, c, e);
}

void
site_view_init(struct site_view *v)
{
  memset(v, 0, sizeof(*v));
}

void
site_view_release(struct site_view *v)
{
  if (v == NULL)
    return;
  free(v->name);
  free(v->kind);
  free(v->detail);
  for (int k = 0; k < v->ngpus; k++)
    free(v->gpus[k].type);
  free(v->gpus);
  free(v->agent);
  free(v->agent_error);
  free(v->prices);
  free(v->egress_to);
  site_view_init(v);
}

/* The days an owned site's use is measured over. */
#define USE_DAYS 30

/* An owned site's use of its GPUs over the last USE_DAYS days, and what
 * a used GPU-hour's sunk cost is at that use (the idle hours are paid
 * for too). */
static void
owned_use(const struct site *s, struct site_view *v)
{
  const struct price_owned *o = &s->cost.owned;
  int64_t now = time_now_ms(), used = 0;
  double have = (double)(o->nodes * o->gpus_per_node) * USE_DAYS *
                (double)TIME_DAY_MS;
  char from[11], to[11];
  int tz = s->broker->tz_offset_min;

  time_format_day(now - (USE_DAYS - 1) * TIME_DAY_MS, tz, from);
  time_format_day(now, tz, to);
  if (db_usage_site_ms(s->broker->db, s->name, from, to, &used, NULL) < 0 ||
      used <= 0 || have <= 0)
    return;
  v->utilization = (double)used / have;
  if (v->utilization > 1)
    v->utilization = 1;
  v->sunk_at_use_micro = price_owned_sunk_at(o, v->utilization);
}

/* The price part of s's view. */
static void
price_view(const struct site *s, struct site_view *v)
{
  static const char *const names[] = {"unpriced", "owned", "rented"};
  const struct site_cost *c = &s->cost;

  v->pricing = names[c->kind];
  v->sunk_micro = c->rates.sunk_micro;
  v->owned = c->owned;
  v->marginal_micro = c->rates.marginal_micro;
  v->prices = xcalloc(c->nrented > 0 ? c->nrented : 1, sizeof(*v->prices));
  for (size_t k = 0; k < c->nrented; k++) {
    struct site_price_view *p = &v->prices[v->nprices++];

    memcpy(p->gpu_type, c->rented[k].gpu_type, sizeof(p->gpu_type));
    p->per_gpu_hour_micro = c->rented[k].per_gpu_hour_micro;
    p->spot_micro = c->rented[k].spot_micro;
  }
  v->min_billed_seconds = c->min_billed_seconds;
  v->egress_per_gb_micro = c->egress_per_gb_micro;
  v->egress_to = xcalloc(c->negress_to + 1, sizeof(*v->egress_to));
  if (c->negress_to > 0)
    memcpy(v->egress_to, c->egress_to,
           c->negress_to * sizeof(*v->egress_to));
  v->negress_to = (int)c->negress_to;
  if (c->kind == SITE_OWNED)
    owned_use(s, v);
}

/* The agent's part of s's view, for a site that has one. */
static void
agent_view(const struct site *s, struct site_view *v)
{
  static const char *const names[] = {"unknown", "up", "down"};
  const struct agent_seen *a = &s->agent_seen;

  if (s->agent_url == NULL)
    return;
  v->agent = xstrdup(s->agent_url);
  v->agent_health = names[a->health];
  v->agent_error = a->error[0] != '\0' ? xstrdup(a->error) : NULL;
  v->agent_since_ms = a->since_ms;
  v->agent_checked_ms = a->checked_ms;
}

/* Fill v (initialised) with s, whose jobs by state are counts. */
static void
site_view_fill(struct site *s, const int64_t *counts, struct site_view *v)
{
  struct adapter_capacity cap;

  memset(&cap, 0, sizeof(cap));
  s->ops->capacity(s->ctx, &cap);
  v->name = xstrdup(s->name);
  v->kind = xstrdup(s->kind);
  v->reachable = cap.reachable;
  v->detail = xstrdup(cap.detail);
  v->nodes = cap.nodes;
  v->nodes_down = cap.nodes_down;
  v->max_jobs = cap.max_jobs;
  v->gpus_pending = cap.gpus_pending;
  v->gpus = xcalloc(cap.npools > 0 ? (size_t)cap.npools : 1,
                    sizeof(*v->gpus));
  for (int k = 0; k < cap.npools; k++) {
    const struct adapter_gpu_pool *p = &cap.pools[k];
    struct site_gpu_view *g = &v->gpus[v->ngpus++];
    int64_t idle = p->total - p->in_use - p->down - p->grow;

    g->type = xstrdup(p->type);
    g->total = p->total;
    g->in_use = p->in_use;
    g->idle = idle > 0 ? idle : 0;
    g->down = p->down;
    g->pending = p->pending;
    g->grow = p->grow;
    v->gpus_total += p->total;
    v->gpus_in_use += p->in_use;
  }
  /* "queued" at a site: jobs the last pass found waiting for it, plus
   * jobs placed there that the site has not started yet.  A site whose
   * agent is down still runs jobs (reachable is its adapter's word), but
   * no data reaches it: the agent_ fields. */
  v->queued = s->waiting + counts[JOB_PLACED] + counts[JOB_SUBMITTED];
  memcpy(v->jobs, counts, sizeof(v->jobs));
  agent_view(s, v);
  price_view(s, v);
}

int
broker_site_list(struct broker *b, site_view_cb cb, void *arg)
{
  struct site_counts c;
  struct site_view v;
  int rc = 0;

  if (site_counts_load(b, &c, NULL) < 0)
    log_warn("cannot count jobs by site");
  for (size_t i = 0; rc == 0 && i < b->nsites; i++) {
    site_view_init(&v);
    site_view_fill(&b->sites[i], c.by_site[i], &v);
    rc = cb(&v, arg);
    site_view_release(&v);
  }
  free(c.by_site);
  return rc;
}

int
broker_site_get(struct broker *b, const char *name, struct site_view *out,
                struct err *e)
{
  struct site_counts c;

  for (size_t i = 0; i < b->nsites; i++) {
    if (strcmp(b->sites[i].name, name) != 0)
      continue;
    if (site_counts_load(b, &c, NULL) < 0)
      log_warn("cannot count jobs by site");
    site_view_release(out);
    site_view_fill(&b->sites[i], c.by_site[i], out);
    free(c.by_site);
    return 0;
  }
  return err_set(e, ERR_NOT_FOUND, "site '%.64s' not found", name);
}

void
metrics_view_init(struct metrics_view *m)
{
  memset(m, 0, sizeof(*m));
}

void
metrics_view_release(struct metrics_view *m)
{
  if (m == NULL)
    return;
  for (size_t i = 0; i < m->nsites; i++)
    site_view_release(&m->sites[i]);
  free(m->sites);
  for (size_t i = 0; i < m->ncosts; i++) {
    free(m->costs[i].project);
    free(m->costs[i].site);
    free(m->costs[i].gpu_type);
  }
  free(m->costs);
  for (size_t i = 0; i < m->nbudgets; i++)
    free(m->budgets[i].project);
  free(m->budgets);
  metrics_view_init(m);
}

static int
budget_metric_cb(const struct budget_view *v, void *arg)
{
  struct metrics_view *m = arg;

  m->budgets = xrealloc(m->budgets, (m->nbudgets + 1) * sizeof(*m->budgets));
  m->budgets[m->nbudgets++] = (struct budget_metric){
      xstrdup(v->project), v->monthly_micro, v->spent_micro, v->warned_pct};
  return 0;
}

int
broker_metrics_get(struct broker *b, struct metrics_view *out,
                   struct err *e)
{
  struct site_counts c;
  int rc;

  metrics_view_release(out);
  rc = site_counts_load(b, &c, e);
  if (rc < 0)
    goto out;
  memcpy(out->unplaced, c.unplaced, sizeof(out->unplaced));
  out->sites = xcalloc(b->nsites ? b->nsites : 1, sizeof(*out->sites));
  for (size_t i = 0; i < b->nsites; i++) {
    site_view_fill(&b->sites[i], c.by_site[i], &out->sites[i]);
    out->nsites++;
  }
  rc = broker__cost_totals(b, out, e);
  if (rc == 0)
    rc = broker_budget_list(b, &(struct principal){.role = ROLE_ADMIN},
                            NULL, budget_metric_cb, out, e);
out:
  free(c.by_site);
  return rc;
}
