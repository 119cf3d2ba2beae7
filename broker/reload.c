/*
 * A new configuration while tenbind runs (SIGHUP, daemon/main.c).
 *
 * What may change: each site's prices ("cost") and job environment
 * ("job_env"), the placement policy and wait values, the workloads, and
 * the baseline block.  What may not: the sites themselves (their names,
 * order, kind, adapter settings and agent), which live in open
 * adapters, timers and in-flight requests; those are refused, naming
 * the first field that differs, and need a restart.
 *
 * All or nothing: the new values are parsed and checked first, swapped
 * in, and the database half (price history, workloads) is written in
 * one transaction; anything that fails puts every old value back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/broker_internal.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/jsonx.h"
#include "util/log.h"
#include "util/timeutil.h"

/* What a reload swaps, new before and old after. */
struct swap {
  struct site_cost *cost;       /* one per site */
  char ***job_env;
  const struct placement_policy *policy;
  int64_t wait_value_micro;
  json_t *wait_values;
  struct broker_baseline *baseline;
};

/* The fields of a site a reload leaves to a restart: all but these. */
static int
reloadable(const char *key)
{
  return strcmp(key, "cost") == 0 || strcmp(key, "job_env") == 0;
}

/* ERR_CONFIG naming the first field of sites[i] that differs from the
 * running one outside the reloadable ones, else 0. */
static int
site_same(const struct site *s, const json_t *cfg, size_t i, struct err *e)
{
  const char *key;
  const json_t *v;

  if (!json_is_object(cfg))
    return err_set(e, ERR_CONFIG, "field 'sites[%zu]' must be an object", i);
  json_object_foreach((json_t *)cfg, key, v) {
    if (!reloadable(key) && !json_equal(v, json_object_get(s->config, key)))
      return err_set(e, ERR_CONFIG, "field 'sites[%zu].%s': changing it needs "
                     "a restart (a reload changes a site's cost and "
                     "job_env only)", i, key);
  }
  json_object_foreach(s->config, key, v) {
    if (!reloadable(key) && json_object_get(cfg, key) == NULL)
      return err_set(e, ERR_CONFIG, "field 'sites[%zu].%s': changing it needs "
                     "a restart (a reload changes a site's cost and "
                     "job_env only)", i, key);
  }
  return 0;
}

static int
check_sites(struct broker *b, const json_t *sites, struct err *e)
{
  if (!json_is_array(sites) || json_array_size(sites) != b->nsites)
    return err_set(e, ERR_CONFIG, "field 'sites': adding or removing a "
                   "site needs a restart (%zu now)", b->nsites);
  for (size_t i = 0; i < b->nsites; i++) {
    int rc = site_same(&b->sites[i], json_array_get(sites, i), i, e);

    if (rc < 0)
      return rc;
  }
  return 0;
}

/* The new costs and environments into x (owned by x until swapped). */
static int
parse_sites(struct broker *b, const json_t *sites, struct swap *x,
            struct err *e)
{
  x->cost = xcalloc(b->nsites, sizeof(*x->cost));
  x->job_env = xcalloc(b->nsites, sizeof(*x->job_env));
  for (size_t i = 0; i < b->nsites; i++) {
    const json_t *cfg = json_array_get(sites, i);
    const json_t *cost = json_object_get(cfg, "cost");
    const json_t *env = json_object_get(cfg, "job_env");
    int rc = 0;

    if (cost != NULL && !json_is_null(cost))
      rc = broker__site_cost(&x->cost[i], cost, i, e);
    if (rc == 0 && env != NULL && !json_is_null(env))
      rc = broker__site_job_env(&x->job_env[i], env, i, e);
    if (rc < 0)
      return rc;
  }
  return 0;
}

/* Exchange x's values with the broker's. */
static void
swap(struct broker *b, struct swap *x)
{
  const struct placement_policy *policy = b->policy;
  int64_t micro = b->wait_value_micro;
  json_t *values = b->wait_values;
  struct broker_baseline *bl = b->baseline;

  for (size_t i = 0; i < b->nsites; i++) {
    struct site_cost c = b->sites[i].cost;
    char **env = b->sites[i].job_env;

    b->sites[i].cost = x->cost[i];
    b->sites[i].job_env = x->job_env[i];
    x->cost[i] = c;
    x->job_env[i] = env;
  }
  b->policy = x->policy;
  b->wait_value_micro = x->wait_value_micro;
  b->wait_values = x->wait_values;
  b->baseline = x->baseline;
  x->policy = policy;
  x->wait_value_micro = micro;
  x->wait_values = values;
  x->baseline = bl;
}

static void
swap_release(struct broker *b, struct swap *x)
{
  struct broker_baseline *keep = b->baseline;

  for (size_t i = 0; x->cost != NULL && i < b->nsites; i++) {
    broker__site_cost_release(&x->cost[i]);
    strv_free(x->job_env[i]);
  }
  free(x->cost);
  free(x->job_env);
  json_decref(x->wait_values);
  /* broker__baseline_free frees b's: hand it x's for the call. */
  b->baseline = x->baseline;
  broker__baseline_free(b);
  b->baseline = keep;
}

/* The policy, wait values and baseline that cfg gives, computed on b
 * with x's costs in force (swapped in for the call), into x. */
static int
parse_policy(struct broker *b, const struct broker_config *cfg,
             struct swap *x, struct err *e)
{
  int rc;

  /* The policy follows the prices (cost where a site is priced), and
   * the baseline reads b: both are computed on b with the new values
   * in, then handed back to x. */
  x->policy = b->policy;
  x->wait_value_micro = b->wait_value_micro;
  x->wait_values = b->wait_values;
  x->baseline = b->baseline;
  swap(b, x);
  b->wait_values = NULL;
  b->baseline = NULL;
  rc = broker__choose_policy(b, cfg, e);
  if (rc == 0)
    rc = broker__baseline_open(b, cfg->baseline, e);
  swap(b, x);
  return rc;
}

/* What changed, for the log ("cost of onprem, job_env of cloud, 3
 * workloads"), from the sites' running config and the new one. */
static int
describe(struct broker *b, const struct broker_config *cfg,
         const struct placement_policy *was, size_t nworkloads,
         struct buf *out)
{
  static const char *const keys[] = {"cost", "job_env"};
  int rc = 0;

  for (size_t i = 0; rc == 0 && i < b->nsites; i++) {
    const json_t *now = json_array_get(cfg->sites, i);

    for (size_t k = 0; rc == 0 && k < 2; k++) {
      const json_t *x = json_object_get(b->sites[i].config, keys[k]);
      const json_t *y = json_object_get(now, keys[k]);

      if ((x != NULL || y != NULL) &&
          (x == NULL || y == NULL || !json_equal(x, y)))
        rc = buf_addf(out, "%s of %s, ", keys[k], b->sites[i].name);
    }
  }
  if (rc == 0 && was != b->policy)
    rc = buf_addf(out, "placement policy %s, ", b->policy->name);
  if (rc == 0)
    rc = buf_addf(out, "%zu workload%s%s", nworkloads,
                  nworkloads == 1 ? "" : "s",
                  b->baseline != NULL ? ", the baseline" : "");
  return rc;
}

int
broker_reload(struct broker *b, const struct broker_config *cfg,
              char **summary, struct err *e)
{
  struct swap x = {0};
  struct buf text;
  size_t nworkloads = 0;
  const char *url = NULL;
  int rc;

  *summary = NULL;
  if (b->closing)
    return err_set(e, ERR_UNAVAILABLE, "tenbind is shutting down");
  rc = check_sites(b, cfg->sites, e);
  if (rc == 0)
    rc = parse_sites(b, cfg->sites, &x, e);
  for (size_t i = 0; rc == 0 && cfg->workloads != NULL &&
                     i < json_array_size(cfg->workloads); i++) {
    rc = broker__workload_validate(json_array_get(cfg->workloads, i), e);
    if (rc < 0) {
      err_prefix(e, "workloads[%zu]", i);
      rc = err_recode(e, ERR_CONFIG);
    }
  }
  if (rc == 0)
    rc = parse_policy(b, cfg, &x, e);
  if (rc < 0)
    goto out;
  /* The probes' way back, when the new block names none. */
  url = broker__baseline_url(b);
  swap(b, &x);
  if (url != NULL)
    broker_baseline_set_url(b, url);
  rc = db_begin(b->db, e);
  if (rc == 0)
    rc = broker__prices_sync(b, time_now_ms(), e);
  if (rc == 0)
    rc = broker__workloads_load(b, cfg->workloads, &nworkloads, e);
  if (rc == 0)
    rc = db_commit(b->db, e);
  if (rc < 0) {
    db_rollback(b->db);
    swap(b, &x);
    goto out;
  }
  /* The last pass's cost inputs borrow from the old prices. */
  broker__pass_cost_release(b->last_pass);
  free(b->last_pass);
  b->last_pass = NULL;
  buf_init(&text, 4096);
  *summary = xstrdup(describe(b, cfg, x.policy, nworkloads, &text) == 0
                         ? buf_str(&text)
                         : "(too much to say)");
  buf_release(&text);
  for (size_t i = 0; i < b->nsites; i++) {
    json_decref(b->sites[i].config);
    b->sites[i].config = json_deep_copy(json_array_get(cfg->sites, i));
  }
  broker__kick(b);
out:
  swap_release(b, &x);
  return rc;
}
