/*
 * tenbin-agent's HTTP face: the route table and its middleware (the
 * stopping gate, the bearer token, valid names) on http/router, and the
 * answers; serve.c and pull.c do the work.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sync/agent_client.h"
#include "agent/agent_int.h"
#include "sync/path.h"
#include "util/alloc.h"
#include "util/hash.h"
#include "util/log.h"

#define MAX_CONNECTIONS 256
#define CONN_TIMEOUT_S 120
/* Peers pull with a few batches in flight each; more from one address
 * than this is a leak or an attack. */
#define AGENT_MAX_PER_ADDRESS 64

void
agent_reply_json(struct http_request *req, int status, json_t *v)
{
  (void)http_reply_json(req, status, v);
}

void
agent_reply_err(struct http_request *req, const struct err *e)
{
  (void)http_reply_err(req, e);
}

void
agent_reply_errf(struct http_request *req, int code, const char *fmt, ...)
{
  struct err e;
  va_list ap;

  va_start(ap, fmt);
  err_vset(&e, code, fmt, ap);
  va_end(ap);
  agent_reply_err(req, &e);
}

int
agent_body_json(struct http_request *req, json_t **out, struct err *e)
{
  return http_request_json(req, AGENT_JSON_MAX, out, e);
}

static int
authorized(const struct agent *a, struct http_request *req)
{
  const char *h = http_request_header(req, "Authorization");
  size_t want = strlen(a->token);

  if (h == NULL || strncmp(h, "Bearer ", 7) != 0)
    return 0;
  h += 7;
  return strlen(h) == want && hash_equal(h, a->token, want);
}

static int
is_public(const struct http_match *m)
{
  return m->route != NULL && (m->route->flags & HTTP_ROUTE_PUBLIC) != 0;
}

/* Middleware: while stopping, answer 503 to all but the public routes. */
static int
gate(void *ctx, struct http_request *req, const struct http_match *m,
     struct err *e)
{
  const struct agent *a = ctx;

  (void)req;
  if (a->closing && !is_public(m))
    return err_set(e, ERR_UNAVAILABLE, "the agent is stopping");
  return 0;
}

/* Middleware: the agent's token, before anything else is disclosed (a
 * path with no route is 401 too, without it). */
static int
authenticate(void *ctx, struct http_request *req, const struct http_match *m,
             struct err *e)
{
  if (is_public(m) || authorized(ctx, req))
    return 0;
  return err_set(e, ERR_UNAUTHORIZED, "missing or wrong agent token");
}

/* Middleware: the {name} and {v} segments every dataset route has. */
static int
valid_params(void *ctx, struct http_request *req, const struct http_match *m,
             struct err *e)
{
  const char *name = http_match_param(m, "name");
  const char *v = http_match_param(m, "v");

  (void)ctx;
  (void)req;
  if (name != NULL && !syncpath_valid_name(name))
    return err_set(e, ERR_INVALID, "dataset name '%.64s' must match "
                   "[A-Za-z0-9][A-Za-z0-9._-]{0,63}", name);
  if (v != NULL && !agentc_valid_version(v))
    return err_set(e, ERR_INVALID, "version '%.70s' is not a 64-digit "
                   "lowercase hex id", v);
  return 0;
}

/* ---- the routes: each hands the path's {name} and {v} to its worker */

static void
healthz(struct agent *a, struct http_request *req, const struct http_match *m)
{
  (void)m;
  agent_reply_json(req, 200,
                   json_pack("{s:b, s:I, s:I, s:I}", "ok", 1,
                             "background", (json_int_t)a->background,
                             "drafts", (json_int_t)a->drafts, "served_bytes",
                             (json_int_t)serve_served_bytes(a)));
}

static void
versions_post(struct agent *a, struct http_request *req,
              const struct http_match *m)
{
  publish_post(a, req, m->params[0]);
}

static void
versions_get(struct agent *a, struct http_request *req,
             const struct http_match *m)
{
  serve_versions(a, req, m->params[0]);
}

static void
manifest_get(struct agent *a, struct http_request *req,
             const struct http_match *m)
{
  serve_manifest(a, req, m->params[0], m->params[1]);
}

static void
batch_post(struct agent *a, struct http_request *req,
           const struct http_match *m)
{
  serve_batch(a, req, m->params[0], m->params[1]);
}

static void
pull_put_route(struct agent *a, struct http_request *req,
               const struct http_match *m)
{
  pull_put(a, req, m->params[0], m->params[1]);
}

static void
pull_get_route(struct agent *a, struct http_request *req,
               const struct http_match *m)
{
  pull_get(a, req, m->params[0], m->params[1]);
}

struct agent_route {
  struct http_route http; /* no roles: the token is all or nothing */
  void (*handler)(struct agent *a, struct http_request *req,
                  const struct http_match *m);
};

/* THE agent's route table; agent/agent-openapi.yaml describes it. */
static const struct agent_route routes[] = {
    {{"GET", "/healthz", 0, HTTP_ROUTE_PUBLIC}, healthz},
    {{"POST", "/v1/datasets/{name}/versions", 0, 0}, versions_post},
    {{"GET", "/v1/datasets/{name}/versions", 0, 0}, versions_get},
    {{"GET", "/v1/datasets/{name}/versions/{v}/manifest", 0, 0},
     manifest_get},
    {{"POST", "/v1/datasets/{name}/versions/{v}/batch", 0, 0}, batch_post},
    {{"PUT", "/v1/datasets/{name}/pulls/{v}", 0, 0}, pull_put_route},
    {{"GET", "/v1/datasets/{name}/pulls/{v}", 0, 0}, pull_get_route},
};

const struct http_routes agent_routes = HTTP_ROUTES(routes);

static const http_middleware_fn middleware[] = {gate, authenticate,
                                                valid_params};

static const struct http_router router = {
    HTTP_ROUTES(routes), middleware,
    sizeof(middleware) / sizeof(middleware[0])};

/* The http server's head handler: a request with a body is refused, if
 * it is to be, before that body (up to AGENT_BATCH_MAX) is read. */
static void
handle_head(struct http_request *req, void *arg)
{
  struct http_match m;
  struct err e = {0};

  if (!http_request_announces_body(req))
    return;
  if (http_router_admit(&router, arg, req, &m, &e) < 0)
    agent_reply_err(req, &e);
}

static void
handle(struct http_request *req, void *arg)
{
  struct http_match m;
  struct err e = {0};

  if (http_router_admit(&router, arg, req, &m, &e) < 0) {
    agent_reply_err(req, &e);
    return;
  }
  routes[m.index].handler(arg, req, &m);
}

int
agent_start(uv_loop_t *loop, const struct agent_config *cfg,
            struct agent **out, struct err *e)
{
  struct agent *a;
  struct http_server_config hc;
  struct http_client_config cc;
  int rc;

  if (cfg->host != NULL && (cfg->token == NULL || strlen(cfg->token) < 16))
    return err_set(e, ERR_CONFIG, "the agent token must have at least 16 "
                   "characters");
  a = xcalloc(1, sizeof(*a));
  a->loop = loop;
  a->token = xstrdup(cfg->token);
  a->parallel = cfg->parallel > 0 ? cfg->parallel : 4;
  a->watch = cfg->watch;
  a->draft_ms = cfg->draft_ms < 0    ? 0
                : cfg->draft_ms == 0 ? AGENT_DRAFT_MS
                                     : (unsigned)cfg->draft_ms;
  /* 8 MiB: four batches in flight keep a 1 Gbit link with a 20 ms RTT
   * (2.5 MB in flight) full many times over, and hold an agent's peak
   * memory under 64 MiB while a 2 GiB file moves. */
  a->batch_bytes = cfg->batch_bytes > 0 ? cfg->batch_bytes
                                        : (size_t)8 << 20;
  if (a->batch_bytes > ((size_t)64 << 20))
    a->batch_bytes = (size_t)64 << 20;
  rc = store_open(cfg->root, cfg->fsync_publish, &a->store, e);
  if (rc < 0)
    goto fail;
  serve_new(a);
  publish_new(a);
  memset(&cc, 0, sizeof(cc));
  cc.ca_file = cfg->ca_file;
  cc.allow_insecure_tokens = cfg->allow_insecure_tokens != 0;
  rc = http_client_new(loop, &cc, &a->client, e);
  if (rc < 0)
    goto fail;
  /* In-process only (agent_pull): no port, no token to check. */
  if (cfg->host == NULL)
    goto done;
  memset(&hc, 0, sizeof(hc));
  hc.host = cfg->host;
  hc.port = cfg->port;
  hc.max_body = AGENT_BATCH_MAX;
  hc.max_connections = MAX_CONNECTIONS;
  hc.max_per_address = cfg->max_per_address > 0 ? cfg->max_per_address
                                                : AGENT_MAX_PER_ADDRESS;
  hc.conn_timeout_s = CONN_TIMEOUT_S;
  hc.tls_cert_file = cfg->tls_cert_file;
  hc.tls_key_file = cfg->tls_key_file;
  hc.head_handler = handle_head;
  hc.handler = handle;
  hc.handler_arg = a;
  rc = http_server_start(loop, &hc, &a->http, e);
  if (rc < 0)
    goto fail;
done:
  *out = a;
  return 0;

fail:
  if (a->client != NULL)
    http_client_close(a->client, NULL, NULL);
  serve_free(a);
  publish_free(a);
  store_close(a->store);
  free(a->token);
  free(a);
  return rc;
}

uint16_t
agent_port(const struct agent *a)
{
  return a->http != NULL ? http_server_port(a->http) : 0;
}

void
agent_queue(struct agent *a, uv_work_t *w, uv_work_cb run,
            uv_after_work_cb done)
{
  a->inflight++;
  /* uv_queue_work fails only for a NULL work_cb. */
  if (uv_queue_work(a->loop, w, run, done) != 0)
    abort();
}

static void close_step(struct agent *a);

void
agent_work_done(struct agent *a)
{
  a->inflight--;
  if (a->closing && a->inflight == 0)
    close_step(a);
}

static void
finish_close(struct agent *a)
{
  void (*cb)(void *) = a->close_cb;
  void *arg = a->close_arg;

  pull_free_all(a);
  pull_prestage_free(a);
  serve_free(a);
  publish_free(a);
  store_close(a->store);
  free(a->token);
  free(a);
  if (cb != NULL)
    cb(arg);
}

static void
client_closed(void *arg)
{
  struct agent *a = arg;

  a->client = NULL;
  finish_close(a);
}

static void
close_client(struct agent *a)
{
  if (a->client_closing)
    return;
  a->client_closing = 1;
  http_client_close(a->client, client_closed, a);
}

static void
server_closed(void *arg)
{
  struct agent *a = arg;

  a->http = NULL;
  close_client(a);
}

/* Once the pool holds nothing of ours, close the server (no request of
 * ours is left unanswered by then) and the client; an agent that
 * listens nowhere has only the client. */
static void
close_step(struct agent *a)
{
  if (a->inflight > 0)
    return;
  if (a->http != NULL)
    http_server_close(a->http, server_closed, a);
  else if (a->closing)
    close_client(a);
}

void
agent_close(struct agent *a, void (*cb)(void *arg), void *arg)
{
  a->closing = 1;
  a->close_cb = cb;
  a->close_arg = arg;
  pull_cancel_all(a);
  close_step(a);
}
