/*
 * Form bodies (form.h).
 */
#include "adapters/form.h"

#include <stdarg.h>
#include <stdio.h>

#include "adapters/sigv4.h"

int
form_add(struct buf *body, const char *name, const char *value)
{
  int rc = body->len > 0 ? buf_adds(body, "&") : 0;

  if (rc == 0)
    rc = sigv4_uri_encode(body, name);
  if (rc == 0)
    rc = buf_adds(body, "=");
  if (rc == 0)
    rc = sigv4_uri_encode(body, value);
  return rc;
}

int
form_addf(struct buf *body, const char *name, const char *fmt, ...)
{
  char value[512];
  va_list ap;
  int n;

  va_start(ap, fmt);
  n = vsnprintf(value, sizeof(value), fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof(value))
    return ERR_TOO_LARGE;
  return form_add(body, name, value);
}
