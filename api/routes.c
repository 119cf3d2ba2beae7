/*
 * THE route table, and the middleware every request passes in order
 * (http/router does the matching): the shutdown gate (503),
 * authentication (401) and role (403) of a matched route, then the
 * route match's own refusal (404/405), then the handler.  Request
 * counters for /metrics are kept per route and status.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_internal.h"
#include "util/alloc.h"

const struct api_route api_routes[] = {
    {{"POST", "/v1/jobs", ROLE_SUBMITTER, 0}, api__jobs_create},
    {{"GET", "/v1/jobs", ROLE_VIEWER, 0}, api__jobs_list},
    {{"GET", "/v1/jobs/{id}", ROLE_VIEWER, 0}, api__jobs_get},
    {{"POST", "/v1/jobs/{id}/cancel", ROLE_SUBMITTER, 0}, api__jobs_cancel},
    {{"POST", "/v1/jobs/{id}/release", ROLE_SUBMITTER, 0},
     api__jobs_release},
    {{"GET", "/v1/jobs/{id}/events", ROLE_VIEWER, 0}, api__jobs_events},
    {{"GET", "/v1/jobs/{id}/placement", ROLE_VIEWER, 0},
     api__jobs_placement},
    {{"GET", "/v1/jobs/{id}/log", ROLE_VIEWER, 0}, api__jobs_log},
    {{"GET", "/v1/workloads", ROLE_VIEWER, 0}, api__workloads_list},
    {{"POST", "/v1/workloads", ROLE_ADMIN, 0}, api__workloads_create},
    {{"GET", "/v1/workloads/{name}", ROLE_VIEWER, 0}, api__workloads_get},
    {{"GET", "/v1/sites", ROLE_VIEWER, 0}, api__sites_list},
    {{"GET", "/v1/sites/{name}", ROLE_VIEWER, 0}, api__sites_get},
    {{"GET", "/v1/sites/{name}/baseline", ROLE_VIEWER, 0},
     api__baseline_get},
    {{"POST", "/v1/sites/{name}/baseline/run", ROLE_ADMIN, 0},
     api__baseline_run},
    {{"GET", "/v1/prices", ROLE_VIEWER, 0}, api__prices_list},
    {{"GET", "/v1/autoscaler/log", ROLE_VIEWER, 0}, api__autoscaler_log},
    {{"GET", "/v1/reports/usage", ROLE_VIEWER, 0}, api__reports_usage},
    {{"GET", "/v1/budgets", ROLE_VIEWER, 0}, api__budgets_list},
    {{"GET", "/v1/budgets/{project}", ROLE_VIEWER, 0}, api__budgets_get},
    {{"PUT", "/v1/budgets/{project}", ROLE_ADMIN, 0}, api__budgets_set},
    {{"PUT", "/v1/prices/{site}/{gpu_type}", ROLE_ADMIN, 0},
     api__prices_set},
    {{"POST", "/v1/datasets", ROLE_SUBMITTER, 0}, api__datasets_create},
    {{"GET", "/v1/datasets", ROLE_VIEWER, 0}, api__datasets_list},
    {{"GET", "/v1/datasets/{name}", ROLE_VIEWER, 0}, api__datasets_get},
    {{"POST", "/v1/datasets/{name}/versions", ROLE_SUBMITTER, 0},
     api__datasets_publish},
    {{"POST", "/v1/datasets/{name}/replicas", ROLE_SUBMITTER, 0},
     api__datasets_replicate},
    /* Node agents present node tokens, which the handlers check. */
    {{"POST", "/v1/nodes/heartbeat", ROLE_VIEWER, HTTP_ROUTE_PUBLIC},
     api__nodes_heartbeat},
    {{"PUT", "/v1/nodes/jobs/{id}/log", ROLE_VIEWER, HTTP_ROUTE_PUBLIC},
     api__nodes_log},
    /* A probe's nodes present the probe's token, which the broker
     * checks. */
    {{"PUT", "/v1/probes/{id}/nccl-id", ROLE_VIEWER, HTTP_ROUTE_PUBLIC},
     api__probes_nccl_id_put},
    {{"GET", "/v1/probes/{id}/nccl-id", ROLE_VIEWER, HTTP_ROUTE_PUBLIC},
     api__probes_nccl_id_get},
    {{"POST", "/v1/probes/{id}/report", ROLE_VIEWER, HTTP_ROUTE_PUBLIC},
     api__probes_report},
    {{"GET", "/healthz", ROLE_VIEWER, HTTP_ROUTE_PUBLIC}, api__healthz},
    /* The dashboard's files hold no data: its API calls carry the
     * token. */
    {{"GET", "/ui", ROLE_VIEWER, HTTP_ROUTE_PUBLIC}, api__ui_redirect},
    {{"GET", "/ui/", ROLE_VIEWER, HTTP_ROUTE_PUBLIC}, api__ui_index},
    {{"GET", "/ui/{file}", ROLE_VIEWER, HTTP_ROUTE_PUBLIC}, api__ui_file},
    {{"GET", "/metrics", ROLE_VIEWER, 0}, api__metrics},
};

const size_t api_route_count = sizeof(api_routes) / sizeof(api_routes[0]);

static const int status_slots[API_STATUS_SLOTS - 1] = {
    200, 201, 202, 204, 400, 401, 402, 403, 404, 405, 409, 413, 422, 500,
    502, 503, 504};

int
api_new(struct broker *b, const struct api_config *cfg, struct api **out,
        struct err *e)
{
  struct api *api = xcalloc(1, sizeof(*api));

  (void)e;
  api->broker = b;
  api->auth = cfg->auth;
  api->version = xstrdup(cfg->version ? cfg->version : "dev");
  api->requests = xcalloc(api_route_count + 1, sizeof(*api->requests));
  *out = api;
  return 0;
}

void
api_stop(struct api *api)
{
  api->stopped = 1;
}

void
api_free(struct api *api)
{
  if (api == NULL)
    return;
  free(api->requests);
  free(api->version);
  free(api);
}

static void
count(struct api *api, size_t route, int status)
{
  size_t slot = API_STATUS_SLOTS - 1;

  for (size_t i = 0; i < API_STATUS_SLOTS - 1; i++) {
    if (status_slots[i] == status) {
      slot = i;
      break;
    }
  }
  api->requests[route][slot]++;
}

int
api__metrics_http(const struct api *api, struct buf *out)
{
  int rc = buf_adds(out, "# HELP tenbin_http_requests_total HTTP requests "
                         "by route and status.\n"
                         "# TYPE tenbin_http_requests_total counter\n");

  for (size_t r = 0; rc == 0 && r <= api_route_count; r++) {
    for (size_t s = 0; rc == 0 && s < API_STATUS_SLOTS; s++) {
      char route[96];

      if (api->requests[r][s] == 0)
        continue;
      if (r == api_route_count)
        snprintf(route, sizeof(route), "unmatched");
      else
        snprintf(route, sizeof(route), "%s %s", api_routes[r].http.method,
                 api_routes[r].http.pattern);
      if (s == API_STATUS_SLOTS - 1)
        rc = buf_addf(out, "tenbin_http_requests_total{route=\"%s\","
                      "status=\"other\"} %llu\n", route,
                      (unsigned long long)api->requests[r][s]);
      else
        rc = buf_addf(out, "tenbin_http_requests_total{route=\"%s\","
                      "status=\"%d\"} %llu\n", route, status_slots[s],
                      (unsigned long long)api->requests[r][s]);
    }
  }
  return rc;
}

static void
call_free(struct api_call *call)
{
  principal_release(&call->who);
  free(call);
}

void
api__reply_body(struct api_call *call, int status, const char *ctype,
                char *body, size_t len)
{
  count(call->api, call->match.index, status);
  http_respond(call->req, status, ctype, body, len);
  call_free(call);
}

void
api__reply_fd(struct api_call *call, int status, const char *ctype, int fd,
              int64_t offset, size_t len)
{
  count(call->api, call->match.index, status);
  http_respond_fd(call->req, status, ctype, fd, (off_t)offset, len);
  call_free(call);
}

void
api__reply_json(struct api_call *call, int status, json_t *v)
{
  count(call->api, call->match.index,
        http_reply_json(call->req, status, v));
  call_free(call);
}

void
api__reply_err(struct api_call *call, const struct err *e)
{
  count(call->api, call->match.index, http_reply_err(call->req, e));
  call_free(call);
}

void
api__reply_errf(struct api_call *call, int code, const char *fmt, ...)
{
  struct err e;
  va_list ap;

  va_start(ap, fmt);
  err_vset(&e, code, fmt, ap);
  va_end(ap);
  api__reply_err(call, &e);
}

/* Middleware: while shutting down, answer 503 without touching the
 * broker. */
static int
gate(void *ctx, struct http_request *req, const struct http_match *m,
     struct err *e)
{
  const struct api_call *call = ctx;

  (void)req;
  (void)m;
  if (call->api->stopped)
    return err_set(e, ERR_UNAVAILABLE, "tenbind is shutting down");
  return 0;
}

/*
 * Middleware: who is calling (with auth off, an admin of everything),
 * and whether their role may use the route.  A path with no route is
 * let through to its 404 or 405.
 */
static int
authenticate(void *ctx, struct http_request *req, const struct http_match *m,
             struct err *e)
{
  struct api_call *call = ctx;
  const struct http_route *route = m->route;
  const char *h;
  int rc;

  (void)req;
  if (route == NULL)
    return 0;
  if (!call->api->auth || (route->flags & HTTP_ROUTE_PUBLIC) != 0) {
    call->who.role = ROLE_ADMIN;
    call->who.projects = NULL;
    snprintf(call->who.name, sizeof(call->who.name), "anonymous");
    return 0;
  }
  h = http_request_header(call->req, "Authorization");
  if (h == NULL)
    return err_set(e, ERR_UNAUTHORIZED, "missing 'Authorization: Bearer' "
                   "header");
  if (strncasecmp(h, "Bearer ", 7) != 0 || h[7] == '\0')
    return err_set(e, ERR_UNAUTHORIZED, "'Authorization' header must be "
                   "'Bearer TOKEN'");
  rc = broker_authenticate(call->api->broker, h + 7, &call->who, e);
  if (rc < 0)
    return rc;
  if ((int)call->who.role < route->role)
    return err_set(e, ERR_FORBIDDEN, "role '%s' may not %s %s",
                   broker_role_name(call->who.role), route->method,
                   route->pattern);
  return 0;
}

static const http_middleware_fn middleware[] = {gate, authenticate};

static const struct http_router router = {
    HTTP_ROUTES(api_routes), middleware,
    sizeof(middleware) / sizeof(middleware[0])};

static struct api_call *
call_new(struct api *api, struct http_request *req)
{
  struct api_call *call = xcalloc(1, sizeof(*call));

  call->api = api;
  call->req = req;
  call->match.index = api_route_count;
  call->params = call->match.params;
  return call;
}

/*
 * Route and authenticate call.  Returns 1 when the route's handler may
 * run; 0 when call was answered (and freed) instead.
 */
static int
admit(struct api_call *call)
{
  struct err e = {0};

  if (http_router_admit(&router, call, call->req, &call->match, &e) < 0) {
    api__reply_err(call, &e);
    return 0;
  }
  return 1;
}

void
api_handle_head(struct http_request *req, void *arg)
{
  struct api_call *call;

  /* Only a body is worth refusing early; the rest is checked once, in
   * api_handle(), which checks again anyway (a token may be revoked
   * while its body arrives). */
  if (!http_request_announces_body(req))
    return;
  call = call_new(arg, req);
  if (admit(call))
    call_free(call);
}

void
api_handle(struct http_request *req, void *arg)
{
  struct api_call *call = call_new(arg, req);

  if (admit(call))
    api_routes[call->match.index].handler(call);
}
