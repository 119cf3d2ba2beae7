/*
 * Tests for http/client.c: real HTTP on 127.0.0.1, with the project's own
 * http/server.h as the peer on the same libuv loop in the same thread
 * (the broker's production shape).  Each test sets up the loop, a server
 * whose handler behaves as the test needs, and a client; the client's
 * callbacks record what they saw, and once every expected callback has
 * run the fixture closes both and uv_run() returns.  A watchdog timer
 * turns a hang into a failure after WATCHDOG_MS (a bound, never a
 * measurement).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/client.h"
#include "http/server.h"
#include "util/alloc.h"

#define WATCHDOG_MS 60000u
#define MAX_HELD 64
#define MAX_RESULTS 256
#define BIG_BODY (2u << 20)

struct fixture;

/* What the client saw for one request. */
struct result {
  struct fixture *fx;
  int calls;
  int rc;
  int err_code;
  int status;
  unsigned attempts;
  char *body;
  size_t len;
  char *echo;            /* the X-Echo response header */
  int send_while_closing; /* rc of a send from inside a cancelled callback */
};

struct fixture {
  uv_loop_t loop;
  uv_timer_t watchdog;
  uv_timer_t poll_timer;  /* for tests that wait on a condition */
  struct http_server *srv;
  struct http_client *cli;
  char base[64];          /* "http://127.0.0.1:PORT" */
  void (*handle)(struct fixture *fx, struct http_request *req);
  /* server side */
  int hits;
  int fail_first;         /* answer 503 to this many requests first */
  int status;             /* for handle_status */
  struct http_request *held[MAX_HELD];
  int nheld;
  /* client side */
  struct result results[MAX_RESULTS];
  int done;
  int expected;
  int chain_left;         /* sequential requests still to send */
  bool client_closed;
  bool server_closed;
  int done_at_client_close;
  bool shut;
};

static char *
dup_bytes(const char *p, size_t n)
{
  char *s = xmalloc(n + 1);

  memcpy(s, p, n);
  s[n] = '\0';
  return s;
}

/* ---- server behaviours ---- */

static void
on_server_request(struct http_request *req, void *arg)
{
  struct fixture *fx = arg;

  fx->hits++;
  fx->handle(fx, req);
}

/* 200 with "METHOD PATH X-Test BODY" and X-Echo: the X-Test header. */
static void
handle_echo(struct fixture *fx, struct http_request *req)
{
  const char *h = http_request_header(req, "X-Test");
  const char *body;
  size_t len;
  char *out;
  size_t n;

  (void)fx;
  body = http_request_body(req, &len);
  n = strlen(http_request_method(req)) + strlen(http_request_path(req)) +
      (h != NULL ? strlen(h) : 1) + len + 4;
  out = xmalloc(n);
  n = (size_t)snprintf(out, n, "%s %s %s %.*s", http_request_method(req),
                       http_request_path(req), h != NULL ? h : "-",
                       (int)len, body);
  if (h != NULL)
    http_request_add_header(req, "X-Echo", h);
  http_respond(req, 200, "text/plain", out, n);
}

static void
handle_big(struct fixture *fx, struct http_request *req)
{
  char *out = xmalloc(BIG_BODY);

  (void)fx;
  memset(out, 'x', BIG_BODY);
  http_respond(req, 200, "text/plain", out, BIG_BODY);
}

/* Never answered by the handler (the server's close answers 503). */
static void
handle_hold(struct fixture *fx, struct http_request *req)
{
  assert_true(fx->nheld < MAX_HELD);
  fx->held[fx->nheld++] = req;
}

static void
handle_flaky(struct fixture *fx, struct http_request *req)
{
  if (fx->hits <= fx->fail_first) {
    http_respond(req, 503, "text/plain", xstrdup("busy"), 4);
    return;
  }
  http_respond(req, 200, "text/plain", xstrdup("ok"), 2);
}

static void
handle_status(struct fixture *fx, struct http_request *req)
{
  http_respond(req, fx->status, "text/plain", xstrdup("status"), 6);
}

/* ---- fixture ---- */

static void
on_watchdog(uv_timer_t *t)
{
  (void)t;
  fail_msg("test did not finish within %u ms", WATCHDOG_MS);
}

static void
on_client_closed(void *arg)
{
  struct fixture *fx = arg;

  fx->client_closed = true;
  fx->done_at_client_close = fx->done;
}

static void
on_server_closed(void *arg)
{
  struct fixture *fx = arg;

  fx->server_closed = true;
}

static void
fx_shutdown(struct fixture *fx)
{
  if (fx->shut)
    return;
  fx->shut = true;
  http_client_close(fx->cli, on_client_closed, fx);
  http_server_close(fx->srv, on_server_closed, fx);
}

static void
fx_setup(struct fixture *fx,
         void (*handle)(struct fixture *fx, struct http_request *req),
         unsigned max_host_connections)
{
  struct http_server_config scfg;
  struct http_client_config ccfg;
  struct err e;

  memset(fx, 0, sizeof(*fx));
  fx->handle = handle;
  assert_int_equal(uv_loop_init(&fx->loop), 0);
  memset(&scfg, 0, sizeof(scfg));
  scfg.host = "127.0.0.1";
  scfg.max_body = 1u << 20;
  scfg.conn_timeout_s = 30;
  scfg.handler = on_server_request;
  scfg.handler_arg = fx;
  assert_int_equal(http_server_start(&fx->loop, &scfg, &fx->srv, &e), 0);
  snprintf(fx->base, sizeof(fx->base), "http://127.0.0.1:%u",
           (unsigned)http_server_port(fx->srv));
  memset(&ccfg, 0, sizeof(ccfg));
  ccfg.max_host_connections = max_host_connections;
  assert_int_equal(http_client_new(&fx->loop, &ccfg, &fx->cli, &e), 0);
  uv_timer_init(&fx->loop, &fx->watchdog);
  uv_timer_init(&fx->loop, &fx->poll_timer);
  fx->watchdog.data = fx;
  fx->poll_timer.data = fx;
  uv_timer_start(&fx->watchdog, on_watchdog, WATCHDOG_MS, 0);
  /* Neither timer may keep the loop alive once both ends are closed. */
  uv_unref((uv_handle_t *)&fx->watchdog);
  uv_unref((uv_handle_t *)&fx->poll_timer);
}

static void
fx_run_and_teardown(struct fixture *fx)
{
  uv_run(&fx->loop, UV_RUN_DEFAULT);
  assert_true(fx->client_closed);
  assert_true(fx->server_closed);
  uv_close((uv_handle_t *)&fx->watchdog, NULL);
  uv_close((uv_handle_t *)&fx->poll_timer, NULL);
  uv_run(&fx->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&fx->loop), 0);
}

static void
fx_free(struct fixture *fx)
{
  int i;

  for (i = 0; i < MAX_RESULTS; i++) {
    free(fx->results[i].body);
    free(fx->results[i].echo);
  }
  free(fx);
}

/* Record one callback; shut down once the expected number came. */
static void
on_result(void *arg, int rc, const struct http_client_response *resp,
          const struct err *e)
{
  struct result *r = arg;
  struct fixture *fx = r->fx;
  const char *echo;

  r->calls++;
  r->rc = rc;
  r->err_code = e != NULL ? e->code : 0;
  if (rc == 0) {
    assert_non_null(resp);
    r->status = resp->status;
    r->attempts = resp->attempts;
    free(r->body);
    r->body = dup_bytes(resp->body, resp->len);
    r->len = resp->len;
    echo = http_client_response_header(resp, "x-echo");
    free(r->echo);
    r->echo = echo != NULL ? xstrdup(echo) : NULL;
  } else {
    assert_null(resp);
    assert_non_null(e);
    assert_int_equal(e->code, rc);
  }
  if (++fx->done == fx->expected)
    fx_shutdown(fx);
}

/* on_result, but the body is taken, not copied; a second take is "". */
static void
on_result_take(void *arg, int rc, const struct http_client_response *resp,
               const struct err *e)
{
  struct result *r = arg;
  struct fixture *fx = r->fx;
  size_t again_len = 99;
  char *again;

  r->calls++;
  r->rc = rc;
  r->err_code = e != NULL ? e->code : 0;
  if (rc == 0) {
    r->status = resp->status;
    free(r->body);
    r->body = http_client_response_take(resp, &r->len);
    again = http_client_response_take(resp, &again_len);
    assert_string_equal(again, "");
    assert_int_equal(again_len, 0);
    free(again);
  }
  if (++fx->done == fx->expected)
    fx_shutdown(fx);
}

static void
send_ok(struct fixture *fx, const struct http_client_request *req,
        struct result *r)
{
  struct err e;
  int rc;

  r->fx = fx;
  rc = http_client_send(fx->cli, req, on_result, r, &e);
  if (rc != 0)
    fail_msg("send: %s", e.msg);
}

/* A port on 127.0.0.1 with nothing listening: bound, then closed. */
static uint16_t
dead_port(void)
{
  struct sockaddr_in sa;
  socklen_t len = sizeof(sa);
  int fd = socket(AF_INET, SOCK_STREAM, 0);

  assert_true(fd >= 0);
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
  close(fd);
  return ntohs(sa.sin_port);
}

/* ---- tests ---- */

static void
test_get_and_post_round_trip_headers_and_body(void **state)
{
  struct fixture *fx = xcalloc(1, sizeof(*fx));
  struct http_client_request req;
  const char *headers[] = {"X-Test: hello there", NULL};
  char url[128];
  char body[] = "{\"a\":1}";

  (void)state;
  fx_setup(fx, handle_echo, 0);
  fx->expected = 2;

  memset(&req, 0, sizeof(req));
  snprintf(url, sizeof(url), "%s/v1/get", fx->base);
  req.url = url;
  req.headers = headers;
  send_ok(fx, &req, &fx->results[0]);

  /* The caller's strings may go away once send returns. */
  snprintf(url, sizeof(url), "%s/v1/post", fx->base);
  req.method = "POST";
  req.body = body;
  req.body_len = strlen(body);
  send_ok(fx, &req, &fx->results[1]);
  memset(url, 'Z', sizeof(url) - 1);
  memset(body, 'Z', sizeof(body) - 1);

  fx_run_and_teardown(fx);
  assert_int_equal(fx->results[0].calls, 1);
  assert_int_equal(fx->results[0].rc, 0);
  assert_int_equal(fx->results[0].status, 200);
  assert_string_equal(fx->results[0].body, "GET /v1/get hello there ");
  assert_string_equal(fx->results[0].echo, "hello there");
  assert_int_equal(fx->results[1].calls, 1);
  assert_int_equal(fx->results[1].rc, 0);
  assert_int_equal(fx->results[1].status, 200);
  assert_string_equal(fx->results[1].body,
                      "POST /v1/post hello there {\"a\":1}");
  assert_string_equal(fx->results[1].echo, "hello there");
  assert_int_equal(fx->results[1].attempts, 1);
  fx_free(fx);
}

/* Each answer sends the next request, so one connection suffices. */
static void
on_chained(void *arg, int rc, const struct http_client_response *resp,
           const struct err *e)
{
  struct result *r = arg;
  struct fixture *fx = r->fx;
  struct http_client_request req;
  struct http_client_stats st;
  char url[128];

  (void)e;
  assert_int_equal(rc, 0);
  assert_int_equal(resp->status, 200);
  r->calls++;
  fx->done++;
  if (--fx->chain_left == 0) {
    http_client_stats(fx->cli, &st);
    assert_int_equal(st.requests, 20);
    assert_int_equal(st.connections_opened, 1);
    assert_int_equal(st.in_flight, 0); /* this one is no longer due */
    fx_shutdown(fx);
    return;
  }
  memset(&req, 0, sizeof(req));
  snprintf(url, sizeof(url), "%s/next", fx->base);
  req.url = url;
  fx->results[fx->done].fx = fx;
  assert_int_equal(http_client_send(fx->cli, &req, on_chained,
                                    &fx->results[fx->done], NULL),
                   0);
}

static void
test_sequential_requests_reuse_one_keepalive_connection(void **state)
{
  struct fixture *fx = xcalloc(1, sizeof(*fx));
  struct http_client_request req;
  char url[128];

  (void)state;
  fx_setup(fx, handle_echo, 0);
  fx->chain_left = 20;
  memset(&req, 0, sizeof(req));
  snprintf(url, sizeof(url), "%s/first", fx->base);
  req.url = url;
  fx->results[0].fx = fx;
  assert_int_equal(
      http_client_send(fx->cli, &req, on_chained, &fx->results[0], NULL), 0);
  fx_run_and_teardown(fx);
  assert_int_equal(fx->done, 20);
  assert_int_equal(fx->hits, 20);
  fx_free(fx);
}

static void
test_many_concurrent_requests_all_complete_within_the_host_limit(
    void **state)
{
  struct fixture *fx = xcalloc(1, sizeof(*fx));
  struct http_client_request req;
  char url[128];
  char expect[128];
  int i;

  (void)state;
  fx_setup(fx, handle_echo, 8);
  fx->expected = 200;
  memset(&req, 0, sizeof(req));
  req.url = url;
  for (i = 0; i < 200; i++) {
    snprintf(url, sizeof(url), "%s/n/%d", fx->base, i);
    send_ok(fx, &req, &fx->results[i]);
  }
  fx_run_and_teardown(fx);
  assert_int_equal(fx->hits, 200);
  for (i = 0; i < 200; i++) {
    snprintf(expect, sizeof(expect), "GET /n/%d - ", i);
    assert_int_equal(fx->results[i].calls, 1);
    assert_int_equal(fx->results[i].status, 200);
    assert_string_equal(fx->results[i].body, expect);
  }
  fx_free(fx);
}

/* Stats are checked from a callback, while the client is still open. */
static void
on_result_check_connections(void *arg, int rc,
                            const struct http_client_response *resp,
                            const struct err *e)
{
  struct result *r = arg;
  struct fixture *fx = r->fx;
  struct http_client_stats st;

  if (fx->done + 1 == fx->expected) {
    http_client_stats(fx->cli, &st);
    assert_int_equal(st.requests, (uint64_t)fx->expected);
    assert_int_equal(st.attempts, (uint64_t)fx->expected);
    assert_int_equal(st.retries, 0);
    assert_true(st.connections_opened >= 1);
    /* Never more connections than the host limit (all were reused). */
    assert_true(st.connections_opened <= 8);
    assert_int_equal(st.in_flight, 0); /* this one is no longer due */
  }
  on_result(arg, rc, resp, e);
}

static void
test_connections_are_reused_and_capped_per_host(void **state)
{
  struct fixture *fx = xcalloc(1, sizeof(*fx));
  struct http_client_request req;
  struct err e;
  char url[128];
  int i;

  (void)state;
  fx_setup(fx, handle_echo, 8);
  fx->expected = 100;
  memset(&req, 0, sizeof(req));
  snprintf(url, sizeof(url), "%s/c", fx->base);
  req.url = url;
  for (i = 0; i < 100; i++) {
    fx->results[i].fx = fx;
    assert_int_equal(http_client_send(fx->cli, &req,
                                      on_result_check_connections,
                                      &fx->results[i], &e),
                     0);
  }
  fx_run_and_teardown(fx);
  assert_int_equal(fx->done, 100);
  fx_free(fx);
}

static void
test_response_over_max_response_fails_too_large(void **state)
{
  struct fixture *fx = xcalloc(1, sizeof(*fx));
  struct http_client_request req;
  char url[128];

  (void)state;
  fx_setup(fx, handle_big, 0);
  fx->expected = 2;
  memset(&req, 0, sizeof(req));
  snprintf(url, sizeof(url), "%s/big", fx->base);
  req.url = url;
  req.max_response = 1u << 20;
  req.max_attempts = 3; /* too large is never retried */
  send_ok(fx, &req, &fx->results[0]);
  req.max_response = 4u << 20;
  send_ok(fx, &req, &fx->results[1]);
  fx_run_and_teardown(fx);
  assert_int_equal(fx->results[0].calls, 1);
  assert_int_equal(fx->results[0].rc, ERR_TOO_LARGE);
  assert_int_equal(fx->results[1].rc, 0);
  assert_int_equal(fx->results[1].len, BIG_BODY);
  assert_int_equal(fx->hits, 2);
  fx_free(fx);
}

static void
test_taken_body_outlives_the_callback_whole(void **state)
{
  struct fixture *fx = xcalloc(1, sizeof(*fx));
  struct http_client_request req;
  struct err e;
  char url[128];

  (void)state;
  fx_setup(fx, handle_big, 0);
  fx->expected = 1;
  memset(&req, 0, sizeof(req));
  snprintf(url, sizeof(url), "%s/big", fx->base);
  req.url = url;
  req.max_response = 4u << 20;
  fx->results[0].fx = fx;
  if (http_client_send(fx->cli, &req, on_result_take, &fx->results[0],
                       &e) != 0)
    fail_msg("send: %s", e.msg);
  fx_run_and_teardown(fx);
  assert_int_equal(fx->results[0].rc, 0);
  assert_int_equal(fx->results[0].status, 200);
  assert_int_equal(fx->results[0].len, BIG_BODY);
  assert_non_null(fx->results[0].body);
  for (size_t i = 0; i < BIG_BODY; i++)
    if (fx->results[0].body[i] != 'x')
      fail_msg("byte %zu of the taken body is %d", i,
               fx->results[0].body[i]);
  assert_int_equal(fx->results[0].body[BIG_BODY], '\0');
  fx_free(fx);
}

/*
 * A one-shot raw HTTP/1.1 peer on the loop that answers without a
 * Content-Length (the body ends when the connection closes, as a chunked
 * or streamed answer would), so the cap is met while the body arrives.
 */
struct raw_peer {
  uv_tcp_t listener;
  uv_tcp_t conn;
  uv_write_t write;
  char *answer;
  size_t answer_len;
  bool accepted;
  bool answered;
  uint16_t port;
};

static void
raw_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
  static char scratch[4096];

  (void)h;
  (void)hint;
  *b = uv_buf_init(scratch, sizeof(scratch));
}

static void
raw_on_written(uv_write_t *w, int status)
{
  struct raw_peer *p = w->data;

  (void)status;
  if (!uv_is_closing((uv_handle_t *)&p->conn))
    uv_close((uv_handle_t *)&p->conn, NULL);
}

static void
raw_on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
  struct raw_peer *p = st->data;
  uv_buf_t out;

  (void)b;
  if (n < 0) {
    if (!uv_is_closing((uv_handle_t *)&p->conn))
      uv_close((uv_handle_t *)&p->conn, NULL);
    return;
  }
  if (n == 0 || p->answered)
    return;
  p->answered = true;
  out = uv_buf_init(p->answer, (unsigned)p->answer_len);
  p->write.data = p;
  assert_int_equal(uv_write(&p->write, st, &out, 1, raw_on_written), 0);
}

static void
raw_on_connection(uv_stream_t *l, int status)
{
  struct raw_peer *p = l->data;

  assert_int_equal(status, 0);
  assert_false(p->accepted);
  p->accepted = true;
  uv_tcp_init(l->loop, &p->conn);
  p->conn.data = p;
  assert_int_equal(uv_accept(l, (uv_stream_t *)&p->conn), 0);
  assert_int_equal(
      uv_read_start((uv_stream_t *)&p->conn, raw_alloc, raw_on_read), 0);
}

static void
raw_start(struct raw_peer *p, uv_loop_t *loop, size_t body_len)
{
  static const char head[] =
      "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
      "Connection: close\r\n\r\n";
  struct sockaddr_in sa;
  int len = sizeof(sa);

  memset(p, 0, sizeof(*p));
  p->answer_len = strlen(head) + body_len;
  p->answer = xmalloc(p->answer_len);
  memcpy(p->answer, head, strlen(head));
  memset(p->answer + strlen(head), 'y', body_len);
  uv_tcp_init(loop, &p->listener);
  p->listener.data = p;
  assert_int_equal(uv_ip4_addr("127.0.0.1", 0, &sa), 0);
  assert_int_equal(uv_tcp_bind(&p->listener, (struct sockaddr *)&sa, 0), 0);
  assert_int_equal(uv_listen((uv_stream_t *)&p->listener, 8,
                             raw_on_connection),
                   0);
  assert_int_equal(uv_tcp_getsockname(&p->listener, (struct sockaddr *)&sa,
                                      &len),
                   0);
  p->port = ntohs(sa.sin_port);
}

static void
raw_close(struct raw_peer *p)
{
  uv_close((uv_handle_t *)&p->listener, NULL);
  if (p->accepted && !uv_is_closing((uv_handle_t *)&p->conn))
    uv_close((uv_handle_t *)&p->conn, NULL);
}

static struct raw_peer *the_raw_peer;

static void
on_result_close_raw(void *arg, int rc, const struct http_client_response *resp,
                    const struct err *e)
{
  raw_close(the_raw_peer);
  on_result(arg, rc, resp, e);
}

static void
test_streamed_response_over_max_response_fails_too_large(void **state)
{
  struct fixture *fx = xcalloc(1, sizeof(*fx));
  struct raw_peer peer;
  struct http_client_request req;
  char url[128];

  (void)state;
  fx_setup(fx, handle_echo, 0);
  raw_start(&peer, &fx->loop, BIG_BODY);
  the_raw_peer = &peer;
  fx->expected = 1;
  memset(&req, 0, sizeof(req));
  snprintf(url, sizeof(url), "http://127.0.0.1:%u/stream",
           (unsigned)peer.port);
  req.url = url;
  req.max_response = 1u << 20;
  req.max_attempts = 3; /* too large is never retried */
  fx->results[0].fx = fx;
  assert_int_equal(http_client_send(fx->cli, &req, on_result_close_raw,
                                    &fx->results[0], NULL),
                   0);
  fx_run_and_teardown(fx);
  free(peer.answer);
  assert_true(peer.accepted);
  assert_int_equal(fx->results[0].calls, 1);
  assert_int_equal(fx->results[0].rc, ERR_TOO_LARGE);
  fx_free(fx);
}

static void
test_answer_later_than_timeout_fails_with_timeout_unretried(void **state)
{
  struct fixture *fx = xcalloc(1, sizeof(*fx));
  struct http_client_request req;
  char url[128];

  (void)state;
  fx_setup(fx, handle_hold, 0);
  fx->expected = 1;
  memset(&req, 0, sizeof(req));
  snprintf(url, sizeof(url), "%s/slow", fx->base);
  req.url = url;
  req.timeout_ms = 200;
  req.max_attempts = 3;
  req.backoff_ms = 1;
  send_ok(fx, &req, &fx->results[0]);
  fx_run_and_teardown(fx);
  assert_int_equal(fx->results[0].calls, 1);
  assert_int_equal(fx->results[0].rc, ERR_TIMEOUT);
  assert_int_equal(fx->hits, 1);
  fx_free(fx);
}

static void
test_503_twice_then_200_is_retried_and_reported_once(void **state)
{
  struct fixture *fx = xcalloc(1, sizeof(*fx));
  struct http_client_request req;
  char url[128];

  (void)state;
  fx_setup(fx, handle_flaky, 0);
  fx->fail_first = 2;
  fx->expected = 1;
  memset(&req, 0, sizeof(req));
  snprintf(url, sizeof(url), "%s/flaky", fx->base);
  req.url = url;
  req.retry_on_5xx = true;
  req.max_attempts = 5;
  req.backoff_ms = 10;
  send_ok(fx, &req, &fx->results[0]);
  fx_run_and_teardown(fx);
  assert_int_equal(fx->results[0].calls, 1);
  assert_int_equal(fx->results[0].rc, 0);
  assert_int_equal(fx->results[0].status, 200);
  assert_string_equal(fx->results[0].body, "ok");
  assert_int_equal(fx->results[0].attempts, 3);
  assert_int_equal(fx->hits, 3);
  fx_free(fx);
}

static void
test_503_until_attempts_run_out_reports_the_last_503(void **state)
{
  struct fixture *fx = xcalloc(1, sizeof(*fx));
  struct http_client_request req;
  char url[128];

  (void)state;
  fx_setup(fx, handle_flaky, 0);
  fx->fail_first = 100;
  fx->expected = 1;
  memset(&req, 0, sizeof(req));
  snprintf(url, sizeof(url), "%s/flaky", fx->base);
  req.url = url;
  req.retry_on_5xx = true;
  req.max_attempts = 3;
  req.backoff_ms = 5;
  send_ok(fx, &req, &fx->results[0]);
  fx_run_and_teardown(fx);
  assert_int_equal(fx->results[0].calls, 1);
  assert_int_equal(fx->results[0].rc, 0);
  assert_int_equal(fx->results[0].status, 503);
  assert_int_equal(fx->results[0].attempts, 3);
  assert_int_equal(fx->hits, 3);
  fx_free(fx);
}

static void
test_post_answered_503_is_not_retried_unless_asked(void **state)
{
  struct fixture *fx = xcalloc(1, sizeof(*fx));
  struct http_client_request req;
  char url[128];

  (void)state;
  fx_setup(fx, handle_status, 0);
  fx->status = 503;
  fx->expected = 1;
  memset(&req, 0, sizeof(req));
  snprintf(url, sizeof(url), "%s/jobs", fx->base);
  req.url = url;
  req.method = "POST";
  req.body = "{}";
  req.body_len = 2;
  req.max_attempts = 5;
  req.backoff_ms = 1;
  send_ok(fx, &req, &fx->results[0]);
  fx_run_and_teardown(fx);
  assert_int_equal(fx->results[0].rc, 0);
  assert_int_equal(fx->results[0].status, 503);
  assert_int_equal(fx->results[0].attempts, 1);
  assert_int_equal(fx->hits, 1);
  fx_free(fx);
}

static void
test_500_is_never_retried_even_with_retry_on_5xx(void **state)
{
  struct fixture *fx = xcalloc(1, sizeof(*fx));
  struct http_client_request req;
  char url[128];

  (void)state;
  fx_setup(fx, handle_status, 0);
  fx->status = 500;
  fx->expected = 1;
  memset(&req, 0, sizeof(req));
  snprintf(url, sizeof(url), "%s/jobs", fx->base);
  req.url = url;
  req.method = "POST";
  req.body = "{}";
  req.body_len = 2;
  req.max_attempts = 5;
  req.backoff_ms = 1;
  req.retry_on_5xx = true;
  req.idempotent = true;
  send_ok(fx, &req, &fx->results[0]);
  fx_run_and_teardown(fx);
  assert_int_equal(fx->results[0].rc, 0);
  assert_int_equal(fx->results[0].status, 500);
  assert_string_equal(fx->results[0].body, "status");
  assert_int_equal(fx->hits, 1);
  fx_free(fx);
}

static void
on_result_refused(void *arg, int rc, const struct http_client_response *resp,
                  const struct err *e)
{
  struct result *r = arg;
  struct fixture *fx = r->fx;
  struct http_client_stats st;

  if (fx->done + 1 == fx->expected) {
    /* GET: 3 attempts, POST: 1, idempotent POST: 3. */
    http_client_stats(fx->cli, &st);
    assert_int_equal(st.attempts, 7);
    assert_int_equal(st.retries, 4);
  }
  on_result(arg, rc, resp, e);
}

static void
test_connection_refused_fails_unavailable_after_retries(void **state)
{
  struct fixture *fx = xcalloc(1, sizeof(*fx));
  struct http_client_request req;
  char url[128];
  int i;

  (void)state;
  fx_setup(fx, handle_echo, 0);
  fx->expected = 3;
  memset(&req, 0, sizeof(req));
  snprintf(url, sizeof(url), "http://127.0.0.1:%u/x",
           (unsigned)dead_port());
  req.url = url;
  req.max_attempts = 3;
  req.backoff_ms = 5;
  for (i = 0; i < 3; i++) {
    if (i > 0) {
      req.method = "POST";
      req.body = "{}";
      req.body_len = 2;
    }
    req.idempotent = i == 2;
    fx->results[i].fx = fx;
    assert_int_equal(http_client_send(fx->cli, &req, on_result_refused,
                                      &fx->results[i], NULL),
                     0);
  }
  fx_run_and_teardown(fx);
  for (i = 0; i < 3; i++) {
    assert_int_equal(fx->results[i].calls, 1);
    assert_int_equal(fx->results[i].rc, ERR_UNAVAILABLE);
  }
  assert_int_equal(fx->hits, 0);
  fx_free(fx);
}

/* A cancelled request's callback: the client refuses new work. */
static void
on_result_cancelled(void *arg, int rc, const struct http_client_response *resp,
                    const struct err *e)
{
  struct result *r = arg;
  struct fixture *fx = r->fx;
  struct http_client_request req;

  memset(&req, 0, sizeof(req));
  req.url = fx->base;
  r->send_while_closing = http_client_send(fx->cli, &req, on_result, r, NULL);
  r->calls++;
  r->rc = rc;
  assert_null(resp);
  assert_non_null(e);
  assert_false(fx->client_closed);
  fx->done++;
}

static void
on_poll_close_when_busy(uv_timer_t *t)
{
  struct fixture *fx = t->data;
  struct http_client_stats st;

  http_client_stats(fx->cli, &st);
  /* 8 requests held by the server (the host limit), 2 queued in curl,
   * one backing off after a refused connection. */
  if (fx->nheld < 8 || st.retries < 1)
    return;
  uv_timer_stop(t);
  fx_shutdown(fx);
}

static void
test_close_cancels_requests_in_flight_and_backing_off(void **state)
{
  struct fixture *fx = xcalloc(1, sizeof(*fx));
  struct http_client_request req;
  char url[128];
  int i;

  (void)state;
  fx_setup(fx, handle_hold, 8);
  memset(&req, 0, sizeof(req));
  snprintf(url, sizeof(url), "%s/held", fx->base);
  req.url = url;
  for (i = 0; i < 10; i++) {
    fx->results[i].fx = fx;
    assert_int_equal(http_client_send(fx->cli, &req, on_result_cancelled,
                                      &fx->results[i], NULL),
                     0);
  }
  snprintf(url, sizeof(url), "http://127.0.0.1:%u/x",
           (unsigned)dead_port());
  req.max_attempts = 5;
  req.backoff_ms = 600000;
  fx->results[10].fx = fx;
  assert_int_equal(http_client_send(fx->cli, &req, on_result_cancelled,
                                    &fx->results[10], NULL),
                   0);
  uv_timer_start(&fx->poll_timer, on_poll_close_when_busy, 5, 5);
  fx_run_and_teardown(fx);
  assert_int_equal(fx->done, 11);
  assert_int_equal(fx->done_at_client_close, 11);
  for (i = 0; i < 11; i++) {
    assert_int_equal(fx->results[i].calls, 1);
    assert_int_equal(fx->results[i].rc, ERR_UNAVAILABLE);
    assert_int_equal(fx->results[i].send_while_closing, ERR_UNAVAILABLE);
  }
  fx_free(fx);
}

/* The first answer closes the client; every callback still runs once. */
static void
on_result_close_first(void *arg, int rc,
                      const struct http_client_response *resp,
                      const struct err *e)
{
  struct result *r = arg;
  struct fixture *fx = r->fx;

  (void)resp;
  (void)e;
  r->calls++;
  r->rc = rc;
  fx->done++;
  if (fx->done == 1)
    fx_shutdown(fx);
}

static void
test_close_from_inside_a_callback_runs_every_callback_once(void **state)
{
  struct fixture *fx = xcalloc(1, sizeof(*fx));
  struct http_client_request req;
  char url[128];
  int i;

  (void)state;
  fx_setup(fx, handle_echo, 2);
  memset(&req, 0, sizeof(req));
  snprintf(url, sizeof(url), "%s/e", fx->base);
  req.url = url;
  for (i = 0; i < 6; i++) {
    fx->results[i].fx = fx;
    assert_int_equal(http_client_send(fx->cli, &req, on_result_close_first,
                                      &fx->results[i], NULL),
                     0);
  }
  fx_run_and_teardown(fx);
  assert_int_equal(fx->done, 6);
  for (i = 0; i < 6; i++) {
    assert_int_equal(fx->results[i].calls, 1);
    assert_true(fx->results[i].rc == 0 ||
                fx->results[i].rc == ERR_UNAVAILABLE);
  }
  fx_free(fx);
}

static void
on_never(void *arg, int rc, const struct http_client_response *resp,
         const struct err *e)
{
  (void)arg;
  (void)rc;
  (void)resp;
  (void)e;
  fail_msg("callback of a rejected request ran");
}

static void
test_unusable_requests_are_rejected_at_send(void **state)
{
  struct fixture *fx = xcalloc(1, sizeof(*fx));
  struct http_client_request req;
  const char *bad_headers[] = {"X-A: 1\r\nX-B: 2", NULL};
  struct err e;
  char url[128];

  (void)state;
  fx_setup(fx, handle_echo, 0);
  snprintf(url, sizeof(url), "%s/x", fx->base);

  memset(&req, 0, sizeof(req));
  assert_int_equal(http_client_send(fx->cli, &req, on_never, NULL, &e),
                   ERR_INVALID);
  assert_string_equal(e.msg, "http client: no url");

  req.url = url;
  req.method = "get";
  assert_int_equal(http_client_send(fx->cli, &req, on_never, NULL, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "method 'get'"));

  req.method = NULL;
  req.headers = bad_headers;
  assert_int_equal(http_client_send(fx->cli, &req, on_never, NULL, &e),
                   ERR_INVALID);

  req.headers = NULL;
  req.url = "ftp://127.0.0.1/x";
  assert_int_equal(http_client_send(fx->cli, &req, on_never, NULL, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "not http or https"));
  req.url = "http://[::1/x";
  assert_int_equal(http_client_send(fx->cli, &req, on_never, NULL, &e),
                   ERR_INVALID);

  req.url = url;
  req.body_len = 3;
  assert_int_equal(http_client_send(fx->cli, &req, on_never, NULL, &e),
                   ERR_INVALID);

  fx_shutdown(fx);
  fx_run_and_teardown(fx);
  assert_int_equal(fx->hits, 0);
  fx_free(fx);
}

static void
test_token_is_never_sent_in_clear_to_a_host_not_loopback(void **state)
{
  struct fixture *fx = xcalloc(1, sizeof(*fx));
  struct http_client_request req;
  const char *bearer[] = {"Authorization: Bearer secret", NULL};
  const char *slurm[] = {"X-SLURM-USER-TOKEN: secret", NULL};
  const char *plain[] = {"X-Test: hello", NULL};
  static const char *const remote[] = {
      "http://10.1.2.3:8760/v1/x", "http://agent.example.com/v1/x",
      "http://127.0.0.1.example.com/v1/x", "http://[2001:db8::1]/v1/x",
      "http://user@10.1.2.3/v1/x"};
  struct err e;
  size_t i;

  (void)state;
  fx_setup(fx, handle_echo, 0);
  memset(&req, 0, sizeof(req));
  /* Refused at send: no connection is ever tried, so no callback. */
  for (i = 0; i < sizeof(remote) / sizeof(remote[0]); i++) {
    req.url = remote[i];
    req.headers = bearer;
    assert_int_equal(http_client_send(fx->cli, &req, on_never, NULL, &e),
                     ERR_FORBIDDEN);
    assert_non_null(strstr(e.msg, "not loopback"));
    req.headers = slurm;
    assert_int_equal(http_client_send(fx->cli, &req, on_never, NULL, &e),
                     ERR_FORBIDDEN);
  }
  /* Loopback may have it in clear; a request without a token goes. */
  fx->expected = 2;
  fx->results[0].fx = fx;
  fx->results[1].fx = fx;
  req.url = fx->base;
  req.headers = bearer;
  assert_int_equal(http_client_send(fx->cli, &req, on_result,
                                    &fx->results[0], &e), 0);
  req.headers = plain;
  assert_int_equal(http_client_send(fx->cli, &req, on_result,
                                    &fx->results[1], &e), 0);
  fx_run_and_teardown(fx);
  assert_int_equal(fx->results[0].status, 200);
  assert_int_equal(fx->results[1].status, 200);
  assert_int_equal(fx->hits, 2);
  fx_free(fx);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_get_and_post_round_trip_headers_and_body),
      cmocka_unit_test(
          test_sequential_requests_reuse_one_keepalive_connection),
      cmocka_unit_test(
          test_many_concurrent_requests_all_complete_within_the_host_limit),
      cmocka_unit_test(test_connections_are_reused_and_capped_per_host),
      cmocka_unit_test(test_response_over_max_response_fails_too_large),
      cmocka_unit_test(
          test_streamed_response_over_max_response_fails_too_large),
      cmocka_unit_test(test_taken_body_outlives_the_callback_whole),
      cmocka_unit_test(
          test_answer_later_than_timeout_fails_with_timeout_unretried),
      cmocka_unit_test(test_503_twice_then_200_is_retried_and_reported_once),
      cmocka_unit_test(test_503_until_attempts_run_out_reports_the_last_503),
      cmocka_unit_test(test_post_answered_503_is_not_retried_unless_asked),
      cmocka_unit_test(test_500_is_never_retried_even_with_retry_on_5xx),
      cmocka_unit_test(
          test_connection_refused_fails_unavailable_after_retries),
      cmocka_unit_test(
          test_close_cancels_requests_in_flight_and_backing_off),
      cmocka_unit_test(
          test_close_from_inside_a_callback_runs_every_callback_once),
      cmocka_unit_test(test_unusable_requests_are_rejected_at_send),
      cmocka_unit_test(
          test_token_is_never_sent_in_clear_to_a_host_not_loopback),
  };
  int rc;

  curl_global_init(CURL_GLOBAL_DEFAULT);
  rc = cmocka_run_group_tests(tests, NULL, NULL);
  curl_global_cleanup();
  return rc;
}
