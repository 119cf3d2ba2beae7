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
#include "policies/burst.h"
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

/* ---- the autoscaler ---- */

/* Site's autoscaler as the site view shows it, or NULL when none grows
 * the site. */
json_t *
api__site_autoscaler(struct broker *b, const char *site)
{
  struct scale_view v;
  json_t *o, *counts;

  if (!broker_scale_view(b, site, &v))
    return NULL;
  o = json_object();
  jsonx_set_str(o, "action", v.action);
  jsonx_set_str(o, "reason", v.reason);
  jsonx_set_str(o, "detail", v.detail);
  jsonx_set_time(o, "at", v.at_ms);
  json_object_set_new(o, "nodes", json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}",
                                            "wanted", (json_int_t)v.wanted,
                                            "live", (json_int_t)v.live,
                                            "launching",
                                            (json_int_t)v.launching,
                                            "idle", (json_int_t)v.idle,
                                            "busy", (json_int_t)v.busy,
                                            "terminating",
                                            (json_int_t)v.terminating));
  json_object_set_new(o, "demand_gpus", json_integer(v.demand_gpus));
  json_object_set_new(o, "forecast_gpus", v.forecast_gpus >= 0
                                              ? json_integer(v.forecast_gpus)
                                              : json_null());
  json_object_set_new(o, "spend_micro_per_hour", json_integer(v.spend_micro));
  json_object_set_new(o, "spend_cap_micro_per_hour",
                      v.spend_cap_micro > 0 ? json_integer(v.spend_cap_micro)
                                            : json_null());
  json_object_set_new(o, "boot_s", json_integer(v.boot_ms / 1000));
  json_object_set_new(o, "spot_interruptions_per_hour",
                      json_real(v.interruptions_per_hour));
  counts = json_object();
  for (int r = 1; r < BURST_REASON_COUNT; r++)
    if (v.decisions[r] > 0)
      json_object_set_new(counts, burst_reason_name((enum burst_reason)r),
                          json_integer((json_int_t)v.decisions[r]));
  json_object_set_new(o, "decisions", counts);
  return o;
}

static int
decision_json(const struct scale_decision *d, void *arg)
{
  json_t *o = json_object();

  json_object_set_new(o, "id", json_integer(d->id));
  jsonx_set_time(o, "at", d->at_ms);
  jsonx_set_str(o, "site", d->site);
  jsonx_set_str(o, "action", d->action);
  jsonx_set_str(o, "reason", d->reason);
  jsonx_set_str(o, "detail", d->detail);
  json_object_set_new(o, "launched", json_integer(d->launched));
  json_object_set_new(o, "released", json_integer(d->released));
  json_object_set_new(o, "live_nodes", json_integer(d->live_nodes));
  json_object_set_new(o, "wanted_nodes", json_integer(d->wanted_nodes));
  json_object_set_new(o, "demand_gpus", json_integer(d->demand_gpus));
  json_object_set_new(o, "forecast_gpus", d->forecast_gpus >= 0
                                              ? json_integer(d->forecast_gpus)
                                              : json_null());
  json_object_set_new(o, "spend_micro_per_hour",
                      json_integer(d->spend_micro));
  json_array_append_new(arg, o);
  return 0;
}

#define SCALE_LOG_DEFAULT 50
#define SCALE_LOG_MAX 1000

void
api__autoscaler_log(struct api_call *call)
{
  json_t *arr = json_array();
  const char *site = http_request_query(call->req, "site");
  int64_t limit, before;
  struct err e = {0};

  if (api__query_int(call, "limit", 1, SCALE_LOG_MAX, SCALE_LOG_DEFAULT,
                     &limit, &e) < 0 ||
      api__query_int(call, "before", 1, INT64_MAX, 0, &before, &e) < 0 ||
      broker_scale_log(call->api->broker, site, before, limit, decision_json,
                       arr, &e) < 0) {
    json_decref(arr);
    api__reply_err(call, &e);
    return;
  }
  api__reply_json(call, 200, json_pack("{s:o}", "decisions", arr));
}

struct scale_metrics {
  struct broker *b;
  struct buf *out;
  int family;   /* which family this walk writes */
  int rc;
};

static int
scale_metric_site(const struct site_view *s, void *arg)
{
  struct scale_metrics *m = arg;
  struct scale_view v;
  static const char *const states[] = {"wanted", "launching", "idle",
                                       "busy"};

  if (!broker_scale_view(m->b, s->name, &v))
    return 0;
  if (m->family == 0) {
    const int64_t n[] = {v.wanted, v.launching, v.idle, v.busy};

    for (size_t i = 0; m->rc == 0 && i < 4; i++)
      m->rc = buf_addf(m->out,
                       "tenbin_autoscaler_nodes{site=\"%s\",state=\"%s\"} "
                       "%lld\n", s->name, states[i], (long long)n[i]);
    return m->rc;
  }
  for (int r = 1; m->rc == 0 && r < BURST_REASON_COUNT; r++)
    m->rc = buf_addf(m->out,
                     "tenbin_autoscaler_decisions_total{site=\"%s\","
                     "reason=\"%s\"} %llu\n", s->name,
                     burst_reason_name((enum burst_reason)r),
                     (unsigned long long)v.decisions[r]);
  return m->rc;
}

int
api__metrics_autoscaler(struct broker *b, struct buf *out)
{
  struct scale_metrics m = {.b = b, .out = out};

  m.rc = buf_adds(out, "# HELP tenbin_autoscaler_nodes Nodes of elastic "
                       "sites the autoscaler wants, and those launching, "
                       "idle and busy.\n"
                       "# TYPE tenbin_autoscaler_nodes gauge\n");
  if (m.rc == 0)
    (void)broker_site_list(b, scale_metric_site, &m);
  if (m.rc == 0)
    m.rc = buf_adds(out, "# HELP tenbin_autoscaler_decisions_total Plans "
                         "that launched, released or held back, by "
                         "reason.\n"
                         "# TYPE tenbin_autoscaler_decisions_total counter\n");
  m.family = 1;
  if (m.rc == 0)
    (void)broker_site_list(b, scale_metric_site, &m);
  return m.rc;
}
