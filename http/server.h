/*
 * HTTP server on the libuv loop: libmicrohttpd with no threads of its own.
 *
 * MHD runs in external-epoll mode: its epoll fd is watched by a uv_poll_t
 * and its timeout drives a uv_timer_t, so every callback runs on the loop
 * thread and touches broker state without locks.  A handler may answer
 * at once or later: a request that is not answered when the handler
 * returns has its connection suspended, and http_respond() resumes it
 * (the broker answers POST /v1/jobs only after the batch commit).
 *
 * Request bodies are accumulated up to max_body bytes; a larger body is
 * answered 413 by the server itself and never reaches the handler.
 * The server also answers by itself, before any handler: 400 for a path
 * or query argument that decodes to a NUL byte and for ambiguous framing
 * (two Content-Length headers, or Content-Length with Transfer-Encoding:
 * RFC 9112 6.3), 503 while closing.
 *
 * It accepts connections itself and hands them to MHD, so that accepting
 * always resumes once a connection closes, one client address can be
 * held to max_per_address connections, and a client that sends its
 * headers or body too slowly (slowloris) is cut off (see the config).
 *
 * Lifecycle (libuv style): http_server_start() -> ... ->
 * http_server_close(cb); the struct is freed after cb runs.
 */
#ifndef TENBIN_HTTP_SERVER_H
#define TENBIN_HTTP_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "util/err.h"

struct http_server;
struct http_request;

/*
 * Called once per complete request.  The request is borrowed until the
 * handler (now or later) calls one of the http_respond*() functions,
 * exactly once; after that it must not be touched.
 */
typedef void (*http_handler_fn)(struct http_request *req, void *arg);

/* Defaults for the zero values of the fields below. */
#define HTTP_SERVER_DEFAULT_MAX_CONNECTIONS 1024u
#define HTTP_SERVER_DEFAULT_HEADER_TIMEOUT_S 10u
#define HTTP_SERVER_DEFAULT_MIN_BODY_RATE 8192u

struct http_server_config {
  const char *host;        /* numeric IPv4/IPv6 address to bind */
  uint16_t port;           /* 0 picks a free port (see http_server_port) */
  size_t max_body;         /* bodies larger than this get 413 */
  unsigned max_connections; /* open at once; past it, accepting waits */
  unsigned max_per_address; /* one client address may hold at most this
                               many; more are closed at accept; 0: no
                               limit but max_connections */
  unsigned conn_timeout_s; /* idle keep-alive connections are closed */
  unsigned header_timeout_s; /* a request's headers must be in within
                                this of the connect (or of the idle
                                timeout after the previous answer) */
  unsigned min_body_rate;  /* bytes/s: a body must come at least this
                              fast after a header_timeout_s start */
  const char *tls_cert_file; /* PEM chain: with tls_key_file, HTTPS only */
  const char *tls_key_file;  /* PEM key, mode 0600 (util/secret.h) */
  /*
   * Called once the headers are in, before any body is read; may be
   * NULL.  It may answer at once (the body is then never read and the
   * connection is closed after the answer: a 401 costs no memory) or
   * return without answering (it must not keep req for later); then the
   * body is read and handler runs.  http_request_body() is empty here.
   */
  http_handler_fn head_handler;
  http_handler_fn handler;
  void *handler_arg;
};

/* Bind, listen and start serving on loop.  *out is new: close it with
 * http_server_close(). */
int http_server_start(uv_loop_t *loop, const struct http_server_config *cfg,
                      struct http_server **out, struct err *e) WARN_UNUSED;
/* The port actually bound. */
uint16_t http_server_port(const struct http_server *s);
/*
 * Stop accepting, answer every request still unanswered with 503, close
 * the uv handles and free s; cb(arg) runs once all of that is done (from
 * the loop).  cb may be NULL.
 */
void http_server_close(struct http_server *s, void (*cb)(void *arg),
                       void *arg);

/* ---- the request (all strings borrowed, valid until answered) ---- */

const char *http_request_method(const struct http_request *req);
/* The path without the query string, percent-decoded (never holds a NUL:
 * such a request is answered 400 by the server). */
const char *http_request_path(const struct http_request *req);
/* A query argument, or NULL. */
const char *http_request_query(const struct http_request *req,
                               const char *name);
/* A header (case-insensitive name), or NULL. */
const char *http_request_header(const struct http_request *req,
                                const char *name);
/* The body (NUL-terminated for convenience; may contain NULs). */
const char *http_request_body(const struct http_request *req, size_t *len);
/* One pointer slot for the handler's own per-request state. */
void http_request_set_data(struct http_request *req, void *data);
void *http_request_data(const struct http_request *req);

/* ---- answering (exactly once per request) ---- */

/* Add a response header to the answer being prepared (copies). */
void http_request_add_header(struct http_request *req, const char *name,
                             const char *value);
/* Answer with a body (steals body: malloc'd, freed with free(); may be
 * NULL, len 0). */
void http_respond(struct http_request *req, int status,
                  const char *content_type, char *body, size_t len);
/* Answer with len bytes of fd from offset (steals fd; sendfile path). */
void http_respond_fd(struct http_request *req, int status,
                     const char *content_type, int fd, off_t offset,
                     size_t len);

#endif
