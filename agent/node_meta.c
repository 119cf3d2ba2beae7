/*
 * The node agent's watch on its cloud's metadata service: whether the
 * provider has announced the end of this (spot) VM.  docs/NODES.md
 * "Spot interruption" has the three contracts:
 *
 *   aws    IMDSv2: PUT /latest/api/token for a session token, then
 *          GET /latest/meta-data/spot/instance-action (404: nothing)
 *   gcp    GET /computeMetadata/v1/instance/preempted: TRUE or FALSE
 *   azure  GET /metadata/scheduledevents: a Preempt event for this VM
 *          (its name read once from /metadata/instance/compute/name)
 *
 * One request at a time, every poll_ms.  Every answer is outside input:
 * bodies are capped, parsed strictly, and the notice handed on is cut
 * and made printable.  A service that does not answer is logged once at
 * warn, then at debug: polling goes on.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agent/node.h"
#include "http/client.h"
#include "util/alloc.h"
#include "util/jsonx.h"
#include "util/log.h"
#include "util/timeutil.h"

#define DEFAULT_POLL_MS 2000u
/* A request to a link-local service that takes longer is not coming. */
#define META_TIMEOUT_MS 2000u
#define META_BODY_MAX (64u << 10)
/* IMDSv2 session tokens are about 56 characters. */
#define AWS_TOKEN_MAX 512
#define AWS_TOKEN_TTL_S 21600
/* Asked again a minute before AWS would refuse it. */
#define AWS_TOKEN_RENEW_MS ((AWS_TOKEN_TTL_S - 60) * 1000LL)
#define AZURE_NAME_MAX 128
/* Scheduled events listed for one VM are a handful. */
#define AZURE_EVENTS_MAX 256
#define AZURE_RESOURCES_MAX 1024

enum meta_step {
  STEP_NONE = 0,
  STEP_AWS_TOKEN,
  STEP_AWS_ACTION,
  STEP_GCP_PREEMPTED,
  STEP_AZURE_NAME,
  STEP_AZURE_EVENTS
};

struct node_meta {
  uv_loop_t *loop;
  struct http_client *client;
  enum node_provider provider;
  char *base;              /* no trailing '/' */
  unsigned poll_ms;
  uv_timer_t timer;
  node_meta_fn fn;
  void *fn_arg;
  enum meta_step step;     /* the request in flight, or STEP_NONE */
  char token[AWS_TOKEN_MAX + 1]; /* aws: "" when none */
  int64_t token_ms;        /* aws: monotonic time it was had */
  char vm_name[AZURE_NAME_MAX + 1]; /* azure: "" until known */
  int name_tries;          /* azure: the name is asked this often, no more */
  struct node_interruption last; /* what fn was told last */
  int told;
  int warned;              /* a failure has been logged at warn */
  int closing;
  int parts;               /* the timer and the client, until closed */
  void (*close_cb)(void *arg);
  void *close_arg;
};

/* ---- parsing ---- */

/* Copy at most n bytes of src (up to a NUL) into dst (cap bytes with
 * the NUL), printable ASCII only: the notice travels in JSON and in
 * logs, and the service is not ours. */
static void
copy_words(char *dst, size_t cap, const char *src, size_t n)
{
  size_t o = 0;

  for (size_t i = 0; i < n && src[i] != '\0' && o + 1 < cap; i++) {
    unsigned char ch = (unsigned char)src[i];

    dst[o++] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
  }
  dst[o] = '\0';
}

/* Append "text" to the notice, cut at its cap. */
static void
notice_add(struct node_interruption *out, const char *text)
{
  size_t used = strlen(out->notice);

  copy_words(out->notice + used, sizeof(out->notice) - used, text,
             strlen(text));
}

static void
interruption_init(struct node_interruption *out, enum node_provider p)
{
  memset(out, 0, sizeof(*out));
  out->provider = p;
}

int
node_meta_parse_aws(const char *body, size_t len,
                    struct node_interruption *out)
{
  json_t *obj = NULL;
  const char *action;
  const char *when;
  int64_t ms = 0;
  struct err pe = {0};
  int rc;

  rc = jsonx_parse_object(body, len, &obj, &pe);
  if (rc < 0)
    return ERR_INVALID;
  action = jsonx_str(obj, "action");
  when = jsonx_str(obj, "time");
  if (action == NULL || action[0] == '\0') {
    rc = ERR_INVALID;
    goto out;
  }
  /* A time we cannot read still leaves the notice: the end is then
   * unknown, which the protocol allows. */
  if (when != NULL && (time_parse_iso(when, &ms) < 0 || ms < 0))
    ms = 0;
  interruption_init(out, NODE_PROVIDER_AWS);
  notice_add(out, "spot/instance-action: ");
  notice_add(out, action);
  if (when != NULL) {
    notice_add(out, " at ");
    notice_add(out, when);
  }
  out->ends_ms = ms;
  rc = 1;
out:
  json_decref(obj);
  return rc;
}

int
node_meta_parse_gcp(const char *body, size_t len,
                    struct node_interruption *out)
{
  size_t b = 0;
  size_t e = len;

  while (b < e && isspace((unsigned char)body[b]))
    b++;
  while (e > b && isspace((unsigned char)body[e - 1]))
    e--;
  if (e - b == 5 && memcmp(body + b, "FALSE", 5) == 0)
    return 0;
  if (e - b != 4 || memcmp(body + b, "TRUE", 4) != 0)
    return ERR_INVALID;
  interruption_init(out, NODE_PROVIDER_GCP);
  notice_add(out, "instance/preempted: TRUE");
  return 1;
}

/*
 * An RFC 1123 date, "Mon, 19 Sep 2016 18:29:47 GMT", as Azure writes
 * NotBefore, into ms; ERR_INVALID otherwise, a day the month does not
 * have included.  Rewritten as ISO 8601 for the one date parser.
 */
static int
parse_rfc1123(const char *s, int64_t *ms)
{
  static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
  static const int mdays[12] = {31, 28, 31, 30, 31, 30,
                                31, 31, 30, 31, 30, 31};
  int month;
  int leap;
  char wday[4];
  char mon[4];
  char iso[32];
  int day;
  int year;
  int hh;
  int mm;
  int ss;
  int used = 0;
  const char *m;

  if (strlen(s) > 40 ||
      sscanf(s, "%3[A-Za-z], %2d %3[A-Za-z] %4d %2d:%2d:%2d GMT%n", wday,
             &day, mon, &year, &hh, &mm, &ss, &used) != 7 ||
      used == 0 || s[used] != '\0' || strlen(mon) != 3)
    return ERR_INVALID;
  m = strstr(months, mon);
  if (m == NULL || (m - months) % 3 != 0)
    return ERR_INVALID;
  month = (int)((m - months) / 3);
  leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  if (day < 1 || day > mdays[month] + (month == 1 && leap))
    return ERR_INVALID;
  snprintf(iso, sizeof(iso), "%04d-%02d-%02dT%02d:%02d:%02dZ", year,
           month + 1, day, hh, mm, ss);
  return time_parse_iso(iso, ms);
}

/* Whether the event's Resources (absent, or an array of VM names)
 * include vm_name; an empty list means every VM of the set. */
static int
event_is_ours(const json_t *ev, const char *vm_name, int *ok)
{
  json_t *res = json_object_get(ev, "Resources");
  size_t i;
  json_t *v;

  *ok = 1;
  if (res == NULL || json_is_null(res))
    return 1;
  if (!json_is_array(res) || json_array_size(res) > AZURE_RESOURCES_MAX) {
    *ok = 0;
    return 0;
  }
  if (json_array_size(res) == 0)
    return 1;
  json_array_foreach(res, i, v) {
    if (!json_is_string(v)) {
      *ok = 0;
      return 0;
    }
    /* Azure's names ignore case. */
    if (vm_name != NULL && vm_name[0] != '\0' &&
        strcasecmp(json_string_value(v), vm_name) == 0)
      return 1;
  }
  return 0;
}

int
node_meta_parse_azure(const char *body, size_t len, const char *vm_name,
                      struct node_interruption *out)
{
  json_t *obj = NULL;
  json_t *events;
  json_t *ev;
  size_t i;
  int rc;

  if (jsonx_parse_object(body, len, &obj, NULL) < 0)
    return ERR_INVALID;
  events = json_object_get(obj, "Events");
  rc = 0;
  if (events == NULL || json_is_null(events))
    goto out;
  if (!json_is_array(events) || json_array_size(events) > AZURE_EVENTS_MAX) {
    rc = ERR_INVALID;
    goto out;
  }
  json_array_foreach(events, i, ev) {
    const char *type;
    const char *id;
    const char *nb;
    const char *desc;
    int64_t ms = 0;
    int ok;

    if (!json_is_object(ev)) {
      rc = ERR_INVALID;
      goto out;
    }
    type = jsonx_str(ev, "EventType");
    if (type == NULL || strcmp(type, "Preempt") != 0)
      continue;
    if (!event_is_ours(ev, vm_name, &ok)) {
      if (!ok) {
        rc = ERR_INVALID;
        goto out;
      }
      continue;
    }
    id = jsonx_str(ev, "EventId");
    nb = jsonx_str(ev, "NotBefore");
    desc = jsonx_str(ev, "Description");
    /* NotBefore is "" until the platform has set it. */
    if (nb != NULL && nb[0] != '\0' && parse_rfc1123(nb, &ms) < 0)
      ms = 0;
    interruption_init(out, NODE_PROVIDER_AZURE);
    notice_add(out, "scheduledevents: Preempt");
    if (id != NULL) {
      notice_add(out, " ");
      notice_add(out, id);
    }
    if (nb != NULL && nb[0] != '\0') {
      notice_add(out, " not before ");
      notice_add(out, nb);
    }
    if (desc != NULL && desc[0] != '\0') {
      notice_add(out, ": ");
      notice_add(out, desc);
    }
    /* An end before 1970 is no end anyone can mean. */
    out->ends_ms = ms > 0 ? ms : 0;
    rc = 1;
    goto out;
  }
out:
  json_decref(obj);
  return rc;
}

/* ---- polling ---- */

static void poll_step(struct node_meta *m);

static void
meta_failed(struct node_meta *m, const char *what, const char *why)
{
  if (!m->warned) {
    m->warned = 1;
    log_warn("node: %s metadata %s: %s (polling goes on; spot "
             "interruptions are not seen while it fails)",
             node_provider_name(m->provider), what, why);
  } else {
    log_debug("node: %s metadata %s: %s", node_provider_name(m->provider),
              what, why);
  }
}

static void
meta_saw(struct node_meta *m, const struct node_interruption *i)
{
  if (m->told && strcmp(m->last.notice, i->notice) == 0 &&
      m->last.ends_ms == i->ends_ms)
    return;
  m->last = *i;
  m->told = 1;
  m->fn(m->fn_arg, i);
}

static void maybe_free(struct node_meta *m);

/* What an answer with status st and body b means at m's step. */
static void
meta_answer(struct node_meta *m, enum meta_step step, int st,
            const char *b, size_t len)
{
  struct node_interruption i;
  char why[64];
  int rc = 0;

  snprintf(why, sizeof(why), "answered %d", st);
  switch (step) {
  case STEP_AWS_TOKEN:
    if (st != 200 || len == 0 || len > AWS_TOKEN_MAX) {
      meta_failed(m, "session token", why);
      return;
    }
    for (size_t k = 0; k < len; k++) {
      /* It goes back in a header: nothing but visible ASCII. */
      if ((unsigned char)b[k] <= 0x20 || (unsigned char)b[k] >= 0x7f) {
        meta_failed(m, "session token", "not a token");
        return;
      }
    }
    memcpy(m->token, b, len);
    m->token[len] = '\0';
    m->token_ms = time_mono_ms();
    /* The question itself right away, not a poll later. */
    poll_step(m);
    return;
  case STEP_AWS_ACTION:
    if (st == 404)
      return;
    if (st == 401) {
      m->token[0] = '\0';
      return;
    }
    if (st == 200)
      rc = node_meta_parse_aws(b, len, &i);
    break;
  case STEP_GCP_PREEMPTED:
    if (st == 200)
      rc = node_meta_parse_gcp(b, len, &i);
    break;
  case STEP_AZURE_NAME:
    m->name_tries++;
    if (st == 200 && len > 0 && len <= AZURE_NAME_MAX) {
      copy_words(m->vm_name, sizeof(m->vm_name), b, len);
      poll_step(m);
      return;
    }
    meta_failed(m, "compute/name", why);
    return;
  case STEP_AZURE_EVENTS:
    if (st == 200)
      rc = node_meta_parse_azure(b, len, m->vm_name, &i);
    break;
  default:
    return;
  }
  if (st != 200) {
    meta_failed(m, "poll", why);
  } else if (rc < 0) {
    meta_failed(m, "poll", "an answer that cannot be read");
  } else if (rc == 1) {
    meta_saw(m, &i);
  }
}

static void
on_meta_answer(void *arg, int rc, const struct http_client_response *resp,
               const struct err *e)
{
  struct node_meta *m = arg;
  enum meta_step step = m->step;

  m->step = STEP_NONE;
  if (m->closing) {
    maybe_free(m);
    return;
  }
  if (rc < 0) {
    meta_failed(m, "request", err_msg(e));
    return;
  }
  meta_answer(m, step, resp->status, resp->body, resp->len);
}

/* Send the request of step: path under base, with one header. */
static void
meta_send(struct node_meta *m, enum meta_step step, const char *method,
          const char *path, const char *header)
{
  struct http_client_request r;
  const char *headers[2] = {header, NULL};
  struct err e = {0};
  char *url;
  size_t n = strlen(m->base) + strlen(path) + 1;

  url = xmalloc(n);
  snprintf(url, n, "%s%s", m->base, path);
  memset(&r, 0, sizeof(r));
  r.method = method;
  r.url = url;
  r.headers = headers;
  r.timeout_ms = META_TIMEOUT_MS;
  r.connect_timeout_ms = META_TIMEOUT_MS;
  r.max_response = META_BODY_MAX;
  if (http_client_send(m->client, &r, on_meta_answer, m, &e) < 0)
    meta_failed(m, "request", err_msg(&e));
  else
    m->step = step;
  free(url);
}

static void
poll_step(struct node_meta *m)
{
  char h[AWS_TOKEN_MAX + 64];

  if (m->closing || m->step != STEP_NONE)
    return;
  switch (m->provider) {
  case NODE_PROVIDER_AWS:
    if (m->token[0] == '\0' ||
        time_mono_ms() - m->token_ms > AWS_TOKEN_RENEW_MS) {
      snprintf(h, sizeof(h), "X-aws-ec2-metadata-token-ttl-seconds: %d",
               AWS_TOKEN_TTL_S);
      meta_send(m, STEP_AWS_TOKEN, "PUT", "/latest/api/token", h);
    } else {
      snprintf(h, sizeof(h), "X-aws-ec2-metadata-token: %s", m->token);
      meta_send(m, STEP_AWS_ACTION, "GET",
                "/latest/meta-data/spot/instance-action", h);
    }
    break;
  case NODE_PROVIDER_GCP:
    meta_send(m, STEP_GCP_PREEMPTED, "GET",
              "/computeMetadata/v1/instance/preempted",
              "Metadata-Flavor: Google");
    break;
  case NODE_PROVIDER_AZURE:
    /* Without its name, only events for the whole set are ours. */
    if (m->vm_name[0] == '\0' && m->name_tries < 3)
      meta_send(m, STEP_AZURE_NAME, "GET",
                "/metadata/instance/compute/name?api-version=2021-02-01"
                "&format=text",
                "Metadata: true");
    else
      meta_send(m, STEP_AZURE_EVENTS, "GET",
                "/metadata/scheduledevents?api-version=2020-07-01",
                "Metadata: true");
    break;
  default:
    break;
  }
}

static void
on_poll(uv_timer_t *t)
{
  poll_step(t->data);
}

int
node_meta_start(uv_loop_t *loop, enum node_provider provider,
                const char *base_url, unsigned poll_ms, node_meta_fn fn,
                void *arg, struct node_meta **out, struct err *e)
{
  struct http_client_config cc;
  struct node_meta *m;
  const char *base = base_url;
  size_t n;
  int rc;

  if (provider == NODE_PROVIDER_NONE || fn == NULL)
    return err_set(e, ERR_INTERNAL, "metadata poller needs a provider");
  if (base == NULL)
    base = provider == NODE_PROVIDER_GCP ? "http://metadata.google.internal"
                                         : "http://169.254.169.254";
  m = xcalloc(1, sizeof(*m));
  m->loop = loop;
  m->provider = provider;
  m->poll_ms = poll_ms > 0 ? poll_ms : DEFAULT_POLL_MS;
  m->fn = fn;
  m->fn_arg = arg;
  m->base = xstrdup(base);
  n = strlen(m->base);
  while (n > 0 && m->base[n - 1] == '/')
    m->base[--n] = '\0';
  memset(&cc, 0, sizeof(cc));
  cc.max_host_connections = 1;
  /* The service is link-local plain http by design; nothing here is
   * tenbin's secret. */
  cc.allow_insecure_tokens = true;
  rc = http_client_new(loop, &cc, &m->client, e);
  if (rc < 0) {
    free(m->base);
    free(m);
    return rc;
  }
  uv_timer_init(loop, &m->timer);
  m->timer.data = m;
  m->parts = 2;
  uv_timer_start(&m->timer, on_poll, 0, m->poll_ms);
  *out = m;
  return 0;
}

static void
maybe_free(struct node_meta *m)
{
  void (*cb)(void *arg) = m->close_cb;
  void *arg = m->close_arg;

  if (!m->closing || m->parts > 0 || m->step != STEP_NONE)
    return;
  free(m->base);
  free(m);
  if (cb != NULL)
    cb(arg);
}

static void
on_part_closed(void *arg)
{
  struct node_meta *m = arg;

  m->parts--;
  maybe_free(m);
}

static void
on_timer_closed(uv_handle_t *h)
{
  on_part_closed(h->data);
}

void
node_meta_close(struct node_meta *m, void (*cb)(void *arg), void *arg)
{
  m->closing = 1;
  m->close_cb = cb;
  m->close_arg = arg;
  uv_close((uv_handle_t *)&m->timer, on_timer_closed);
  /* A request in flight ends (ERR_UNAVAILABLE) before the client's
   * close callback runs. */
  http_client_close(m->client, on_part_closed, m);
}
