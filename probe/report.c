/*
 * HTTP between the probe and tenbind with libcurl's easy API: the NCCL
 * rendezvous (measure.c) and the report.  Blocking is right here: the
 * probe is a batch job with nothing else to do while it waits.
 *
 * The bearer token is a secret of the run: it goes into one header and
 * never into a message, a log line or the document.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe/probe.h"
#include "util/buf.h"
#include "util/timeutil.h"

#define MAX_URL 2048
#define MAX_TOKEN 4096

static size_t
write_cb(char *data, size_t size, size_t nmemb, void *arg)
{
  struct buf *b = arg;
  size_t n = size * nmemb;

  /* Returning less than n makes curl stop with CURLE_WRITE_ERROR; the
   * caller tells a full buffer from other errors by b->len. */
  if (buf_add(b, data, n) < 0)
    return 0;
  return n;
}

/* A header value must not carry a line break (header injection). */
static int
token_ok(const char *token)
{
  size_t n = strlen(token);

  if (n == 0 || n > MAX_TOKEN)
    return 0;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)token[i] < 0x20 || token[i] == 0x7f)
      return 0;
  return 1;
}

int
probe_http(const char *method, const char *base, const char *path,
           const char *token, const char *body, long timeout_s,
           size_t max_resp, long *status, char **resp, struct err *e)
{
  CURL *c = NULL;
  struct curl_slist *hdrs = NULL;
  struct buf auth, out;
  char url[MAX_URL];
  size_t blen = strlen(base);
  CURLcode cc;
  int rc = ERR_INVALID;
  int n;

  buf_init(&auth, MAX_TOKEN + 64);
  buf_init(&out, max_resp);
  *status = 0;
  /* base may end in '/'; the paths start with one. */
  while (blen > 0 && base[blen - 1] == '/')
    blen--;
  n = snprintf(url, sizeof(url), "%.*s%s", (int)blen, base, path);
  if (n < 0 || (size_t)n >= sizeof(url)) {
    err_set(e, ERR_INVALID, "probe URL longer than %d bytes", MAX_URL);
    goto out;
  }
  if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) {
    err_set(e, ERR_INVALID, "probe URL '%.100s' is not http or https",
            url);
    goto out;
  }
  if (token != NULL && !token_ok(token)) {
    err_set(e, ERR_INVALID, "TENBIN_PROBE_TOKEN is empty, too long or has "
            "control characters");
    goto out;
  }
  c = curl_easy_init();
  if (c == NULL) {
    rc = err_set(e, ERR_NOMEM, "curl_easy_init failed");
    goto out;
  }
  if (token != NULL) {
    if (buf_addf(&auth, "Authorization: Bearer %s", token) < 0)
      goto out;
    hdrs = curl_slist_append(hdrs, buf_str(&auth));
  }
  if (body != NULL)
    hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
  /* No "Expect: 100-continue" round trip for a small body. */
  hdrs = curl_slist_append(hdrs, "Expect:");
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout_s);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, timeout_s < 10 ? timeout_s
                                                             : 10L);
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_cb);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &out);
  curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)max_resp);
  if (body != NULL) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
                     (curl_off_t)strlen(body));
  } else if (strcmp(method, "GET") == 0) {
    curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  }
  cc = curl_easy_perform(c);
  if (cc == CURLE_WRITE_ERROR || cc == CURLE_FILESIZE_EXCEEDED) {
    rc = err_set(e, ERR_TOO_LARGE, "%s %s: response larger than %zu bytes",
                 method, path, max_resp);
    goto out;
  }
  if (cc != CURLE_OK) {
    rc = err_set(e, ERR_UNAVAILABLE, "%s %s: %s", method, path,
                 curl_easy_strerror(cc));
    goto out;
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
  if (resp != NULL)
    *resp = buf_take(&out, NULL);
  rc = 0;
out:
  curl_slist_free_all(hdrs);
  if (c != NULL)
    curl_easy_cleanup(c);
  /* The header held the token: clear it before the memory goes back. */
  if (auth.data != NULL)
    memset(auth.data, 0, auth.len);
  buf_release(&auth);
  buf_release(&out);
  return rc;
}

int
probe_report(const char *base, const char *token, const char *doc,
             int attempts, long backoff_ms, struct err *e)
{
  long status = 0;
  int rc = ERR_UNAVAILABLE;

  for (int i = 0; i < attempts; i++) {
    if (i > 0) {
      time_sleep_ms(backoff_ms);
      backoff_ms *= 2;
    }
    rc = probe_http("POST", base, "/report", token, doc, 30, 4096, &status,
                    NULL, e);
    if (rc == ERR_UNAVAILABLE)
      continue; /* no answer: tenbind may be restarting */
    if (rc < 0)
      return rc;
    if (status >= 200 && status < 300)
      return 0;
    rc = err_set(e, ERR_SITE, "POST /report: tenbind answered %ld", status);
    if (status < 500)
      return rc; /* a 4xx will not change on a retry */
  }
  if (e != NULL)
    err_prefix(e, "after %d tries", attempts);
  return rc;
}
