/*
 * AWS Signature Version 4 (sigv4.h), as the algorithm is documented:
 *
 *   CanonicalRequest = Method \n CanonicalURI \n CanonicalQuery \n
 *                      CanonicalHeaders \n SignedHeaders \n Hex(SHA256(body))
 *   StringToSign     = "AWS4-HMAC-SHA256" \n AmzDate \n Scope \n
 *                      Hex(SHA256(CanonicalRequest))
 *   Scope            = YYYYMMDD/region/service/aws4_request
 *   SigningKey       = HMAC(HMAC(HMAC(HMAC("AWS4" secret, YYYYMMDD),
 *                      region), service), "aws4_request")
 */
#include "adapters/sigv4.h"

#include <ctype.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/alloc.h"
#include "util/hash.h"

/* More headers than a request of ours signs is a caller's mistake. */
#define SIGV4_MAX_HEADERS 16

void
sigv4_date(int64_t ms, char out[SIGV4_DATE_LEN])
{
  time_t secs = (time_t)(ms / 1000);
  struct tm tm;

  gmtime_r(&secs, &tm);
  strftime(out, SIGV4_DATE_LEN, "%Y%m%dT%H%M%SZ", &tm);
}

static int
unreserved(unsigned char c)
{
  return isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~';
}

/* s URI-encoded, '/' kept when keep_slash. */
static int
encode(struct buf *out, const char *s, int keep_slash)
{
  int rc = 0;

  for (const unsigned char *p = (const unsigned char *)s; rc == 0 && *p;
       p++) {
    if (unreserved(*p) || (keep_slash && *p == '/'))
      rc = buf_add(out, p, 1);
    else
      rc = buf_addf(out, "%%%02X", *p);
  }
  return rc;
}

int
sigv4_uri_encode(struct buf *out, const char *s)
{
  return encode(out, s, 0);
}

static int
cmp_str(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The query's pairs sorted by name, then value: comparing "name=value"
 * strings whole would put "a-b=1" before "a=1" ('-' < '='), so they are
 * compared with the '=' as the lowest byte. */
static int
cmp_pair(const void *a, const void *b)
{
  const unsigned char *x = *(const unsigned char *const *)a;
  const unsigned char *y = *(const unsigned char *const *)b;

  for (;; x++, y++) {
    int cx = *x == '=' ? 1 : *x, cy = *y == '=' ? 1 : *y;

    if (cx != cy || cx == 0)
      return cx - cy;
  }
}

static int
canonical_query(const char *query, struct buf *out)
{
  char *copy, *pairs[256], *save = NULL;
  size_t n = 0;
  int rc = 0;

  if (query == NULL || query[0] == '\0')
    return 0;
  copy = xstrdup(query);
  for (char *p = strtok_r(copy, "&", &save); p != NULL;
       p = strtok_r(NULL, "&", &save)) {
    if (n == sizeof(pairs) / sizeof(pairs[0])) {
      rc = ERR_TOO_LARGE;
      goto out;
    }
    pairs[n++] = p;
  }
  qsort(pairs, n, sizeof(pairs[0]), cmp_pair);
  for (size_t i = 0; rc == 0 && i < n; i++) {
    rc = buf_addf(out, "%s%s%s", i ? "&" : "", pairs[i],
                  strchr(pairs[i], '=') ? "" : "=");
  }
out:
  free(copy);
  return rc;
}

/* "name:value" of h, the name in lower case and the value trimmed with
 * its runs of spaces squeezed; new (free()). */
static char *
header_line(const struct sigv4_header *h)
{
  struct buf b;
  const char *v = h->value;
  int space = 0;

  buf_init(&b, 64 * 1024);
  for (const char *p = h->name; *p; p++) {
    char c = (char)tolower((unsigned char)*p);

    if (buf_add(&b, &c, 1) < 0)
      goto fail;
  }
  if (buf_adds(&b, ":") < 0)
    goto fail;
  while (*v == ' ' || *v == '\t')
    v++;
  for (; *v; v++) {
    if (*v == ' ' || *v == '\t') {
      space = 1;
      continue;
    }
    if ((space && buf_adds(&b, " ") < 0) || buf_add(&b, v, 1) < 0)
      goto fail;
    space = 0;
  }
  return buf_take(&b, NULL);
fail:
  buf_release(&b);
  return NULL;
}

/* The canonical headers block and the signed headers list. */
static int
canonical_headers(const struct sigv4_request *r, struct buf *lines,
                  struct buf *names)
{
  char *hl[SIGV4_MAX_HEADERS];
  size_t n = 0;
  int rc = 0;

  if (r->nheaders > SIGV4_MAX_HEADERS)
    return ERR_TOO_LARGE;
  for (; n < r->nheaders; n++) {
    hl[n] = header_line(&r->headers[n]);
    if (hl[n] == NULL) {
      rc = ERR_NOMEM;
      goto out;
    }
  }
  qsort(hl, n, sizeof(hl[0]), cmp_str);
  for (size_t i = 0; rc == 0 && i < n; i++) {
    rc = buf_addf(lines, "%s\n", hl[i]);
    if (rc == 0)
      rc = buf_addf(names, "%s%.*s", i ? ";" : "",
                    (int)(strchr(hl[i], ':') - hl[i]), hl[i]);
  }
out:
  for (size_t i = 0; i < n; i++)
    free(hl[i]);
  return rc;
}

/* The canonical request of r into out, and its signed headers into
 * names. */
static int
canonical(const struct sigv4_request *r, struct buf *out, struct buf *names)
{
  struct buf lines;
  char body_hash[65];
  int rc;

  buf_init(&lines, 64 * 1024);
  hash_sha256_hex(r->body != NULL ? r->body : "", r->body_len, body_hash);
  rc = buf_addf(out, "%s\n", r->method);
  if (rc == 0)
    rc = encode(out, r->path, 1);
  if (rc == 0)
    rc = buf_adds(out, "\n");
  if (rc == 0)
    rc = canonical_query(r->query, out);
  if (rc == 0)
    rc = canonical_headers(r, &lines, names);
  if (rc == 0)
    rc = buf_addf(out, "\n%s\n%s\n%s", buf_str(&lines), buf_str(names),
                  body_hash);
  buf_release(&lines);
  return rc;
}

int
sigv4_canonical_request(const struct sigv4_request *r, struct buf *out)
{
  struct buf names;
  int rc;

  buf_init(&names, 4096);
  rc = canonical(r, out, &names);
  buf_release(&names);
  return rc;
}

int
sigv4_string_to_sign(const char *creq, const char *amz_date,
                     const struct sigv4_key *k, struct buf *out)
{
  char hash[65];

  hash_sha256_hex(creq, strlen(creq), hash);
  return buf_addf(out, "AWS4-HMAC-SHA256\n%s\n%.8s/%s/%s/aws4_request\n%s",
                  amz_date, amz_date, k->region, k->service, hash);
}

static void
hmac(const void *key, size_t keylen, const char *msg, unsigned char out[32])
{
  unsigned int len = 32;

  HMAC(EVP_sha256(), key, (int)keylen, (const unsigned char *)msg,
       strlen(msg), out, &len);
}

int
sigv4_authorization(const struct sigv4_request *r, const struct sigv4_key *k,
                    const char *amz_date, struct buf *out)
{
  struct buf creq, sts, names;
  unsigned char key[32], sig[32];
  char day[9], hex[65];
  char *secret;
  size_t slen = strlen(k->secret_key) + 5;
  int rc;

  buf_init(&creq, 1 << 20);
  buf_init(&sts, 4096);
  buf_init(&names, 4096);
  snprintf(day, sizeof(day), "%.8s", amz_date);
  secret = xmalloc(slen);
  snprintf(secret, slen, "AWS4%s", k->secret_key);
  hmac(secret, strlen(secret), day, key);
  OPENSSL_cleanse(secret, slen);
  free(secret);
  hmac(key, sizeof(key), k->region, key);
  hmac(key, sizeof(key), k->service, key);
  hmac(key, sizeof(key), "aws4_request", key);
  rc = canonical(r, &creq, &names);
  if (rc == 0)
    rc = sigv4_string_to_sign(buf_str(&creq), amz_date, k, &sts);
  if (rc < 0)
    goto out;
  hmac(key, sizeof(key), buf_str(&sts), sig);
  hash_hex(sig, sizeof(sig), hex);
  rc = buf_addf(out, "AWS4-HMAC-SHA256 Credential=%s/%s/%s/%s/aws4_request, "
                "SignedHeaders=%s, Signature=%s", k->access_key, day,
                k->region, k->service, buf_str(&names), hex);
out:
  OPENSSL_cleanse(key, sizeof(key));
  buf_release(&creq);
  buf_release(&sts);
  buf_release(&names);
  return rc;
}
