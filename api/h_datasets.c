/*
 * /v1/datasets handlers (docs/SYNC.md "tenbind REST API"): thin, the
 * broker validates and answers with views, rendered here.  A publish is answered later,
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

/* ---- rendering ---- */

static json_t *
version_json(const struct dataset_version_view *v)
{
  json_t *o = json_pack("{s:s, s:I, s:I}", "version", v->version, "files",
                        (json_int_t)v->files, "bytes",
                        (json_int_t)v->bytes);

  jsonx_set_time(o, "created", v->created_ms);
  jsonx_set_time(o, "published", v->published_ms);
  return o;
}

static json_t *
replica_json(const struct replica_view *r)
{
  json_t *o = json_pack(
      "{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I}", "site", r->site,
      "version", r->version, "state", r->state,
      "bytes_total", (json_int_t)r->bytes_total, "bytes_done",
      (json_int_t)r->bytes_done, "bytes_wire", (json_int_t)r->bytes_wire,
      "bytes_saved", (json_int_t)r->bytes_saved, "files_total",
      (json_int_t)r->files_total, "files_done", (json_int_t)r->files_done);

  jsonx_set_str(o, "error", r->error);
  jsonx_set_str(o, "path", r->path);
  jsonx_set_time(o, "started", r->started_ms);
  jsonx_set_time(o, "finished", r->finished_ms);
  jsonx_set_time(o, "updated", r->updated_ms);
  /* While a try waits out a backoff: when the next one goes. */
  jsonx_set_time(o, "next_try", r->next_try_ms);
  return o;
}

static json_t *
transfer_json(const struct transfer_view *t)
{
  json_t *o = json_pack("{s:I, s:s, s:s, s:s, s:I, s:s}", "id",
                        (json_int_t)t->id, "from_site", t->from_site,
                        "to_site", t->to_site, "version", t->version,
                        "bytes_wire", (json_int_t)t->bytes_wire, "state",
                        t->state);

  jsonx_set_str(o, "error", t->error);
  jsonx_set_time(o, "started", t->started_ms);
  jsonx_set_time(o, "finished", t->finished_ms);
  return o;
}

/* The dataset (new reference): its own fields with "versions" the
 * count, or, for a detailed view, the versions themselves, its replicas
 * and its latest transfers. */
static json_t *
dataset_json(const struct dataset_view *d)
{
  json_t *o = json_pack("{s:s, s:s, s:s, s:I}", "name", d->name,
                        "source_site", d->source_site, "path", d->path,
                        "versions", (json_int_t)d->nversions);
  json_t *versions;
  json_t *replicas;
  json_t *transfers;

  jsonx_set_str(o, "latest", d->latest);
  jsonx_set_str(o, "project", d->project);
  jsonx_set_time(o, "created", d->created_ms);
  if (!d->detailed)
    return o;
  versions = json_array();
  replicas = json_array();
  transfers = json_array();
  for (int64_t i = 0; i < d->nversions; i++)
    json_array_append_new(versions, version_json(&d->versions[i]));
  for (size_t i = 0; i < d->nreplicas; i++)
    json_array_append_new(replicas, replica_json(&d->replicas[i]));
  for (size_t i = 0; i < d->ntransfers; i++)
    json_array_append_new(transfers, transfer_json(&d->transfers[i]));
  /* Set over the count, so the key keeps its place. */
  json_object_set_new(o, "versions", versions);
  json_object_set_new(o, "replicas", replicas);
  json_object_set_new(o, "transfers", transfers);
  return o;
}

/* ---- handlers ---- */

void
api__datasets_create(struct api_call *call)
{
  json_t *body = NULL;
  struct dataset_view d;
  struct err e = {0};

  dataset_view_init(&d);
  if (api__body_json(call, &body, &e) < 0 ||
      broker_dataset_register(call->api->broker, &call->who, body, &d,
                              &e) < 0) {
    json_decref(body);
    dataset_view_release(&d);
    api__reply_err(call, &e);
    return;
  }
  json_decref(body);
  api__reply_json(call, 201, dataset_json(&d));
  dataset_view_release(&d);
}

static int
list_cb(const struct dataset_view *d, void *arg)
{
  json_array_append_new(arg, dataset_json(d));
  return 0;
}

void
api__datasets_list(struct api_call *call)
{
  json_t *arr = json_array();
  struct err e = {0};

  if (broker_dataset_list(call->api->broker, &call->who, list_cb, arr,
                          &e) < 0) {
    json_decref(arr);
    api__reply_err(call, &e);
    return;
  }
  api__reply_json(call, 200, json_pack("{s:o}", "datasets", arr));
}

void
api__datasets_get(struct api_call *call)
{
  struct dataset_view d;
  struct err e = {0};

  dataset_view_init(&d);
  if (broker_dataset_get(call->api->broker, &call->who, call->params[0],
                         &d, &e) < 0) {
    dataset_view_release(&d);
    api__reply_err(call, &e);
    return;
  }
  api__reply_json(call, 200, dataset_json(&d));
  dataset_view_release(&d);
}

static void
published_cb(void *arg, int rc, int created,
             const struct dataset_version_view *version, const char *path,
             const struct err *e)
{
  struct api_call *call = arg;
  json_t *v;

  if (rc < 0) {
    api__reply_err(call, e);
    return;
  }
  v = version_json(version);
  jsonx_set_str(v, "dataset", version->dataset);
  jsonx_set_str(v, "path", path);
  api__reply_json(call, created ? 201 : 200, v);
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
  struct replica_view r;
  struct err e = {0};

  replica_view_init(&r);
  if (api__body_json(call, &body, &e) < 0 ||
      broker_dataset_replicate(call->api->broker, &call->who,
                               call->params[0], body, &r, &e) < 0) {
    json_decref(body);
    replica_view_release(&r);
    api__reply_err(call, &e);
    return;
  }
  json_decref(body);
  api__reply_json(call, 202, replica_json(&r));
  replica_view_release(&r);
}
