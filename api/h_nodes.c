/*
 * The node agents' routes (docs/NODES.md) and the nodes operators see.
 *
 * A node agent presents its node token, which the broker checks itself:
 * the routes are public to the API's own token check, and answer 401
 * without a node token whether API auth is on or off (a VM proves which
 * node it is, always).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api_internal.h"
#include "util/alloc.h"
#include "util/jsonx.h"
#include "util/timeutil.h"

/* A log chunk's cap: the agent sends at most 1 MiB per request. */
#define NODE_LOG_CHUNK_MAX (1u << 20)

static const char *
node_token(const struct api_call *call)
{
  const char *h = http_request_header(call->req, "Authorization");

  if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0 || h[7] == '\0')
    return NULL;
  return h + 7;
}

void
api__nodes_heartbeat(struct api_call *call)
{
  const char *token = node_token(call);
  json_t *req = NULL, *answer = NULL;
  struct err e = {0};

  if (token == NULL) {
    api__reply_errf(call, ERR_UNAUTHORIZED, "missing 'Authorization: Bearer "
                    "NODE_TOKEN' header");
    return;
  }
  if (api__body_json(call, &req, &e) < 0 ||
      broker_node_heartbeat(call->api->broker, token, req, &answer, &e) < 0) {
    api__reply_err(call, &e);
  } else {
    api__reply_json(call, 200, answer);
  }
  json_decref(req);
}

void
api__nodes_log(struct api_call *call)
{
  const char *token = node_token(call);
  const char *data;
  int64_t job_id, offset, size = 0;
  size_t len = 0;
  struct err e = {0};
  int rc;

  if (token == NULL) {
    api__reply_errf(call, ERR_UNAUTHORIZED, "missing 'Authorization: Bearer "
                    "NODE_TOKEN' header");
    return;
  }
  if (api__param_id(call, 0, &job_id, &e) < 0 ||
      api__query_int(call, "offset", 0, INT64_MAX, -1, &offset, &e) < 0) {
    api__reply_err(call, &e);
    return;
  }
  if (offset < 0) {
    api__reply_errf(call, ERR_INVALID, "query 'offset' is required");
    return;
  }
  data = http_request_body(call->req, &len);
  if (len > NODE_LOG_CHUNK_MAX) {
    api__reply_errf(call, ERR_TOO_LARGE, "a log chunk is at most %u bytes",
                    NODE_LOG_CHUNK_MAX);
    return;
  }
  rc = broker_node_log(call->api->broker, token, job_id, offset, data, len,
                       &size, &e);
  if (rc == ERR_CONFLICT) {
    /* The agent resumes from what is held. */
    api__reply_json(call, 409, json_pack("{s:{s:s, s:s}, s:I}", "error",
                                         "code", "CONFLICT", "message",
                                         e.msg, "size", (json_int_t)size));
    return;
  }
  if (rc < 0) {
    api__reply_err(call, &e);
    return;
  }
  api__reply_json(call, 200, json_pack("{s:I}", "size", (json_int_t)size));
}

static int
node_json(const struct node_view *n, void *arg)
{
  json_t *v = json_object();

  json_object_set_new(v, "id", json_integer(n->id));
  jsonx_set_str(v, "state", n->state);
  jsonx_set_str(v, "shape", n->shape);
  jsonx_set_str(v, "zone", n->zone);
  json_object_set_new(v, "spot", json_boolean(n->spot));
  jsonx_set_str(v, "vm_id", n->vm_id);
  json_object_set_new(v, "gpus", json_integer(n->gpus));
  jsonx_set_str(v, "gpu_type", n->gpu_type);
  jsonx_set_time(v, "created", n->created_ms);
  jsonx_set_time(v, "launched", n->launched_ms);
  jsonx_set_time(v, "registered", n->registered_ms);
  jsonx_set_time(v, "ended", n->ended_ms);
  json_object_set_new(v, "uptime_s", json_integer(n->uptime_ms / 1000));
  json_object_set_new(v, "cost_micro", n->cost_micro >= 0
                                           ? json_integer(n->cost_micro)
                                           : json_null());
  jsonx_set_str(v, "reason", n->reason);
  json_array_append_new(arg, v);
  return 0;
}

int
api__site_nodes(struct api_call *call, const char *site, json_t **out,
                struct err *e)
{
  json_t *nodes = json_array();
  /* Nodes that ended in the last day are shown: where a VM went is
   * what an operator asks first. */
  int rc = broker_node_list(call->api->broker, site,
                            time_now_ms() - 86400000, node_json, nodes, e);

  if (rc < 0) {
    json_decref(nodes);
    return rc;
  }
  *out = nodes;
  return 0;
}

/* Live nodes counted by site and state, for /metrics. */
struct node_counts {
  struct {
    char site[128];
    char state[16];
    int64_t n;
  } c[512];
  size_t n;
};

static int
count_node(const struct node_view *v, void *arg)
{
  struct node_counts *nc = arg;
  size_t i;

  for (i = 0; i < nc->n; i++)
    if (strcmp(nc->c[i].site, v->site) == 0 &&
        strcmp(nc->c[i].state, v->state) == 0)
      break;
  if (i == nc->n) {
    if (nc->n == sizeof(nc->c) / sizeof(nc->c[0]))
      return 0;
    snprintf(nc->c[i].site, sizeof(nc->c[i].site), "%s", v->site);
    snprintf(nc->c[i].state, sizeof(nc->c[i].state), "%s", v->state);
    nc->c[i].n = 0;
    nc->n++;
  }
  nc->c[i].n++;
  return 0;
}

int
api__metrics_nodes(struct broker *b, struct buf *out)
{
  struct node_counts *nc = xcalloc(1, sizeof(*nc));
  struct err e = {0};
  int rc = broker_node_list(b, NULL, INT64_MAX, count_node, nc, &e);

  if (rc == 0)
    rc = buf_adds(out, "# HELP tenbin_nodes VMs of elastic sites by state "
                       "(launching, booting, idle, busy, terminating).\n"
                       "# TYPE tenbin_nodes gauge\n");
  for (size_t i = 0; rc == 0 && i < nc->n; i++)
    rc = buf_addf(out, "tenbin_nodes{site=\"%s\",state=\"%s\"} %lld\n",
                  nc->c[i].site, nc->c[i].state, (long long)nc->c[i].n);
  free(nc);
  return rc;
}
