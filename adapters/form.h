/*
 * application/x-www-form-urlencoded bodies, the way the clouds' APIs
 * read them (EC2's Query API, the token endpoints): names and values
 * percent-encoded as SigV4 encodes (sigv4_uri_encode: a space is %20).
 */
#ifndef TENBIN_ADAPTERS_FORM_H
#define TENBIN_ADAPTERS_FORM_H

#include "util/buf.h"
#include "util/err.h"

/* "&name=value" appended to body (no '&' before the first field). */
int form_add(struct buf *body, const char *name, const char *value)
    WARN_UNUSED;
/* The same with a formatted value (at most 511 bytes). */
int form_addf(struct buf *body, const char *name, const char *fmt, ...)
    PRINTF_LIKE(3, 4) WARN_UNUSED;

#endif
