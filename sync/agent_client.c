/*
 * tenbind's client of a tenbin-agent (agent_client.h): requests built
 * from the contract in docs/SYNC.md, answers parsed strictly enough that
 * a wrong answer is an error naming the agent, leniently enough that a
 * counter the agent leaves out (a version already held answers without
 * progress counters) reads 0.
 *
 * Each request carries its own context (the callback, the kind of answer
 * it expects and the agent's URL for messages), so nothing in flight
 * points at the struct agentc.
 */
#include "sync/agent_client.h"

#include <ctype.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/router.h"
#include "util/alloc.h"
#include "util/jsonx.h"

#define NAME_MAX_LEN 64
/* An answer this client reads is a small JSON object; a version list of
 * a dataset with thousands of versions is still well under this. */
#define ANSWER_MAX ((size_t)8 << 20)

struct agentc {
  struct http_client *hc;  /* borrowed */
  char *url;               /* without a trailing '/' */
  char *token;
  char *auth;              /* "Authorization: Bearer TOKEN" */
};

enum answer_kind {
  ANSWER_VERSION,
  ANSWER_VERSIONS,
  ANSWER_PULL,
  ANSWER_HEALTH
};

/* One request in flight; freed after its callback. */
struct agentc_req {
  enum answer_kind kind;
  char *url;               /* the agent's, for messages */
  union {
    agentc_version_cb version;
    agentc_versions_cb versions;
    agentc_pull_cb pull;
    agentc_health_cb health;
  } cb;
  void *arg;
};

int
agentc_valid_name(const char *name)
{
  size_t i;

  if (name == NULL || !isalnum((unsigned char)name[0]))
    return 0;
  for (i = 1; name[i] != '\0'; i++) {
    unsigned char c = (unsigned char)name[i];

    if (i >= NAME_MAX_LEN ||
        !(isalnum(c) || c == '.' || c == '_' || c == '-'))
      return 0;
  }
  return 1;
}

int
agentc_valid_version(const char *version)
{
  size_t i;

  if (version == NULL)
    return 0;
  for (i = 0; version[i] != '\0'; i++) {
    char c = version[i];

    if (i >= AGENTC_VERSION_HEX ||
        !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return 0;
  }
  return i == AGENTC_VERSION_HEX;
}

int
agentc_transient(int rc)
{
  if (rc == ERR_UNAVAILABLE || rc == ERR_TIMEOUT)
    return 1;
  return rc < 0 && err_http_status(rc) >= 500;
}

/* A header value must stay one line of visible text. */
static int
valid_token(const char *t)
{
  size_t n = t != NULL ? strlen(t) : 0;

  if (n == 0 || n > AGENTC_TOKEN_MAX)
    return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)t[i];

    if (c < 0x21 || c == 0x7f)
      return 0;
  }
  return 1;
}

int
agentc_new(struct http_client *hc, const char *url, const char *token,
           struct agentc **out, struct err *e)
{
  struct agentc *c;
  size_t n;

  *out = NULL;
  if (url == NULL || (strncmp(url, "http://", 7) != 0 &&
                      strncmp(url, "https://", 8) != 0))
    return err_set(e, ERR_INVALID, "agent url '%.100s': must start with "
                   "http:// or https://", url != NULL ? url : "");
  n = strlen(url);
  while (n > 0 && url[n - 1] == '/')
    n--;
  if (n > AGENTC_URL_MAX || n <= strlen("https://") - 1)
    return err_set(e, ERR_INVALID, "agent url '%.100s': must be a URL of "
                   "at most %d bytes", url, AGENTC_URL_MAX);
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)url[i];

    if (ch <= 0x20 || ch == 0x7f)
      return err_set(e, ERR_INVALID, "agent url '%.100s': must not hold "
                     "spaces or control characters", url);
  }
  if (!valid_token(token))
    return err_set(e, ERR_INVALID, "agent token: must be 1 to %d visible "
                   "characters without spaces", AGENTC_TOKEN_MAX);
  c = xcalloc(1, sizeof(*c));
  c->hc = hc;
  c->url = xstrndup(url, n);
  c->token = xstrdup(token);
  c->auth = xmalloc(strlen(token) + 32);
  snprintf(c->auth, strlen(token) + 32, "Authorization: Bearer %s", token);
  *out = c;
  return 0;
}

void
agentc_free(struct agentc *c)
{
  if (c == NULL)
    return;
  free(c->url);
  free(c->token);
  free(c->auth);
  free(c);
}

const char *
agentc_url(const struct agentc *c)
{
  return c->url;
}

const char *
agentc_token(const struct agentc *c)
{
  return c->token;
}

/* ---- answers ---- */

/* Read a non-negative integer member; 0 when absent or null. */
static int
counter(const json_t *o, const char *key, int64_t *out, const char *url,
        struct err *e)
{
  const json_t *v = json_object_get(o, key);

  *out = 0;
  if (v == NULL || json_is_null(v))
    return 0;
  if (!json_is_integer(v) || json_integer_value(v) < 0)
    return err_set(e, ERR_SITE, "agent %s: field '%s' must be a "
                   "non-negative integer", url, key);
  *out = (int64_t)json_integer_value(v);
  return 0;
}

/* A string member that may be absent or null. */
static int
opt_string(const json_t *o, const char *key, const char **out,
           const char *url, struct err *e)
{
  const json_t *v = json_object_get(o, key);

  *out = NULL;
  if (v == NULL || json_is_null(v))
    return 0;
  if (!json_is_string(v))
    return err_set(e, ERR_SITE, "agent %s: field '%s' must be a string",
                   url, key);
  *out = json_string_value(v);
  return 0;
}

static int
version_id(const json_t *o, char *out, const char *url, struct err *e)
{
  const char *v = jsonx_str(o, "version");

  if (!agentc_valid_version(v))
    return err_set(e, ERR_SITE, "agent %s: field 'version' must be 64 "
                   "lowercase hex digits", url);
  memcpy(out, v, AGENTC_VERSION_HEX + 1);
  return 0;
}

static int
parse_version(const json_t *o, struct agentc_version *v, const char *url,
              struct err *e)
{
  int rc;

  memset(v, 0, sizeof(*v));
  if (!json_is_object(o))
    return err_set(e, ERR_SITE, "agent %s: a version must be an object",
                   url);
  rc = version_id(o, v->version, url, e);
  if (rc == 0)
    rc = counter(o, "files", &v->files, url, e);
  if (rc == 0)
    rc = counter(o, "dirs", &v->dirs, url, e);
  if (rc == 0)
    rc = counter(o, "links", &v->links, url, e);
  if (rc == 0)
    rc = counter(o, "bytes", &v->bytes, url, e);
  if (rc == 0)
    rc = opt_string(o, "path", &v->path, url, e);
  v->source = jsonx_bool(o, "source", 0);
  return rc;
}

static int
parse_pull(const json_t *o, struct agentc_pull *p, const char *url,
           struct err *e)
{
  static const char *const keys[] = {
      "files_total", "files_done", "bytes_total", "bytes_done",
      "bytes_wire",  "bytes_saved", "bytes_linked", "retries"};
  int64_t *const dst[] = {
      &p->files_total, &p->files_done, &p->bytes_total, &p->bytes_done,
      &p->bytes_wire,  &p->bytes_saved, &p->bytes_linked, &p->retries};
  const char *state = jsonx_str(o, "state");
  int rc;

  memset(p, 0, sizeof(*p));
  if (state != NULL && strcmp(state, "running") == 0)
    p->state = AGENTC_PULL_RUNNING;
  else if (state != NULL && strcmp(state, "complete") == 0)
    p->state = AGENTC_PULL_COMPLETE;
  else if (state != NULL && strcmp(state, "failed") == 0)
    p->state = AGENTC_PULL_FAILED;
  else
    return err_set(e, ERR_SITE, "agent %s: field 'state' must be "
                   "running, complete or failed", url);
  rc = version_id(o, p->version, url, e);
  for (size_t i = 0; rc == 0 && i < sizeof(keys) / sizeof(keys[0]); i++)
    rc = counter(o, keys[i], dst[i], url, e);
  if (rc == 0)
    rc = opt_string(o, "path", &p->path, url, e);
  if (rc == 0)
    rc = opt_string(o, "error", &p->error, url, e);
  if (rc == 0 && p->state == AGENTC_PULL_COMPLETE && p->path == NULL)
    rc = err_set(e, ERR_SITE, "agent %s: a complete pull must have a "
                 "'path'", url);
  if (rc == 0 && p->state == AGENTC_PULL_FAILED && p->error == NULL)
    p->error = "the agent gave no reason";
  return rc;
}

/*
 * The error of a non-2xx answer: the agent's own code and message when
 * the body is the contract's error object, else ERR_SITE with the
 * status.  A code this build does not know is ERR_SITE naming the
 * agent.
 */
static int
answer_error(const struct http_client_response *resp, const char *url,
             struct err *e)
{
  struct err got;
  int code = http_error_parse(resp->body, resp->len, &got);

  if (code == 0)
    return err_set(e, ERR_SITE, "agent %s answered HTTP %d", url,
                   resp->status);
  if (code == ERR_SITE)
    return err_set(e, ERR_SITE, "agent %s: %s", url, got.msg);
  return err_set(e, code, "%s", got.msg);
}

static void
deliver_error(struct agentc_req *r, int rc, const struct err *e)
{
  switch (r->kind) {
  case ANSWER_VERSION:
    r->cb.version(r->arg, rc, NULL, e);
    break;
  case ANSWER_VERSIONS:
    r->cb.versions(r->arg, rc, NULL, 0, e);
    break;
  case ANSWER_PULL:
    r->cb.pull(r->arg, rc, NULL, e);
    break;
  case ANSWER_HEALTH:
    r->cb.health(r->arg, rc, e);
    break;
  }
}

static int
deliver_versions(struct agentc_req *r, const json_t *body, struct err *e)
{
  const json_t *list = json_object_get(body, "versions");
  struct agentc_version *v;
  size_t n = json_array_size(list);
  int rc = 0;

  if (!json_is_array(list))
    return err_set(e, ERR_SITE, "agent %s: field 'versions' must be an "
                   "array", r->url);
  v = xcalloc(n > 0 ? n : 1, sizeof(*v));
  for (size_t i = 0; rc == 0 && i < n; i++) {
    rc = parse_version(json_array_get(list, i), &v[i], r->url, e);
    if (rc < 0)
      err_prefix(e, "versions[%zu]", i);
  }
  if (rc == 0)
    r->cb.versions(r->arg, 0, v, n, NULL);
  free(v);
  return rc;
}

/* Parse a 2xx answer and hand it over; < 0 (e set) when it does not
 * follow the contract, and then nothing was delivered. */
static int
deliver(struct agentc_req *r, const struct http_client_response *resp,
        struct err *e)
{
  struct agentc_version v;
  struct agentc_pull p;
  struct err pe = {0};
  json_t *body = NULL;
  int rc;

  rc = jsonx_parse_object(resp->body, resp->len, &body, &pe);
  if (rc < 0) {
    rc = err_set(e, ERR_SITE, "agent %s: answer is not a JSON object: %s",
                 r->url, pe.msg);
    goto out;
  }
  switch (r->kind) {
  case ANSWER_VERSION:
    rc = parse_version(body, &v, r->url, e);
    if (rc < 0)
      break;
    v.existed = resp->status == 200;
    r->cb.version(r->arg, 0, &v, NULL);
    break;
  case ANSWER_VERSIONS:
    rc = deliver_versions(r, body, e);
    break;
  case ANSWER_PULL:
    rc = parse_pull(body, &p, r->url, e);
    if (rc < 0)
      break;
    p.http_status = resp->status;
    r->cb.pull(r->arg, 0, &p, NULL);
    break;
  case ANSWER_HEALTH:
    if (!jsonx_bool(body, "ok", 0)) {
      rc = err_set(e, ERR_SITE, "agent %s: /healthz does not say ok",
                   r->url);
      break;
    }
    r->cb.health(r->arg, 0, NULL);
    break;
  }
out:
  json_decref(body);
  return rc;
}

static void
on_answer(void *arg, int rc, const struct http_client_response *resp,
          const struct err *he)
{
  struct agentc_req *r = arg;
  struct err e = {0};

  if (rc < 0) {
    err_set(&e, rc, "agent %s: %s", r->url, err_msg(he));
    deliver_error(r, rc, &e);
  } else if (resp->status < 200 || resp->status > 299) {
    rc = answer_error(resp, r->url, &e);
    deliver_error(r, rc, &e);
  } else if (deliver(r, resp, &e) < 0) {
    deliver_error(r, e.code, &e);
  }
  free(r->url);
  free(r);
}

/* Send method path (body may be NULL) for r, which is freed on failure. */
static int
send_req(struct agentc *c, const char *method, const char *path,
         const char *body, unsigned timeout_ms, struct agentc_req *r,
         struct err *e)
{
  const char *headers[3] = {c->auth, NULL, NULL};
  struct http_client_request hr;
  char *url;
  size_t n;
  int rc;

  if (c->hc == NULL) {
    free(r);
    return err_set(e, ERR_INTERNAL, "agent %s: client without http",
                   c->url);
  }
  memset(&hr, 0, sizeof(hr));
  n = strlen(c->url) + strlen(path) + 1;
  url = xmalloc(n);
  snprintf(url, n, "%s%s", c->url, path);
  if (body != NULL)
    headers[1] = "Content-Type: application/json";
  hr.method = method;
  hr.url = url;
  hr.headers = headers;
  hr.body = body;
  hr.body_len = body != NULL ? strlen(body) : 0;
  hr.timeout_ms = timeout_ms;
  hr.max_response = ANSWER_MAX;
  r->url = xstrdup(c->url);
  rc = http_client_send(c->hc, &hr, on_answer, r, e);
  free(url);
  if (rc < 0) {
    err_prefix(e, "agent %s", c->url);
    free(r->url);
    free(r);
  }
  return rc;
}

static int
check_name(const char *name, struct err *e)
{
  if (!agentc_valid_name(name))
    return err_set(e, ERR_INVALID, "dataset name '%.64s': must match "
                   "[A-Za-z0-9][A-Za-z0-9._-]{0,63}", name ? name : "");
  return 0;
}

static int
check_version(const char *version, struct err *e)
{
  if (!agentc_valid_version(version))
    return err_set(e, ERR_INVALID, "version '%.70s': must be 64 lowercase "
                   "hex digits", version ? version : "");
  return 0;
}

int
agentc_publish(struct agentc *c, const char *name, const char *path,
               agentc_version_cb cb, void *arg, struct err *e)
{
  struct agentc_req *r;
  char p[NAME_MAX_LEN + 32];
  json_t *body;
  char *text;
  int rc;

  rc = check_name(name, e);
  if (rc < 0)
    return rc;
  if (path == NULL || path[0] == '\0')
    return err_set(e, ERR_INVALID, "publish of '%s': no path", name);
  r = xcalloc(1, sizeof(*r));
  r->kind = ANSWER_VERSION;
  r->cb.version = cb;
  r->arg = arg;
  snprintf(p, sizeof(p), "/v1/datasets/%s/versions", name);
  body = json_pack("{s:s}", "path", path);
  text = jsonx_dump(body);
  json_decref(body);
  rc = send_req(c, "POST", p, text, AGENTC_PUBLISH_TIMEOUT_MS, r, e);
  free(text);
  return rc;
}

int
agentc_versions(struct agentc *c, const char *name, agentc_versions_cb cb,
                void *arg, struct err *e)
{
  struct agentc_req *r;
  char p[NAME_MAX_LEN + 32];
  int rc;

  rc = check_name(name, e);
  if (rc < 0)
    return rc;
  r = xcalloc(1, sizeof(*r));
  r->kind = ANSWER_VERSIONS;
  r->cb.versions = cb;
  r->arg = arg;
  snprintf(p, sizeof(p), "/v1/datasets/%s/versions", name);
  return send_req(c, "GET", p, NULL, AGENTC_TIMEOUT_MS, r, e);
}

static int
pull_path(const char *name, const char *version, char *out, size_t outlen,
          struct err *e)
{
  int rc = check_name(name, e);

  if (rc == 0)
    rc = check_version(version, e);
  if (rc == 0)
    snprintf(out, outlen, "/v1/datasets/%s/pulls/%s", name, version);
  return rc;
}

int
agentc_pull_put(struct agentc *c, const char *name, const char *version,
                const char *src_url, const char *src_token, uint64_t bwlimit,
                agentc_pull_cb cb, void *arg, struct err *e)
{
  struct agentc_req *r;
  char p[NAME_MAX_LEN + AGENTC_VERSION_HEX + 32];
  json_t *body;
  char *text;
  int rc;

  rc = pull_path(name, version, p, sizeof(p), e);
  if (rc < 0)
    return rc;
  if (src_url == NULL || src_token == NULL)
    return err_set(e, ERR_INVALID, "pull of '%s': no source url or token",
                   name);
  r = xcalloc(1, sizeof(*r));
  r->kind = ANSWER_PULL;
  r->cb.pull = cb;
  r->arg = arg;
  body = json_pack("{s:{s:s, s:s}}", "source", "url", src_url, "token",
                   src_token);
  if (bwlimit > 0)
    json_object_set_new(body, "bwlimit", json_integer((json_int_t)bwlimit));
  text = jsonx_dump(body);
  json_decref(body);
  rc = send_req(c, "PUT", p, text, AGENTC_TIMEOUT_MS, r, e);
  free(text);
  return rc;
}

int
agentc_pull_get(struct agentc *c, const char *name, const char *version,
                agentc_pull_cb cb, void *arg, struct err *e)
{
  struct agentc_req *r;
  char p[NAME_MAX_LEN + AGENTC_VERSION_HEX + 32];
  int rc;

  rc = pull_path(name, version, p, sizeof(p), e);
  if (rc < 0)
    return rc;
  r = xcalloc(1, sizeof(*r));
  r->kind = ANSWER_PULL;
  r->cb.pull = cb;
  r->arg = arg;
  return send_req(c, "GET", p, NULL, AGENTC_TIMEOUT_MS, r, e);
}

int
agentc_health(struct agentc *c, agentc_health_cb cb, void *arg,
              struct err *e)
{
  struct agentc_req *r = xcalloc(1, sizeof(*r));

  r->kind = ANSWER_HEALTH;
  r->cb.health = cb;
  r->arg = arg;
  return send_req(c, "GET", "/healthz", NULL, AGENTC_HEALTH_TIMEOUT_MS, r,
                  e);
}
