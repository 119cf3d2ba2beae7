/*
 * libcurl easy-interface client for tenbind.  curl_easy_reset() before
 * each call clears the previous call's options but keeps the handle's
 * connection cache, so consecutive calls ride one keep-alive connection.
 */
#include "cli/client.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/alloc.h"
#include "util/secret.h"

#ifndef TENBIN_VERSION
#define TENBIN_VERSION "0.1.0"
#endif

#define CONNECT_TIMEOUT_S 10L
/* A reply is at most a 1 MiB log chunk or a page of 1000 jobs. */
#define REQUEST_TIMEOUT_S 120L
#define MAX_URL 16384

/* What the callbacks of one call write into. */
struct call {
  struct cli_response *r;
  int too_large;
};

static size_t
on_body(char *data, size_t size, size_t nmemb, void *arg)
{
  struct call *call = arg;
  size_t n = size * nmemb;

  if (buf_add(&call->r->body, data, n) < 0) {
    /* Returning less than n makes curl abort with CURLE_WRITE_ERROR. */
    call->too_large = 1;
    return 0;
  }
  return n;
}

/* A header's integer value, or -1 when it is not a plain integer. */
static int64_t
header_int(const char *s, size_t n)
{
  char tmp[32];
  char *end = NULL;
  long long v;

  if (n == 0 || n >= sizeof(tmp) || s[0] < '0' || s[0] > '9')
    return -1;
  memcpy(tmp, s, n);
  tmp[n] = '\0';
  errno = 0;
  v = strtoll(tmp, &end, 10);
  if (errno != 0 || *end != '\0')
    return -1;
  return v;
}

static void
reset_headers(struct cli_response *r)
{
  r->replayed = 0;
  r->job_state[0] = '\0';
  r->log_offset = -1;
  r->log_next = -1;
  r->log_size = -1;
}

static int
header_is(const char *name, size_t n, const char *want)
{
  return strlen(want) == n && strncasecmp(name, want, n) == 0;
}

static size_t
on_header(char *data, size_t size, size_t nitems, void *arg)
{
  struct call *call = arg;
  struct cli_response *r = call->r;
  size_t len = size * nitems;
  const char *colon = memchr(data, ':', len);
  const char *v;
  const char *end = data + len;
  size_t nlen;

  /* A new status line (after "100 Continue") starts a new header set. */
  if (len >= 5 && strncmp(data, "HTTP/", 5) == 0) {
    reset_headers(r);
    return len;
  }
  if (colon == NULL)
    return len;
  nlen = (size_t)(colon - data);
  v = colon + 1;
  while (v < end && (*v == ' ' || *v == '\t'))
    v++;
  while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' ||
                     end[-1] == '\t'))
    end--;
  if (header_is(data, nlen, "X-Job-State")) {
    size_t n = (size_t)(end - v);

    if (n >= sizeof(r->job_state))
      n = sizeof(r->job_state) - 1;
    memcpy(r->job_state, v, n);
    r->job_state[n] = '\0';
  } else if (header_is(data, nlen, "X-Log-Offset")) {
    r->log_offset = header_int(v, (size_t)(end - v));
  } else if (header_is(data, nlen, "X-Log-Next-Offset")) {
    r->log_next = header_int(v, (size_t)(end - v));
  } else if (header_is(data, nlen, "X-Log-Size")) {
    r->log_size = header_int(v, (size_t)(end - v));
  } else if (header_is(data, nlen, "Idempotent-Replayed")) {
    r->replayed = (size_t)(end - v) == 4 && strncasecmp(v, "true", 4) == 0;
  }
  return len;
}

/*
 * A token goes over plain http only to loopback (as in http/client.h),
 * unless TENBIN_ALLOW_INSECURE_TOKEN=1: checked on curl's own reading of
 * the URL, before anything is sent.
 */
static int
check_token_transport(const char *server, struct err *e)
{
  const char *allow = getenv("TENBIN_ALLOW_INSECURE_TOKEN");
  CURLU *u = curl_url();
  char *scheme = NULL;
  char *host = NULL;
  int rc = 0;

  if (u == NULL)
    return err_set(e, ERR_NOMEM, "cannot parse the server URL");
  if (curl_url_set(u, CURLUPART_URL, server, 0) != CURLUE_OK ||
      curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
      curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK)
    rc = err_set(e, ERR_INVALID, "server '%.200s' is not a URL", server);
  else if (strcmp(scheme, "http") == 0 && !secret_host_is_loopback(host) &&
           (allow == NULL || strcmp(allow, "1") != 0))
    rc = err_set(e, ERR_FORBIDDEN, "refusing to send the token over plain "
                 "http to '%.100s', which is not loopback: use https:// "
                 "(or set TENBIN_ALLOW_INSECURE_TOKEN=1)", host);
  curl_free(host);
  curl_free(scheme);
  curl_url_cleanup(u);
  return rc;
}

int
cli_client_init(struct cli_client *c, const char *server, const char *token,
                const char *ca_file, struct err *e)
{
  size_t n = strlen(server);

  memset(c, 0, sizeof(*c));
  if (token != NULL)
    for (const char *p = token; *p != '\0'; p++)
      if ((unsigned char)*p < 0x20 || *p == 0x7f)
        return err_set(e, ERR_INVALID,
                       "token: control characters are not allowed");
  while (n > 0 && server[n - 1] == '/')
    n--;
  c->curl = curl_easy_init();
  if (c->curl == NULL)
    return err_set(e, ERR_INTERNAL, "cannot create a libcurl handle");
  c->server = xstrndup(server, n);
  c->token = xstrdup(token);
  c->ca_file = ca_file != NULL && ca_file[0] != '\0' ? xstrdup(ca_file) : NULL;
  if (token != NULL)
    return check_token_transport(c->server, e);
  c->timeout_s = REQUEST_TIMEOUT_S;
  return 0;
}

void
cli_client_release(struct cli_client *c)
{
  if (c == NULL)
    return;
  if (c->curl != NULL)
    curl_easy_cleanup(c->curl);
  free(c->server);
  free(c->token);
  free(c->ca_file);
  memset(c, 0, sizeof(*c));
}

void
cli_response_init(struct cli_response *r)
{
  r->status = 0;
  buf_init(&r->body, CLI_MAX_RESPONSE);
  reset_headers(r);
}

void
cli_response_release(struct cli_response *r)
{
  if (r == NULL)
    return;
  buf_release(&r->body);
  r->status = 0;
}

/* Header line "name: value" appended to *list (copied by curl). */
static void
add_header(struct curl_slist **list, const char *name, const char *value)
{
  char line[512];

  snprintf(line, sizeof(line), "%s: %s", name, value);
  *list = curl_slist_append(*list, line);
}

int
cli_client_call(struct cli_client *c, const char *method, const char *path,
                const struct buf *body, const char *idem_key,
                struct cli_response *r, struct err *e)
{
  struct curl_slist *headers = NULL;
  struct call call = {r, 0};
  struct buf url;
  char *auth = NULL;
  CURLcode cc;
  int rc = ERR_INTERNAL;

  buf_init(&url, MAX_URL);
  r->status = 0;
  buf_reset(&r->body);
  reset_headers(r);
  if (buf_adds(&url, c->server) < 0 || buf_adds(&url, path) < 0) {
    rc = err_set(e, ERR_INVALID, "request URL longer than %d bytes",
                 MAX_URL);
    goto out;
  }
  curl_easy_reset(c->curl);
  c->errbuf[0] = '\0';
  curl_easy_setopt(c->curl, CURLOPT_URL, buf_str(&url));
  curl_easy_setopt(c->curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, c->errbuf);
  curl_easy_setopt(c->curl, CURLOPT_USERAGENT, "tenbin/" TENBIN_VERSION);
  curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT_S);
  /* An https tenbind proves who it is, against --cacert when given (a
   * private CA), else the system's CAs. */
  curl_easy_setopt(c->curl, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(c->curl, CURLOPT_SSL_VERIFYHOST, 2L);
  if (c->ca_file != NULL)
    curl_easy_setopt(c->curl, CURLOPT_CAINFO, c->ca_file);
  curl_easy_setopt(c->curl, CURLOPT_TIMEOUT, c->timeout_s);
  curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &call);
  curl_easy_setopt(c->curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c->curl, CURLOPT_HEADERDATA, &call);

  headers = curl_slist_append(headers, "Accept: application/json");
  /* No "Expect: 100-continue" round trip for larger bodies. */
  headers = curl_slist_append(headers, "Expect:");
  if (c->token != NULL) {
    /* Built apart from add_header: a token may be longer than a line. */
    size_t n = strlen(c->token) + sizeof("Authorization: Bearer ");

    auth = xmalloc(n);
    snprintf(auth, n, "Authorization: Bearer %s", c->token);
    headers = curl_slist_append(headers, auth);
  }
  if (idem_key != NULL)
    add_header(&headers, "Idempotency-Key", idem_key);
  if (strcmp(method, "GET") == 0) {
    curl_easy_setopt(c->curl, CURLOPT_HTTPGET, 1L);
  } else {
    curl_easy_setopt(c->curl, CURLOPT_POST, 1L);
    curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS,
                     body != NULL ? buf_str(body) : "");
    curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE,
                     (curl_off_t)(body != NULL ? body->len : 0));
    if (strcmp(method, "POST") != 0)
      curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, method);
    /* Without a body, send no type: curl's default would be a form. */
    headers = curl_slist_append(headers, body != NULL
                                             ? "Content-Type: application/json"
                                             : "Content-Type:");
  }
  curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, headers);

  cc = curl_easy_perform(c->curl);
  if (call.too_large) {
    rc = err_set(e, ERR_TOO_LARGE,
                 "reply of tenbind at %s is larger than %zu MiB", c->server,
                 CLI_MAX_RESPONSE >> 20);
    goto out;
  }
  if (cc != CURLE_OK) {
    rc = err_set(e, ERR_UNAVAILABLE, "cannot reach tenbind at %s: %s",
                 c->server,
                 c->errbuf[0] != '\0' ? c->errbuf : curl_easy_strerror(cc));
    goto out;
  }
  curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &r->status);
  rc = 0;
out:
  curl_slist_free_all(headers);
  free(auth);
  buf_release(&url);
  return rc;
}

static int
status_code(long status)
{
  switch (status) {
  case 401:
    return ERR_UNAUTHORIZED;
  case 403:
    return ERR_FORBIDDEN;
  case 404:
    return ERR_NOT_FOUND;
  case 405:
    return ERR_METHOD;
  case 409:
    return ERR_CONFLICT;
  case 413:
    return ERR_TOO_LARGE;
  case 422:
    return ERR_UNPROCESSABLE;
  }
  return status >= 500 ? ERR_UNAVAILABLE : ERR_INVALID;
}

int
cli_response_check(const struct cli_response *r, struct err *e)
{
  json_t *v;
  const char *msg;
  const char *text = buf_str(&r->body);
  int code = status_code(r->status);

  if (r->status >= 200 && r->status < 300)
    return 0;
  v = json_loadb(r->body.data != NULL ? r->body.data : "", r->body.len, 0,
                 NULL);
  msg = json_string_value(
      json_object_get(json_object_get(v, "error"), "message"));
  if (msg != NULL)
    err_set(e, code, "%s (HTTP %ld)", msg, r->status);
  else if (text[0] != '\0')
    /* Not our error format (a proxy?): its first line says the most. */
    err_set(e, code, "%.*s (HTTP %ld)", (int)strcspn(text, "\r\n"), text,
            r->status);
  else
    err_set(e, code, "request failed (HTTP %ld)", r->status);
  json_decref(v);
  return code;
}

int
cli_response_json(const struct cli_response *r, json_t **out, struct err *e)
{
  json_error_t jerr;
  json_t *v;

  v = json_loadb(r->body.data != NULL ? r->body.data : "", r->body.len, 0,
                 &jerr);
  if (v == NULL || !json_is_object(v)) {
    json_decref(v);
    return err_set(e, ERR_INVALID, "reply of tenbind is not a JSON object");
  }
  *out = v;
  return 0;
}
