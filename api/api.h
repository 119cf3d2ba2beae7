/*
 * tenbind's REST API: the route table, authentication, and thin handlers
 * that parse, call the broker and map its error codes to HTTP (STYLE.md
 * rule 10: no SQL here, no HTTP in broker/).
 *
 * api_handle() is the http server's handler; routing, the middleware
 * chain and error answers are http/router's.  Every route is described
 * in api/openapi.yaml; a test compares that file with api_routes[].
 */
#ifndef TENBIN_API_API_H
#define TENBIN_API_API_H

#include <stddef.h>

#include "broker/broker.h"
#include "http/router.h"
#include "http/server.h"

struct api;
struct api_call;

struct api_config {
  int auth;             /* 1: every route but /healthz needs a token */
  const char *version;  /* shown by /healthz */
};

/* *out is new: free with api_free().  b is borrowed and must outlive it. */
int api_new(struct broker *b, const struct api_config *cfg,
            struct api **out, struct err *e) WARN_UNUSED;
void api_free(struct api *api);
/* From now on answer every request 503 without touching the broker (the
 * daemon is shutting down). */
void api_stop(struct api *api);
/* The http_handler_fn to give http_server_start (arg = the api). */
void api_handle(struct http_request *req, void *arg);
/* The head_handler to give it: route, token and role are checked from
 * the headers, and a request that fails is answered before its body is
 * read (an unauthenticated upload costs tenbind no memory). */
void api_handle_head(struct http_request *req, void *arg);

/* One entry of the route table: the router's part first (method,
 * pattern, least role as an enum broker_role, HTTP_ROUTE_PUBLIC when no
 * token is needed), then the handler. */
struct api_route {
  struct http_route http;
  void (*handler)(struct api_call *call);
};

extern const struct api_route api_routes[];
extern const size_t api_route_count;

#endif
