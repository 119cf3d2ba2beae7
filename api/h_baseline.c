/*
 * The NCCL baseline's routes (docs/BASELINE.md): what operators see and
 * start, and what a probe's nodes call.
 *
 * A probe presents its probe's token, which the broker checks itself:
 * those routes are public to the API's own token check, and answer 401
 * without the probe's token whether API auth is on or off.
 */
#include <strings.h>

#include "api/api_internal.h"
#include "spec/probe_doc.h"
#include "util/jsonx.h"

void
api__baseline_get(struct api_call *call)
{
  json_t *out = NULL;
  struct err e = {0};

  if (broker_baseline_view(call->api->broker, call->params[0],
                           http_request_query(call->req, "against"), &out,
                           &e) < 0)
    api__reply_err(call, &e);
  else
    api__reply_json(call, 200, out);
}

void
api__baseline_run(struct api_call *call)
{
  static const struct jsonx_field fields[] = {{"nodes", JX_INT},
                                              {NULL, 0}};
  json_t *req = NULL, *out = NULL;
  struct err e = {0};
  int64_t nodes = 1;
  size_t len = 0;

  (void)http_request_body(call->req, &len);
  /* The body is optional: no body is one node. */
  if (len > 0 && (api__body_json(call, &req, &e) < 0 ||
                  jsonx_check(req, fields, "", &e) < 0 ||
                  jsonx_int(req, "nodes", 1, PROBE_DOC_MAX_NODES, 1, &nodes,
                            "", &e) < 0)) {
    api__reply_err(call, &e);
    goto out;
  }
  if (broker_baseline_run(call->api->broker, call->params[0], nodes, &out,
                          &e) < 0)
    api__reply_err(call, &e);
  else
    api__reply_json(call, 202, out);
out:
  json_decref(req);
}

/* The bearer token of a probe's call, or NULL after answering 401. */
static const char *
probe_token(struct api_call *call)
{
  const char *h = http_request_header(call->req, "Authorization");

  if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0 || h[7] == '\0') {
    api__reply_errf(call, ERR_UNAUTHORIZED, "missing 'Authorization: Bearer "
                    "PROBE_TOKEN' header");
    return NULL;
  }
  return h + 7;
}

void
api__probes_nccl_id_put(struct api_call *call)
{
  const char *token = probe_token(call);
  json_t *req = NULL;
  struct err e = {0};
  int64_t id;

  if (token == NULL)
    return;
  if (api__param_id(call, 0, &id, &e) < 0 ||
      api__body_json(call, &req, &e) < 0 ||
      broker_probe_nccl_id_put(call->api->broker, token, id, req, &e) < 0)
    api__reply_err(call, &e);
  else
    api__reply_body(call, 204, NULL, NULL, 0);
  json_decref(req);
}

void
api__probes_nccl_id_get(struct api_call *call)
{
  const char *token = probe_token(call);
  json_t *out = NULL;
  struct err e = {0};
  int64_t id;

  if (token == NULL)
    return;
  if (api__param_id(call, 0, &id, &e) < 0 ||
      broker_probe_nccl_id_get(call->api->broker, token, id, &out, &e) < 0)
    api__reply_err(call, &e);
  else
    api__reply_json(call, 200, out);
}

void
api__probes_report(struct api_call *call)
{
  const char *token = probe_token(call);
  const char *body;
  struct err e = {0};
  size_t len = 0;
  int64_t id;

  if (token == NULL)
    return;
  body = http_request_body(call->req, &len);
  if (api__param_id(call, 0, &id, &e) < 0 ||
      broker_probe_report(call->api->broker, token, id, body, len, &e) < 0)
    api__reply_err(call, &e);
  else
    api__reply_body(call, 204, NULL, NULL, 0);
}
