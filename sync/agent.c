/*
 * tenbin-agent's HTTP face: the route table, bearer-token auth and the
 * answers; serve.c and pull.c do the work.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sync/agent_client.h"
#include "sync/agent_int.h"
#include "sync/path.h"
#include "util/alloc.h"
#include "util/hash.h"
#include "util/jsonx.h"
#include "util/log.h"

#define MAX_CONNECTIONS 256
#define CONN_TIMEOUT_S 120
/* Peers pull with a few batches in flight each; more from one address
 * than this is a leak or an attack. */
#define AGENT_MAX_PER_ADDRESS 64

void
agent_reply_json(struct http_request *req, int status, json_t *v)
{
  char *text = jsonx_dump(v);
  size_t len = strlen(text);

  json_decref(v);
  text = xrealloc(text, len + 2);
  text[len] = '\n';
  text[len + 1] = '\0';
  http_respond(req, status, "application/json", text, len + 1);
}

void
agent_reply_err(struct http_request *req, const struct err *e)
{
  int code = e->code < 0 ? e->code : ERR_INTERNAL;

  if (code == ERR_UNAUTHORIZED)
    http_request_add_header(req, "WWW-Authenticate", "Bearer");
  agent_reply_json(req, err_http_status(code),
                   json_pack("{s:{s:s, s:s}}", "error", "code",
                             err_name(code), "message", err_msg(e)));
}

void
agent_reply_errf(struct http_request *req, int code, const char *fmt, ...)
{
  struct err e;
  va_list ap;

  e.code = code;
  va_start(ap, fmt);
  vsnprintf(e.msg, sizeof(e.msg), fmt, ap);
  va_end(ap);
  agent_reply_err(req, &e);
}

int
agent_body_json(struct http_request *req, json_t **out, struct err *e)
{
  size_t len;
  const char *body = http_request_body(req, &len);

  if (len == 0)
    return err_set(e, ERR_INVALID, "request body is empty; a JSON object "
                   "is required");
  if (len > AGENT_JSON_MAX)
    return err_set(e, ERR_TOO_LARGE, "JSON body of %zu bytes; at most %zu",
                   len, AGENT_JSON_MAX);
  return jsonx_parse_object(body, len, out, e);
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

/*
 * Split "/v1/datasets/NAME/REST..." into the name and the rest; the
 * segments are copied into parts (at most 4).  Returns the count.
 */
static size_t
split_path(const char *path, char parts[][80], size_t max)
{
  size_t n = 0;

  while (*path == '/')
    path++;
  while (*path != '\0' && n < max) {
    size_t len = strcspn(path, "/");

    if (len >= 80)
      return max + 1;
    memcpy(parts[n], path, len);
    parts[n][len] = '\0';
    n++;
    path += len;
    while (*path == '/')
      path++;
  }
  return *path == '\0' ? n : max + 1;
}

static void
healthz(struct agent *a, struct http_request *req)
{
  agent_reply_json(req, 200,
                   json_pack("{s:b, s:I, s:I, s:I, s:I}", "ok", 1,
                             "background", (json_int_t)a->background,
                             "drafts", (json_int_t)a->drafts, "served_bytes",
                             (json_int_t)serve_served_bytes(a),
                             "reserve_files",
                             (json_int_t)reserve_count(a->reserve)));
}

/* The http server's head handler: a request without the token is
 * answered before its body (up to AGENT_BATCH_MAX) is read. */
static void
handle_head(struct http_request *req, void *arg)
{
  struct agent *a = arg;

  if (strcmp(http_request_path(req), "/healthz") == 0 || a->closing)
    return;
  if (!authorized(a, req))
    agent_reply_errf(req, ERR_UNAUTHORIZED, "missing or wrong agent token");
}

static void
handle(struct http_request *req, void *arg)
{
  struct agent *a = arg;
  const char *method = http_request_method(req);
  char p[7][80];
  size_t n;
  int get = strcmp(method, "GET") == 0;
  int post = strcmp(method, "POST") == 0;
  int put = strcmp(method, "PUT") == 0;

  if (strcmp(http_request_path(req), "/healthz") == 0 && get) {
    healthz(a, req);
    return;
  }
  if (a->closing) {
    agent_reply_errf(req, ERR_UNAVAILABLE, "the agent is stopping");
    return;
  }
  if (!authorized(a, req)) {
    agent_reply_errf(req, ERR_UNAUTHORIZED, "missing or wrong agent token");
    return;
  }
  n = split_path(http_request_path(req), p, 6);
  if (n < 4 || strcmp(p[0], "v1") != 0 || strcmp(p[1], "datasets") != 0)
    goto not_found;
  if (!syncpath_valid_name(p[2])) {
    agent_reply_errf(req, ERR_INVALID, "dataset name '%.64s' must match "
                     "[A-Za-z0-9][A-Za-z0-9._-]{0,63}", p[2]);
    return;
  }
  if (n >= 5 && !agentc_valid_version(p[4])) {
    agent_reply_errf(req, ERR_INVALID, "version '%.70s' is not a "
                     "64-digit lowercase hex id", p[4]);
    return;
  }
  if (strcmp(p[3], "versions") == 0) {
    if (n == 4 && post)
      publish_post(a, req, p[2]);
    else if (n == 4 && get)
      serve_versions(a, req, p[2]);
    else if (n == 6 && get && strcmp(p[5], "manifest") == 0)
      serve_manifest(a, req, p[2], p[4]);
    else if (n == 6 && post && strcmp(p[5], "batch") == 0)
      serve_batch(a, req, p[2], p[4]);
    else
      goto not_found;
    return;
  }
  if (strcmp(p[3], "pulls") == 0 && n == 5) {
    if (put)
      pull_put(a, req, p[2], p[4]);
    else if (get)
      pull_get(a, req, p[2], p[4]);
    else
      agent_reply_errf(req, ERR_METHOD, "%s is not allowed here", method);
    return;
  }

not_found:
  agent_reply_errf(req, ERR_NOT_FOUND, "no route %s %.200s", method,
                   http_request_path(req));
}

int
agent_start(uv_loop_t *loop, const struct agent_config *cfg,
            struct agent **out, struct err *e)
{
  struct agent *a;
  struct http_server_config hc;
  struct http_client_config cc;
  char path[PATH_MAX];
  int rc;

  if (cfg->token == NULL || strlen(cfg->token) < 16)
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
  a->batch_bytes = cfg->batch_bytes > 0 ? cfg->batch_bytes
                                        : (size_t)16 << 20;
  if (a->batch_bytes > ((size_t)64 << 20))
    a->batch_bytes = (size_t)64 << 20;
  rc = store_open(cfg->root, cfg->fsync_publish, &a->store, e);
  if (rc < 0)
    goto fail;
  store_reserve_dir(a->store, path, sizeof(path));
  rc = reserve_open(path, &a->reserve, e);
  if (rc < 0)
    goto fail;
  (void)serve_new(a);
  (void)publish_new(a);
  memset(&cc, 0, sizeof(cc));
  cc.ca_file = cfg->ca_file;
  cc.allow_insecure_tokens = cfg->allow_insecure_tokens != 0;
  rc = http_client_new(loop, &cc, &a->client, e);
  if (rc < 0)
    goto fail;
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
  *out = a;
  return 0;

fail:
  if (a->client != NULL)
    http_client_close(a->client, NULL, NULL);
  serve_free(a);
  publish_free(a);
  reserve_close(a->reserve);
  store_close(a->store);
  free(a->token);
  free(a);
  return rc;
}

uint16_t
agent_port(const struct agent *a)
{
  return http_server_port(a->http);
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
  reserve_close(a->reserve);
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
server_closed(void *arg)
{
  struct agent *a = arg;

  a->http = NULL;
  http_client_close(a->client, client_closed, a);
}

/* Once the pool holds nothing of ours, close the server (no request of
 * ours is left unanswered by then) and the client. */
static void
close_step(struct agent *a)
{
  if (a->http != NULL && a->inflight == 0)
    http_server_close(a->http, server_closed, a);
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
