/*
 * AWS Signature Version 4: the Authorization header of a request to an
 * AWS API (EC2's Query API, the pricing API), from the request and a key.
 * Pure but for OpenSSL's SHA-256 and HMAC; checked against the official
 * test suite (tests/data/sigv4).
 *
 * What a caller gives is what goes on the wire: the path unencoded (it is
 * encoded here, '/' kept; not normalized, which no API tenbin calls
 * needs), the query as name=value pairs each already encoded with
 * sigv4_uri_encode, every header to sign (host and x-amz-date at least,
 * content-type with a body, x-amz-security-token with session
 * credentials), each name once, and the body.
 */
#ifndef TENBIN_ADAPTERS_SIGV4_H
#define TENBIN_ADAPTERS_SIGV4_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

/* "20150830T123600Z" and its NUL */
#define SIGV4_DATE_LEN 17

struct sigv4_header {
  const char *name;   /* any case */
  const char *value;  /* trimmed and its spaces squeezed when signed */
};

struct sigv4_request {
  const char *method;                  /* "GET", "POST" */
  const char *path;                    /* "/", unencoded */
  const char *query;                   /* "a=1&b=2" encoded, or NULL */
  const struct sigv4_header *headers;  /* borrowed */
  size_t nheaders;
  const void *body;                    /* may be NULL when body_len is 0 */
  size_t body_len;
};

struct sigv4_key {
  const char *access_key;
  const char *secret_key;
  const char *region;                  /* "us-east-1" */
  const char *service;                 /* "ec2" */
};

/* The x-amz-date of ms since the epoch, UTC. */
void sigv4_date(int64_t ms, char out[SIGV4_DATE_LEN]);
/* s URI-encoded as SigV4 wants (every byte but A-Z a-z 0-9 - _ . ~ as
 * %XX, upper case) appended to out. */
int sigv4_uri_encode(struct buf *out, const char *s) WARN_UNUSED;
/* The canonical request of r appended to out. */
int sigv4_canonical_request(const struct sigv4_request *r, struct buf *out)
    WARN_UNUSED;
/* The string to sign of canonical request creq at amz_date appended to
 * out. */
int sigv4_string_to_sign(const char *creq, const char *amz_date,
                         const struct sigv4_key *k, struct buf *out)
    WARN_UNUSED;
/* The Authorization header value of r signed with k at amz_date (which r's
 * x-amz-date header must say) appended to out. */
int sigv4_authorization(const struct sigv4_request *r,
                        const struct sigv4_key *k, const char *amz_date,
                        struct buf *out) WARN_UNUSED;

#endif
