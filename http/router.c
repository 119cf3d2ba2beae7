/*
 * The route table matcher, the middleware chain, and the error object's
 * writer and reader (router.h).
 */
#include "http/router.h"

#include <stdio.h>
#include <string.h>

#include "util/alloc.h"
#include "util/buf.h"
#include "util/jsonx.h"
#include "util/utf8.h"

/* Largest JSON answer: a list page of 1000 jobs with big specs. */
#define REPLY_JSON_MAX ((size_t)1 << 30)

const struct http_route *
http_routes_at(const struct http_routes *t, size_t i)
{
  /* The first member of each element is its struct http_route. */
  return (const struct http_route *)(const void *)((const char *)t->base +
                                                   i * t->size);
}

/*
 * Match path against pattern segment by segment; "{x}" segments capture
 * into m->params.  Returns 1 on a match.
 */
static int
match(const char *pattern, const char *path, struct http_match *m)
{
  size_t np = 0;

  while (*pattern != '\0' && *path != '\0') {
    const char *pend = strchr(pattern + 1, '/');
    const char *send = strchr(path + 1, '/');
    size_t plen = pend ? (size_t)(pend - pattern) : strlen(pattern);
    size_t slen = send ? (size_t)(send - path) : strlen(path);

    if (pattern[1] == '{') {
      /* "/{x}" captures a non-empty segment */
      if (slen < 2 || slen - 1 >= HTTP_ROUTE_PARAM_LEN ||
          np == HTTP_ROUTE_MAX_PARAMS)
        return 0;
      memcpy(m->params[np], path + 1, slen - 1);
      m->params[np][slen - 1] = '\0';
      np++;
    } else if (plen != slen || memcmp(pattern, path, plen) != 0) {
      return 0;
    }
    pattern += plen;
    path += slen;
  }
  m->nparams = np;
  return *pattern == '\0' && *path == '\0';
}

int
http_route_match(const struct http_routes *t, const char *method,
                 const char *path, struct http_match *m, struct err *e)
{
  int path_matched = 0;

  m->index = t->count;
  m->route = NULL;
  m->nparams = 0;
  for (size_t i = 0; i < t->count; i++) {
    const struct http_route *r = http_routes_at(t, i);

    if (!match(r->pattern, path, m))
      continue;
    path_matched = 1;
    if (strcmp(r->method, method) == 0) {
      m->index = i;
      m->route = r;
      return 0;
    }
  }
  m->nparams = 0;
  if (path_matched)
    return err_set(e, ERR_METHOD, "method %.16s not allowed on '%.100s'",
                   method, path);
  return err_set(e, ERR_NOT_FOUND, "no route for '%.100s'", path);
}

const char *
http_match_param(const struct http_match *m, const char *name)
{
  const char *p;
  size_t n = 0;
  size_t len = strlen(name);

  if (m->route == NULL)
    return NULL;
  for (p = strchr(m->route->pattern, '{'); p != NULL;
       p = strchr(p + 1, '{')) {
    if (strncmp(p + 1, name, len) == 0 && p[1 + len] == '}')
      return n < m->nparams ? m->params[n] : NULL;
    n++;
  }
  return NULL;
}

int
http_router_admit(const struct http_router *r, void *ctx,
                  struct http_request *req, struct http_match *m,
                  struct err *e)
{
  struct err miss = {0};
  int rc = http_route_match(&r->routes, http_request_method(req),
                            http_request_path(req), m, &miss);

  for (size_t i = 0; i < r->nmiddleware; i++) {
    int mw = r->middleware[i](ctx, req, m, e);

    if (mw < 0)
      return mw;
  }
  if (rc < 0 && e != NULL)
    *e = miss;
  return rc;
}

int
http_request_announces_body(const struct http_request *req)
{
  const char *len = http_request_header(req, "Content-Length");

  if (http_request_header(req, "Transfer-Encoding") != NULL)
    return 1;
  return len != NULL && strcmp(len, "0") != 0;
}

int
http_request_json(const struct http_request *req, size_t max, json_t **out,
                  struct err *e)
{
  size_t len;
  const char *body = http_request_body(req, &len);

  if (len == 0)
    return err_set(e, ERR_INVALID, "request body is empty; a JSON object "
                   "is required");
  if (max > 0 && len > max)
    return err_set(e, ERR_TOO_LARGE, "JSON body of %zu bytes; at most %zu",
                   len, max);
  return jsonx_parse_object(body, len, out, e);
}

int
http_reply_json(struct http_request *req, int status, json_t *v)
{
  struct buf b;
  char *body;
  size_t len;

  buf_init(&b, REPLY_JSON_MAX);
  if (v == NULL || jsonx_dump_buf(v, &b) < 0 || buf_add(&b, "\n", 1) < 0) {
    /* Only a bug gets here (jansson refuses invalid UTF-8, and every
     * message went through utf8_repair): say so in words that are
     * known to encode. */
    buf_release(&b);
    json_decref(v);
    status = err_http_status(ERR_INTERNAL);
    body = xstrdup("{\"error\":{\"code\":\"INTERNAL\",\"message\":"
                   "\"cannot encode the response\"}}\n");
    http_respond(req, status, "application/json", body, strlen(body));
    return status;
  }
  json_decref(v);
  body = buf_take(&b, &len);
  http_respond(req, status, "application/json", body, len);
  return status;
}

int
http_reply_err(struct http_request *req, const struct err *e)
{
  int code = e->code < 0 ? e->code : ERR_INTERNAL;
  char msg[ERR_MSG_SIZE];

  /* e may have been filled by hand rather than by err_set. */
  snprintf(msg, sizeof(msg), "%s", err_msg(e));
  utf8_repair(msg);
  if (code == ERR_UNAUTHORIZED)
    http_request_add_header(req, "WWW-Authenticate", "Bearer");
  return http_reply_json(req, err_http_status(code),
                         json_pack("{s:{s:s, s:s}}", "error", "code",
                                   err_name(code), "message", msg));
}

int
http_error_parse(const char *body, size_t len, struct err *e)
{
  json_t *v = NULL;
  const json_t *obj;
  const char *name;
  const char *msg;
  int code = 0;

  err_clear(e);
  if (jsonx_parse_object(body, len, &v, NULL) < 0)
    goto out;
  obj = json_object_get(v, "error");
  name = jsonx_str(obj, "code");
  msg = jsonx_str(obj, "message");
  if (name == NULL || msg == NULL)
    goto out;
  code = err_from_name(name);
  if (code < 0)
    err_set(e, code, "%s", msg);
  else
    code = err_set(e, ERR_SITE, "%s (%.32s)", msg, name);

out:
  json_decref(v);
  return code;
}
