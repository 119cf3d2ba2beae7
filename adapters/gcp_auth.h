/*
 * Google's OAuth 2.0 service-account flow, the way the gcp site gets the
 * bearer token it calls Compute Engine with: the key file read, a JWT
 * signed with RS256 (OpenSSL) and the token request's body.  No I/O: the
 * site sends the body to the key's token_uri.
 */
#ifndef TENBIN_ADAPTERS_GCP_AUTH_H
#define TENBIN_ADAPTERS_GCP_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "util/err.h"

#define GCP_SCOPE "https://www.googleapis.com/auth/cloud-platform"
/* Google refuses a JWT that lives longer than an hour. */
#define GCP_JWT_TTL_S 3600

struct gcp_key;

/*
 * Read a service-account key file's JSON text into *out (new; free with
 * gcp_key_free): "type" must be "service_account", and "client_email",
 * "private_key" (an RSA key in PEM), "private_key_id", "token_uri" (an
 * http or https URL) and "project_id" present.  ERR_INVALID naming the
 * field otherwise; the key's text is never in a message.
 */
int gcp_key_load(const char *json, size_t len, struct gcp_key **out,
                 struct err *e) WARN_UNUSED;
void gcp_key_free(struct gcp_key *k);
/* The key's token_uri and project_id (borrowed). */
const char *gcp_key_token_uri(const struct gcp_key *k);
const char *gcp_key_project(const struct gcp_key *k);

/* The token request's form body for a JWT asserted at now_s (seconds
 * since the epoch), valid GCP_JWT_TTL_S, for scope, appended to out. */
int gcp_token_request(const struct gcp_key *k, int64_t now_s,
                      const char *scope, struct buf *out, struct err *e)
    WARN_UNUSED;
/* The signed JWT alone (what the body asserts), appended to out. */
int gcp_jwt(const struct gcp_key *k, int64_t now_s, const char *scope,
            struct buf *out, struct err *e) WARN_UNUSED;

/* The token answer is read by oauth_token_parse (oauth.h). */

#endif
