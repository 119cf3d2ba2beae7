/*
 * /v1/datasets handlers (docs/SYNC.md "tenbind REST API"): thin, the
 * broker validates and answers in JSON.  A publish is answered later,
 * when the source site's agent has hashed the tree.
 */
#include <stdlib.h>
#include <string.h>

#include "api/api_internal.h"
#include "util/jsonx.h"

/* The body of a POST that takes none or an empty object. */
static int
empty_body(const struct api_call *call, struct err *e)
{
  static const struct jsonx_field none[] = {{NULL, 0}};
  size_t len;
  json_t *body = NULL;
  int rc;

  (void)http_request_body(call->req, &len);
  if (len == 0)
    return 0;
  rc = api__body_json(call, &body, e);
  if (rc == 0)
    rc = jsonx_check(body, none, "", e);
  json_decref(body);
  return rc;
}

void
api__datasets_create(struct api_call *call)
{
  json_t *body = NULL;
  json_t *out = NULL;
  struct err e = {0};

  if (api__body_json(call, &body, &e) < 0 ||
      broker_dataset_register(call->api->broker, &call->who, body, &out,
                              &e) < 0) {
    json_decref(body);
    api__reply_err(call, &e);
    return;
  }
  json_decref(body);
  api__reply_json(call, 201, out);
}

void
api__datasets_list(struct api_call *call)
{
  json_t *out = NULL;
  struct err e = {0};

  if (broker_dataset_list(call->api->broker, &call->who, &out, &e) < 0) {
    api__reply_err(call, &e);
    return;
  }
  api__reply_json(call, 200, out);
}

void
api__datasets_get(struct api_call *call)
{
  json_t *out = NULL;
  struct err e = {0};

  if (broker_dataset_get(call->api->broker, &call->who, call->params[0],
                         &out, &e) < 0) {
    api__reply_err(call, &e);
    return;
  }
  api__reply_json(call, 200, out);
}

static void
published_cb(void *arg, int rc, int created, const json_t *version,
             const struct err *e)
{
  struct api_call *call = arg;

  if (rc < 0) {
    api__reply_err(call, e);
    return;
  }
  api__reply_json(call, created ? 201 : 200, json_incref((json_t *)version));
}

void
api__datasets_publish(struct api_call *call)
{
  struct err e = {0};

  if (empty_body(call, &e) < 0 ||
      broker_dataset_publish(call->api->broker, &call->who, call->params[0],
                             published_cb, call, &e) < 0)
    api__reply_err(call, &e);
  /* else: answered by published_cb */
}

void
api__datasets_replicate(struct api_call *call)
{
  json_t *body = NULL;
  json_t *out = NULL;
  struct err e = {0};

  if (api__body_json(call, &body, &e) < 0 ||
      broker_dataset_replicate(call->api->broker, &call->who,
                               call->params[0], body, &out, &e) < 0) {
    json_decref(body);
    api__reply_err(call, &e);
    return;
  }
  json_decref(body);
  api__reply_json(call, 202, out);
}
