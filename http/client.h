/*
 * HTTP client on the libuv loop: libcurl's multi-socket interface with no
 * threads of its own.
 *
 * One client owns one curl multi handle, whose sockets are watched by
 * uv_poll_t handles and whose timeout drives a uv_timer_t, so every
 * callback runs on the loop thread (the broker's, shared with
 * http/server.h).  Connections are kept alive and reused between requests
 * to the same host, at most max_host_connections at a time; requests
 * beyond that wait in curl's queue for a free connection.
 *
 * A request either ends with an HTTP answer (rc 0, any status, 5xx
 * included) or with a transport failure (rc < 0: ERR_UNAVAILABLE when no
 * connection could be made or it broke, ERR_TIMEOUT, ERR_TOO_LARGE).
 * Failed attempts may be retried, after an exponential backoff with
 * jitter, up to max_attempts attempts in all:
 *   - transport failures other than ERR_TIMEOUT and ERR_TOO_LARGE (refused
 *     or reset connections, an empty reply), but only for a request that
 *     may be repeated: GET, HEAD, PUT, DELETE and OPTIONS are, any other
 *     method (POST) only with `idempotent` set;
 *   - answers 502, 503 and 504, only with `retry_on_5xx` set (the caller
 *     knows whether the peer uses them for "try again"; slurmrestd answers
 *     500 for job errors, and 500 is never retried).
 * A timeout (of the connect or of the whole attempt) is never retried:
 * timeout_ms bounds each attempt, and the caller's own deadline is better
 * served by a prompt ERR_TIMEOUT.  Redirects are not followed.
 *
 * https servers are always verified (certificate chain and host name),
 * against ca_file when one is given.  A request that carries a
 * credential (an Authorization header, or any header whose name holds
 * "token") over plain http to a host that is not loopback is refused at
 * send, before any connection, unless allow_insecure_tokens is set: the
 * agents talk across clouds, and a bearer token in clear is a token given
 * away.
 *
 * libcurl must have been initialised (curl_global_init) by main.
 *
 * Lifecycle (libuv style): http_client_new() -> http_client_send()... ->
 * http_client_close(cb); the struct is freed before cb runs.
 */
#ifndef TENBIN_HTTP_CLIENT_H
#define TENBIN_HTTP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "util/err.h"

/* Defaults for the zero values of the fields below. */
#define HTTP_CLIENT_DEFAULT_TIMEOUT_MS 30000u
#define HTTP_CLIENT_DEFAULT_CONNECT_TIMEOUT_MS 10000u
#define HTTP_CLIENT_DEFAULT_MAX_RESPONSE (16u << 20)
#define HTTP_CLIENT_DEFAULT_BACKOFF_MS 100u
#define HTTP_CLIENT_DEFAULT_MAX_BACKOFF_MS 30000u
#define HTTP_CLIENT_DEFAULT_MAX_HOST_CONNECTIONS 8u

struct http_client;

struct http_client_config {
  unsigned max_host_connections; /* per host at once; 0: the default */
  unsigned max_backoff_ms;       /* cap of one backoff; 0: the default */
  const char *user_agent;        /* copied; NULL: "tenbin" */
  const char *ca_file;           /* PEM CAs that https servers are checked
                                    against (copied); NULL: the system's */
  bool allow_insecure_tokens;    /* send credentials over plain http to
                                    hosts other than loopback */
};

/* One request; send copies everything it needs from it. */
struct http_client_request {
  const char *method;         /* "GET", "POST", ...; NULL: GET */
  const char *url;            /* "http://127.0.0.1:6820/slurm/v0.0.39/..." */
  const char *const *headers; /* "Name: value" lines, NULL-terminated;
                                 may be NULL */
  const char *body;           /* may contain NULs; NULL when len is 0 */
  size_t body_len;
  unsigned timeout_ms;        /* whole attempt; 0: the default */
  unsigned connect_timeout_ms; /* 0: the default */
  size_t max_response;        /* body cap (ERR_TOO_LARGE); 0: the default */
  unsigned max_attempts;      /* 0 and 1: no retry */
  unsigned backoff_ms;        /* before the 2nd attempt, doubling after;
                                 0: the default */
  bool retry_on_5xx;          /* retry answers 502, 503 and 504 */
  bool idempotent;            /* a POST that may be repeated safely */
  uint64_t max_recv_speed;    /* bytes/s while receiving; 0: no limit */
};

struct http_client_response {
  /* public, read-only */
  int status;         /* 200, 404, 503, ... */
  const char *body;   /* NUL-terminated (may hold NULs); never NULL */
  size_t len;
  unsigned attempts;  /* attempts made, this one included */
  /* private */
  void *easy_;
  void *call_;
};

/*
 * Called exactly once per request sent, from the loop (never from inside
 * http_client_send()).  rc is 0 when an HTTP answer came back (resp then
 * holds it, whatever its status) and negative for a transport failure or
 * a closed client (resp is NULL, e says why).  resp and e are borrowed
 * for the duration of the call.
 */
typedef void (*http_client_cb)(void *arg, int rc,
                               const struct http_client_response *resp,
                               const struct err *e);

/* Counters since http_client_new(). */
struct http_client_stats {
  uint64_t requests;           /* accepted by http_client_send() */
  uint64_t attempts;           /* transfers started, retries included */
  uint64_t retries;            /* attempts scheduled after a failure */
  uint64_t connections_opened; /* new connections (the rest reused one) */
  uint64_t in_flight;          /* requests whose callback is still due */
};

/* Set the client up on loop.  *out is new: close it with
 * http_client_close().  cfg may be NULL for the defaults. */
int http_client_new(uv_loop_t *loop, const struct http_client_config *cfg,
                    struct http_client **out, struct err *e) WARN_UNUSED;

/*
 * Start a request (copies r: its strings may go away when this returns).
 * cb(arg, ...) runs exactly once, later, from the loop.  Fails at once,
 * without calling cb, with ERR_INVALID for an unusable request (no url or
 * one curl cannot parse, a scheme other than http and https, a method
 * that is not an upper-case token, a header that is not one
 * "Name: value" line), with ERR_FORBIDDEN for a credential that would
 * travel in clear (see above) and with ERR_UNAVAILABLE once the client
 * is closing.
 */
int http_client_send(struct http_client *c,
                     const struct http_client_request *r, http_client_cb cb,
                     void *arg, struct err *e) WARN_UNUSED;

/*
 * A response header (case-insensitive name; the last one when repeated),
 * borrowed like resp; NULL when absent.
 */
const char *http_client_response_header(
    const struct http_client_response *resp, const char *name);

/*
 * Take resp's body instead of copying it (a batch answer is tens of MiB):
 * new, free with free(); *len (may be NULL)
 * its length.  NUL-terminated like resp->body.  Once taken, resp->body
 * and resp->len must not be used; a second take gives "".
 */
char *http_client_response_take(const struct http_client_response *resp,
                                size_t *len);

void http_client_stats(const struct http_client *c,
                       struct http_client_stats *out);

/*
 * Cancel every request still in flight or waiting for a retry: each one's
 * callback runs with ERR_UNAVAILABLE (from the loop, not from inside this
 * call), then connections are closed, the uv handles closed and c freed,
 * and last cb(arg) runs.  cb may be NULL.  May be called from inside a
 * request callback; c must not be used after this call.
 */
void http_client_close(struct http_client *c, void (*cb)(void *arg),
                       void *arg);

#endif
