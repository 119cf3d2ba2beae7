/*
 * What the OAuth 2.0 token endpoints of Google and Microsoft answer (RFC
 * 6749 5.1 and 5.2), read the one way both sites use: the bearer token
 * and its lifetime, or the refusal's code and description.
 */
#ifndef TENBIN_ADAPTERS_OAUTH_H
#define TENBIN_ADAPTERS_OAUTH_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

/* Azure's tokens are JWTs of a few KiB. */
#define OAUTH_TOKEN_LEN 8192

/*
 * The access token into token and its lifetime into *expires_in_s
 * ("expires_in": a number, or a string of digits as Microsoft's v1
 * endpoint writes it).  An error answer ({"error", "error_description"})
 * is ERR_UNAUTHORIZED saying both; anything else unusable is ERR_SITE.
 * token is "" unless 0 is returned.
 */
int oauth_token_parse(const char *json, size_t len,
                      char token[OAUTH_TOKEN_LEN], int64_t *expires_in_s,
                      struct err *e) WARN_UNUSED;

#endif
