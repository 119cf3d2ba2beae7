/*
 * Workloads, sites, health and metrics handlers.
 */
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

/* The site as GET /v1/sites shows it (new reference). */
static json_t *
site_json(const struct site_view *v)
{
  json_t *gpus = json_array();
  json_t *jobs = json_object();

  for (int k = 0; k < v->ngpus; k++) {
    const struct site_gpu_view *g = &v->gpus[k];

    json_array_append_new(
        gpus, json_pack("{s:s, s:I, s:I, s:I, s:I, s:I}", "type", g->type,
                        "total", (json_int_t)g->total, "in_use",
                        (json_int_t)g->in_use, "idle", (json_int_t)g->idle,
                        "down", (json_int_t)g->down, "pending",
                        (json_int_t)g->pending));
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
                   "s:I, s:o, s:s?, s:o}",
                   "name", v->name, "kind", v->kind, "reachable",
                   v->reachable, "detail", v->detail, "nodes",
                   (json_int_t)v->nodes, "nodes_down",
                   (json_int_t)v->nodes_down, "max_jobs",
                   (json_int_t)v->max_jobs, "gpus", gpus, "gpus_total",
                   (json_int_t)v->gpus_total, "gpus_in_use",
                   (json_int_t)v->gpus_in_use, "gpus_pending",
                   (json_int_t)v->gpus_pending, "jobs", jobs, "agent",
                   v->agent, "agent_state", agent_state_json(v));
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
  api__reply_json(call, 200, site_json(&v));
  site_view_release(&v);
}

void
api__healthz(struct api_call *call)
{
  api__reply_json(call, 200, json_pack("{s:s, s:s}", "status", "ok",
                                       "version", call->api->version));
}

void
api__metrics(struct api_call *call)
{
  struct buf b;
  size_t len;
  char *body;

  buf_init(&b, 16 * 1024 * 1024);
  if (broker_metrics(call->api->broker, &b) < 0 ||
      api__metrics_http(call->api, &b) < 0) {
    buf_release(&b);
    api__reply_errf(call, ERR_INTERNAL, "cannot produce metrics");
    return;
  }
  body = buf_take(&b, &len);
  api__reply_body(call, 200, "text/plain; version=0.0.4", body, len);
}
