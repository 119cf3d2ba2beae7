/*
 * HTTP server: libmicrohttpd driven by the libuv loop, with no MHD threads.
 *
 * MHD runs in external-epoll mode.  Its epoll fd is watched by a uv_poll_t
 * and the timeout MHD_get_timeout() reports drives a uv_timer_t that is
 * re-armed after every MHD_run(), so MHD only ever runs from a loop
 * callback and never re-entrantly from inside one of its own callbacks.
 *
 * A request goes through these states (enum req_state):
 *
 *   BODY -> IN_HANDLER -> ANSWERED -> QUEUED -> freed on completion
 *                    \--> SUSPENDED --^
 *   BODY -> TOO_LARGE (rest of the body discarded, 413 at the end)
 *
 * A handler that answers while it runs gets its response queued as soon as
 * it returns.  Otherwise the connection is suspended; a later
 * http_respond*() stores the response, resumes the connection and asks for
 * a prompt MHD_run() through a zero timer; MHD then calls the access
 * handler once more, and that call queues the stored response.  Request
 * state is freed in MHD's completion callback.
 *
 * Connections are accepted here, not by MHD: the listening socket is a
 * uv_poll_t of ours, and each accepted socket goes to MHD_add_connection()
 * (MHD runs with MHD_USE_NO_LISTEN_SOCKET).  MHD 0.9.75 drops its own
 * listening socket from its epoll set at its connection limit and, after
 * a burst of connections timed out at that limit, sometimes never added
 * it back: tenbind stopped accepting for good.  Here accepting pauses at
 * max_connections and resumes as soon as one closes (or, after EMFILE,
 * on the next sweep), and a client address past max_per_address is
 * closed at once.  Each connection (struct http_conn) carries a deadline
 * while its request is being read: header_timeout_s for the headers,
 * then the body must keep up min_body_rate; a once-a-second sweep shuts
 * down the socket of any connection past its deadline, so a slowloris
 * client cannot hold a slot for longer than that, however it trickles.
 *
 * Closing is deferred to the timer too (http_server_close() may be called
 * from inside a handler): the daemon is quiesced, every suspended request
 * is answered 503 (as is any request that completes during the close),
 * MHD runs until every request in flight is done (at most CLOSE_DRAIN_MS),
 * and only then is the daemon stopped, which drops idle keep-alive
 * connections, and are the handles closed.
 *
 * Throughput (wrk -t1 -c64 -d5s on 127.0.0.1, RelWithDebInfo without
 * sanitizers, server and wrk pinned to one core each of a shared 2-core
 * machine, libmicrohttpd 0.9.75, libuv 1.44): a handler answering 2 bytes
 * synchronously served 100,000-155,000 requests/s over several runs; one
 * answering every request later, from a uv_idle callback (suspend and
 * resume on every request), about 55,000 requests/s.
 */
#define _GNU_SOURCE /* accept4 */
#include "server.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "util/alloc.h"
#include "util/buf.h"
#include "util/fileio.h"
#include "util/list.h"
#include "util/log.h"
#include "util/secret.h"

/* The kernel caps this at net.core.somaxconn; a burst of connects from
 * many clients should wait in the queue rather than be refused. */
#define LISTEN_BACKLOG 4096u
/* Handlers add a handful of headers; the cap only stops a runaway loop. */
#define MAX_RESPONSE_HEADER_BYTES (64u * 1024u)
/* An oversized chunked body is read and dropped so that the 413 can be
 * sent at its end; past this many dropped bytes the connection is cut. */
#define MAX_DISCARD_BYTES (16u * 1024u * 1024u)
/* How long a closing server waits for the requests in flight (the 503
 * answers, responses still being written, bodies still arriving); a
 * client that stopped reading must not hold the shutdown up. */
#define CLOSE_DRAIN_MS 2000u
/* Accepts per wakeup: other work on the loop gets its turn in a flood. */
#define ACCEPT_BATCH 64
/* How often deadlines are checked (and accepting retried after EMFILE). */
#define SWEEP_MS 1000u
/* A certificate chain is a few KiB. */
#define MAX_CERT_BYTES (1024u * 1024u)

enum req_state {
  REQ_BODY,       /* receiving the body */
  REQ_TOO_LARGE,  /* body over max_body: discarding it, 413 at the end */
  REQ_IN_HANDLER, /* the handler is running */
  REQ_SUSPENDED,  /* the handler returned without answering */
  REQ_ANSWERED,   /* response stored, not yet queued */
  REQ_QUEUED      /* response handed to MHD */
};

/* One client connection, from accept until MHD closes it. */
struct http_conn {
  struct http_server *srv;       /* borrowed */
  MHD_socket fd;                 /* owned by MHD; only shut down here */
  struct sockaddr_storage addr;
  uint64_t deadline;             /* uv_now() by which the request being
                                    read must be in; 0: none (answering) */
  bool nul_in_url;               /* the path or a query decoded to NUL */
  bool cut;                      /* shut down for being too slow */
  struct list link;              /* in srv->conns */
};

struct http_request {
  struct http_server *srv;     /* borrowed */
  struct MHD_Connection *conn; /* borrowed */
  const char *method;          /* borrowed from MHD */
  const char *path;            /* borrowed from MHD */
  struct buf body;
  size_t discarded;            /* body bytes dropped past the cap */
  struct buf headers;          /* answer headers as "name\0value\0" pairs */
  struct MHD_Response *resp;   /* the stored answer until queued, owned */
  unsigned status;
  enum req_state state;
  void *data;                  /* the handler's slot */
  struct list link;            /* in srv->suspended while SUSPENDED */
};

struct http_server {
  uv_loop_t *loop;               /* borrowed */
  struct MHD_Daemon *mhd;
  uv_poll_t poll;                /* MHD's epoll fd */
  uv_timer_t timer;              /* MHD's timeout, and "run soon" */
  uv_poll_t listen_poll;         /* our listening socket */
  uv_timer_t sweep;              /* deadlines, accept retries */
  int listen_fd;                 /* -1 once closed */
  bool listening;                /* listen_poll is started */
  struct list conns;             /* every open connection */
  struct http_conn *adding;      /* handed to MHD_add_connection() now */
  unsigned nconns;
  unsigned max_connections;
  unsigned max_per_address;
  uint64_t header_timeout_ms;
  uint64_t idle_timeout_ms;
  uint64_t min_body_rate;
  uint64_t refused;              /* closed at accept: address over limit */
  uint64_t cut_total;            /* shut down for being too slow */
  char *tls_cert;                /* PEM, kept while MHD may use it */
  char *tls_key;                 /* PEM, wiped when freed */
  http_handler_fn head_handler;
  http_handler_fn handler;
  void *handler_arg;
  size_t max_body;
  uint16_t port;
  bool run_soon;                 /* an MHD_run() is wanted at once */
  bool close_requested;
  bool close_started;
  uint64_t close_deadline;       /* uv_now() limit of the drain */
  unsigned live;                 /* requests not yet completed */
  int open_handles;              /* uv handles not yet closed */
  void (*close_cb)(void *arg);
  void *close_arg;
  struct list suspended;         /* the SUSPENDED requests */
  char too_large_json[128];      /* the 413 body; outlives the daemon */
  char last_log[160];            /* MHD's last message, for start errors */
};

static const char unavailable_json[] =
    "{\"error\":{\"code\":\"UNAVAILABLE\","
    "\"message\":\"server shutting down\"}}";
static const char internal_json[] =
    "{\"error\":{\"code\":\"INTERNAL\","
    "\"message\":\"cannot build the response\"}}";
static const char json_type[] = "application/json";
static const char nul_json[] =
    "{\"error\":{\"code\":\"INVALID\","
    "\"message\":\"the path or a query argument decodes to a NUL byte\"}}";
static const char framing_json[] =
    "{\"error\":{\"code\":\"INVALID\","
    "\"message\":\"two Content-Length headers, or Content-Length with "
    "Transfer-Encoding: the body's length is ambiguous\"}}";

static void server_run(struct http_server *s);

/* ---- driving MHD from the loop ---- */

static void
on_timer(uv_timer_t *t)
{
  server_run(t->data);
}

static void
on_poll(uv_poll_t *p, int status, int events)
{
  /* An error on MHD's epoll fd cannot be acted on here; running MHD is
   * still the right thing (it reports its own failures). */
  server_run(p->data);
}

/*
 * Ask for an MHD_run() on the next loop iteration.  Used wherever MHD must
 * run again but we may be inside one of its callbacks, where calling
 * MHD_run() would re-enter it.
 */
static void
server_run_soon(struct http_server *s)
{
  s->run_soon = true;
  uv_timer_start(&s->timer, on_timer, 0, 0);
}

static void
server_arm_timer(struct http_server *s)
{
  MHD_UNSIGNED_LONG_LONG ms = 0;
  bool have_timeout;
  uint64_t now;

  if (s->run_soon)
    have_timeout = true;
  else
    have_timeout = MHD_get_timeout(s->mhd, &ms) == MHD_YES;
  if (s->close_started) {
    /* Wake up at the drain deadline even when MHD has nothing to time. */
    now = uv_now(s->loop);
    if (now >= s->close_deadline)
      ms = 0;
    else if (!have_timeout || ms > s->close_deadline - now)
      ms = s->close_deadline - now;
    have_timeout = true;
  }
  if (have_timeout)
    uv_timer_start(&s->timer, on_timer, (uint64_t)ms, 0);
  else
    uv_timer_stop(&s->timer);
}

/* ---- building answers ---- */

/* Copy the handler's headers and the content type into resp. */
static void
request_apply_headers(struct http_request *req, struct MHD_Response *resp,
                      const char *content_type)
{
  const char *p;
  const char *end;
  const char *name;

  if (content_type != NULL)
    (void)MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                  content_type);
  if (req->headers.len == 0)
    return;
  p = req->headers.data;
  end = p + req->headers.len;
  while (p < end) {
    name = p;
    p += strlen(p) + 1;
    if (MHD_add_response_header(resp, name, p) != MHD_YES)
      log_warn("http: response header '%s' rejected", name);
    p += strlen(p) + 1;
  }
}

/* A response over a static or server-owned JSON text (borrowed). */
static struct MHD_Response *
json_response(const char *json)
{
  struct MHD_Response *resp;

  resp = MHD_create_response_from_buffer(strlen(json), (void *)json,
                                         MHD_RESPMEM_PERSISTENT);
  if (resp != NULL)
    (void)MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                  json_type);
  return resp;
}

/* Queue a one-off JSON answer on conn (not through a request). */
static enum MHD_Result
queue_json(struct MHD_Connection *conn, unsigned status, const char *json,
           bool close)
{
  struct MHD_Response *resp = json_response(json);
  enum MHD_Result ret;

  if (resp == NULL)
    return MHD_NO;
  if (close)
    (void)MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
  ret = MHD_queue_response(conn, status, resp);
  MHD_destroy_response(resp);
  return ret;
}

/*
 * Store resp (steals it; NULL means building it failed) as the answer of
 * req.  Inside the handler the access callback queues it when the handler
 * returns; for a suspended request the connection is resumed.
 */
static void
request_answer(struct http_request *req, unsigned status,
               struct MHD_Response *resp)
{
  if (req->state != REQ_IN_HANDLER && req->state != REQ_SUSPENDED) {
    /* A second answer, or one after http_server_close() answered 503. */
    log_error("http: %s '%s' answered twice, answer %u dropped",
              req->method, req->path, status);
    if (resp != NULL)
      MHD_destroy_response(resp);
    return;
  }
  if (resp == NULL) {
    log_error("http: %s '%s': cannot build a %u response", req->method,
              req->path, status);
    status = MHD_HTTP_INTERNAL_SERVER_ERROR;
    resp = json_response(internal_json);
  }
  req->resp = resp;
  req->status = status;
  if (req->state == REQ_IN_HANDLER) {
    req->state = REQ_ANSWERED;
    return;
  }
  req->state = REQ_ANSWERED;
  list_remove(&req->link);
  MHD_resume_connection(req->conn);
  server_run_soon(req->srv);
}

/* Hand the stored answer to MHD. */
static enum MHD_Result
request_queue(struct http_request *req)
{
  enum MHD_Result ret = MHD_NO;

  if (req->resp != NULL) {
    ret = MHD_queue_response(req->conn, req->status, req->resp);
    MHD_destroy_response(req->resp);
    req->resp = NULL;
  }
  req->state = REQ_QUEUED;
  return ret;
}

/* ---- MHD callbacks ---- */

static bool
content_length_too_large(struct MHD_Connection *conn, size_t max)
{
  const char *v;
  char *end = NULL;
  unsigned long long n;

  v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                  MHD_HTTP_HEADER_CONTENT_LENGTH);
  if (v == NULL)
    return false;
  errno = 0;
  n = strtoull(v, &end, 10);
  if (end == v)
    return false; /* MHD rejects a malformed length itself */
  return errno == ERANGE || n > max;
}

/* The connection state of conn (NULL only for one MHD made itself). */
static struct http_conn *
conn_of(struct MHD_Connection *conn)
{
  const union MHD_ConnectionInfo *ci;

  ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return ci != NULL ? ci->socket_context : NULL;
}

struct framing {
  unsigned content_length;
  unsigned transfer_encoding;
};

static enum MHD_Result
count_framing(void *cls, enum MHD_ValueKind kind, const char *key,
              const char *value)
{
  struct framing *f = cls;

  (void)kind;
  (void)value;
  if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0)
    f->content_length++;
  else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0)
    f->transfer_encoding++;
  return MHD_YES;
}

/* RFC 9112 6.3: a length given twice, or both ways, is a smuggling
 * attempt or a broken client; either way the body cannot be trusted. */
static bool
framing_is_ambiguous(struct MHD_Connection *conn)
{
  struct framing f = {0, 0};

  (void)MHD_get_connection_values(conn, MHD_HEADER_KIND, count_framing, &f);
  return f.content_length > 1 ||
         (f.content_length > 0 && f.transfer_encoding > 0);
}

static struct http_request *
request_new(struct http_server *s, struct MHD_Connection *conn,
            const char *method, const char *path)
{
  struct http_request *req = xcalloc(1, sizeof(*req));

  req->srv = s;
  list_init(&req->link);
  req->conn = conn;
  req->method = method;
  req->path = path;
  buf_init(&req->body, s->max_body);
  buf_init(&req->headers, MAX_RESPONSE_HEADER_BYTES);
  req->state = REQ_BODY;
  s->live++;
  return req;
}

/*
 * First call, headers only: refuse what cannot be served before reading
 * any body, then let the head handler look.  A body left unread makes
 * MHD close the connection after the answer.
 */
static enum MHD_Result
on_headers(struct http_server *s, struct MHD_Connection *conn,
           const char *url, const char *method, void **con_cls)
{
  struct http_conn *hc = conn_of(conn);
  struct http_request *req;

  if (hc != NULL)
    hc->deadline = uv_now(s->loop) + s->header_timeout_ms;
  if (s->close_requested)
    return queue_json(conn, MHD_HTTP_SERVICE_UNAVAILABLE, unavailable_json,
                      true);
  if (hc != NULL && hc->nul_in_url)
    return queue_json(conn, MHD_HTTP_BAD_REQUEST, nul_json, true);
  if (framing_is_ambiguous(conn))
    return queue_json(conn, MHD_HTTP_BAD_REQUEST, framing_json, true);
  if (content_length_too_large(conn, s->max_body))
    return queue_json(conn, MHD_HTTP_CONTENT_TOO_LARGE, s->too_large_json,
                      true);
  req = request_new(s, conn, method, url);
  *con_cls = req;
  if (s->head_handler == NULL)
    return MHD_YES;
  req->state = REQ_IN_HANDLER;
  s->head_handler(req, s->handler_arg);
  if (req->state != REQ_ANSWERED) {
    req->state = REQ_BODY;
    return MHD_YES;
  }
  if (req->resp != NULL)
    (void)MHD_add_response_header(req->resp, MHD_HTTP_HEADER_CONNECTION,
                                  "close");
  return request_queue(req);
}

static enum MHD_Result
on_access(void *cls, struct MHD_Connection *conn, const char *url,
          const char *method, const char *version, const char *upload_data,
          size_t *upload_data_size, void **con_cls)
{
  struct http_server *s = cls;
  struct http_request *req = *con_cls;
  struct http_conn *hc;

  if (req == NULL)
    return on_headers(s, conn, url, method, con_cls);

  if (*upload_data_size != 0) {
    /* Each byte buys the time min_body_rate allows for it: a steady
     * client never runs out, a trickle soon does. */
    hc = conn_of(conn);
    if (hc != NULL && hc->deadline != 0)
      hc->deadline += (uint64_t)*upload_data_size * 1000u / s->min_body_rate;
    if (req->state == REQ_QUEUED) {
      /* Answered from the headers: drop what MHD still hands over. */
      *upload_data_size = 0;
      return MHD_YES;
    }
    /* A chunked body has no length up front: it is capped as it comes.
     * MHD 0.9.75 cannot queue an answer in the middle of an upload, so
     * past the cap the rest is read and dropped and the 413 goes out at
     * the end; a client that keeps sending far beyond that is cut off. */
    if (req->state == REQ_BODY &&
        buf_add(&req->body, upload_data, *upload_data_size) < 0) {
      buf_release(&req->body);
      req->state = REQ_TOO_LARGE;
    }
    if (req->state == REQ_TOO_LARGE) {
      req->discarded += *upload_data_size;
      if (req->discarded > MAX_DISCARD_BYTES) {
        log_warn("http: %s '%s': body still coming after %zu bytes over "
                 "the cap, closing the connection", req->method, req->path,
                 req->discarded);
        return MHD_NO;
      }
    }
    *upload_data_size = 0;
    return MHD_YES;
  }

  /* The whole request is in: no deadline while it is answered. */
  hc = conn_of(conn);
  if (hc != NULL)
    hc->deadline = 0;
  switch (req->state) {
  case REQ_TOO_LARGE:
    /* The whole body was read, so the connection can be kept. */
    req->state = REQ_QUEUED;
    return queue_json(conn, MHD_HTTP_CONTENT_TOO_LARGE, s->too_large_json,
                      false);
  case REQ_BODY:
    if (s->close_requested) {
      req->state = REQ_QUEUED;
      return queue_json(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
                        unavailable_json, true);
    }
    req->state = REQ_IN_HANDLER;
    s->handler(req, s->handler_arg);
    if (req->state == REQ_ANSWERED)
      return request_queue(req);
    req->state = REQ_SUSPENDED;
    list_insert_head(&s->suspended, &req->link);
    MHD_suspend_connection(conn);
    return MHD_YES;
  case REQ_ANSWERED:
    /* Resumed after a late answer. */
    return request_queue(req);
  case REQ_IN_HANDLER:
  case REQ_SUSPENDED:
  case REQ_QUEUED:
    break;
  }
  log_error("http: %s '%s': unexpected callback in state %d", req->method,
            req->path, (int)req->state);
  return MHD_NO;
}

static void
on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
             enum MHD_RequestTerminationCode toe)
{
  struct http_server *s = cls;
  struct http_request *req = *con_cls;
  struct http_conn *hc = conn_of(conn);

  /* A kept-alive connection may idle, then must send the next request's
   * headers in time like a new one. */
  if (hc != NULL) {
    hc->nul_in_url = false;
    hc->deadline =
        uv_now(s->loop) + s->idle_timeout_ms + s->header_timeout_ms;
  }
  if (req == NULL)
    return;
  *con_cls = NULL;
  list_remove(&req->link); /* suspended only when MHD is torn down */
  s->live--;
  if (req->resp != NULL)
    MHD_destroy_response(req->resp);
  buf_release(&req->body);
  buf_release(&req->headers);
  free(req);
}

/* MHD_OPTION_UNESCAPE_CALLBACK: MHD's own decoding, but a %00 would cut
 * the C string short ("/v1/jobs%00/1/cancel" read as "/v1/jobs"), so the
 * connection is marked and the request answered 400. */
static size_t
on_unescape(void *cls, struct MHD_Connection *conn, char *s)
{
  size_t n = MHD_http_unescape(s);
  struct http_conn *hc;

  (void)cls;
  if (memchr(s, '\0', n) != NULL) {
    hc = conn_of(conn);
    if (hc != NULL)
      hc->nul_in_url = true;
  }
  return n;
}

/* ---- accepting ---- */

static void
listen_pause(struct http_server *s)
{
  if (s->listening)
    (void)uv_poll_stop(&s->listen_poll);
  s->listening = false;
}

static void on_listen(uv_poll_t *p, int status, int events);

/* Accept again if there is room (a no-op while closing). */
static void
listen_resume(struct http_server *s)
{
  if (s->listening || s->listen_fd < 0 || s->close_requested ||
      s->nconns >= s->max_connections)
    return;
  if (uv_poll_start(&s->listen_poll, UV_READABLE, on_listen) == 0)
    s->listening = true;
}

static bool
same_address(const struct sockaddr_storage *a,
             const struct sockaddr_storage *b)
{
  const struct sockaddr_in *a4 = (const struct sockaddr_in *)a;
  const struct sockaddr_in *b4 = (const struct sockaddr_in *)b;
  const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)a;
  const struct sockaddr_in6 *b6 = (const struct sockaddr_in6 *)b;

  if (a->ss_family != b->ss_family)
    return false;
  if (a->ss_family == AF_INET)
    return a4->sin_addr.s_addr == b4->sin_addr.s_addr;
  if (a->ss_family == AF_INET6)
    return memcmp(&a6->sin6_addr, &b6->sin6_addr,
                  sizeof(a6->sin6_addr)) == 0;
  return false;
}

/* Connections open from addr (a walk: there are max_connections at most,
 * and only an accept pays for it). */
static unsigned
address_count(const struct http_server *s,
              const struct sockaddr_storage *addr)
{
  const struct list *q;
  unsigned n = 0;

  LIST_FOREACH(q, &s->conns)
    if (same_address(&LIST_ENTRY(q, struct http_conn, link)->addr, addr))
      n++;
  return n;
}

/* Hand one accepted socket to MHD (which owns it from then on). */
static void
server_add(struct http_server *s, int fd,
           const struct sockaddr_storage *addr, socklen_t len)
{
  struct http_conn *hc;

  if (s->max_per_address > 0 && address_count(s, addr) >= s->max_per_address) {
    if (s->refused++ % 1024 == 0)
      log_warn("http: a client address holds %u connections, the most "
               "allowed: closing its new ones (%llu so far)",
               s->max_per_address, (unsigned long long)s->refused);
    close(fd);
    return;
  }
  hc = xcalloc(1, sizeof(*hc));
  hc->srv = s;
  hc->fd = fd;
  memcpy(&hc->addr, addr, len);
  /* on_connection() takes hc from here, inside MHD_add_connection(). */
  s->adding = hc;
  if (MHD_add_connection(s->mhd, fd, (const struct sockaddr *)addr, len) !=
      MHD_YES)
    log_warn("http: mhd refused a connection: %s", strerror(errno));
  if (s->adding == hc)
    free(hc); /* never started: MHD closed the socket */
  s->adding = NULL;
}

static void
on_listen(uv_poll_t *p, int status, int events)
{
  struct http_server *s = p->data;
  struct sockaddr_storage addr;
  socklen_t len;
  int fd;
  int i;

  (void)status;
  (void)events;
  for (i = 0; i < ACCEPT_BATCH; i++) {
    if (s->nconns >= s->max_connections) {
      /* Resumed by the first connection to close. */
      listen_pause(s);
      break;
    }
    len = sizeof(addr);
    fd = accept4(s->listen_fd, (struct sockaddr *)&addr, &len,
                 SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED)
        continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        /* EMFILE and the like: a level-triggered poll would spin, so
         * wait for a close or the next sweep. */
        log_warn("http: cannot accept: %s; retrying when a connection "
                 "closes", strerror(errno));
        listen_pause(s);
      }
      break;
    }
    server_add(s, fd, &addr, len);
  }
  server_run_soon(s);
}

/* MHD_OPTION_NOTIFY_CONNECTION: track every connection's life. */
static void
on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
              enum MHD_ConnectionNotificationCode code)
{
  struct http_server *s = cls;
  struct http_conn *hc;

  (void)conn;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    hc = s->adding;
    s->adding = NULL;
    *socket_context = hc;
    if (hc == NULL)
      return;
    hc->deadline = uv_now(s->loop) + s->header_timeout_ms;
    list_insert_head(&s->conns, &hc->link);
    s->nconns++;
    return;
  }
  hc = *socket_context;
  *socket_context = NULL;
  if (hc == NULL)
    return;
  list_remove(&hc->link);
  s->nconns--;
  free(hc);
  listen_resume(s);
}

/* Cut the connections whose request is late; retry accepting. */
static void
on_sweep(uv_timer_t *t)
{
  struct http_server *s = t->data;
  struct list *q;
  uint64_t now = uv_now(s->loop);
  unsigned cut = 0;

  LIST_FOREACH(q, &s->conns) {
    struct http_conn *hc = LIST_ENTRY(q, struct http_conn, link);

    if (hc->cut || hc->deadline == 0 || now < hc->deadline)
      continue;
    /* MHD owns the fd; a shutdown makes it see the end and close. */
    (void)shutdown(hc->fd, SHUT_RDWR);
    hc->cut = true;
    cut++;
  }
  if (cut > 0) {
    s->cut_total += cut;
    log_warn("http: cut %u connection(s) too slow to send a request "
             "(%llu so far)", cut, (unsigned long long)s->cut_total);
    server_run_soon(s);
  }
  listen_resume(s);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
    PRINTF_LIKE(2, 0);

static void
on_mhd_log(void *cls, const char *fmt, va_list ap)
{
  struct http_server *s = cls;
  size_t n;

  vsnprintf(s->last_log, sizeof(s->last_log), fmt, ap);
  n = strlen(s->last_log);
  while (n > 0 && (s->last_log[n - 1] == '\n' || s->last_log[n - 1] == '.'))
    s->last_log[--n] = '\0';
  log_warn("http: mhd: %s", s->last_log);
}

/* ---- closing ---- */

static void on_handle_closed(uv_handle_t *h);

static void
server_free(struct http_server *s)
{
  if (s->listen_fd >= 0)
    close(s->listen_fd);
  free(s->tls_cert);
  secret_free(s->tls_key);
  free(s);
}

/* Close the listening socket and its poll (once). */
static void
listen_close(struct http_server *s)
{
  if (s->listen_fd < 0)
    return;
  listen_pause(s);
  uv_close((uv_handle_t *)&s->listen_poll, on_handle_closed);
  /* Stopped by uv_close(), so no longer polled: safe to close now. */
  close(s->listen_fd);
  s->listen_fd = -1;
}

static void
on_handle_closed(uv_handle_t *h)
{
  struct http_server *s = h->data;
  void (*cb)(void *arg) = s->close_cb;
  void *arg = s->close_arg;

  if (--s->open_handles > 0)
    return;
  server_free(s);
  if (cb != NULL)
    cb(arg);
}

/* Stop accepting and answer every suspended request 503. */
static void
server_close_begin(struct http_server *s)
{
  struct http_request *req;
  struct MHD_Response *resp;

  s->close_started = true;
  s->close_deadline = uv_now(s->loop) + CLOSE_DRAIN_MS;
  listen_close(s);
  uv_close((uv_handle_t *)&s->sweep, on_handle_closed);
  while (!list_empty(&s->suspended)) {
    req = LIST_ENTRY(list_first(&s->suspended), struct http_request, link);
    resp = json_response(unavailable_json);
    if (resp != NULL)
      (void)MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION,
                                    "close");
    request_answer(req, MHD_HTTP_SERVICE_UNAVAILABLE, resp);
  }
}

/* Stop the daemon (which completes whatever is left) and close handles. */
static void
server_close_finish(struct http_server *s)
{
  /* libuv must stop polling the epoll fd before MHD closes it. */
  uv_close((uv_handle_t *)&s->poll, on_handle_closed);
  MHD_stop_daemon(s->mhd);
  s->mhd = NULL;
  uv_close((uv_handle_t *)&s->timer, on_handle_closed);
}

static void
server_run(struct http_server *s)
{
  s->run_soon = false;
  if (s->close_requested && !s->close_started)
    server_close_begin(s);
  (void)MHD_run(s->mhd);
  if (s->close_started &&
      (s->live == 0 || uv_now(s->loop) >= s->close_deadline)) {
    server_close_finish(s);
    return;
  }
  server_arm_timer(s);
}

/* ---- public API ---- */

/*
 * sendfile() can raise SIGPIPE and, unlike send(), cannot be told not to,
 * so MHD falls back to read+send for fd responses unless the application
 * promises SIGPIPE is handled.  The daemon ignores SIGPIPE in main; here
 * we only report what the process actually does.
 */
static int
sigpipe_is_handled(void)
{
  struct sigaction sa;

  if (sigaction(SIGPIPE, NULL, &sa) != 0)
    return 0;
  if ((sa.sa_flags & SA_SIGINFO) != 0)
    return 1;
  return sa.sa_handler != SIG_DFL;
}

static int
parse_address(const char *host, uint16_t port, struct sockaddr_storage *ss,
              bool *ipv6, struct err *e)
{
  memset(ss, 0, sizeof(*ss));
  *ipv6 = false;
  if (host == NULL)
    return err_set(e, ERR_CONFIG, "http: no address to bind");
  if (uv_ip4_addr(host, port, (struct sockaddr_in *)ss) == 0)
    return 0;
  if (uv_ip6_addr(host, port, (struct sockaddr_in6 *)ss) == 0) {
    *ipv6 = true;
    return 0;
  }
  return err_set(e, ERR_CONFIG,
                 "http: address '%s': not a numeric IPv4 or IPv6 address",
                 host);
}

/* socket, bind and listen on ss; the port bound goes into s->port. */
static int
listen_open(struct http_server *s, const struct sockaddr_storage *ss,
            bool ipv6, const char *host, struct err *e)
{
  struct sockaddr_storage bound;
  socklen_t len = ipv6 ? sizeof(struct sockaddr_in6)
                       : sizeof(struct sockaddr_in);
  int one = 1;
  int fd;

  fd = socket(ipv6 ? AF_INET6 : AF_INET,
              SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return err_set(e, ERR_IO, "http: cannot listen on '%s': socket: %s",
                   host, strerror(errno));
  /* A restart must not wait out the previous run's TIME_WAIT. */
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (ipv6)
    (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
  if (bind(fd, (const struct sockaddr *)ss, len) < 0 ||
      listen(fd, (int)LISTEN_BACKLOG) < 0 ||
      getsockname(fd, (struct sockaddr *)&bound, &len) < 0) {
    err_set(e, ERR_IO, "http: cannot listen on '%s' port %u: %s", host,
            ntohs(((const struct sockaddr_in *)ss)->sin_port),
            strerror(errno));
    close(fd);
    return ERR_IO;
  }
  /* sin_port and sin6_port sit at the same offset. */
  s->port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
  s->listen_fd = fd;
  return 0;
}

/* Read the certificate and key for MHD (which keeps pointers to them). */
static int
tls_load(struct http_server *s, const struct http_server_config *cfg,
         struct err *e)
{
  int rc;

  if (cfg->tls_cert_file == NULL && cfg->tls_key_file == NULL)
    return 0;
  if (cfg->tls_cert_file == NULL || cfg->tls_key_file == NULL)
    return err_set(e, ERR_CONFIG, "http: TLS needs both a certificate "
                   "file and a key file");
  if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
    return err_set(e, ERR_CONFIG, "http: this libmicrohttpd has no TLS");
  rc = file_read(cfg->tls_cert_file, MAX_CERT_BYTES, &s->tls_cert, NULL, e);
  if (rc == 0)
    rc = secret_read_file(cfg->tls_key_file, 0, &s->tls_key, NULL, e);
  if (rc < 0) {
    /* Whatever went wrong, the configuration names a file to fix. */
    (void)err_prefix(e, "http: TLS %s", s->tls_cert == NULL ? "certificate"
                                                             : "key");
    if (e != NULL)
      e->code = ERR_CONFIG;
    return ERR_CONFIG;
  }
  return 0;
}

int
http_server_start(uv_loop_t *loop, const struct http_server_config *cfg,
                  struct http_server **out, struct err *e)
{
  struct http_server *s = NULL;
  struct sockaddr_storage ss;
  const union MHD_DaemonInfo *info;
  struct MHD_OptionItem tls_opts[3] = {{MHD_OPTION_END, 0, NULL},
                                       {MHD_OPTION_END, 0, NULL},
                                       {MHD_OPTION_END, 0, NULL}};
  unsigned flags;
  bool ipv6;
  int epoll_fd;
  int rc;

  *out = NULL;
  if (cfg->handler == NULL)
    return err_set(e, ERR_CONFIG, "http: no handler");
  rc = parse_address(cfg->host, cfg->port, &ss, &ipv6, e);
  if (rc < 0)
    return rc;

  s = xcalloc(1, sizeof(*s));
  list_init(&s->conns);
  list_init(&s->suspended);
  s->loop = loop;
  s->listen_fd = -1;
  s->head_handler = cfg->head_handler;
  s->handler = cfg->handler;
  s->handler_arg = cfg->handler_arg;
  s->max_body = cfg->max_body;
  s->max_connections = cfg->max_connections > 0
                           ? cfg->max_connections
                           : HTTP_SERVER_DEFAULT_MAX_CONNECTIONS;
  s->max_per_address = cfg->max_per_address;
  s->header_timeout_ms = 1000u * (uint64_t)(
      cfg->header_timeout_s > 0 ? cfg->header_timeout_s
                                : HTTP_SERVER_DEFAULT_HEADER_TIMEOUT_S);
  s->idle_timeout_ms = 1000u * (uint64_t)cfg->conn_timeout_s;
  s->min_body_rate = cfg->min_body_rate > 0
                         ? cfg->min_body_rate
                         : HTTP_SERVER_DEFAULT_MIN_BODY_RATE;
  snprintf(s->too_large_json, sizeof(s->too_large_json),
           "{\"error\":{\"code\":\"TOO_LARGE\","
           "\"message\":\"request body exceeds %zu bytes\"}}",
           cfg->max_body);
  rc = tls_load(s, cfg, e);
  if (rc < 0)
    goto out;
  rc = listen_open(s, &ss, ipv6, cfg->host, e);
  if (rc < 0)
    goto out;

  flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
          MHD_USE_NO_LISTEN_SOCKET;
  if (s->tls_cert != NULL) {
    flags |= MHD_USE_TLS;
    tls_opts[0] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0,
                                          s->tls_key};
    tls_opts[1] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0,
                                          s->tls_cert};
  }
  s->mhd = MHD_start_daemon(
      flags, 0, NULL, NULL, on_access, s,
      /* First, so that MHD's own option checks are routed too. */
      MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s,
      /* Ours is the limit; MHD's only must never be the one hit. */
      MHD_OPTION_CONNECTION_LIMIT, s->max_connections + 16u,
      MHD_OPTION_CONNECTION_TIMEOUT, cfg->conn_timeout_s,
      MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
      MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
      MHD_OPTION_UNESCAPE_CALLBACK, on_unescape, s,
      MHD_OPTION_SIGPIPE_HANDLED_BY_APP, sigpipe_is_handled(),
      MHD_OPTION_ARRAY, tls_opts,
      MHD_OPTION_END);
  if (s->mhd == NULL) {
    rc = err_set(e, ERR_IO, "http: cannot serve on '%s' port %u: %s",
                 cfg->host, (unsigned)cfg->port,
                 s->last_log[0] != '\0' ? s->last_log : "unknown error");
    goto out;
  }

  info = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_EPOLL_FD);
  epoll_fd = info != NULL ? info->epoll_fd : -1;
  if (epoll_fd < 0) {
    rc = err_set(e, ERR_INTERNAL, "http: no epoll fd from mhd");
    goto out;
  }
  rc = uv_poll_init(loop, &s->poll, epoll_fd);
  if (rc < 0) {
    rc = err_set(e, ERR_IO, "http: cannot poll mhd's epoll fd: %s",
                 uv_strerror(rc));
    goto out;
  }
  rc = uv_poll_init_socket(loop, &s->listen_poll, s->listen_fd);
  if (rc < 0) {
    rc = err_set(e, ERR_IO, "http: cannot poll the listening socket: %s",
                 uv_strerror(rc));
    /* The first poll exists: it must close before s is freed. */
    MHD_stop_daemon(s->mhd);
    s->mhd = NULL;
    s->open_handles = 1;
    s->poll.data = s;
    uv_close((uv_handle_t *)&s->poll, on_handle_closed);
    s = NULL;
    goto out;
  }
  /* From here on the handles exist and failure can no longer occur. */
  uv_timer_init(loop, &s->timer);
  uv_timer_init(loop, &s->sweep);
  s->poll.data = s;
  s->timer.data = s;
  s->listen_poll.data = s;
  s->sweep.data = s;
  s->open_handles = 4;
  (void)uv_poll_start(&s->poll, UV_READABLE, on_poll);
  uv_timer_start(&s->sweep, on_sweep, SWEEP_MS, SWEEP_MS);
  listen_resume(s);
  server_arm_timer(s);
  *out = s;
  s = NULL;
  rc = 0;

out:
  if (s != NULL) {
    if (s->mhd != NULL)
      MHD_stop_daemon(s->mhd);
    server_free(s);
  }
  return rc;
}

uint16_t
http_server_port(const struct http_server *s)
{
  return s->port;
}

void
http_server_close(struct http_server *s, void (*cb)(void *arg), void *arg)
{
  if (s->close_requested) {
    log_error("http: server closed twice");
    return;
  }
  s->close_requested = true;
  s->close_cb = cb;
  s->close_arg = arg;
  server_run_soon(s);
}

/* ---- the request ---- */

const char *
http_request_method(const struct http_request *req)
{
  return req->method;
}

const char *
http_request_path(const struct http_request *req)
{
  return req->path;
}

const char *
http_request_query(const struct http_request *req, const char *name)
{
  return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, name);
}

const char *
http_request_header(const struct http_request *req, const char *name)
{
  return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

const char *
http_request_body(const struct http_request *req, size_t *len)
{
  if (len != NULL)
    *len = req->body.len;
  return buf_str(&req->body);
}

void
http_request_set_data(struct http_request *req, void *data)
{
  req->data = data;
}

void *
http_request_data(const struct http_request *req)
{
  return req->data;
}

/* ---- answering ---- */

void
http_request_add_header(struct http_request *req, const char *name,
                        const char *value)
{
  size_t n = strlen(name) + 1;
  size_t v = strlen(value) + 1;

  /* Check the room for the whole pair first so the list stays in pairs. */
  if (n + v > req->headers.max - req->headers.len ||
      buf_add(&req->headers, name, n) < 0 ||
      buf_add(&req->headers, value, v) < 0)
    log_error("http: response header '%s' dropped: too many headers",
              name);
}

void
http_respond(struct http_request *req, int status, const char *content_type,
             char *body, size_t len)
{
  struct MHD_Response *resp;

  if (body == NULL)
    len = 0;
  resp = MHD_create_response_from_buffer_with_free_callback(len, body,
                                                            free);
  if (resp == NULL)
    free(body);
  else
    request_apply_headers(req, resp, content_type);
  request_answer(req, (unsigned)status, resp);
}

void
http_respond_fd(struct http_request *req, int status,
                const char *content_type, int fd, off_t offset, size_t len)
{
  struct MHD_Response *resp = NULL;

  if (fd >= 0 && offset >= 0)
    resp = MHD_create_response_from_fd_at_offset64((uint64_t)len, fd,
                                                   (uint64_t)offset);
  if (resp == NULL) {
    if (fd >= 0)
      close(fd);
  } else {
    request_apply_headers(req, resp, content_type);
  }
  request_answer(req, (unsigned)status, resp);
}
