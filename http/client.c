/*
 * HTTP client: libcurl's multi-socket interface driven by the libuv loop.
 *
 * curl tells us which sockets to watch (CURLMOPT_SOCKETFUNCTION), and we
 * give each one a uv_poll_t (struct sock, remembered with
 * curl_multi_assign()); it tells us when it next needs to run
 * (CURLMOPT_TIMERFUNCTION), and a uv_timer_t calls it then.  Both call
 * curl_multi_socket_action() from a loop callback, never from inside a
 * curl callback, and then collect finished transfers with
 * curl_multi_info_read().
 *
 * A request (struct call) owns one easy handle for its whole life: a retry
 * takes it out of the multi handle, waits on the client's retry timer and
 * adds it again, so the copied options (url, headers, body) are set once.
 * A call is in exactly one of two lists, `active` (in the multi handle) or
 * `waiting` (backing off); the retry timer is armed for the earliest due
 * waiting call.  User callbacks run only from our own loop callbacks,
 * after curl has returned, so they may send more requests or close the
 * client.
 *
 * Closing is deferred to the retry timer (close may be called from inside
 * a request callback): every call is cancelled with ERR_UNAVAILABLE, the
 * multi handle is cleaned up (which closes the cached connections), then
 * whatever sockets remain and both timers are closed, and the client is
 * freed when the last uv handle has closed.
 */
#include "client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "util/alloc.h"
#include "util/buf.h"
#include "util/log.h"
#include "util/secret.h"

/* A method is a short token; this only stops nonsense early. */
#define MAX_METHOD_LEN 16u

/* One socket curl asked us to watch. */
struct sock {
  uv_poll_t poll;
  struct http_client *c; /* borrowed */
  curl_socket_t fd;
  struct sock *prev;     /* in c->socks */
  struct sock *next;
};

/* One request, from send until its callback has run. */
struct call {
  struct http_client *c;       /* borrowed */
  CURL *easy;
  struct curl_slist *headers;
  struct buf resp;             /* the response body, capped */
  http_client_cb cb;
  void *arg;
  char method[MAX_METHOD_LEN + 1];
  unsigned attempts;           /* started so far */
  unsigned max_attempts;
  unsigned backoff_ms;
  bool retry_on_5xx;
  bool repeatable;             /* transport failures may be retried */
  bool too_large;              /* the write callback hit the cap */
  uint64_t due;                /* uv_now() of the next attempt */
  struct call *prev;           /* in c->active or c->waiting */
  struct call *next;
  char errbuf[CURL_ERROR_SIZE];
};

struct http_client {
  uv_loop_t *loop;             /* borrowed */
  CURLM *multi;
  uv_timer_t curl_timer;       /* curl's timeout */
  uv_timer_t retry_timer;      /* the earliest backoff; the close */
  struct call *active;
  struct call *waiting;
  struct sock *socks;
  char *user_agent;
  char *ca_file;               /* NULL: curl's default CA store */
  bool allow_insecure_tokens;
  unsigned max_backoff_ms;
  uint64_t rng;                /* jitter state (xorshift64) */
  struct http_client_stats stats;
  bool closing;                /* http_client_close() was called */
  bool torn_down;              /* handles are being closed */
  int handles;                 /* uv handles not yet closed */
  void (*close_cb)(void *arg);
  void *close_arg;
};

static void client_check_done(struct http_client *c);
static void client_arm_retry(struct http_client *c);

/* ---- lists ---- */

static void
call_link(struct call **head, struct call *call)
{
  call->prev = NULL;
  call->next = *head;
  if (*head != NULL)
    (*head)->prev = call;
  *head = call;
}

static void
call_unlink(struct call **head, struct call *call)
{
  if (call->prev != NULL)
    call->prev->next = call->next;
  else
    *head = call->next;
  if (call->next != NULL)
    call->next->prev = call->prev;
  call->prev = NULL;
  call->next = NULL;
}

/* ---- closing uv handles ---- */

static void
client_handle_closed(struct http_client *c)
{
  void (*cb)(void *arg) = c->close_cb;
  void *arg = c->close_arg;

  if (--c->handles > 0 || !c->torn_down)
    return;
  free(c->user_agent);
  free(c->ca_file);
  free(c);
  if (cb != NULL)
    cb(arg);
}

static void
on_timer_closed(uv_handle_t *h)
{
  client_handle_closed(h->data);
}

static void
on_sock_closed(uv_handle_t *h)
{
  struct sock *s = h->data;
  struct http_client *c = s->c;

  free(s);
  client_handle_closed(c);
}

static void
sock_close(struct sock *s)
{
  struct http_client *c = s->c;

  if (s->prev != NULL)
    s->prev->next = s->next;
  else
    c->socks = s->next;
  if (s->next != NULL)
    s->next->prev = s->prev;
  uv_close((uv_handle_t *)&s->poll, on_sock_closed);
}

/* ---- driving curl from the loop ---- */

static void
on_poll(uv_poll_t *p, int status, int events)
{
  struct sock *s = p->data;
  struct http_client *c = s->c;
  int flags = 0;
  int running;

  if (c->closing)
    return;
  if (status < 0)
    flags |= CURL_CSELECT_ERR;
  if ((events & UV_READABLE) != 0)
    flags |= CURL_CSELECT_IN;
  if ((events & UV_WRITABLE) != 0)
    flags |= CURL_CSELECT_OUT;
  /* s may be closed by curl's socket callback in here: not used after. */
  (void)curl_multi_socket_action(c->multi, s->fd, flags, &running);
  client_check_done(c);
}

static void
on_curl_timer(uv_timer_t *t)
{
  struct http_client *c = t->data;
  int running;

  if (c->closing)
    return;
  (void)curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
  client_check_done(c);
}

/* CURLMOPT_TIMERFUNCTION: curl must not be called back from in here, so
 * even a 0 ms timeout goes through the uv timer. */
static int
on_curl_timeout(CURLM *multi, long timeout_ms, void *userp)
{
  struct http_client *c = userp;

  (void)multi;
  if (timeout_ms < 0)
    uv_timer_stop(&c->curl_timer);
  else
    uv_timer_start(&c->curl_timer, on_curl_timer, (uint64_t)timeout_ms, 0);
  return 0;
}

/* CURLMOPT_SOCKETFUNCTION: start, change or stop watching fd. */
static int
on_curl_socket(CURL *easy, curl_socket_t fd, int what, void *userp,
               void *socketp)
{
  struct http_client *c = userp;
  struct sock *s = socketp;
  int events = 0;
  int rc;

  (void)easy;
  if (what == CURL_POLL_REMOVE) {
    /* curl forgets the socket (and its socketp) right after this. */
    if (s != NULL)
      sock_close(s);
    return 0;
  }
  if (s == NULL) {
    s = xcalloc(1, sizeof(*s));
    rc = uv_poll_init_socket(c->loop, &s->poll, fd);
    if (rc < 0) {
      log_error("http client: cannot poll socket %d: %s", (int)fd,
                uv_strerror(rc));
      free(s);
      return -1;
    }
    s->poll.data = s;
    s->c = c;
    s->fd = fd;
    s->next = c->socks;
    if (c->socks != NULL)
      c->socks->prev = s;
    c->socks = s;
    c->handles++;
    (void)curl_multi_assign(c->multi, fd, s);
  }
  if ((what & CURL_POLL_IN) != 0)
    events |= UV_READABLE;
  if ((what & CURL_POLL_OUT) != 0)
    events |= UV_WRITABLE;
  rc = uv_poll_start(&s->poll, events, on_poll);
  if (rc < 0) {
    log_error("http client: cannot poll socket %d: %s", (int)fd,
              uv_strerror(rc));
    return -1;
  }
  return 0;
}

/* CURLOPT_WRITEFUNCTION: accumulate the body up to its cap, in one
 * allocation of the announced length (a length past the cap fails at
 * once). */
static size_t
on_write(char *data, size_t size, size_t n, void *arg)
{
  struct call *call = arg;
  curl_off_t announced = -1;

  if ((call->resp.data == NULL &&
       curl_easy_getinfo(call->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T,
                         &announced) == CURLE_OK &&
       announced > 0 &&
       ((uint64_t)announced > SIZE_MAX ||
        buf_grow(&call->resp, (size_t)announced) < 0)) ||
      buf_add(&call->resp, data, size * n) < 0) {
    call->too_large = true;
    return 0; /* curl fails the transfer with CURLE_WRITE_ERROR */
  }
  return size * n;
}

/* ---- calls ---- */

static void
call_free(struct call *call)
{
  if (call->easy != NULL)
    curl_easy_cleanup(call->easy);
  curl_slist_free_all(call->headers);
  buf_release(&call->resp);
  free(call);
}

/* Run the callback once (rc 0 with the answer, or a failure) and free. */
static void
call_finish(struct call *call, int rc, const struct err *e)
{
  struct http_client *c = call->c;
  struct http_client_response resp;
  long status = 0;

  c->stats.in_flight--;
  if (rc == 0) {
    (void)curl_easy_getinfo(call->easy, CURLINFO_RESPONSE_CODE, &status);
    memset(&resp, 0, sizeof(resp));
    resp.status = (int)status;
    resp.body = buf_str(&call->resp);
    resp.len = call->resp.len;
    resp.attempts = call->attempts;
    resp.easy_ = call->easy;
    resp.call_ = call;
    call->cb(call->arg, 0, &resp, e);
  } else {
    call->cb(call->arg, rc, NULL, e);
  }
  call_free(call);
}

/* Put call into the multi handle for one more attempt. */
static int
call_start(struct call *call, struct err *e)
{
  struct http_client *c = call->c;
  CURLMcode mc;

  buf_reset(&call->resp);
  call->too_large = false;
  call->errbuf[0] = '\0';
  mc = curl_multi_add_handle(c->multi, call->easy);
  if (mc != CURLM_OK)
    return err_set(e, ERR_INTERNAL, "http client: cannot start %s: %s",
                   call->method, curl_multi_strerror(mc));
  call->attempts++;
  c->stats.attempts++;
  call_link(&c->active, call);
  return 0;
}

static uint64_t
client_random(struct http_client *c)
{
  uint64_t x = c->rng;

  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  c->rng = x;
  return x;
}

/*
 * Backoff before attempt n+1 after n attempts: base * 2^(n-1), capped,
 * of which a random half is waited ("equal jitter": never less than half,
 * and retries of many calls that failed together spread out).
 */
static uint64_t
call_backoff(struct call *call)
{
  struct http_client *c = call->c;
  uint64_t d = call->backoff_ms;
  unsigned i;

  for (i = 1; i < call->attempts && d < c->max_backoff_ms; i++)
    d *= 2;
  if (d > c->max_backoff_ms)
    d = c->max_backoff_ms;
  return d / 2 + client_random(c) % (d / 2 + 1);
}

static void
call_schedule_retry(struct call *call)
{
  struct http_client *c = call->c;

  c->stats.retries++;
  call->due = uv_now(c->loop) + call_backoff(call);
  call_link(&c->waiting, call);
  client_arm_retry(c);
}

static bool
is_retryable_status(long status)
{
  return status == 502 || status == 503 || status == 504;
}

/* A transfer ended: answer, fail or schedule another attempt. */
static void
call_done(struct call *call, CURLcode res)
{
  struct http_client *c = call->c;
  struct err e;
  const char *url = NULL;
  const char *why;
  long status = 0;
  long connects = 0;
  int rc;

  call_unlink(&c->active, call);
  (void)curl_multi_remove_handle(c->multi, call->easy);
  if (curl_easy_getinfo(call->easy, CURLINFO_NUM_CONNECTS, &connects) ==
          CURLE_OK &&
      connects > 0)
    c->stats.connections_opened += (uint64_t)connects;
  (void)curl_easy_getinfo(call->easy, CURLINFO_EFFECTIVE_URL, &url);
  if (url == NULL)
    url = "";
  err_clear(&e);

  if (res == CURLE_OK) {
    (void)curl_easy_getinfo(call->easy, CURLINFO_RESPONSE_CODE, &status);
    if (call->retry_on_5xx && is_retryable_status(status) &&
        call->attempts < call->max_attempts) {
      call_schedule_retry(call);
      return;
    }
    call_finish(call, 0, &e);
    return;
  }

  why = call->errbuf[0] != '\0' ? call->errbuf : curl_easy_strerror(res);
  if (call->too_large || res == CURLE_FILESIZE_EXCEEDED) {
    rc = err_set(&e, ERR_TOO_LARGE,
                 "http client: %s '%s': response exceeds %zu bytes",
                 call->method, url, call->resp.max);
  } else if (res == CURLE_URL_MALFORMAT ||
             res == CURLE_UNSUPPORTED_PROTOCOL ||
             res == CURLE_BAD_FUNCTION_ARGUMENT) {
    rc = err_set(&e, ERR_INVALID, "http client: %s '%s': %s", call->method,
                 url, why);
  } else if (res == CURLE_OPERATION_TIMEDOUT) {
    rc = err_set(&e, ERR_TIMEOUT, "http client: %s '%s': %s", call->method,
                 url, why);
  } else {
    if (call->repeatable && call->attempts < call->max_attempts) {
      log_debug("http client: %s '%s': %s, retrying", call->method, url,
                why);
      call_schedule_retry(call);
      return;
    }
    if (call->attempts > 1)
      rc = err_set(&e, ERR_UNAVAILABLE,
                   "http client: %s '%s': %s (after %u attempts)",
                   call->method, url, why, call->attempts);
    else
      rc = err_set(&e, ERR_UNAVAILABLE, "http client: %s '%s': %s",
                   call->method, url, why);
  }
  call_finish(call, rc, &e);
}

/* Collect finished transfers; stop early if a callback closed c. */
static void
client_check_done(struct http_client *c)
{
  CURLMsg *msg;
  struct call *call;
  CURLcode res;
  int left;

  for (;;) {
    if (c->closing)
      break;
    msg = curl_multi_info_read(c->multi, &left);
    if (msg == NULL)
      break;
    if (msg->msg != CURLMSG_DONE)
      continue;
    call = NULL;
    (void)curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &call);
    /* msg is invalid once the handle is removed: read it first. */
    res = msg->data.result;
    call_done(call, res);
  }
}

/* ---- retries and closing (the retry timer) ---- */

static void client_teardown(struct http_client *c);

static void
on_retry_timer(uv_timer_t *t)
{
  struct http_client *c = t->data;
  struct call *call;
  struct call *due;
  struct err e;
  uint64_t now;
  int rc;

  for (;;) {
    if (c->closing) {
      client_teardown(c);
      return;
    }
    now = uv_now(c->loop);
    due = NULL;
    for (call = c->waiting; call != NULL; call = call->next) {
      if (call->due <= now) {
        due = call;
        break;
      }
    }
    if (due == NULL)
      break;
    call_unlink(&c->waiting, due);
    err_clear(&e);
    rc = call_start(due, &e);
    if (rc < 0)
      call_finish(due, rc, &e); /* may close c */
  }
  client_arm_retry(c);
}

static void
client_arm_retry(struct http_client *c)
{
  struct call *call;
  uint64_t earliest = UINT64_MAX;
  uint64_t now;

  if (c->closing) {
    uv_timer_start(&c->retry_timer, on_retry_timer, 0, 0);
    return;
  }
  for (call = c->waiting; call != NULL; call = call->next)
    if (call->due < earliest)
      earliest = call->due;
  if (earliest == UINT64_MAX) {
    uv_timer_stop(&c->retry_timer);
    return;
  }
  now = uv_now(c->loop);
  uv_timer_start(&c->retry_timer, on_retry_timer,
                 earliest > now ? earliest - now : 0, 0);
}

/* Cancel every call, drop the connections and close the handles. */
static void
client_teardown(struct http_client *c)
{
  struct call *call;
  struct err e;

  while (c->active != NULL || c->waiting != NULL) {
    if (c->active != NULL) {
      call = c->active;
      call_unlink(&c->active, call);
      (void)curl_multi_remove_handle(c->multi, call->easy);
    } else {
      call = c->waiting;
      call_unlink(&c->waiting, call);
    }
    err_clear(&e);
    (void)err_set(&e, ERR_UNAVAILABLE, "http client: %s: client closed",
                  call->method);
    call_finish(call, ERR_UNAVAILABLE, &e);
  }
  /* Closes the cached connections; curl reports their sockets removed. */
  (void)curl_multi_cleanup(c->multi);
  c->multi = NULL;
  c->torn_down = true;
  while (c->socks != NULL)
    sock_close(c->socks);
  uv_close((uv_handle_t *)&c->curl_timer, on_timer_closed);
  uv_close((uv_handle_t *)&c->retry_timer, on_timer_closed);
}

/* ---- public API ---- */

int
http_client_new(uv_loop_t *loop, const struct http_client_config *cfg,
                struct http_client **out, struct err *e)
{
  struct http_client *c;
  unsigned max_host = 0;

  *out = NULL;
  c = xcalloc(1, sizeof(*c));
  c->multi = curl_multi_init();
  if (c->multi == NULL) {
    free(c);
    return err_set(e, ERR_NOMEM, "http client: cannot create a multi handle");
  }
  c->loop = loop;
  if (cfg != NULL) {
    max_host = cfg->max_host_connections;
    c->max_backoff_ms = cfg->max_backoff_ms;
    c->user_agent = xstrdup(cfg->user_agent);
    c->ca_file = xstrdup(cfg->ca_file);
    c->allow_insecure_tokens = cfg->allow_insecure_tokens;
  }
  if (max_host == 0)
    max_host = HTTP_CLIENT_DEFAULT_MAX_HOST_CONNECTIONS;
  if (c->max_backoff_ms == 0)
    c->max_backoff_ms = HTTP_CLIENT_DEFAULT_MAX_BACKOFF_MS;
  if (c->user_agent == NULL)
    c->user_agent = xstrdup("tenbin");
  c->rng = uv_hrtime() | 1u;

  (void)curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket);
  (void)curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
  (void)curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, on_curl_timeout);
  (void)curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
  (void)curl_multi_setopt(c->multi, CURLMOPT_MAX_HOST_CONNECTIONS,
                          (long)max_host);
  /* Keep every idle connection of a few hosts rather than curl's default
   * (4 per easy handle added), which shrinks as requests finish. */
  (void)curl_multi_setopt(c->multi, CURLMOPT_MAXCONNECTS,
                          (long)max_host * 4);

  uv_timer_init(loop, &c->curl_timer);
  uv_timer_init(loop, &c->retry_timer);
  c->curl_timer.data = c;
  c->retry_timer.data = c;
  c->handles = 2;
  *out = c;
  return 0;
}

/* Whether header line h ("Name: value") carries a credential. */
static bool
header_is_credential(const char *h)
{
  size_t n = strcspn(h, ":");
  size_t i;

  if (n == 13 && strncasecmp(h, "Authorization", 13) == 0)
    return true;
  for (i = 0; i + 5 <= n; i++)
    if (strncasecmp(h + i, "token", 5) == 0)
      return true;
  return false;
}

/*
 * Parse url as curl will, so that a bad one fails at send, unretried;
 * and refuse a credential that would go in clear to another machine.
 * The host is curl's own reading of the url, so that what is checked is
 * what curl connects to.
 */
static int
check_url(const char *url, bool credential, bool allow_insecure,
          struct err *e)
{
  CURLU *u = curl_url();
  char *scheme = NULL;
  char *host = NULL;
  CURLUcode uc;
  int rc = 0;

  if (u == NULL)
    return err_set(e, ERR_NOMEM, "http client: cannot parse a url");
  uc = curl_url_set(u, CURLUPART_URL, url, 0);
  if (uc == CURLUE_OK)
    uc = curl_url_get(u, CURLUPART_SCHEME, &scheme, 0);
  if (uc == CURLUE_OK)
    uc = curl_url_get(u, CURLUPART_HOST, &host, 0);
  if (uc != CURLUE_OK)
    rc = err_set(e, ERR_INVALID, "http client: url '%.*s': %s", 200, url,
                 curl_url_strerror(uc));
  else if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)
    rc = err_set(e, ERR_INVALID, "http client: url '%.*s': not http or https",
                 200, url);
  else if (credential && !allow_insecure && strcmp(scheme, "http") == 0 &&
           !secret_host_is_loopback(host))
    rc = err_set(e, ERR_FORBIDDEN, "http client: url '%.*s': a token is "
                 "not sent over plain http to '%.*s', which is not "
                 "loopback; use https", 200, url, 100, host);
  curl_free(host);
  curl_free(scheme);
  curl_url_cleanup(u);
  return rc;
}

static bool
method_is_token(const char *m)
{
  size_t n = strlen(m);
  size_t i;

  if (n == 0 || n > MAX_METHOD_LEN)
    return false;
  for (i = 0; i < n; i++)
    if (m[i] < 'A' || m[i] > 'Z')
      return false;
  return true;
}

static bool
method_is_idempotent(const char *m)
{
  return strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0 ||
         strcmp(m, "PUT") == 0 || strcmp(m, "DELETE") == 0 ||
         strcmp(m, "OPTIONS") == 0;
}

/* Check r and copy what it says into call (curl copies the strings). */
static int
call_setup(struct call *call, const struct http_client_request *r,
           struct err *e)
{
  struct http_client *c = call->c;
  const char *const *h;
  struct curl_slist *l;
  bool has_body;
  bool head;
  int rc;

  bool credential = false;

  if (r->url == NULL || r->url[0] == '\0')
    return err_set(e, ERR_INVALID, "http client: no url");
  for (h = r->headers; h != NULL && *h != NULL; h++)
    credential = credential || header_is_credential(*h);
  rc = check_url(r->url, credential, c->allow_insecure_tokens, e);
  if (rc < 0)
    return rc;
  if (r->body == NULL && r->body_len > 0)
    return err_set(e, ERR_INVALID, "http client: body length without body");
  snprintf(call->method, sizeof(call->method), "%s",
           r->method != NULL ? r->method : "GET");
  if (r->method != NULL && !method_is_token(r->method))
    return err_set(e, ERR_INVALID, "http client: method '%.*s': not a method",
                   32, r->method);
  head = strcmp(call->method, "HEAD") == 0;
  has_body = r->body_len > 0 || strcmp(call->method, "POST") == 0 ||
             strcmp(call->method, "PUT") == 0 ||
             strcmp(call->method, "PATCH") == 0;

  for (h = r->headers; h != NULL && *h != NULL; h++) {
    if (strpbrk(*h, "\r\n") != NULL || strchr(*h, ':') == NULL)
      return err_set(e, ERR_INVALID, "http client: header '%.*s': not one "
                     "'Name: value' line", 64, *h);
    l = curl_slist_append(call->headers, *h);
    if (l == NULL)
      return err_set(e, ERR_NOMEM, "http client: cannot copy headers");
    call->headers = l;
  }
  /* No "Expect: 100-continue" round trip before larger bodies. */
  l = curl_slist_append(call->headers, "Expect:");
  if (l == NULL)
    return err_set(e, ERR_NOMEM, "http client: cannot copy headers");
  call->headers = l;

  if (curl_easy_setopt(call->easy, CURLOPT_URL, r->url) != CURLE_OK ||
      curl_easy_setopt(call->easy, CURLOPT_PROTOCOLS_STR, "http,https") !=
          CURLE_OK)
    return err_set(e, ERR_INVALID, "http client: url '%s': not usable",
                   r->url);
  (void)curl_easy_setopt(call->easy, CURLOPT_PRIVATE, call);
  (void)curl_easy_setopt(call->easy, CURLOPT_NOSIGNAL, 1L);
  (void)curl_easy_setopt(call->easy, CURLOPT_ERRORBUFFER, call->errbuf);
  (void)curl_easy_setopt(call->easy, CURLOPT_WRITEFUNCTION, on_write);
  (void)curl_easy_setopt(call->easy, CURLOPT_WRITEDATA, call);
  (void)curl_easy_setopt(call->easy, CURLOPT_USERAGENT, c->user_agent);
  (void)curl_easy_setopt(call->easy, CURLOPT_HTTPHEADER, call->headers);
  (void)curl_easy_setopt(call->easy, CURLOPT_TCP_KEEPALIVE, 1L);
  /* curl's defaults, said out loud: an https peer proves who it is. */
  (void)curl_easy_setopt(call->easy, CURLOPT_SSL_VERIFYPEER, 1L);
  (void)curl_easy_setopt(call->easy, CURLOPT_SSL_VERIFYHOST, 2L);
  if (c->ca_file != NULL)
    (void)curl_easy_setopt(call->easy, CURLOPT_CAINFO, c->ca_file);
  (void)curl_easy_setopt(call->easy, CURLOPT_TIMEOUT_MS,
                         (long)(r->timeout_ms != 0
                                    ? r->timeout_ms
                                    : HTTP_CLIENT_DEFAULT_TIMEOUT_MS));
  (void)curl_easy_setopt(
      call->easy, CURLOPT_CONNECTTIMEOUT_MS,
      (long)(r->connect_timeout_ms != 0
                 ? r->connect_timeout_ms
                 : HTTP_CLIENT_DEFAULT_CONNECT_TIMEOUT_MS));
  if (r->max_recv_speed > 0)
    (void)curl_easy_setopt(call->easy, CURLOPT_MAX_RECV_SPEED_LARGE,
                           (curl_off_t)r->max_recv_speed);
  buf_init(&call->resp, r->max_response != 0
                            ? r->max_response
                            : HTTP_CLIENT_DEFAULT_MAX_RESPONSE);
  /* Fails early on a Content-Length over the cap. */
  (void)curl_easy_setopt(call->easy, CURLOPT_MAXFILESIZE_LARGE,
                         (curl_off_t)call->resp.max);

  if (head) {
    (void)curl_easy_setopt(call->easy, CURLOPT_NOBODY, 1L);
  } else if (has_body) {
    /* The size first: COPYPOSTFIELDS copies that many bytes. */
    (void)curl_easy_setopt(call->easy, CURLOPT_POSTFIELDSIZE_LARGE,
                           (curl_off_t)r->body_len);
    if (curl_easy_setopt(call->easy, CURLOPT_COPYPOSTFIELDS,
                         r->body_len > 0 ? r->body : "") != CURLE_OK)
      return err_set(e, ERR_NOMEM, "http client: cannot copy the body");
  }
  if (!head && !(strcmp(call->method, "GET") == 0 && !has_body) &&
      !(strcmp(call->method, "POST") == 0 && has_body))
    (void)curl_easy_setopt(call->easy, CURLOPT_CUSTOMREQUEST, call->method);

  call->max_attempts = r->max_attempts > 0 ? r->max_attempts : 1;
  call->backoff_ms =
      r->backoff_ms != 0 ? r->backoff_ms : HTTP_CLIENT_DEFAULT_BACKOFF_MS;
  call->retry_on_5xx = r->retry_on_5xx;
  call->repeatable = method_is_idempotent(call->method) || r->idempotent;
  return 0;
}

int
http_client_send(struct http_client *c, const struct http_client_request *r,
                 http_client_cb cb, void *arg, struct err *e)
{
  struct call *call;
  int rc;

  if (c->closing)
    return err_set(e, ERR_UNAVAILABLE, "http client: closed");
  if (cb == NULL)
    return err_set(e, ERR_INVALID, "http client: no callback");
  call = xcalloc(1, sizeof(*call));
  call->c = c;
  call->cb = cb;
  call->arg = arg;
  buf_init(&call->resp, 0);
  call->easy = curl_easy_init();
  if (call->easy == NULL) {
    rc = err_set(e, ERR_NOMEM, "http client: cannot create an easy handle");
    goto out;
  }
  rc = call_setup(call, r, e);
  if (rc < 0)
    goto out;
  rc = call_start(call, e);
  if (rc < 0)
    goto out;
  c->stats.requests++;
  c->stats.in_flight++;
  call = NULL;

out:
  if (call != NULL)
    call_free(call);
  return rc;
}

const char *
http_client_response_header(const struct http_client_response *resp,
                            const char *name)
{
  struct curl_header *h = NULL;

  if (resp == NULL || resp->easy_ == NULL)
    return NULL;
  if (curl_easy_header(resp->easy_, name, 0, CURLH_HEADER, -1, &h) !=
      CURLHE_OK)
    return NULL;
  if (h->amount > 1 &&
      curl_easy_header(resp->easy_, name, h->amount - 1, CURLH_HEADER, -1,
                       &h) != CURLHE_OK)
    return NULL;
  return h->value;
}

char *
http_client_response_take(const struct http_client_response *resp,
                          size_t *len)
{
  struct call *call = resp->call_;

  return buf_take(&call->resp, len);
}

void
http_client_stats(const struct http_client *c, struct http_client_stats *out)
{
  *out = c->stats;
}

void
http_client_close(struct http_client *c, void (*cb)(void *arg), void *arg)
{
  if (c->closing) {
    log_error("http client: closed twice");
    return;
  }
  c->closing = true;
  c->close_cb = cb;
  c->close_arg = arg;
  client_arm_retry(c);
}
