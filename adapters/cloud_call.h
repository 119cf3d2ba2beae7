/*
 * Private to adapters/: the plumbing every cloud provider (cloud_aws.c,
 * cloud_gcp.c, cloud_azure.c) runs its calls on, so that each keeps
 * cloud_int.h's promises the same way: every call answers exactly once,
 * from the loop, never from inside the provider's call; close() closes
 * the HTTP client and waits for every call still due, then runs the
 * pool's callback and frees the provider.
 *
 * Providers whose calls carry a bearer token (gcp, azure) share one
 * token through it.  The first call that needs one asks, and every call
 * that comes meanwhile waits for that one request; a token is asked for
 * again in the background once most of its life is spent, and is not
 * sent in its last tenth (at most 30 s), so that none expires on the
 * way.  A call answered 401 drops the token it carried (unless another
 * call renewed it since) and goes again, once.  What the token request
 * is and how its answer reads stay the provider's (the hooks).
 *
 * Calling sequence: cloud_calls_init() at open, the provider then sets
 * http; per call cloud_call_start(), cloud_call_send() (or
 * cloud_call_with_token()), and cloud_call_end() or
 * cloud_call_fail_later(); cloud_calls_close() from the provider's
 * close().
 *
 * Ownership: struct cloud_calls lives inside the provider's struct;
 * cloud_calls_release() frees what it holds, and hooks->free (the
 * provider's own free, which calls it) runs once the close is over.  A
 * call's struct is new from the provider (xcalloc), with its struct
 * cloud_call first; it is handed over by cloud_call_start() and freed
 * with free() once the call has ended and its timer closed.  Requests,
 * results and strings passed in are borrowed for the call.  The loop's
 * thread only.
 */
#ifndef TENBIN_ADAPTERS_CLOUD_CALL_H
#define TENBIN_ADAPTERS_CLOUD_CALL_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "adapters/cloud_int.h"
#include "adapters/oauth.h"
#include "http/client.h"
#include "util/err.h"
#include "util/list.h"

enum cloud_call_kind {
  CLOUD_CALL_LAUNCH,
  CLOUD_CALL_LIST,
  CLOUD_CALL_TERMINATE,
  CLOUD_CALL_PRICES
};

struct cloud_call;

/* What each provider does its own way (static, alive while it is). */
struct cloud_call_hooks {
  /* Answer c with r: cloud_call_end() with what the provider gathered.
   * NULL: cloud_call_end(c, r, NULL, NULL, 0). */
  void (*finish)(struct cloud_call *c, const struct cloud_result *r);
  /* Free the provider (owner); runs once close's callback has. */
  void (*free)(void *owner);

  /* The rest only where calls carry a bearer token (else NULL). */
  /* Answer c with r from the loop (NULL: cloud_call_fail_later). */
  void (*fail)(struct cloud_call *c, const struct cloud_result *r);
  /* Send c's request now, the token at hand: cloud_call_send() with
   * bearer set. */
  void (*send)(struct cloud_call *c);
  /* Build a token request and post it with cloud_call_token_post(); when
   * it cannot leave, refuse the waiting calls with
   * cloud_call_token_failed(). */
  void (*ask)(void *owner);
  /* Read a token answer (rc, resp and e as http_client_cb has them): 0
   * with the token in token (OAUTH_TOKEN_LEN bytes) and its lifetime in
   * *ttl_s, else -1 with r set to what the waiting calls are refused
   * with. */
  int (*read)(void *owner, int rc, const struct http_client_response *resp,
              const struct err *e, char *token, int64_t *ttl_s,
              struct cloud_result *r);
  /* Ask for the next token once 1/renew_part of a token's life (at most
   * 5 min) is left. */
  int renew_part;
};

/* A provider's calls, its HTTP client and its token. */
struct cloud_calls {
  uv_loop_t *loop;             /* read-only */
  struct http_client *http;    /* the provider makes it at open; closed
                                  by cloud_calls_close() */
  int closing;                 /* read-only: close() has begun */
  /* private */
  const struct cloud_call_hooks *hooks;
  void *owner;
  char *site;                  /* for logs */
  struct list all;             /* of struct cloud_call, by link */
  unsigned n;
  void (*close_cb)(void *arg);
  void *close_arg;
  char token[OAUTH_TOKEN_LEN]; /* the bearer token */
  unsigned gen;                /* bumped with each new token */
  int64_t usable_ms;           /* time_mono_ms: sent until then (0: none) */
  int64_t renew_ms;            /* ... and the next one asked from then */
  int asking;                  /* a token request is in flight */
  struct list waiting;         /* of struct cloud_call, by wait_link */
};

/* One call; the first member of the provider's struct for it. */
struct cloud_call {
  struct cloud_calls *calls;   /* read-only */
  enum cloud_call_kind kind;   /* read-only */
  /* The caller's callback (the one of kind), set after the start. */
  cloud_launch_cb launch_cb;
  cloud_list_cb list_cb;
  cloud_done_cb done_cb;
  cloud_prices_cb prices_cb;
  void *arg;
  struct cloud_vm *vms;        /* a listing's, grown by the provider;
                                  freed when the call ends */
  size_t n, cap;
  struct cloud_result r;       /* what the timer answers when failing */
  uv_timer_t timer;            /* data: the call.  Free for the
                                  provider's own waits (a poll's backoff)
                                  between requests */
  /* private */
  struct list link;            /* in calls->all */
  struct list wait_link;       /* in calls->waiting while it waits */
  http_client_cb answer;       /* the provider's, for the request out */
  int in_http;                 /* its answer is due from the client */
  int reauthed;                /* a 401 sent it again already */
  unsigned gen;                /* the token its last request carried */
};

/* Set cs up on loop for owner, with hooks (borrowed, static); site is
 * copied. */
void cloud_calls_init(struct cloud_calls *cs, uv_loop_t *loop,
                      const char *site, const struct cloud_call_hooks *hooks,
                      void *owner);
/* Free what cs holds and wipe the token; its HTTP client must be closed
 * or never made, and no call left. */
void cloud_calls_release(struct cloud_calls *cs);
/*
 * Begin the close: with answer_idle, every call between requests (for
 * the token, in a backoff, its answer due) answers ERR_UNAVAILABLE from
 * the loop now; those in a request do when the client cancels it.  Once
 * the client is closed and no call is left, cb(arg) (may be NULL) runs
 * and then hooks->free(owner).
 */
void cloud_calls_close(struct cloud_calls *cs, int answer_idle,
                       void (*cb)(void *arg), void *arg);

/* Count c (zeroed, first in its struct) among cs's calls; arg is for
 * the caller's callback. */
void cloud_call_start(struct cloud_calls *cs, struct cloud_call *c,
                      enum cloud_call_kind kind, void *arg);
/*
 * Answer c's caller with r and end c: a launch gets vm (an empty one
 * when r failed or vm is NULL), a listing c->vms, prices p (n of them);
 * a failure gets nothing.  c's struct is freed later, from the loop; the
 * provider goes here when it was the last call of a close.
 */
void cloud_call_end(struct cloud_call *c, const struct cloud_result *r,
                    const struct cloud_vm *vm, const struct cloud_price *p,
                    size_t n);
/* Answer c with r (copied) from the loop, not from inside its call. */
void cloud_call_fail_later(struct cloud_call *c,
                           const struct cloud_result *r);
/* Set r to what a call answers once close() has begun. */
void cloud_call_closing(struct cloud_result *r);
/* 1 when close() has begun, c then answering that from the loop. */
int cloud_call_closed(struct cloud_call *c);

/*
 * Send req for c; cb(c, ...) gets its answer.  With bearer, the token
 * goes first among req's headers (at most 6 of them).  0, or a negative
 * code with r the refusal ("WHAT request: why") for the caller to
 * answer.
 */
int cloud_call_send(struct cloud_call *c, const struct http_client_request *req,
                    int bearer, http_client_cb cb, const char *what,
                    struct cloud_result *r) WARN_UNUSED;
/* Send c's request (hooks->send) once a token is at hand. */
void cloud_call_with_token(struct cloud_call *c);
/* c's request was answered with status: 1 when that is its first 401
 * and c goes again with a new token, else 0. */
int cloud_call_reauth(struct cloud_call *c, int status);

/* Ask for a token (hooks->ask) unless a request is in flight. */
void cloud_call_token_ask(struct cloud_calls *cs);
/* Post the token request req (max_response, idempotency and attempts
 * are set here); its answer goes to hooks->read.  0, or a negative code
 * with e saying why. */
int cloud_call_token_post(struct cloud_calls *cs,
                          const struct http_client_request *req,
                          struct err *e) WARN_UNUSED;
/* Answer every call waiting for the token with r (hooks->fail); how
 * many there were. */
size_t cloud_call_token_failed(struct cloud_calls *cs,
                               const struct cloud_result *r);
/* 1 when t can go into a header as it is: printable, no spaces. */
int cloud_call_token_ok(const char *t);

#endif
