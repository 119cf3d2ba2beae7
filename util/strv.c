/*
 * NULL-terminated string vectors.  Each push reallocates: the vectors
 * are short (a command line, a job's environment) and built once.
 */
#include "strv.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"

size_t
strv_len(char *const *v)
{
  size_t n = 0;

  if (v == NULL)
    return 0;
  while (v[n] != NULL)
    n++;
  return n;
}

void
strv_free(char **v)
{
  size_t i;

  if (v == NULL)
    return;
  for (i = 0; v[i] != NULL; i++)
    free(v[i]);
  free(v);
}

char **
strv_dup(char *const *v)
{
  size_t n = strv_len(v);
  size_t i;
  char **out;

  if (v == NULL)
    return NULL;
  out = xcalloc(n + 1, sizeof(*out));
  for (i = 0; i < n; i++)
    out[i] = xstrdup(v[i]);
  return out;
}

void
strv_push(char ***v, const char *s)
{
  size_t n = strv_len(*v);

  *v = xrealloc(*v, (n + 2) * sizeof(**v));
  (*v)[n] = xstrdup(s);
  (*v)[n + 1] = NULL;
}

int
strv_contains(char *const *v, const char *s)
{
  size_t i;

  for (i = 0; v != NULL && v[i] != NULL; i++) {
    if (strcmp(v[i], s) == 0)
      return 1;
  }
  return 0;
}
