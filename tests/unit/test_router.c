/*
 * Tests for http/router.c: the matcher and its captures, the middleware
 * chain's order, the error writer (status, JSON, UTF-8 repair, the 401
 * header) and the error reader.  The answers are real: a server on
 * 127.0.0.1 (port 0) and http/client on one loop, as in
 * test_sync_agent_client.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/client.h"
#include "http/router.h"
#include "util/alloc.h"
#include "util/utf8.h"

#include "tests/unit/loop_peer.h"

#define WATCHDOG_MS 20000
/* U+4E2D, 3 bytes, percent-encoded for the URL */
#define CJK "\xe4\xb8\xad"
#define CJK_URL "%E4%B8%AD"

/* ---- a small daemon on the router ---- */

struct fx;

struct test_route {
  struct http_route http;
  void (*handler)(struct fx *fx, struct http_request *req,
                  const struct http_match *m);
};

struct fx {
  uv_loop_t loop;
  uv_timer_t watchdog;
  struct http_server *srv;
  struct http_client *hc;
  char base[64];
  int closed;
  /* the middleware's switches and trace */
  int stopped;        /* gate: refuse everything 503 */
  int token_first;    /* auth: ask a token before a 404 */
  char trace[64];     /* "g" and "a" per middleware run */
  /* the last answer */
  int answers;
  int status;
  char body[1024];
  char www_auth[64];
};

static void
site_get(struct fx *fx, struct http_request *req, const struct http_match *m)
{
  struct err e;

  (void)fx;
  /* What h_misc.c says of a site that does not exist: the name is cut
   * at 64 bytes, inside a character when it is 22 CJK ones. */
  err_set(&e, ERR_NOT_FOUND, "site '%.64s' not found",
          http_match_param(m, "name"));
  http_reply_err(req, &e);
}

static void
cut_by_hand(struct fx *fx, struct http_request *req,
            const struct http_match *m)
{
  struct err e;

  (void)fx;
  /* A message formatted straight into the buffer, with no repair: what
   * both daemons' own writers did before the router. */
  e.code = ERR_NOT_FOUND;
  snprintf(e.msg, sizeof(e.msg), "no '%.4s'", m->params[0]);
  http_reply_err(req, &e);
}

static void
null_json(struct fx *fx, struct http_request *req, const struct http_match *m)
{
  (void)fx;
  (void)m;
  http_reply_json(req, 200, NULL);
}

static void
echo(struct fx *fx, struct http_request *req, const struct http_match *m)
{
  (void)fx;
  http_reply_json(req, 200,
                  json_pack("{s:s?, s:s?, s:s?}", "a",
                            http_match_param(m, "a"), "b",
                            http_match_param(m, "b"), "c",
                            http_match_param(m, "c")));
}

/* Echo a JSON object body of at most 16 bytes. */
static void
json_body(struct fx *fx, struct http_request *req,
          const struct http_match *m)
{
  json_t *v = NULL;
  struct err e = {0};

  (void)fx;
  (void)m;
  if (http_request_json(req, 16, &v, &e) < 0) {
    http_reply_err(req, &e);
    return;
  }
  http_reply_json(req, 200, v);
}

static const struct test_route routes[] = {
    {{"GET", "/healthz", 0, HTTP_ROUTE_PUBLIC}, echo},
    {{"GET", "/v1/sites/{name}", 1, 0}, site_get},
    {{"GET", "/cut/{x}", 1, 0}, cut_by_hand},
    {{"GET", "/null", 1, 0}, null_json},
    {{"GET", "/x/{a}/y/{b}", 1, 0}, echo},
    {{"POST", "/x/{a}/y/{b}", 2, 0}, echo},
    {{"GET", "/x/{a}/y/{b}/{c}", 1, 0}, echo},
    {{"POST", "/json", 1, 0}, json_body},
};

static const struct http_routes table = HTTP_ROUTES(routes);

static void
trace(struct fx *fx, const char *step)
{
  size_t n = strlen(fx->trace);

  snprintf(fx->trace + n, sizeof(fx->trace) - n, "%s", step);
}

static int
gate(void *ctx, struct http_request *req, const struct http_match *m,
     struct err *e)
{
  struct fx *fx = ctx;

  (void)req;
  (void)m;
  trace(fx, "g");
  if (fx->stopped)
    return err_set(e, ERR_UNAVAILABLE, "stopping");
  return 0;
}

/* The token is "Bearer good"; "Bearer low" is role 1 (below POST's 2). */
static int
auth(void *ctx, struct http_request *req, const struct http_match *m,
     struct err *e)
{
  struct fx *fx = ctx;
  const char *h = http_request_header(req, "Authorization");

  trace(fx, "a");
  if (m->route == NULL && !fx->token_first)
    return 0;
  if (m->route != NULL && (m->route->flags & HTTP_ROUTE_PUBLIC) != 0)
    return 0;
  if (h != NULL && strcmp(h, "Bearer good") == 0)
    return 0;
  if (h != NULL && strcmp(h, "Bearer low") == 0) {
    if (m->route != NULL && m->route->role > 1)
      return err_set(e, ERR_FORBIDDEN, "role too low");
    return 0;
  }
  return err_set(e, ERR_UNAUTHORIZED, "no token");
}

static const http_middleware_fn middleware[] = {gate, auth};

static const struct http_router router = {HTTP_ROUTES(routes), middleware,
                                          2};

static void
on_request(struct http_request *req, void *arg)
{
  struct fx *fx = arg;
  struct http_match m;
  struct err e = {0};

  if (http_router_admit(&router, fx, req, &m, &e) < 0) {
    http_reply_err(req, &e);
    return;
  }
  routes[m.index].handler(fx, req, &m);
}

/* ---- fixture ---- */

static int
setup(void **state)
{
  struct fx *fx = xcalloc(1, sizeof(*fx));
  struct err e = {0};

  assert_int_equal(uv_loop_init(&fx->loop), 0);
  loop_peer_watchdog(&fx->loop, &fx->watchdog, WATCHDOG_MS);
  fx->srv = loop_peer_server(&fx->loop, on_request, fx, 16, "", fx->base,
                             sizeof(fx->base));
  if (http_client_new(&fx->loop, NULL, &fx->hc, &e) < 0)
    fail_msg("client: %s", e.msg);
  *state = fx;
  return 0;
}

static void
on_closed(void *arg)
{
  ((struct fx *)arg)->closed++;
}

static int
teardown(void **state)
{
  struct fx *fx = *state;

  http_client_close(fx->hc, on_closed, fx);
  http_server_close(fx->srv, on_closed, fx);
  uv_close((uv_handle_t *)&fx->watchdog, NULL);
  uv_run(&fx->loop, UV_RUN_DEFAULT);
  assert_int_equal(fx->closed, 2);
  assert_int_equal(uv_loop_close(&fx->loop), 0);
  free(fx);
  return 0;
}

static void
on_answer(void *arg, int rc, const struct http_client_response *resp,
          const struct err *e)
{
  struct fx *fx = arg;
  const char *h;

  if (rc < 0)
    fail_msg("request: %s", err_msg(e));
  fx->answers++;
  fx->status = resp->status;
  snprintf(fx->body, sizeof(fx->body), "%s", resp->body);
  h = http_client_response_header(resp, "WWW-Authenticate");
  snprintf(fx->www_auth, sizeof(fx->www_auth), "%s", h != NULL ? h : "");
}

/* Send method path (with token, when not NULL, and body, when not NULL)
 * and wait for the answer. */
static void
call_body(struct fx *fx, const char *method, const char *path,
          const char *token, const char *body)
{
  char url[512];
  char hdr[64];
  const char *headers[] = {hdr, NULL};
  struct http_client_request r = {.method = method, .url = url};
  struct err e = {0};
  int want = fx->answers + 1;

  snprintf(url, sizeof(url), "%s%s", fx->base, path);
  if (token != NULL) {
    snprintf(hdr, sizeof(hdr), "Authorization: Bearer %s", token);
    r.headers = headers;
  }
  if (body != NULL) {
    r.body = body;
    r.body_len = strlen(body);
  }
  fx->trace[0] = '\0';
  if (http_client_send(fx->hc, &r, on_answer, fx, &e) < 0)
    fail_msg("send: %s", e.msg);
  while (fx->answers < want)
    uv_run(&fx->loop, UV_RUN_ONCE);
}

static void
call(struct fx *fx, const char *method, const char *path, const char *token)
{
  call_body(fx, method, path, token, NULL);
}

/* The answer's error object, read back by the router's own reader. */
static int
answer_code(const struct fx *fx, struct err *e)
{
  return http_error_parse(fx->body, strlen(fx->body), e);
}

/* ---- matching, no server ---- */

static void
test_match_captures_segments_and_tells_404_from_405(void **state)
{
  struct http_match m;
  struct err e = {0};

  (void)state;
  assert_int_equal(http_route_match(&table, "GET", "/x/1/y/two", &m, &e), 0);
  assert_int_equal(m.index, 4);
  assert_ptr_equal(m.route, &routes[4].http);
  assert_int_equal(m.nparams, 2);
  assert_string_equal(http_match_param(&m, "a"), "1");
  assert_string_equal(http_match_param(&m, "b"), "two");
  assert_null(http_match_param(&m, "c"));
  assert_null(http_match_param(&m, "x"));

  assert_int_equal(http_route_match(&table, "POST", "/x/1/y/2", &m, &e), 0);
  assert_int_equal(m.index, 5);
  assert_int_equal(http_route_match(&table, "GET", "/x/1/y/2/3", &m, &e), 0);
  assert_int_equal(m.index, 6);
  assert_string_equal(http_match_param(&m, "c"), "3");

  assert_int_equal(http_route_match(&table, "DELETE", "/x/1/y/2", &m, &e),
                   ERR_METHOD);
  assert_null(m.route);
  assert_int_equal(m.index, table.count);
  assert_string_equal(e.msg, "method DELETE not allowed on '/x/1/y/2'");

  assert_int_equal(http_route_match(&table, "GET", "/x/1/z/2", &m, &e),
                   ERR_NOT_FOUND);
  assert_string_equal(e.msg, "no route for '/x/1/z/2'");
  assert_null(m.route);
  /* An empty segment, a trailing slash, a prefix: no match. */
  assert_int_equal(http_route_match(&table, "GET", "/x//y/2", &m, &e),
                   ERR_NOT_FOUND);
  assert_int_equal(http_route_match(&table, "GET", "/x/1/y/2/", &m, &e),
                   ERR_NOT_FOUND);
  assert_int_equal(http_route_match(&table, "GET", "/x/1/y", &m, &e),
                   ERR_NOT_FOUND);
}

static void
test_a_segment_too_long_to_capture_matches_no_route(void **state)
{
  char path[16 + HTTP_ROUTE_PARAM_LEN];
  struct http_match m;
  struct err e = {0};

  (void)state;
  snprintf(path, sizeof(path), "/v1/sites/%0*d", HTTP_ROUTE_PARAM_LEN - 1,
           0);
  assert_int_equal(http_route_match(&table, "GET", path, &m, &e), 0);
  assert_int_equal(strlen(m.params[0]), HTTP_ROUTE_PARAM_LEN - 1);
  snprintf(path, sizeof(path), "/v1/sites/%0*d", HTTP_ROUTE_PARAM_LEN, 0);
  assert_int_equal(http_route_match(&table, "GET", path, &m, &e),
                   ERR_NOT_FOUND);
}

/* ---- the error object's reader, no server ---- */

static void
test_error_parse_reads_known_and_unknown_codes_and_nothing_else(
    void **state)
{
  static const char known[] =
      "{\"error\":{\"code\":\"NOT_FOUND\",\"message\":\"no pull here\"}}";
  static const char unknown[] =
      "{\"error\":{\"code\":\"TEAPOT\",\"message\":\"short and stout\"}}";
  static const char *const not_errors[] = {
      "<html>bad gateway</html>", "", "{\"error\":\"x\"}",
      "{\"error\":{\"code\":\"IO\"}}",
      "{\"error\":{\"message\":\"m\"}}",
      "{\"error\":{\"code\":\"OK\",\"message\":\"m\"}}", "[1]"};
  struct err e;

  (void)state;
  assert_int_equal(http_error_parse(known, strlen(known), &e),
                   ERR_NOT_FOUND);
  assert_int_equal(e.code, ERR_NOT_FOUND);
  assert_string_equal(e.msg, "no pull here");
  assert_int_equal(http_error_parse(unknown, strlen(unknown), &e), ERR_SITE);
  assert_string_equal(e.msg, "short and stout (TEAPOT)");
  for (size_t i = 0; i < sizeof(not_errors) / sizeof(not_errors[0]); i++) {
    int code = http_error_parse(not_errors[i], strlen(not_errors[i]), &e);

    /* "OK" names no error: read as an unknown code, never as success */
    if (strstr(not_errors[i], "\"OK\"") != NULL) {
      assert_int_equal(code, ERR_SITE);
      continue;
    }
    if (code != 0)
      fail_msg("'%s' read as code %d", not_errors[i], code);
    assert_int_equal(e.code, 0);
    assert_string_equal(e.msg, "");
  }
}

/* ---- answers ---- */

static void
test_unknown_site_of_22_cjk_characters_answers_404_in_valid_json(
    void **state)
{
  struct fx *fx = *state;
  char path[256];
  char name[22 * 3 + 1];
  size_t n = (size_t)snprintf(path, sizeof(path), "/v1/sites/");
  struct err e;

  for (int i = 0; i < 22; i++) {
    n += (size_t)snprintf(path + n, sizeof(path) - n, "%s", CJK_URL);
    memcpy(name + 3 * i, CJK, 3);
  }
  name[sizeof(name) - 1] = '\0';
  call(fx, "GET", path, "good");
  assert_int_equal(fx->status, 404);
  assert_true(utf8_valid(fx->body, strlen(fx->body)));
  assert_int_equal(answer_code(fx, &e), ERR_NOT_FOUND);
  /* 21 whole characters, then '?' for the byte of the 22nd kept */
  name[21 * 3] = '?';
  name[21 * 3 + 1] = '\0';
  assert_non_null(strstr(e.msg, name));
}

static void
test_a_message_cut_inside_a_character_by_hand_is_repaired(void **state)
{
  struct fx *fx = *state;
  struct err e;

  /* "%.4s" keeps one whole character and one byte of the next */
  call(fx, "GET", "/cut/" CJK_URL CJK_URL, "good");
  assert_int_equal(fx->status, 404);
  assert_int_equal(answer_code(fx, &e), ERR_NOT_FOUND);
  assert_string_equal(e.msg, "no '" CJK "?'");
}

static void
test_json_that_cannot_be_encoded_answers_500_internal(void **state)
{
  struct fx *fx = *state;
  struct err e;

  call(fx, "GET", "/null", "good");
  assert_int_equal(fx->status, 500);
  assert_int_equal(answer_code(fx, &e), ERR_INTERNAL);
  assert_string_equal(e.msg, "cannot encode the response");
}

static void
test_middleware_runs_in_order_before_the_match_is_answered(void **state)
{
  struct fx *fx = *state;
  struct err e;

  call(fx, "GET", "/x/1/y/2", "good");
  assert_int_equal(fx->status, 200);
  assert_string_equal(fx->trace, "ga");
  assert_string_equal(fx->body, "{\"a\":\"1\",\"b\":\"2\",\"c\":null}\n");

  /* the gate refuses first: auth never runs, the 404 is not told */
  fx->stopped = 1;
  call(fx, "GET", "/nowhere", "good");
  assert_int_equal(fx->status, 503);
  assert_string_equal(fx->trace, "g");
  assert_int_equal(answer_code(fx, &e), ERR_UNAVAILABLE);
  fx->stopped = 0;

  /* a middleware that lets unmatched paths through: 404 after it */
  call(fx, "GET", "/nowhere", NULL);
  assert_int_equal(fx->status, 404);
  assert_string_equal(fx->trace, "ga");
  assert_int_equal(answer_code(fx, &e), ERR_NOT_FOUND);
  call(fx, "PUT", "/x/1/y/2", NULL);
  assert_int_equal(fx->status, 405);
  assert_int_equal(answer_code(fx, &e), ERR_METHOD);

  /* one that asks a token before disclosing anything: 401 first */
  fx->token_first = 1;
  call(fx, "GET", "/nowhere", NULL);
  assert_int_equal(fx->status, 401);
  assert_string_equal(fx->www_auth, "Bearer");
  assert_int_equal(answer_code(fx, &e), ERR_UNAUTHORIZED);
  assert_string_equal(e.msg, "no token");
  call(fx, "GET", "/nowhere", "good");
  assert_int_equal(fx->status, 404);
}

static void
test_public_routes_pass_and_roles_are_the_daemons_to_compare(void **state)
{
  struct fx *fx = *state;
  struct err e;

  call(fx, "GET", "/healthz", NULL);
  assert_int_equal(fx->status, 200);
  call(fx, "GET", "/x/1/y/2", NULL);
  assert_int_equal(fx->status, 401);
  call(fx, "GET", "/x/1/y/2", "low");
  assert_int_equal(fx->status, 200);
  call(fx, "POST", "/x/1/y/2", "low");
  assert_int_equal(fx->status, 403);
  assert_string_equal(fx->www_auth, "");
  assert_int_equal(answer_code(fx, &e), ERR_FORBIDDEN);
  call(fx, "POST", "/x/1/y/2", "good");
  assert_int_equal(fx->status, 200);
}

static void
test_a_json_body_must_be_one_object_within_its_cap(void **state)
{
  struct fx *fx = *state;
  struct err e;

  call_body(fx, "POST", "/json", "good", "{\"a\":1}");
  assert_int_equal(fx->status, 200);
  assert_string_equal(fx->body, "{\"a\":1}\n");
  call_body(fx, "POST", "/json", "good", NULL);
  assert_int_equal(fx->status, 400);
  assert_int_equal(answer_code(fx, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "body is empty"));
  call_body(fx, "POST", "/json", "good", "[1, 2]");
  assert_int_equal(fx->status, 400);
  assert_int_equal(answer_code(fx, &e), ERR_INVALID);
  call_body(fx, "POST", "/json", "good", "{\"a\":\"0123456789\"}");
  assert_int_equal(fx->status, 413);
  assert_int_equal(answer_code(fx, &e), ERR_TOO_LARGE);
  assert_string_equal(e.msg, "JSON body of 18 bytes; at most 16");
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_match_captures_segments_and_tells_404_from_405),
      cmocka_unit_test(test_a_segment_too_long_to_capture_matches_no_route),
      cmocka_unit_test(
          test_error_parse_reads_known_and_unknown_codes_and_nothing_else),
      cmocka_unit_test_setup_teardown(
          test_unknown_site_of_22_cjk_characters_answers_404_in_valid_json,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_a_message_cut_inside_a_character_by_hand_is_repaired, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_json_that_cannot_be_encoded_answers_500_internal, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_middleware_runs_in_order_before_the_match_is_answered, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_public_routes_pass_and_roles_are_the_daemons_to_compare,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_a_json_body_must_be_one_object_within_its_cap, setup,
          teardown),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
