/*
 * xmalloc and friends: allocate or abort.
 */
#include "alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
alloc_oom(size_t size)
{
  fprintf(stderr, "fatal: out of memory allocating %zu bytes\n", size);
  abort();
}

void *
xmalloc(size_t size)
{
  void *p = malloc(size ? size : 1);

  if (p == NULL)
    alloc_oom(size);
  return p;
}

void *
xcalloc(size_t n, size_t size)
{
  void *p;

  if (size != 0 && n > (size_t)-1 / size)
    alloc_oom((size_t)-1);
  p = calloc(n ? n : 1, size ? size : 1);
  if (p == NULL)
    alloc_oom(n * size);
  return p;
}

void *
xrealloc(void *p, size_t size)
{
  void *q = realloc(p, size ? size : 1);

  if (q == NULL)
    alloc_oom(size);
  return q;
}

char *
xstrdup(const char *s)
{
  if (s == NULL)
    return NULL;
  return xstrndup(s, strlen(s));
}

char *
xstrndup(const char *s, size_t n)
{
  char *p = xmalloc(n + 1);

  memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

void *
xmalloc_try(size_t size)
{
  return malloc(size ? size : 1);
}
