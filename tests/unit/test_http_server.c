/*
 * Tests for http/server.c: a real server on 127.0.0.1 (port 0) on a libuv
 * loop in the main thread, driven by libcurl easy clients in their own
 * threads.  A client thread runs its calls one after another on one easy
 * handle (so keep-alive can be observed), then signals the loop with
 * uv_async_send; once every client is done the loop closes the server and
 * uv_run() returns, and the test checks what both sides saw.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <curl/curl.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "http/server.h"
#include "util/alloc.h"
#include "util/buf.h"

#define MAX_CLIENTS 4
#define RESPONSE_CAP (16u << 20)
#define BIG_RESPONSE (8u << 20)

static const char unavailable_json[] =
    "{\"error\":{\"code\":\"UNAVAILABLE\","
    "\"message\":\"server shutting down\"}}";

/* One request a client thread makes, and what it got back. */
struct call {
  const char *path;     /* with the query string */
  const char *method;   /* NULL for GET */
  const char *body;     /* POST body (borrowed) */
  size_t body_len;
  bool chunked;         /* send the body with chunked encoding */
  const char *header;   /* one extra request header line, or NULL */
  /* results */
  CURLcode rc;
  long status;
  long num_connects;
  char content_type[64];
  struct buf resp;
  struct buf resp_headers;
  size_t sent;          /* bytes of body handed to curl so far */
};

struct fixture;

struct client {
  struct fixture *fx;
  pthread_t thread;
  struct call *calls;
  size_t n;
};

struct fixture {
  uv_loop_t loop;
  uv_async_t async;
  uv_timer_t timer;
  struct http_server *srv;
  uint16_t port;
  atomic_int clients_done;
  int clients_started;
  int clients_expected;
  struct client clients[MAX_CLIENTS];
  bool server_closed;
  bool close_cb_ran;
  void (*handle)(struct fixture *fx, struct http_request *req);
  void (*head)(struct fixture *fx, struct http_request *req);
  /* what handlers saw */
  int head_calls;
  int handler_calls;
  char *method;
  char *path;
  char *query_name;
  char *query_flag;
  bool query_missing_is_null;
  char *header;
  bool header_missing_is_null;
  size_t body_len;
  char *body;
  struct http_request *pending;
  int timer_rounds;
  bool fast_answered;
  bool fast_while_slow_pending;
  struct call fast_calls[1];
  char file_path[64];
};

/* ---- client thread ---- */

static size_t
on_curl_write(char *data, size_t size, size_t n, void *arg)
{
  struct buf *b = arg;

  if (buf_add(b, data, size * n) < 0)
    return 0;
  return size * n;
}

static size_t
on_curl_read(char *dst, size_t size, size_t n, void *arg)
{
  struct call *c = arg;
  size_t left = c->body_len - c->sent;
  size_t k = size * n < left ? size * n : left;

  memcpy(dst, c->body + c->sent, k);
  c->sent += k;
  return k;
}

static void
client_do_call(CURL *curl, uint16_t port, struct call *c)
{
  struct curl_slist *headers = NULL;
  char url[256];
  char *ct = NULL;

  snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", (unsigned)port,
           c->path);
  curl_easy_reset(curl);
  curl_easy_setopt(curl, CURLOPT_URL, url);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 30L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_curl_write);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &c->resp);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_curl_write);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &c->resp_headers);
  if (c->header != NULL)
    headers = curl_slist_append(headers, c->header);
  if (c->method != NULL && strcmp(c->method, "POST") == 0) {
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    if (c->chunked) {
      headers = curl_slist_append(headers, "Transfer-Encoding: chunked");
      curl_easy_setopt(curl, CURLOPT_READFUNCTION, on_curl_read);
      curl_easy_setopt(curl, CURLOPT_READDATA, c);
    } else {
      curl_easy_setopt(curl, CURLOPT_POSTFIELDS, c->body);
      curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                       (curl_off_t)c->body_len);
    }
  }
  if (headers != NULL)
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  c->rc = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &c->status);
  curl_easy_getinfo(curl, CURLINFO_NUM_CONNECTS, &c->num_connects);
  if (curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK &&
      ct != NULL)
    snprintf(c->content_type, sizeof(c->content_type), "%s", ct);
  curl_slist_free_all(headers);
}

static void *
client_main(void *arg)
{
  struct client *cl = arg;
  CURL *curl = curl_easy_init();
  size_t i;

  for (i = 0; i < cl->n && curl != NULL; i++)
    client_do_call(curl, cl->fx->port, &cl->calls[i]);
  curl_easy_cleanup(curl);
  atomic_fetch_add(&cl->fx->clients_done, 1);
  uv_async_send(&cl->fx->async);
  return NULL;
}

/* Start a client thread running calls[0..n) (loop thread only). */
static void
client_launch(struct fixture *fx, struct call *calls, size_t n)
{
  struct client *cl = &fx->clients[fx->clients_started++];
  size_t i;

  for (i = 0; i < n; i++) {
    buf_init(&calls[i].resp, RESPONSE_CAP);
    buf_init(&calls[i].resp_headers, RESPONSE_CAP);
  }
  cl->fx = fx;
  cl->calls = calls;
  cl->n = n;
  assert_int_equal(pthread_create(&cl->thread, NULL, client_main, cl), 0);
}

/* ---- loop side ---- */

static void
on_server_closed(void *arg)
{
  struct fixture *fx = arg;

  fx->close_cb_ran = true;
}

static void
close_server(struct fixture *fx)
{
  if (fx->server_closed)
    return;
  fx->server_closed = true;
  http_server_close(fx->srv, on_server_closed, fx);
}

static void
on_clients_async(uv_async_t *a)
{
  struct fixture *fx = a->data;
  int i;

  if (atomic_load(&fx->clients_done) < fx->clients_expected)
    return;
  for (i = 0; i < fx->clients_started; i++)
    pthread_join(fx->clients[i].thread, NULL);
  uv_close((uv_handle_t *)&fx->async, NULL);
  close_server(fx);
}

static void
on_request(struct http_request *req, void *arg)
{
  struct fixture *fx = arg;

  fx->handler_calls++;
  fx->handle(fx, req);
}

static void
on_head(struct http_request *req, void *arg)
{
  struct fixture *fx = arg;

  fx->head_calls++;
  fx->head(fx, req);
}

/* A fixture whose server config tune() may change (tune may be NULL). */
static struct fixture *
fixture_new_tuned(size_t max_body,
                  void (*handle)(struct fixture *fx,
                                 struct http_request *req),
                  void (*tune)(struct fixture *fx,
                               struct http_server_config *cfg))
{
  struct fixture *fx = xcalloc(1, sizeof(*fx));
  struct http_server_config cfg = {
    .host = "127.0.0.1",
    .port = 0,
    .max_body = max_body,
    .max_connections = 64,
    .conn_timeout_s = 30,
    .handler = on_request,
    .handler_arg = fx,
  };
  struct err e;

  fx->handle = handle;
  fx->clients_expected = 1;
  if (tune != NULL)
    tune(fx, &cfg);
  assert_int_equal(uv_loop_init(&fx->loop), 0);
  assert_int_equal(uv_async_init(&fx->loop, &fx->async, on_clients_async),
                   0);
  fx->async.data = fx;
  uv_timer_init(&fx->loop, &fx->timer);
  fx->timer.data = fx;
  assert_int_equal(http_server_start(&fx->loop, &cfg, &fx->srv, &e), 0);
  fx->port = http_server_port(fx->srv);
  assert_true(fx->port != 0);
  return fx;
}

static struct fixture *
fixture_new(size_t max_body,
            void (*handle)(struct fixture *fx, struct http_request *req))
{
  return fixture_new_tuned(max_body, handle, NULL);
}

/* Run until every client is done and the server is closed. */
static void
fixture_run(struct fixture *fx)
{
  /* The timer is only for handlers; do not let it keep the loop alive. */
  uv_unref((uv_handle_t *)&fx->timer);
  uv_run(&fx->loop, UV_RUN_DEFAULT);
  uv_close((uv_handle_t *)&fx->timer, NULL);
  uv_run(&fx->loop, UV_RUN_DEFAULT);
  assert_true(fx->close_cb_ran);
  assert_int_equal(uv_loop_close(&fx->loop), 0);
}

static void
calls_release(struct call *calls, size_t n)
{
  size_t i;

  for (i = 0; i < n; i++) {
    buf_release(&calls[i].resp);
    buf_release(&calls[i].resp_headers);
  }
}

static void
fixture_free(struct fixture *fx)
{
  free(fx->method);
  free(fx->path);
  free(fx->query_name);
  free(fx->query_flag);
  free(fx->header);
  free(fx->body);
  free(fx);
}

static char *
dup_or_null(const char *s)
{
  return s != NULL ? xstrdup(s) : NULL;
}

static void
respond_text(struct http_request *req, int status, const char *text)
{
  http_respond(req, status, "text/plain", xstrdup(text), strlen(text));
}

/* ---- request inspection ---- */

static void
handle_inspect(struct fixture *fx, struct http_request *req)
{
  fx->method = xstrdup(http_request_method(req));
  fx->path = xstrdup(http_request_path(req));
  fx->query_name = dup_or_null(http_request_query(req, "name"));
  fx->query_flag = dup_or_null(http_request_query(req, "flag"));
  fx->query_missing_is_null = http_request_query(req, "nope") == NULL;
  fx->header = dup_or_null(http_request_header(req, "x-TEST"));
  fx->header_missing_is_null = http_request_header(req, "X-Nope") == NULL;
  http_request_add_header(req, "X-Reply", "yes");
  respond_text(req, 200, "hello");
}

static void
test_handler_sees_method_path_query_and_headers(void **state)
{
  struct fixture *fx = fixture_new(1024, handle_inspect);
  struct call calls[] = {
    {.path = "/v1/things%20x?name=va%26l&flag=1", .header = "X-Test: hi"},
  };

  client_launch(fx, calls, 1);
  fixture_run(fx);

  assert_int_equal(calls[0].rc, CURLE_OK);
  assert_int_equal(calls[0].status, 200);
  assert_string_equal(buf_str(&calls[0].resp), "hello");
  assert_string_equal(calls[0].content_type, "text/plain");
  assert_non_null(strstr(buf_str(&calls[0].resp_headers), "X-Reply: yes"));
  assert_int_equal(fx->handler_calls, 1);
  assert_string_equal(fx->method, "GET");
  assert_string_equal(fx->path, "/v1/things x");
  assert_non_null(fx->query_name);
  assert_string_equal(fx->query_name, "va&l");
  assert_non_null(fx->query_flag);
  assert_string_equal(fx->query_flag, "1");
  assert_true(fx->query_missing_is_null);
  assert_non_null(fx->header);
  assert_string_equal(fx->header, "hi");
  assert_true(fx->header_missing_is_null);
  calls_release(calls, 1);
  fixture_free(fx);
}

/* ---- bodies ---- */

static void
handle_echo(struct fixture *fx, struct http_request *req)
{
  size_t len = 0;
  const char *body = http_request_body(req, &len);
  char *copy = xmalloc(len + 1);

  fx->method = xstrdup(http_request_method(req));
  fx->path = xstrdup(http_request_path(req));
  fx->body_len = len;
  /* The body is NUL-terminated for convenience. */
  assert_int_equal(body[len], '\0');
  memcpy(copy, body, len + 1);
  fx->body = xmalloc(len + 1);
  memcpy(fx->body, body, len + 1);
  http_respond(req, 200, "application/octet-stream", copy, len);
}

static void
test_post_body_arrives_intact_including_nul_bytes(void **state)
{
  struct fixture *fx = fixture_new(1 << 20, handle_echo);
  char body[3000];
  struct call calls[1] = {{.path = "/echo", .method = "POST"}};
  size_t i;

  for (i = 0; i < sizeof(body); i++)
    body[i] = (char)(i % 251); /* a NUL every 251 bytes, first one at 0 */
  calls[0].body = body;
  calls[0].body_len = sizeof(body);
  client_launch(fx, calls, 1);
  fixture_run(fx);

  assert_int_equal(calls[0].rc, CURLE_OK);
  assert_int_equal(calls[0].status, 200);
  assert_string_equal(fx->method, "POST");
  assert_int_equal(fx->body_len, sizeof(body));
  assert_memory_equal(fx->body, body, sizeof(body));
  assert_int_equal(calls[0].resp.len, sizeof(body));
  assert_memory_equal(calls[0].resp.data, body, sizeof(body));
  calls_release(calls, 1);
  fixture_free(fx);
}

static void
test_body_over_max_body_gets_413_and_never_reaches_handler(void **state)
{
  static const char too_large[] =
      "{\"error\":{\"code\":\"TOO_LARGE\","
      "\"message\":\"request body exceeds 1024 bytes\"}}";
  struct fixture *fx = fixture_new(1024, handle_echo);
  char big[4096];
  struct call calls[] = {
    /* Content-Length over the cap: refused before the body is read. */
    {.path = "/big", .method = "POST", .body = big, .body_len = 4096},
    /* No length up front: refused once the body passes the cap. */
    {.path = "/chunked", .method = "POST", .body = big, .body_len = 4096,
     .chunked = true},
    /* Exactly at the cap is still fine. */
    {.path = "/ok", .method = "POST", .body = big, .body_len = 1024},
  };
  size_t i;

  memset(big, 'x', sizeof(big));
  client_launch(fx, calls, 3);
  fixture_run(fx);

  for (i = 0; i < 2; i++) {
    assert_int_equal(calls[i].rc, CURLE_OK);
    assert_int_equal(calls[i].status, 413);
    assert_string_equal(calls[i].content_type, "application/json");
    assert_string_equal(buf_str(&calls[i].resp), too_large);
  }
  assert_int_equal(calls[2].status, 200);
  assert_int_equal(calls[2].resp.len, 1024);
  /* Only the request within the cap reached the handler. */
  assert_int_equal(fx->handler_calls, 1);
  assert_string_equal(fx->path, "/ok");
  calls_release(calls, 3);
  fixture_free(fx);
}

/* ---- deferred answers ---- */

static void
on_slow_timer(uv_timer_t *t)
{
  struct fixture *fx = t->data;

  /* Wait for /fast to be served (bounded, so a broken server fails the
   * test instead of hanging it). */
  if (!fx->fast_answered && ++fx->timer_rounds < 200) {
    uv_timer_start(&fx->timer, on_slow_timer, 50, 0);
    return;
  }
  http_request_add_header(fx->pending, "X-Late", "1");
  if (fx->fast_answered)
    respond_text(fx->pending, 200, "slow");
  else
    respond_text(fx->pending, 500, "fast never came");
  fx->pending = NULL;
}

static void
handle_slow_fast(struct fixture *fx, struct http_request *req)
{
  const char *path = http_request_path(req);

  if (strcmp(path, "/slow") == 0) {
    fx->pending = req;
    uv_timer_start(&fx->timer, on_slow_timer, 50, 0);
    /* Only now ask for /fast, so it arrives while /slow is pending. */
    fx->fast_calls[0] = (struct call){.path = "/fast"};
    client_launch(fx, fx->fast_calls, 1);
    return;
  }
  fx->fast_while_slow_pending = fx->pending != NULL;
  fx->fast_answered = true;
  respond_text(req, 200, "fast");
}

static void
test_deferred_answer_works_while_another_request_is_served(void **state)
{
  struct fixture *fx = fixture_new(1024, handle_slow_fast);
  struct call calls[] = {{.path = "/slow"}};

  fx->clients_expected = 2;
  client_launch(fx, calls, 1);
  fixture_run(fx);

  assert_int_equal(calls[0].rc, CURLE_OK);
  assert_int_equal(calls[0].status, 200);
  assert_string_equal(buf_str(&calls[0].resp), "slow");
  assert_non_null(strstr(buf_str(&calls[0].resp_headers), "X-Late: 1"));
  assert_int_equal(fx->fast_calls[0].status, 200);
  assert_string_equal(buf_str(&fx->fast_calls[0].resp), "fast");
  assert_true(fx->fast_while_slow_pending);
  assert_int_equal(fx->handler_calls, 2);
  calls_release(calls, 1);
  calls_release(fx->fast_calls, 1);
  fixture_free(fx);
}

/* ---- files ---- */

#define FILE_SIZE 65536

static void
handle_slice(struct fixture *fx, struct http_request *req)
{
  long off = strtol(http_request_query(req, "off"), NULL, 10);
  long len = strtol(http_request_query(req, "len"), NULL, 10);
  int fd = open(fx->file_path, O_RDONLY | O_CLOEXEC);

  assert_true(fd >= 0);
  http_respond_fd(req, 200, "application/octet-stream", fd, (off_t)off,
                  (size_t)len);
}

static void
test_respond_fd_serves_exactly_the_requested_slice(void **state)
{
  struct fixture *fx = fixture_new(1024, handle_slice);
  struct call calls[] = {
    {.path = "/f?off=1000&len=5000"},
    {.path = "/f?off=65000&len=536"}, /* up to the last byte */
  };
  static char data[FILE_SIZE];
  size_t i;
  int fd;

  for (i = 0; i < sizeof(data); i++)
    data[i] = (char)((i * 7 + i / 256) % 256);
  snprintf(fx->file_path, sizeof(fx->file_path),
           "/tmp/test_http_server.XXXXXX");
  fd = mkstemp(fx->file_path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, data, sizeof(data)), (ssize_t)sizeof(data));
  close(fd);

  client_launch(fx, calls, 2);
  fixture_run(fx);
  unlink(fx->file_path);

  assert_int_equal(calls[0].rc, CURLE_OK);
  assert_int_equal(calls[0].status, 200);
  assert_int_equal(calls[0].resp.len, 5000);
  assert_memory_equal(calls[0].resp.data, data + 1000, 5000);
  assert_int_equal(calls[1].rc, CURLE_OK);
  assert_int_equal(calls[1].status, 200);
  assert_int_equal(calls[1].resp.len, 536);
  assert_memory_equal(calls[1].resp.data, data + 65000, 536);
  calls_release(calls, 2);
  fixture_free(fx);
}

/* ---- connections ---- */

static void
handle_hello(struct fixture *fx, struct http_request *req)
{
  respond_text(req, 200, "hello");
}

static void
test_keep_alive_reuses_the_connection(void **state)
{
  struct fixture *fx = fixture_new(1024, handle_hello);
  struct call calls[] = {{.path = "/a"}, {.path = "/b"}};

  client_launch(fx, calls, 2);
  fixture_run(fx);

  assert_int_equal(calls[0].status, 200);
  assert_int_equal(calls[0].num_connects, 1);
  assert_int_equal(calls[1].status, 200);
  assert_int_equal(calls[1].num_connects, 0);
  calls_release(calls, 2);
  fixture_free(fx);
}

static void
handle_empty(struct fixture *fx, struct http_request *req)
{
  http_respond(req, 204, NULL, NULL, 0);
}

static void
test_answer_without_body_sends_empty_response(void **state)
{
  struct fixture *fx = fixture_new(1024, handle_empty);
  struct call calls[] = {{.path = "/nothing"}};

  client_launch(fx, calls, 1);
  fixture_run(fx);

  assert_int_equal(calls[0].rc, CURLE_OK);
  assert_int_equal(calls[0].status, 204);
  assert_int_equal(calls[0].resp.len, 0);
  calls_release(calls, 1);
  fixture_free(fx);
}

/* ---- closing ---- */

static void
on_close_timer(uv_timer_t *t)
{
  struct fixture *fx = t->data;

  close_server(fx);
}

static void
handle_never_answer(struct fixture *fx, struct http_request *req)
{
  /* Leave the request unanswered: it is suspended, then the server is
   * closed under it a little later. */
  fx->pending = req;
  uv_timer_start(&fx->timer, on_close_timer, 10, 0);
}

static void
test_close_while_request_suspended_answers_503_and_frees_everything(
    void **state)
{
  struct fixture *fx = fixture_new(1024, handle_never_answer);
  struct call calls[] = {{.path = "/hang"}};

  client_launch(fx, calls, 1);
  fixture_run(fx);

  assert_int_equal(calls[0].rc, CURLE_OK);
  assert_int_equal(calls[0].status, 503);
  assert_string_equal(calls[0].content_type, "application/json");
  assert_string_equal(buf_str(&calls[0].resp), unavailable_json);
  assert_int_equal(fx->handler_calls, 1);
  /* LSan at exit proves the request and server were freed. */
  calls_release(calls, 1);
  fixture_free(fx);
}

static void
handle_close_inside(struct fixture *fx, struct http_request *req)
{
  close_server(fx);
}

static void
test_close_from_inside_handler_answers_503(void **state)
{
  struct fixture *fx = fixture_new(1024, handle_close_inside);
  struct call calls[] = {{.path = "/shutdown"}};

  client_launch(fx, calls, 1);
  fixture_run(fx);

  assert_int_equal(calls[0].rc, CURLE_OK);
  assert_int_equal(calls[0].status, 503);
  assert_string_equal(buf_str(&calls[0].resp), unavailable_json);
  calls_release(calls, 1);
  fixture_free(fx);
}

static void
handle_big_then_close(struct fixture *fx, struct http_request *req)
{
  char *body = xmalloc(BIG_RESPONSE);

  memset(body, 'b', BIG_RESPONSE);
  http_respond(req, 200, "application/octet-stream", body, BIG_RESPONSE);
  /* Far more than the socket buffers hold is still unsent here. */
  close_server(fx);
}

static void
test_close_lets_a_response_in_flight_finish(void **state)
{
  struct fixture *fx = fixture_new(1024, handle_big_then_close);
  struct call calls[] = {{.path = "/big"}};
  size_t i;

  client_launch(fx, calls, 1);
  fixture_run(fx);

  assert_int_equal(calls[0].rc, CURLE_OK);
  assert_int_equal(calls[0].status, 200);
  assert_int_equal(calls[0].resp.len, BIG_RESPONSE);
  for (i = 0; i < BIG_RESPONSE; i++)
    if (calls[0].resp.data[i] != 'b')
      fail_msg("byte %zu of the response is wrong", i);
  calls_release(calls, 1);
  fixture_free(fx);
}

/* ---- raw-socket clients (what curl would never send) ---- */

/* A raw client thread: run(arg) talks to the server, then it signals. */
struct raw {
  struct fixture *fx;
  void (*run)(struct raw *r);
  /* results, for the test to check after the loop */
  int status[8];
  bool closed[8];
};

static void *
raw_main(void *arg)
{
  struct raw *r = arg;

  r->run(r);
  atomic_fetch_add(&r->fx->clients_done, 1);
  uv_async_send(&r->fx->async);
  return NULL;
}

static void
raw_launch(struct fixture *fx, struct raw *r)
{
  struct client *cl = &fx->clients[fx->clients_started++];

  r->fx = fx;
  assert_int_equal(pthread_create(&cl->thread, NULL, raw_main, r), 0);
}

/* A blocking connection from local address src (e.g. "127.0.0.2"), with
 * reads that give up after timeout_s. */
static int
raw_connect(uint16_t port, const char *src, int timeout_s)
{
  struct sockaddr_in a;
  struct timeval tv = {timeout_s, 0};
  int fd = socket(AF_INET, SOCK_STREAM, 0);

  if (fd < 0)
    return -1;
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  inet_pton(AF_INET, src, &a.sin_addr);
  if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
    goto fail;
  a.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
    goto fail;
  return fd;
fail:
  close(fd);
  return -1;
}

static void
raw_send(int fd, const char *text)
{
  (void)send(fd, text, strlen(text), MSG_NOSIGNAL);
}

/* Read until the server closes (or the read times out); the status of
 * the first answer, 0 when none came.  *closed: the server closed. */
static int
raw_answer(int fd, bool *closed)
{
  char resp[8192];
  size_t n = 0;
  ssize_t got;
  int status = 0;

  *closed = false;
  for (;;) {
    got = recv(fd, resp + n, sizeof(resp) - 1 - n, 0);
    if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN &&
                     errno != EWOULDBLOCK)) {
      *closed = true;
      break;
    }
    if (got < 0 && errno != EINTR)
      break; /* timed out */
    if (got > 0)
      n += (size_t)got;
    if (n == sizeof(resp) - 1)
      break;
  }
  resp[n] = '\0';
  if (sscanf(resp, "HTTP/1.1 %d", &status) != 1)
    status = 0;
  return status;
}

/* One request on a new connection from 127.0.0.1: its status. */
static int
raw_request(uint16_t port, const char *text, bool *closed)
{
  int fd = raw_connect(port, "127.0.0.1", 10);
  int status;

  if (fd < 0)
    return -1;
  raw_send(fd, text);
  status = raw_answer(fd, closed);
  close(fd);
  return status;
}

/* ---- requests the server refuses by itself ---- */

static void
run_nul_requests(struct raw *r)
{
  uint16_t port = r->fx->port;

  r->status[0] = raw_request(port, "POST /v1/jobs%00/1/cancel HTTP/1.1\r\n"
                             "Host: t\r\nContent-Length: 0\r\n\r\n",
                             &r->closed[0]);
  r->status[1] = raw_request(port, "GET /v1/jobs?project=de%00mo HTTP/1.1\r\n"
                             "Host: t\r\nConnection: close\r\n\r\n",
                             &r->closed[1]);
  r->status[2] = raw_request(port, "GET /v1/jobs?project=demo HTTP/1.1\r\n"
                             "Host: t\r\nConnection: close\r\n\r\n",
                             &r->closed[2]);
}

static void
test_percent_encoded_nul_in_path_or_query_gets_400(void **state)
{
  struct fixture *fx = fixture_new(1024, handle_inspect);
  struct raw r = {.run = run_nul_requests};

  raw_launch(fx, &r);
  fixture_run(fx);

  assert_int_equal(r.status[0], 400);
  assert_int_equal(r.status[1], 400);
  assert_int_equal(r.status[2], 200);
  /* Only the clean request reached the handler, with its whole query. */
  assert_int_equal(fx->handler_calls, 1);
  assert_string_equal(fx->path, "/v1/jobs");
  fixture_free(fx);
}

static void
run_ambiguous_framing(struct raw *r)
{
  uint16_t port = r->fx->port;

  r->status[0] = raw_request(port, "POST /x HTTP/1.1\r\nHost: t\r\n"
                             "Content-Length: 3\r\nContent-Length: 3\r\n\r\n"
                             "abc", &r->closed[0]);
  r->status[1] = raw_request(port, "POST /x HTTP/1.1\r\nHost: t\r\n"
                             "Content-Length: 3\r\n"
                             "Transfer-Encoding: chunked\r\n\r\n"
                             "3\r\nabc\r\n0\r\n\r\n", &r->closed[1]);
  r->status[2] = raw_request(port, "POST /x HTTP/1.1\r\nHost: t\r\n"
                             "Connection: close\r\n"
                             "Content-Length: 3\r\n\r\nabc", &r->closed[2]);
}

static void
test_two_lengths_or_length_with_chunked_get_400(void **state)
{
  struct fixture *fx = fixture_new(1024, handle_echo);
  struct raw r = {.run = run_ambiguous_framing};

  raw_launch(fx, &r);
  fixture_run(fx);

  assert_int_equal(r.status[0], 400);
  assert_true(r.closed[0]);
  assert_int_equal(r.status[1], 400);
  assert_true(r.closed[1]);
  assert_int_equal(r.status[2], 200);
  assert_int_equal(fx->handler_calls, 1);
  fixture_free(fx);
}

/* ---- the head handler: answers before the body ---- */

static void
head_require_token(struct fixture *fx, struct http_request *req)
{
  size_t len = 99;

  (void)http_request_body(req, &len);
  assert_int_equal(len, 0);
  if (http_request_header(req, "Authorization") == NULL)
    respond_text(req, 401, "no token");
}

static void
tune_head(struct fixture *fx, struct http_server_config *cfg)
{
  fx->head = head_require_token;
  cfg->head_handler = on_head;
}

static void
run_unauthenticated_upload(struct raw *r)
{
  /* The body is announced and never sent: only an answer given from the
   * headers can come back. */
  r->status[0] = raw_request(r->fx->port, "POST /upload HTTP/1.1\r\n"
                             "Host: t\r\nContent-Length: 1000000\r\n\r\n",
                             &r->closed[0]);
}

static void
test_head_handler_answers_401_without_reading_the_body(void **state)
{
  struct fixture *fx = fixture_new_tuned(1 << 20, handle_echo, tune_head);
  struct raw r = {.run = run_unauthenticated_upload};
  struct call calls[1] = {{.path = "/echo", .method = "POST", .body = "abc",
                           .body_len = 3,
                           .header = "Authorization: Bearer t"}};

  fx->clients_expected = 2;
  raw_launch(fx, &r);
  client_launch(fx, calls, 1);
  fixture_run(fx);

  assert_int_equal(r.status[0], 401);
  assert_true(r.closed[0]);
  /* With a token the body is read and the handler runs. */
  assert_int_equal(calls[0].status, 200);
  assert_string_equal(buf_str(&calls[0].resp), "abc");
  assert_int_equal(fx->head_calls, 2);
  assert_int_equal(fx->handler_calls, 1);
  calls_release(calls, 1);
  fixture_free(fx);
}

/* ---- connection limits and slow clients ---- */

static void
tune_two_per_address(struct fixture *fx, struct http_server_config *cfg)
{
  cfg->max_per_address = 2;
}

static void
run_three_from_one_address(struct raw *r)
{
  uint16_t port = r->fx->port;
  int a1 = raw_connect(port, "127.0.0.2", 10);
  int a2 = raw_connect(port, "127.0.0.2", 10);
  int a3;

  usleep(200 * 1000); /* let the server take a1 and a2 */
  a3 = raw_connect(port, "127.0.0.2", 5);
  /* The third from 127.0.0.2 is closed at once, before any request. */
  r->status[0] = raw_answer(a3, &r->closed[0]);
  /* Another address is served meanwhile. */
  r->status[1] = raw_request(port, "GET /hello HTTP/1.1\r\nHost: t\r\n"
                             "Connection: close\r\n\r\n", &r->closed[1]);
  /* And the first two are still good for a request. */
  raw_send(a1, "GET /hello HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  r->status[2] = raw_answer(a1, &r->closed[2]);
  close(a1);
  close(a2);
  close(a3);
}

static void
test_one_address_holds_at_most_max_per_address_connections(void **state)
{
  struct fixture *fx =
      fixture_new_tuned(1024, handle_hello, tune_two_per_address);
  struct raw r = {.run = run_three_from_one_address};

  raw_launch(fx, &r);
  fixture_run(fx);

  assert_true(r.closed[0]);
  assert_int_equal(r.status[0], 0);
  assert_int_equal(r.status[1], 200);
  assert_int_equal(r.status[2], 200);
  fixture_free(fx);
}

static void
tune_two_slots_one_second(struct fixture *fx, struct http_server_config *cfg)
{
  cfg->max_connections = 2;
  cfg->header_timeout_s = 1;
}

static void
run_slowloris(struct raw *r)
{
  uint16_t port = r->fx->port;
  static const char req[] = "GET /hello HTTP/1.1\r\nHost: t\r\n"
                            "Connection: close\r\n\r\n";
  int slow[2];
  int c;
  int i;

  /* Two trickling clients take every slot; a byte each 100 ms keeps an
   * idle timeout (30 s here) from ever firing. */
  slow[0] = raw_connect(port, "127.0.0.2", 10);
  slow[1] = raw_connect(port, "127.0.0.3", 10);
  usleep(200 * 1000);
  /* This one waits in the listen queue for a slot. */
  c = raw_connect(port, "127.0.0.1", 15);
  raw_send(c, req);
  for (i = 0; i < 60; i++) { /* 6 s, far less than the idle timeout */
    raw_send(slow[0], "G");
    raw_send(slow[1], "G");
    usleep(100 * 1000);
  }
  r->status[0] = raw_answer(c, &r->closed[0]);
  (void)raw_answer(slow[0], &r->closed[1]);
  (void)raw_answer(slow[1], &r->closed[2]);
  close(c);
  close(slow[0]);
  close(slow[1]);
}

static void
test_slow_headers_are_cut_and_accepting_resumes_at_the_limit(void **state)
{
  struct fixture *fx =
      fixture_new_tuned(1024, handle_hello, tune_two_slots_one_second);
  struct raw r = {.run = run_slowloris};

  raw_launch(fx, &r);
  fixture_run(fx);

  /* The waiting client was served once the tricklers were cut. */
  assert_int_equal(r.status[0], 200);
  assert_true(r.closed[1]);
  assert_true(r.closed[2]);
  assert_int_equal(fx->handler_calls, 1);
  fixture_free(fx);
}

static void
tune_slow_body(struct fixture *fx, struct http_server_config *cfg)
{
  cfg->header_timeout_s = 1;
  cfg->min_body_rate = 1000;
}

static void
run_slow_body(struct raw *r)
{
  int fd = raw_connect(r->fx->port, "127.0.0.1", 10);
  int i;

  raw_send(fd, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 900\r\n\r\n");
  /* 10 bytes/s against the 1000 bytes/s asked for. */
  for (i = 0; i < 40; i++) {
    raw_send(fd, "x");
    usleep(100 * 1000);
  }
  r->status[0] = raw_answer(fd, &r->closed[0]);
  close(fd);
}

static void
test_a_body_slower_than_min_body_rate_is_cut(void **state)
{
  struct fixture *fx = fixture_new_tuned(1024, handle_echo, tune_slow_body);
  struct raw r = {.run = run_slow_body};

  raw_launch(fx, &r);
  fixture_run(fx);

  assert_true(r.closed[0]);
  assert_int_equal(r.status[0], 0);
  assert_int_equal(fx->handler_calls, 0);
  fixture_free(fx);
}

/* ---- start errors ---- */

static void
test_start_with_non_numeric_host_fails_naming_it(void **state)
{
  uv_loop_t loop;
  struct http_server *srv = NULL;
  struct http_server_config cfg = {
    .host = "localhost",
    .max_body = 1024,
    .max_connections = 4,
    .conn_timeout_s = 5,
    .handler = on_request,
  };
  struct err e;

  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(http_server_start(&loop, &cfg, &srv, &e), ERR_CONFIG);
  assert_null(srv);
  assert_non_null(strstr(e.msg, "'localhost'"));
  assert_int_equal(uv_loop_close(&loop), 0);
}

static void
test_start_on_a_port_in_use_fails(void **state)
{
  struct fixture *fx = fixture_new(1024, handle_hello);
  struct http_server *srv = NULL;
  struct http_server_config cfg = {
    .host = "127.0.0.1",
    .port = fx->port,
    .max_body = 1024,
    .max_connections = 4,
    .conn_timeout_s = 5,
    .handler = on_request,
  };
  struct err e;

  assert_int_equal(http_server_start(&fx->loop, &cfg, &srv, &e), ERR_IO);
  assert_null(srv);
  assert_non_null(strstr(e.msg, "cannot listen"));
  /* Nothing to serve: let the loop close the first server. */
  fx->clients_expected = 0;
  uv_async_send(&fx->async);
  fixture_run(fx);
  fixture_free(fx);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_handler_sees_method_path_query_and_headers),
    cmocka_unit_test(test_post_body_arrives_intact_including_nul_bytes),
    cmocka_unit_test(
        test_body_over_max_body_gets_413_and_never_reaches_handler),
    cmocka_unit_test(
        test_deferred_answer_works_while_another_request_is_served),
    cmocka_unit_test(test_respond_fd_serves_exactly_the_requested_slice),
    cmocka_unit_test(test_keep_alive_reuses_the_connection),
    cmocka_unit_test(test_answer_without_body_sends_empty_response),
    cmocka_unit_test(
        test_close_while_request_suspended_answers_503_and_frees_everything),
    cmocka_unit_test(test_close_from_inside_handler_answers_503),
    cmocka_unit_test(test_close_lets_a_response_in_flight_finish),
    cmocka_unit_test(test_percent_encoded_nul_in_path_or_query_gets_400),
    cmocka_unit_test(test_two_lengths_or_length_with_chunked_get_400),
    cmocka_unit_test(test_head_handler_answers_401_without_reading_the_body),
    cmocka_unit_test(
        test_one_address_holds_at_most_max_per_address_connections),
    cmocka_unit_test(
        test_slow_headers_are_cut_and_accepting_resumes_at_the_limit),
    cmocka_unit_test(test_a_body_slower_than_min_body_rate_is_cut),
    cmocka_unit_test(test_start_with_non_numeric_host_fails_naming_it),
    cmocka_unit_test(test_start_on_a_port_in_use_fails),
  };
  int rc;

  /* As in the daemon: a peer that goes away must not kill the process,
   * and it lets MHD use sendfile() for fd responses. */
  signal(SIGPIPE, SIG_IGN);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  rc = cmocka_run_group_tests(tests, NULL, NULL);
  curl_global_cleanup();
  return rc;
}
