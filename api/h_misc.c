/*
 * Workloads, sites, health and metrics handlers, and how the views they
 * get from the broker are rendered.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_internal.h"
#include "util/jsonx.h"

static int
workload_cb(const struct workload_view *w, void *arg)
{
  json_t *v = json_loads(w->definition, 0, NULL);

  if (v != NULL)
    json_array_append_new(arg, v);
  return 0;
}

void
api__workloads_list(struct api_call *call)
{
  json_t *arr = json_array();
  struct err e = {0};

  if (broker_workload_list(call->api->broker, workload_cb, arr, &e) < 0) {
    json_decref(arr);
    api__reply_err(call, &e);
    return;
  }
  api__reply_json(call, 200, json_pack("{s:o}", "workloads", arr));
}

void
api__workloads_create(struct api_call *call)
{
  json_t *def = NULL;
  struct err e = {0};
  int created = 0;

  if (api__body_json(call, &def, &e) < 0 ||
      broker_workload_put(call->api->broker, def, &created, &e) < 0) {
    json_decref(def);
    api__reply_err(call, &e);
    return;
  }
  api__reply_json(call, created ? 201 : 200, def);
}

void
api__workloads_get(struct api_call *call)
{
  struct workload_view w;
  struct err e = {0};
  char *text;

  workload_view_init(&w);
  if (broker_workload_get(call->api->broker, call->params[0], &w, &e) <
      0) {
    workload_view_release(&w);
    api__reply_err(call, &e);
    return;
  }
  /* The stored text is the body, as it was stored: no parse and print. */
  text = w.definition;
  w.definition = NULL;
  workload_view_release(&w);
  api__reply_body(call, 200, "application/json", text, strlen(text));
}

/* {"state", "error", "since", "checked"} of v's agent (new reference),
 * or JSON null for a site without one. */
static json_t *
agent_state_json(const struct site_view *v)
{
  json_t *o;

  if (v->agent == NULL)
    return json_null();
  o = json_pack("{s:s}", "state", v->agent_health);
  jsonx_set_str(o, "error", v->agent_error);
  jsonx_set_time(o, "since", v->agent_since_ms);
  jsonx_set_time(o, "checked", v->agent_checked_ms);
  return o;
}

/* The site's prices, in integer micro-dollars (exact, as billed). */
static json_t *
cost_json(const struct site_view *v)
{
  json_t *c = json_pack("{s:s}", "pricing", v->pricing);
  json_t *od, *spot;

  if (strcmp(v->pricing, "owned") == 0) {
    json_object_set_new(c, "sunk_per_gpu_hour_micro",
                        json_integer(v->sunk_micro));
    json_object_set_new(c, "marginal_per_gpu_hour_micro",
                        json_integer(v->marginal_micro));
    json_object_set_new(c, "inputs", api__owned_inputs_json(&v->owned));
    json_object_set_new(c, "utilization_30d", json_real(v->utilization));
    if (v->sunk_at_use_micro > 0)
      json_object_set_new(c, "sunk_at_utilization_micro",
                          json_integer(v->sunk_at_use_micro));
  } else if (strcmp(v->pricing, "rented") == 0) {
    od = json_object();
    spot = json_object();
    for (int k = 0; k < v->nprices; k++) {
      const struct site_price_view *p = &v->prices[k];

      json_object_set_new(od, p->gpu_type,
                          json_integer(p->per_gpu_hour_micro));
      if (p->spot_micro >= 0)
        json_object_set_new(spot, p->gpu_type, json_integer(p->spot_micro));
    }
    json_object_set_new(c, "per_gpu_hour_micro", od);
    json_object_set_new(c, "spot_per_gpu_hour_micro", spot);
    json_object_set_new(c, "min_billed_seconds",
                        json_integer(v->min_billed_seconds));
    json_object_set_new(c, "egress_per_gb_micro",
                        json_integer(v->egress_per_gb_micro));
    if (v->negress_to > 0) {
      json_t *to = json_object();

      for (int k = 0; k < v->negress_to; k++)
        json_object_set_new(to, v->egress_to[k].site,
                            json_integer(v->egress_to[k].per_gb_micro));
      json_object_set_new(c, "egress_to_sites_per_gb_micro", to);
    }
  }
  return c;
}

/* The site as GET /v1/sites shows it (new reference). */
static json_t *
site_json(const struct site_view *v)
{
  json_t *gpus = json_array();
  json_t *jobs = json_object();

  for (int k = 0; k < v->ngpus; k++) {
    const struct site_gpu_view *g = &v->gpus[k];

    json_array_append_new(
        gpus, json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I}", "type",
                        g->type, "total", (json_int_t)g->total, "in_use",
                        (json_int_t)g->in_use, "idle", (json_int_t)g->idle,
                        "down", (json_int_t)g->down, "pending",
                        (json_int_t)g->pending, "grow", (json_int_t)g->grow));
  }
  json_object_set_new(jobs, "queued", json_integer(v->queued));
  json_object_set_new(jobs, "running", json_integer(v->jobs[JOB_RUNNING]));
  json_object_set_new(jobs, "succeeded",
                      json_integer(v->jobs[JOB_SUCCEEDED]));
  json_object_set_new(jobs, "failed", json_integer(v->jobs[JOB_FAILED]));
  json_object_set_new(jobs, "cancelled",
                      json_integer(v->jobs[JOB_CANCELLED]));
  json_object_set_new(jobs, "lost", json_integer(v->jobs[JOB_LOST]));
  json_object_set_new(jobs, "staging", json_integer(v->jobs[JOB_STAGING]));
  return json_pack("{s:s, s:s, s:b, s:s, s:I, s:I, s:I, s:o, s:I, s:I, "
                   "s:I, s:o, s:s?, s:o, s:o}",
                   "name", v->name, "kind", v->kind, "reachable",
                   v->reachable, "detail", v->detail, "nodes",
                   (json_int_t)v->nodes, "nodes_down",
                   (json_int_t)v->nodes_down, "max_jobs",
                   (json_int_t)v->max_jobs, "gpus", gpus, "gpus_total",
                   (json_int_t)v->gpus_total, "gpus_in_use",
                   (json_int_t)v->gpus_in_use, "gpus_pending",
                   (json_int_t)v->gpus_pending, "jobs", jobs, "agent",
                   v->agent, "agent_state", agent_state_json(v), "cost",
                   cost_json(v));
}

static int
site_cb(const struct site_view *v, void *arg)
{
  json_array_append_new(arg, site_json(v));
  return 0;
}

void
api__sites_list(struct api_call *call)
{
  json_t *arr = json_array();

  (void)broker_site_list(call->api->broker, site_cb, arr);
  api__reply_json(call, 200, json_pack("{s:o}", "sites", arr));
}

void
api__sites_get(struct api_call *call)
{
  struct site_view v;
  struct err e = {0};

  site_view_init(&v);
  if (broker_site_get(call->api->broker, call->params[0], &v, &e) < 0) {
    site_view_release(&v);
    api__reply_err(call, &e);
    return;
  }
  {
    json_t *j = site_json(&v), *nodes = NULL;

    if (api__site_nodes(call, v.name, &nodes, &e) < 0) {
      json_decref(j);
      site_view_release(&v);
      api__reply_err(call, &e);
      return;
    }
    json_t *scaler = api__site_autoscaler(call->api->broker, v.name);

    if (json_array_size(nodes) > 0 || (strcmp(v.kind, "local") != 0 &&
                                        strcmp(v.kind, "slurm") != 0))
      json_object_set_new(j, "nodes", nodes);
    else
      json_decref(nodes);
    json_t *baseline = broker_baseline_summary(call->api->broker, v.name);

    if (scaler != NULL)
      json_object_set_new(j, "autoscaler", scaler);
    if (baseline != NULL)
      json_object_set_new(j, "baseline", baseline);
    api__reply_json(call, 200, j);
  }
  site_view_release(&v);
}

void
api__healthz(struct api_call *call)
{
  api__reply_json(call, 200, json_pack("{s:s, s:s}", "status", "ok",
                                       "version", call->api->version));
}

/* One gauge family by site and GPU type: the int64_t member of struct
 * site_gpu_view at offset. */
static int
gpu_family(const struct metrics_view *m, const char *name, const char *help,
           size_t offset, struct buf *out)
{
  int rc = buf_addf(out, "# HELP %s %s\n# TYPE %s gauge\n", name, help,
                    name);

  for (size_t i = 0; rc == 0 && i < m->nsites; i++) {
    const struct site_view *s = &m->sites[i];

    for (int k = 0; rc == 0 && k < s->ngpus; k++) {
      int64_t v;

      memcpy(&v, (const char *)&s->gpus[k] + offset, sizeof(v));
      rc = buf_addf(out, "%s{site=\"%s\",type=\"%s\"} %lld\n", name,
                    s->name, s->gpus[k].type, (long long)v);
    }
  }
  return rc;
}

/* Prometheus wants each family's samples together, so one family is
 * written for every site before the next family starts. */
static int
metrics_sites(const struct metrics_view *m, struct buf *out)
{
  int rc;

  rc = buf_adds(out, "# HELP tenbin_site_up 1 when the site answers.\n"
                     "# TYPE tenbin_site_up gauge\n");
  for (size_t i = 0; rc == 0 && i < m->nsites; i++)
    rc = buf_addf(out, "tenbin_site_up{site=\"%s\"} %d\n",
                  m->sites[i].name, m->sites[i].reachable ? 1 : 0);
  /* Sites with an agent only; 0 until it has answered once. */
  if (rc == 0)
    rc = buf_adds(out, "# HELP tenbin_agent_up 1 when the site's "
                       "tenbin-agent answers.\n"
                       "# TYPE tenbin_agent_up gauge\n");
  for (size_t i = 0; rc == 0 && i < m->nsites; i++) {
    const struct site_view *s = &m->sites[i];

    if (s->agent != NULL)
      rc = buf_addf(out, "tenbin_agent_up{site=\"%s\"} %d\n", s->name,
                    strcmp(s->agent_health, "up") == 0 ? 1 : 0);
  }
  if (rc == 0)
    rc = gpu_family(m, "tenbin_gpus", "GPUs by site and type.",
                    offsetof(struct site_gpu_view, total), out);
  if (rc == 0)
    rc = gpu_family(m, "tenbin_gpus_in_use", "GPUs assigned to jobs.",
                    offsetof(struct site_gpu_view, in_use), out);
  if (rc == 0)
    rc = gpu_family(m, "tenbin_gpus_down", "GPUs on drained or down nodes.",
                    offsetof(struct site_gpu_view, down), out);
  if (rc == 0)
    rc = gpu_family(m, "tenbin_gpus_waiting",
                    "GPUs asked for by jobs waiting in the site's queue.",
                    offsetof(struct site_gpu_view, pending), out);
  return rc;
}

/* Money spent since the beginning: a counter that only grows (holds
 * still running grow it up to the second). */
static int
metrics_costs(const struct metrics_view *m, struct buf *out)
{
  int rc = buf_adds(out, "# HELP tenbin_cost_dollars_total Dollars spent "
                         "by project, site, GPU type and kind (on_demand, "
                         "spot, sunk, marginal, egress).\n"
                         "# TYPE tenbin_cost_dollars_total counter\n");

  for (size_t i = 0; rc == 0 && i < m->ncosts; i++) {
    const struct cost_total_view *c = &m->costs[i];

    rc = buf_addf(out, "tenbin_cost_dollars_total{project=\"%s\","
                  "site=\"%s\",gpu_type=\"%s\",kind=\"%s\"} ",
                  c->project, c->site, c->gpu_type, c->kind);
    if (rc == 0)
      rc = api__add_dollars(out, c->micro);
    if (rc == 0)
      rc = buf_adds(out, "\n");
  }
  return rc;
}

/* Budgets: the limit and what was spent this month, per project. */
static int
metrics_budgets(const struct metrics_view *m, struct buf *out)
{
  static const char *const fams[] = {"limit", "spent"};
  int rc = 0;

  for (int f = 0; rc == 0 && f < 2; f++) {
    rc = buf_addf(out, "# HELP tenbin_budget_%s_dollars A project's "
                  "monthly budget%s.\n# TYPE tenbin_budget_%s_dollars "
                  "gauge\n", fams[f], f ? ": spent this month" : "",
                  fams[f]);
    for (size_t i = 0; rc == 0 && i < m->nbudgets; i++) {
      int64_t v = f ? m->budgets[i].spent_micro : m->budgets[i].limit_micro;

      rc = buf_addf(out, "tenbin_budget_%s_dollars{project=\"%s\"} ",
                    fams[f], m->budgets[i].project);
      if (rc == 0)
        rc = api__add_dollars(out, v);
      if (rc == 0)
        rc = buf_adds(out, "\n");
    }
  }
  if (rc == 0)
    rc = buf_adds(out, "# HELP tenbin_budget_warned_percent The budget "
                       "warning given this month (0, 80 or 100).\n"
                       "# TYPE tenbin_budget_warned_percent gauge\n");
  for (size_t i = 0; rc == 0 && i < m->nbudgets; i++)
    rc = buf_addf(out, "tenbin_budget_warned_percent{project=\"%s\"} %d\n",
                  m->budgets[i].project, m->budgets[i].warned_pct);
  return rc;
}

/* The broker's metrics (jobs by site and state, sites, agents, GPUs by
 * site and type) in Prometheus text. */
static int
metrics_text(const struct metrics_view *m, struct buf *out)
{
  int rc;

  rc = buf_adds(out, "# HELP tenbin_jobs Jobs by site and state.\n"
                     "# TYPE tenbin_jobs gauge\n");
  for (int st = 0; rc == 0 && st < JOB_STATE_COUNT; st++) {
    const char *state = job_state_name((enum job_state)st);

    rc = buf_addf(out, "tenbin_jobs{site=\"\",state=\"%s\"} %lld\n", state,
                  (long long)m->unplaced[st]);
    for (size_t i = 0; rc == 0 && i < m->nsites; i++)
      rc = buf_addf(out, "tenbin_jobs{site=\"%s\",state=\"%s\"} %lld\n",
                    m->sites[i].name, state,
                    (long long)m->sites[i].jobs[st]);
  }
  if (rc == 0)
    rc = metrics_sites(m, out);
  if (rc == 0)
    rc = metrics_costs(m, out);
  if (rc == 0)
    rc = metrics_budgets(m, out);
  return rc;
}

void
api__metrics(struct api_call *call)
{
  struct metrics_view m;
  struct err e = {0};
  struct buf b;
  size_t len;
  char *body;

  metrics_view_init(&m);
  buf_init(&b, 16 * 1024 * 1024);
  if (broker_metrics_get(call->api->broker, &m, &e) < 0 ||
      metrics_text(&m, &b) < 0 ||
      api__metrics_nodes(call->api->broker, &b) < 0 ||
      api__metrics_autoscaler(call->api->broker, &b) < 0 ||
      broker_baseline_metrics(call->api->broker, &b) < 0 ||
      api__metrics_http(call->api, &b) < 0) {
    metrics_view_release(&m);
    buf_release(&b);
    api__reply_errf(call, ERR_INTERNAL, "cannot produce metrics");
    return;
  }
  metrics_view_release(&m);
  body = buf_take(&b, &len);
  api__reply_body(call, 200, "text/plain; version=0.0.4", body, len);
}
