/*
 * The calls of a cloud provider (cloud_call.h): counting them so that a
 * close waits for each, answering from the loop, and the shared bearer
 * token of the providers that have one.
 */
#include "adapters/cloud_call.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/buf.h"
#include "util/log.h"
#include "util/timeutil.h"

/* Token answers are a JWT and a few fields. */
#define TOKEN_ANSWER_MAX (64u << 10)
/* A longer "expires_in" is read as this. */
#define TOKEN_MAX_TTL_S 86400
/* Renewal starts at most this long before expiry, and a token is not
 * sent in its last tenth, at most this long. */
#define TOKEN_RENEW_MAX_MS (5 * 60 * 1000)
#define TOKEN_SLACK_MAX_MS (30 * 1000)
/* A provider's own headers besides the bearer token. */
#define MAX_HEADERS 6

void
cloud_calls_init(struct cloud_calls *cs, uv_loop_t *loop, const char *site,
                 const struct cloud_call_hooks *hooks, void *owner)
{
  cs->loop = loop;
  cs->hooks = hooks;
  cs->owner = owner;
  cs->site = xstrdup(site != NULL ? site : "");
  list_init(&cs->all);
  list_init(&cs->waiting);
}

void
cloud_calls_release(struct cloud_calls *cs)
{
  free(cs->site);
  cs->site = NULL;
  memset(cs->token, 0, sizeof(cs->token));
}

/* The provider goes once its close has begun, its client is closed and
 * no call is left. */
static void
maybe_closed(struct cloud_calls *cs)
{
  if (!cs->closing || cs->n > 0 || cs->http != NULL)
    return;
  if (cs->close_cb != NULL)
    cs->close_cb(cs->close_arg);
  cs->hooks->free(cs->owner);
}

static void
http_closed(void *arg)
{
  struct cloud_calls *cs = arg;

  cs->http = NULL;
  maybe_closed(cs);
}

void
cloud_calls_close(struct cloud_calls *cs, int answer_idle,
                  void (*cb)(void *arg), void *arg)
{
  struct cloud_result r;
  struct list *q;

  cs->closing = 1;
  cs->close_cb = cb;
  cs->close_arg = arg;
  cloud_call_closing(&r);
  LIST_FOREACH(q, &cs->all) {
    struct cloud_call *c = LIST_ENTRY(q, struct cloud_call, link);

    if (!answer_idle || c->in_http)
      continue;
    list_remove(&c->wait_link);
    uv_timer_stop(&c->timer);
    cloud_call_fail_later(c, &r);
  }
  http_client_close(cs->http, http_closed, cs);
}

void
cloud_call_start(struct cloud_calls *cs, struct cloud_call *c,
                 enum cloud_call_kind kind, void *arg)
{
  c->calls = cs;
  c->kind = kind;
  c->arg = arg;
  list_init(&c->wait_link);
  uv_timer_init(cs->loop, &c->timer);
  c->timer.data = c;
  list_insert_tail(&cs->all, &c->link);
  cs->n++;
}

/* The call is the first member of the provider's struct: freeing it
 * frees that. */
static void
call_free_cb(uv_handle_t *h)
{
  free(h->data);
}

void
cloud_call_end(struct cloud_call *c, const struct cloud_result *r,
               const struct cloud_vm *vm, const struct cloud_price *p,
               size_t n)
{
  struct cloud_calls *cs = c->calls;
  struct cloud_vm none;

  switch (c->kind) {
  case CLOUD_CALL_LAUNCH:
    memset(&none, 0, sizeof(none));
    c->launch_cb(c->arg, r, r->rc == 0 && vm != NULL ? vm : &none);
    break;
  case CLOUD_CALL_LIST:
    c->list_cb(c->arg, r, c->vms, r->rc == 0 ? c->n : 0);
    break;
  case CLOUD_CALL_TERMINATE:
    c->done_cb(c->arg, r);
    break;
  case CLOUD_CALL_PRICES:
    c->prices_cb(c->arg, r, r->rc == 0 ? p : NULL, r->rc == 0 ? n : 0);
    break;
  }
  list_remove(&c->link);
  list_remove(&c->wait_link);
  free(c->vms);
  c->vms = NULL;
  uv_close((uv_handle_t *)&c->timer, call_free_cb);
  cs->n--;
  maybe_closed(cs);
}

static void
finish(struct cloud_call *c, const struct cloud_result *r)
{
  if (c->calls->hooks->finish != NULL)
    c->calls->hooks->finish(c, r);
  else
    cloud_call_end(c, r, NULL, NULL, 0);
}

static void
later_cb(uv_timer_t *t)
{
  struct cloud_call *c = t->data;

  finish(c, &c->r);
}

void
cloud_call_fail_later(struct cloud_call *c, const struct cloud_result *r)
{
  if (r != &c->r)
    c->r = *r;
  uv_timer_start(&c->timer, later_cb, 0, 0);
}

static void
fail(struct cloud_call *c, const struct cloud_result *r)
{
  if (c->calls->hooks->fail != NULL)
    c->calls->hooks->fail(c, r);
  else
    cloud_call_fail_later(c, r);
}

void
cloud_call_closing(struct cloud_result *r)
{
  memset(r, 0, sizeof(*r));
  r->rc = ERR_UNAVAILABLE;
  r->why = CLOUD_REFUSED_TRANSIENT;
  r->retry_after_ms = -1;
  snprintf(r->msg, sizeof(r->msg), "the site is closing");
}

int
cloud_call_closed(struct cloud_call *c)
{
  struct cloud_result r;

  if (!c->calls->closing)
    return 0;
  cloud_call_closing(&r);
  cloud_call_fail_later(c, &r);
  return 1;
}

/* ---- requests ---- */

static void
answered(void *arg, int rc, const struct http_client_response *resp,
         const struct err *e)
{
  struct cloud_call *c = arg;

  c->in_http = 0;
  c->answer(c, rc, resp, e);
}

int
cloud_call_send(struct cloud_call *c, const struct http_client_request *req,
                int bearer, http_client_cb cb, const char *what,
                struct cloud_result *r)
{
  struct cloud_calls *cs = c->calls;
  struct http_client_request out = *req;
  const char *headers[MAX_HEADERS + 2];
  struct buf auth;
  struct err e = {0};
  size_t nh = 0;
  int rc = 0;

  buf_init(&auth, OAUTH_TOKEN_LEN + 64);
  if (bearer) {
    if (buf_addf(&auth, "Authorization: Bearer %s", cs->token) < 0)
      rc = err_set(&e, ERR_TOO_LARGE, "the access token is too long");
    headers[nh++] = buf_str(&auth);
    for (size_t i = 0; req->headers != NULL && req->headers[i] != NULL;
         i++) {
      if (nh > MAX_HEADERS) {
        rc = err_set(&e, ERR_INVALID, "more than %d headers", MAX_HEADERS);
        break;
      }
      headers[nh++] = req->headers[i];
    }
    headers[nh] = NULL;
    out.headers = headers;
    c->gen = cs->gen;
  }
  c->answer = cb;
  if (rc == 0)
    rc = http_client_send(cs->http, &out, answered, c, &e);
  if (auth.data != NULL)
    memset(auth.data, 0, auth.len);
  buf_release(&auth);
  if (rc == 0) {
    c->in_http = 1;
    return 0;
  }
  cloud_refuse(r, CLOUD_REFUSED_OTHER, -1, "%s request: %s", what, e.msg);
  return rc;
}

/* ---- the token ---- */

void
cloud_call_with_token(struct cloud_call *c)
{
  struct cloud_calls *cs = c->calls;
  int64_t now = time_mono_ms();

  if (cloud_call_closed(c))
    return;
  if (cs->usable_ms > now) {
    /* Late in its life: a new one comes while this one still serves. */
    if (now >= cs->renew_ms)
      cloud_call_token_ask(cs);
    cs->hooks->send(c);
    return;
  }
  list_insert_tail(&cs->waiting, &c->wait_link);
  cloud_call_token_ask(cs);
}

int
cloud_call_reauth(struct cloud_call *c, int status)
{
  struct cloud_calls *cs = c->calls;

  if (status != 401 || c->reauthed) {
    c->reauthed = 0;
    return 0;
  }
  /* Revoked or expired early: a new token (unless another call already
   * got one), once. */
  c->reauthed = 1;
  if (c->gen == cs->gen)
    cs->usable_ms = 0;
  cloud_call_with_token(c);
  return 1;
}

void
cloud_call_token_ask(struct cloud_calls *cs)
{
  if (cs->asking || cs->closing)
    return;
  cs->hooks->ask(cs->owner);
}

size_t
cloud_call_token_failed(struct cloud_calls *cs, const struct cloud_result *r)
{
  struct list batch, *q, *tmp;
  size_t n = 0;

  list_init(&batch);
  list_move(&cs->waiting, &batch);
  LIST_FOREACH_SAFE(q, tmp, &batch) {
    list_remove(q);
    fail(LIST_ENTRY(q, struct cloud_call, wait_link), r);
    n++;
  }
  return n;
}

int
cloud_call_token_ok(const char *t)
{
  for (; *t != '\0'; t++)
    if ((unsigned char)*t <= 0x20 || (unsigned char)*t >= 0x7f)
      return 0;
  return 1;
}

static void
keep_token(struct cloud_calls *cs, const char *token, int64_t ttl_s)
{
  int64_t now = time_mono_ms();
  int64_t life = (ttl_s > TOKEN_MAX_TTL_S ? TOKEN_MAX_TTL_S : ttl_s) * 1000;
  int64_t renew = life / cs->hooks->renew_part, slack = life / 10;

  if (renew > TOKEN_RENEW_MAX_MS)
    renew = TOKEN_RENEW_MAX_MS;
  if (slack > TOKEN_SLACK_MAX_MS)
    slack = TOKEN_SLACK_MAX_MS;
  snprintf(cs->token, sizeof(cs->token), "%s", token);
  cs->gen++;
  cs->renew_ms = now + life - renew;
  cs->usable_ms = now + life - slack;
  log_debug("site %s: new access token, %" PRId64 " s", cs->site, ttl_s);
}

static void
token_answered(void *arg, int rc, const struct http_client_response *resp,
               const struct err *e)
{
  struct cloud_calls *cs = arg;
  struct cloud_result r;
  struct list batch, *q, *tmp;
  char *token;
  int64_t ttl_s = 0;

  cs->asking = 0;
  /* The calls that waited were answered when the close began. */
  if (cs->closing)
    return;
  memset(&r, 0, sizeof(r));
  r.retry_after_ms = -1;
  token = xmalloc(OAUTH_TOKEN_LEN);
  if (cs->hooks->read(cs->owner, rc, resp, e, token, &ttl_s, &r) < 0) {
    /* A token still usable keeps serving: only a renewal failed. */
    if (list_empty(&cs->waiting))
      log_warn("site %s: renewing the access token: %s", cs->site, r.msg);
    cloud_call_token_failed(cs, &r);
    goto out;
  }
  keep_token(cs, token, ttl_s);
  /* Sending may queue a call again (never with a fresh token, but the
   * batch keeps the walk safe). */
  list_init(&batch);
  list_move(&cs->waiting, &batch);
  LIST_FOREACH_SAFE(q, tmp, &batch) {
    list_remove(q);
    cs->hooks->send(LIST_ENTRY(q, struct cloud_call, wait_link));
  }
out:
  memset(token, 0, OAUTH_TOKEN_LEN);
  free(token);
}

int
cloud_call_token_post(struct cloud_calls *cs,
                      const struct http_client_request *req, struct err *e)
{
  struct http_client_request out = *req;
  int rc;

  out.max_response = TOKEN_ANSWER_MAX;
  /* Asking twice gives two tokens, both good. */
  out.idempotent = true;
  out.max_attempts = 2;
  rc = http_client_send(cs->http, &out, token_answered, cs, e);
  if (rc == 0)
    cs->asking = 1;
  return rc;
}
