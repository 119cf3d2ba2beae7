/*
 * The router both daemons put in front of their handlers: a route table,
 * an ordered list of middleware (gates, authentication), one writer that
 * turns a struct err into a status and a JSON error object, and the one
 * reader of such objects in a peer's answer.
 *
 * It knows nothing of either daemon.  A route's role is a number whose
 * meaning is the daemon's (its middleware compares it), and the table
 * is an array of the daemon's own route type whose first member is a
 * struct http_route, handed over with its element size as qsort() is:
 * each daemon keeps typed handlers, the router keeps one matcher.
 *
 * The error object, as both daemons answer it and their clients read it:
 *   {"error": {"code": "NOT_FOUND", "message": "site 'x' not found"}}
 * where code is a name of util/err.h's table and the status is that
 * code's.
 */
#ifndef TENBIN_HTTP_ROUTER_H
#define TENBIN_HTTP_ROUTER_H

#include <jansson.h>
#include <stddef.h>

#include "http/server.h"
#include "util/err.h"

#define HTTP_ROUTE_MAX_PARAMS 4
/* A "{x}" segment longer than this matches no route (404). */
#define HTTP_ROUTE_PARAM_LEN 128

enum http_route_flags {
  HTTP_ROUTE_PUBLIC = 1 << 0, /* no token needed (the daemon's
                                 authentication middleware skips it) */
};

struct http_route {
  const char *method;  /* "GET" */
  const char *pattern; /* "/v1/jobs/{id}/cancel": "{x}" captures one
                          non-empty segment */
  int role;            /* least role allowed; the daemon's meaning */
  unsigned flags;      /* enum http_route_flags */
};

/* A daemon's route table: count elements of size bytes at base, each
 * starting with a struct http_route.  All borrowed, usually static. */
struct http_routes {
  const void *base;
  size_t count;
  size_t size;
};

#define HTTP_ROUTES(table)                                              \
  {                                                                     \
    (table), sizeof(table) / sizeof((table)[0]), sizeof((table)[0])    \
  }

/* What the router found for one request. */
struct http_match {
  size_t index;                   /* into the table; count when none */
  const struct http_route *route; /* the matched route, or NULL */
  size_t nparams;
  char params[HTTP_ROUTE_MAX_PARAMS][HTTP_ROUTE_PARAM_LEN];
};

/*
 * One step every request passes before its handler.  m->route is NULL
 * when no route matched: the router answers that (404, 405) only after
 * every middleware passed, so a middleware decides whether, say, a token
 * is asked for before a path is disclosed as missing.  Returns 0 to pass
 * the request on, or a negative code with e set to refuse it.  ctx is
 * the daemon's (per request or per server).
 */
typedef int (*http_middleware_fn)(void *ctx, struct http_request *req,
                                  const struct http_match *m,
                                  struct err *e);

struct http_router {
  struct http_routes routes;
  const http_middleware_fn *middleware; /* run in this order */
  size_t nmiddleware;
};

/* Element i of t (i < t->count). */
const struct http_route *http_routes_at(const struct http_routes *t,
                                        size_t i);

/*
 * Find the first route of t for method and path, and capture its "{x}"
 * segments into m.  0 on a match; ERR_NOT_FOUND when no pattern matches
 * path, ERR_METHOD when one does but not for method, e naming the path
 * (m->route is then NULL).
 */
int http_route_match(const struct http_routes *t, const char *method,
                     const char *path, struct http_match *m, struct err *e)
    WARN_UNUSED;

/* The segment captured by "{name}" in m's route, or NULL. */
const char *http_match_param(const struct http_match *m, const char *name);

/*
 * Match req, then run r's middleware in order.  0: the handler of
 * m->index may run.  Otherwise the refusal (a middleware's, else the
 * match's) is in e, req is unanswered, and the caller answers it with
 * http_reply_err() (or its own wrapper around it).
 */
int http_router_admit(const struct http_router *r, void *ctx,
                      struct http_request *req, struct http_match *m,
                      struct err *e) WARN_UNUSED;

/*
 * Whether req announces a body (Content-Length other than 0, or
 * Transfer-Encoding).  A head handler refuses only those early: a
 * request without one costs nothing to read, and is checked once.
 */
int http_request_announces_body(const struct http_request *req);

/*
 * The body of req as a JSON object (new reference in *out).  ERR_INVALID
 * for an empty body or anything but an object (naming where the JSON
 * broke), ERR_TOO_LARGE for one over max bytes (0: no cap but the
 * server's).
 */
int http_request_json(const struct http_request *req, size_t max,
                      json_t **out, struct err *e) WARN_UNUSED;

/*
 * Answer req with v as compact JSON plus a newline (steals v); when v is
 * NULL or cannot be encoded, answer 500 INTERNAL instead.  Returns the
 * status answered.
 */
int http_reply_json(struct http_request *req, int status, json_t *v);

/*
 * Answer req with e as the error object and its code's status (a code
 * that is not negative answers 500 INTERNAL); 401 adds
 * "WWW-Authenticate: Bearer".  The message is made valid UTF-8 first,
 * so a message cut inside a character still answers its own status.
 * Returns the status answered.
 */
int http_reply_err(struct http_request *req, const struct err *e);

/*
 * Read the error object from a peer's answer body.  Returns its code and
 * fills e (code and message) when body is one; a code name this build
 * does not know reads as ERR_SITE, with " (NAME)" after the message.
 * Returns 0 and clears e when body is no error object.
 */
int http_error_parse(const char *body, size_t len, struct err *e);

#endif
