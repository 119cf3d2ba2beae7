/*
 * Tests for adapters/cloud_call.c: the calls of a cloud provider, over a
 * fake provider whose requests go to a server on 127.0.0.1 (answers
 * from the loop and once, the close that waits for every call, the
 * shared bearer token, its renewal and the one retry after a 401).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapters/cloud_call.h"
#include "http/server.h"
#include "util/alloc.h"

#include "tests/unit/loop_peer.h"

#define WATCHDOG_MS 30000u

#define RUN_UNTIL(fx, cond)                                                 \
  do {                                                                      \
    while (!(cond))                                                         \
      uv_run(&(fx)->loop, UV_RUN_ONCE);                                     \
  } while (0)

/* What one call came to. */
struct res {
  int called;
  struct cloud_result r;
};

struct fx {
  uv_loop_t loop;
  uv_timer_t watchdog;
  uv_timer_t pause;
  int paused;
  struct http_server *srv;
  char url[64];
  struct fake *f;
  int closed, freed, srv_closed;

  /* the token endpoint */
  int n_token;
  int token_ttl;
  int token_status;
  int hold_token;
  struct http_request *held_token;
  int ask_fails;
  /* the API: takes tok-N for N >= min_tok */
  int min_tok;
  int n_api, n_401;
  char auth[64];
  char accept[64];
};

/* The fake provider and its call. */
struct fake {
  struct cloud_calls calls;
  struct fx *fx;
};

struct call {
  struct cloud_call call;      /* first */
  struct fx *fx;
};

/* ---- the server ---- */

static void
respond(struct http_request *req, int status, const char *body)
{
  http_respond(req, status, "application/json", xstrdup(body),
               strlen(body));
}

static void
answer_token(struct fx *fx, struct http_request *req)
{
  char body[128];

  if (fx->token_status != 200) {
    respond(req, fx->token_status, "{\"error\":\"invalid_client\"}");
    return;
  }
  snprintf(body, sizeof(body),
           "{\"access_token\":\"tok-%d\",\"expires_in\":%d,"
           "\"token_type\":\"Bearer\"}",
           fx->n_token, fx->token_ttl);
  respond(req, 200, body);
}

static void
on_request(struct http_request *req, void *arg)
{
  struct fx *fx = arg;
  const char *auth = http_request_header(req, "Authorization");
  const char *accept = http_request_header(req, "Accept");
  int tok = 0;

  if (strcmp(http_request_path(req), "/token") == 0) {
    fx->n_token++;
    if (fx->hold_token && fx->held_token == NULL) {
      fx->held_token = req;
      return;
    }
    answer_token(fx, req);
    return;
  }
  assert_string_equal(http_request_path(req), "/api");
  fx->n_api++;
  snprintf(fx->auth, sizeof(fx->auth), "%s", auth != NULL ? auth : "");
  snprintf(fx->accept, sizeof(fx->accept), "%s",
           accept != NULL ? accept : "");
  if (auth != NULL && strncmp(auth, "Bearer tok-", 11) == 0)
    tok = (int)strtol(auth + 11, NULL, 10);
  if (tok < fx->min_tok) {
    fx->n_401++;
    respond(req, 401, "{}");
    return;
  }
  respond(req, 200, "{}");
}

/* ---- the fake provider ---- */

static void
on_api(void *arg, int rc, const struct http_client_response *resp,
       const struct err *e)
{
  struct cloud_call *c = arg;
  struct cloud_result r = {0};

  r.retry_after_ms = -1;
  if (rc < 0) {
    cloud_refuse(&r, CLOUD_REFUSED_TRANSIENT, -1, "API: %s", e->msg);
  } else if (cloud_call_reauth(c, resp->status)) {
    return;
  } else if (resp->status != 200) {
    cloud_refuse(&r, CLOUD_REFUSED_AUTH, -1, "API %d", resp->status);
  }
  cloud_call_end(c, &r, NULL, NULL, 0);
}

static void
send_api(struct cloud_call *c)
{
  static const char *const headers[] = {"Accept: application/json", NULL};
  struct fx *fx = ((struct call *)c)->fx;
  struct http_client_request req = {0};
  struct cloud_result r;
  char url[96];

  snprintf(url, sizeof(url), "%s/api", fx->url);
  req.method = "GET";
  req.url = url;
  req.headers = headers;
  req.max_attempts = 1;
  if (cloud_call_send(c, &req, 1, on_api, "API", &r) < 0)
    cloud_call_fail_later(c, &r);
}

static void
ask_token(void *owner)
{
  static const char *const headers[] = {
      "Content-Type: application/x-www-form-urlencoded", NULL};
  static const char body[] = "grant_type=client_credentials";
  struct fake *f = owner;
  struct http_client_request req = {0};
  struct cloud_result r;
  struct err e = {0};
  char url[96];

  if (f->fx->ask_fails) {
    cloud_refuse(&r, CLOUD_REFUSED_AUTH, -1, "no key to ask with");
    cloud_call_token_failed(&f->calls, &r);
    return;
  }
  snprintf(url, sizeof(url), "%s/token", f->fx->url);
  req.method = "POST";
  req.url = url;
  req.headers = headers;
  req.body = body;
  req.body_len = strlen(body);
  if (cloud_call_token_post(&f->calls, &req, &e) < 0) {
    cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "token request: %s", e.msg);
    cloud_call_token_failed(&f->calls, &r);
  }
}

static int
read_token(void *owner, int rc, const struct http_client_response *resp,
           const struct err *e, char *token, int64_t *ttl_s,
           struct cloud_result *r)
{
  struct err pe = {0};

  (void)owner;
  if (rc < 0) {
    cloud_refuse(r, CLOUD_REFUSED_TRANSIENT, -1, "token: %s", e->msg);
    return -1;
  }
  if (resp->status != 200 ||
      oauth_token_parse(resp->body, resp->len, token, ttl_s, &pe) < 0 ||
      !cloud_call_token_ok(token)) {
    cloud_refuse(r, CLOUD_REFUSED_AUTH, -1, "token endpoint %d",
                 resp->status);
    return -1;
  }
  return 0;
}

static void
fake_free(void *owner)
{
  struct fake *f = owner;

  f->fx->freed++;
  cloud_calls_release(&f->calls);
  free(f);
}

static const struct cloud_call_hooks hooks = {
    .free = fake_free,
    .send = send_api,
    .ask = ask_token,
    .read = read_token,
    .renew_part = 2,
};

static void
on_done(void *arg, const struct cloud_result *r)
{
  struct res *res = arg;

  res->called++;
  res->r = *r;
}

/* A terminate call of the fake provider, answering into res. */
static struct cloud_call *
start(struct fx *fx, struct res *res)
{
  struct call *c = xcalloc(1, sizeof(*c));

  c->fx = fx;
  cloud_call_start(&fx->f->calls, &c->call, CLOUD_CALL_TERMINATE, res);
  c->call.done_cb = on_done;
  return &c->call;
}

/* ---- fixture ---- */

static void
on_closed(void *arg)
{
  struct fx *fx = arg;

  /* The provider is freed only after its close callback. */
  assert_int_equal(fx->freed, 0);
  fx->closed++;
}

static void
on_srv_closed(void *arg)
{
  ((struct fx *)arg)->srv_closed = 1;
}

static void
on_pause(uv_timer_t *t)
{
  ((struct fx *)t->data)->paused = 1;
}

static void
never_cb(uv_timer_t *t)
{
  (void)t;
  fail_msg("the backoff ran out instead of the close answering");
}

static void
pause_ms(struct fx *fx, uint64_t ms)
{
  fx->paused = 0;
  uv_timer_start(&fx->pause, on_pause, ms, 0);
  RUN_UNTIL(fx, fx->paused);
}

static void
close_fake(struct fx *fx, int answer_idle)
{
  cloud_calls_close(&fx->f->calls, answer_idle, on_closed, fx);
  fx->f = NULL;
  RUN_UNTIL(fx, fx->freed == 1);
  assert_int_equal(fx->closed, 1);
}

static int
setup(void **state)
{
  struct fx *fx = xcalloc(1, sizeof(*fx));
  struct err e = {0};

  assert_int_equal(uv_loop_init(&fx->loop), 0);
  loop_peer_watchdog(&fx->loop, &fx->watchdog, WATCHDOG_MS);
  uv_timer_init(&fx->loop, &fx->pause);
  fx->pause.data = fx;
  fx->srv = loop_peer_server(&fx->loop, on_request, fx, 16, "", fx->url,
                             sizeof(fx->url));
  fx->token_ttl = 3600;
  fx->token_status = 200;
  fx->min_tok = 1;
  fx->f = xcalloc(1, sizeof(*fx->f));
  fx->f->fx = fx;
  cloud_calls_init(&fx->f->calls, &fx->loop, "test", &hooks, fx->f);
  if (http_client_new(&fx->loop, NULL, &fx->f->calls.http, &e) < 0)
    fail_msg("client: %s", e.msg);
  *state = fx;
  return 0;
}

static int
teardown(void **state)
{
  struct fx *fx = *state;

  if (fx->f != NULL)
    close_fake(fx, 1);
  http_server_close(fx->srv, on_srv_closed, fx);
  uv_close((uv_handle_t *)&fx->watchdog, NULL);
  uv_close((uv_handle_t *)&fx->pause, NULL);
  uv_run(&fx->loop, UV_RUN_DEFAULT);
  assert_true(fx->srv_closed);
  assert_int_equal(uv_loop_close(&fx->loop), 0);
  free(fx);
  return 0;
}

/* ---- tests ---- */

static void
test_a_failure_answers_from_the_loop_exactly_once(void **state)
{
  struct fx *fx = *state;
  struct res a = {0};
  struct cloud_result r;

  cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "body too large");
  cloud_call_fail_later(start(fx, &a), &r);
  assert_int_equal(a.called, 0);
  RUN_UNTIL(fx, a.called);
  pause_ms(fx, 20);
  assert_int_equal(a.called, 1);
  assert_int_equal(a.r.rc, ERR_SITE);
  assert_int_equal(a.r.why, CLOUD_REFUSED_OTHER);
  assert_string_equal(a.r.msg, "body too large");
}

static void
test_close_waits_for_a_due_answer_then_calls_back_and_frees(void **state)
{
  struct fx *fx = *state;
  struct res a = {0};
  struct cloud_result r;

  cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "body too large");
  cloud_call_fail_later(start(fx, &a), &r);
  /* Without answer_idle the answer due stays the call's own. */
  close_fake(fx, 0);
  assert_int_equal(a.called, 1);
  assert_int_equal(a.r.rc, ERR_SITE);
  assert_string_equal(a.r.msg, "body too large");
}

static void
test_close_answers_calls_between_requests_unavailable(void **state)
{
  struct fx *fx = *state;
  struct res a = {0}, b = {0}, c = {0};
  struct cloud_call *in_backoff = start(fx, &a);
  struct cloud_result r;

  /* One in a long backoff of the provider's, one with its answer due,
   * one waiting for a token that does not come. */
  uv_timer_start(&in_backoff->timer, never_cb, 3600000, 0);
  fx->hold_token = 1;
  cloud_call_with_token(start(fx, &c));
  RUN_UNTIL(fx, fx->held_token != NULL);
  cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "body too large");
  cloud_call_fail_later(start(fx, &b), &r);
  close_fake(fx, 1);
  assert_int_equal(a.called + b.called + c.called, 3);
  assert_int_equal(a.r.rc, ERR_UNAVAILABLE);
  assert_int_equal(b.r.rc, ERR_UNAVAILABLE);
  assert_int_equal(c.r.rc, ERR_UNAVAILABLE);
  assert_string_equal(c.r.msg, "the site is closing");
}

static void
test_a_call_after_close_began_answers_that(void **state)
{
  struct fx *fx = *state;
  struct res a = {0};
  struct cloud_call *c = start(fx, &a);

  cloud_calls_close(&fx->f->calls, 1, on_closed, fx);
  fx->f = NULL;
  assert_true(cloud_call_closed(c));
  assert_int_equal(a.called, 0);
  RUN_UNTIL(fx, fx->freed == 1);
  assert_int_equal(a.called, 1);
  assert_int_equal(a.r.rc, ERR_UNAVAILABLE);
}

static void
test_calls_share_one_token_request_and_carry_it(void **state)
{
  struct fx *fx = *state;
  struct res a = {0}, b = {0};

  fx->hold_token = 1;
  cloud_call_with_token(start(fx, &a));
  cloud_call_with_token(start(fx, &b));
  RUN_UNTIL(fx, fx->held_token != NULL);
  pause_ms(fx, 50);
  assert_int_equal(fx->n_token, 1);
  assert_int_equal(a.called + b.called, 0);
  answer_token(fx, fx->held_token);
  fx->held_token = NULL;
  RUN_UNTIL(fx, a.called && b.called);
  assert_int_equal(a.r.rc, 0);
  assert_int_equal(b.r.rc, 0);
  assert_int_equal(fx->n_token, 1);
  assert_int_equal(fx->n_api, 2);
  /* The token goes first; the provider's own headers follow. */
  assert_string_equal(fx->auth, "Bearer tok-1");
  assert_string_equal(fx->accept, "application/json");
}

static void
test_a_first_401_gets_a_new_token_and_goes_again_once(void **state)
{
  struct fx *fx = *state;
  struct res a = {0}, b = {0};

  fx->min_tok = 2; /* tok-1 is revoked */
  cloud_call_with_token(start(fx, &a));
  RUN_UNTIL(fx, a.called);
  assert_int_equal(a.r.rc, 0);
  assert_int_equal(fx->n_token, 2);
  assert_int_equal(fx->n_401, 1);
  assert_string_equal(fx->auth, "Bearer tok-2");
  /* Every token refused: one new one, then the refusal stands. */
  fx->min_tok = 1000;
  cloud_call_with_token(start(fx, &b));
  RUN_UNTIL(fx, b.called);
  assert_int_equal(b.r.why, CLOUD_REFUSED_AUTH);
  assert_string_equal(b.r.msg, "API 401");
  assert_int_equal(fx->n_token, 3);
  assert_int_equal(fx->n_401, 3);
}

static void
test_a_token_late_in_its_life_is_renewed_while_it_serves(void **state)
{
  struct fx *fx = *state;
  struct res a = {0}, b = {0}, c = {0};

  /* 2 s: asked for again after 1 s, sent until 1.8 s */
  fx->token_ttl = 2;
  cloud_call_with_token(start(fx, &a));
  RUN_UNTIL(fx, a.called);
  pause_ms(fx, 1200);
  cloud_call_with_token(start(fx, &b));
  RUN_UNTIL(fx, b.called && fx->n_token == 2);
  assert_int_equal(b.r.rc, 0);
  /* b did not wait: it went with the old token */
  assert_int_equal(fx->n_api, 2);
  assert_string_equal(fx->auth, "Bearer tok-1");
  pause_ms(fx, 50);
  cloud_call_with_token(start(fx, &c));
  RUN_UNTIL(fx, c.called);
  assert_string_equal(fx->auth, "Bearer tok-2");
  assert_int_equal(fx->n_401, 0);
}

static void
test_a_refused_token_refuses_every_waiting_call(void **state)
{
  struct fx *fx = *state;
  struct res a = {0}, b = {0};

  fx->token_status = 400;
  cloud_call_with_token(start(fx, &a));
  cloud_call_with_token(start(fx, &b));
  RUN_UNTIL(fx, a.called && b.called);
  assert_int_equal(fx->n_token, 1);
  assert_int_equal(fx->n_api, 0);
  assert_int_equal(a.r.why, CLOUD_REFUSED_AUTH);
  assert_string_equal(b.r.msg, "token endpoint 400");
}

static void
test_a_token_request_that_cannot_leave_answers_from_the_loop(void **state)
{
  struct fx *fx = *state;
  struct res a = {0}, b = {0};

  fx->ask_fails = 1;
  cloud_call_with_token(start(fx, &a));
  cloud_call_with_token(start(fx, &b));
  assert_int_equal(a.called + b.called, 0);
  RUN_UNTIL(fx, a.called && b.called);
  assert_int_equal(fx->n_token, 0);
  assert_int_equal(a.r.why, CLOUD_REFUSED_AUTH);
  assert_string_equal(b.r.msg, "no key to ask with");
}

static void
test_token_ok_takes_only_a_printable_word(void **state)
{
  (void)state;
  assert_true(cloud_call_token_ok("eyJ0eXAi.eyJhdWQi.c2ln-_~+/="));
  assert_false(cloud_call_token_ok("tok 1"));
  assert_false(cloud_call_token_ok("tok\r\nX-Evil: 1"));
  assert_false(cloud_call_token_ok("tok\x7f"));
  assert_false(cloud_call_token_ok("tok\xc3\xa9"));
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          test_a_failure_answers_from_the_loop_exactly_once, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_close_waits_for_a_due_answer_then_calls_back_and_frees, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_close_answers_calls_between_requests_unavailable, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_a_call_after_close_began_answers_that, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_calls_share_one_token_request_and_carry_it, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_a_first_401_gets_a_new_token_and_goes_again_once, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_a_token_late_in_its_life_is_renewed_while_it_serves, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_a_refused_token_refuses_every_waiting_call, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_a_token_request_that_cannot_leave_answers_from_the_loop,
          setup, teardown),
      cmocka_unit_test(test_token_ok_takes_only_a_printable_word),
  };
  int rc;

  curl_global_init(CURL_GLOBAL_DEFAULT);
  rc = cmocka_run_group_tests(tests, NULL, NULL);
  curl_global_cleanup();
  return rc;
}
