/*
 * Capped growable buffer.
 */
#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

void
buf_init(struct buf *b, size_t max)
{
  b->data = NULL;
  b->len = 0;
  b->cap = 0;
  b->max = max;
}

void
buf_release(struct buf *b)
{
  if (b == NULL)
    return;
  free(b->data);
  b->data = NULL;
  b->len = 0;
  b->cap = 0;
}

void
buf_reset(struct buf *b)
{
  b->len = 0;
  if (b->data != NULL)
    b->data[0] = '\0';
}

int
buf_grow(struct buf *b, size_t extra)
{
  size_t need;
  size_t cap;

  if (extra > b->max || b->len > b->max - extra)
    return ERR_TOO_LARGE;
  need = b->len + extra + 1;
  if (need <= b->cap)
    return 0;
  cap = b->cap ? b->cap : 64;
  while (cap < need)
    cap *= 2;
  b->data = xrealloc(b->data, cap);
  b->cap = cap;
  b->data[b->len] = '\0';
  return 0;
}

int
buf_add(struct buf *b, const void *data, size_t n)
{
  int rc = buf_grow(b, n);

  if (rc < 0)
    return rc;
  if (n > 0)
    memcpy(b->data + b->len, data, n);
  b->len += n;
  b->data[b->len] = '\0';
  return 0;
}

int
buf_adds(struct buf *b, const char *s)
{
  return buf_add(b, s, strlen(s));
}

int
buf_addf(struct buf *b, const char *fmt, ...)
{
  va_list ap;
  int n;
  int rc;

  va_start(ap, fmt);
  n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0)
    return ERR_INTERNAL;
  rc = buf_grow(b, (size_t)n);
  if (rc < 0)
    return rc;
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
  return 0;
}

char *
buf_take(struct buf *b, size_t *len_out)
{
  char *p = b->data;

  if (len_out != NULL)
    *len_out = b->len;
  if (p == NULL)
    p = xstrdup("");
  b->data = NULL;
  b->len = 0;
  b->cap = 0;
  return p;
}

const char *
buf_str(const struct buf *b)
{
  return b->data != NULL ? b->data : "";
}
