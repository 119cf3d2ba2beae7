/*
 * Workloads, sites, health and metrics handlers.
 */
#include <stdlib.h>
#include <string.h>

#include "api/api_internal.h"
#include "util/jsonx.h"

static int
workload_cb(const char *name, const char *json, void *arg)
{
  json_t *v = json_loads(json, 0, NULL);

  (void)name;
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
  char *text = NULL;
  struct err e = {0};
  size_t len;

  if (broker_workload_get(call->api->broker, call->params[0], &text, &e) <
      0) {
    api__reply_err(call, &e);
    return;
  }
  len = strlen(text);
  api__reply_body(call, 200, "application/json", text, len);
}

void
api__sites_list(struct api_call *call)
{
  api__reply_json(call, 200, json_pack("{s:o}", "sites",
                                       broker_sites_json(call->api->broker)));
}

void
api__sites_get(struct api_call *call)
{
  json_t *v = broker_site_json(call->api->broker, call->params[0]);

  if (v == NULL) {
    api__reply_errf(call, ERR_NOT_FOUND, "site '%.64s' not found",
                    call->params[0]);
    return;
  }
  api__reply_json(call, 200, v);
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
