/*
 * Allocation policy (STYLE.md rule 7): small internal allocations abort on
 * out-of-memory, like redis' zmalloc, so callers need no NULL checks.
 * Anything sized by untrusted input goes through struct buf (buf.h), whose
 * cap turns into an error instead.
 *
 * xmalloc_try() is for the few allocations sized by a file the caller
 * did not write, where running out is an error to report, not a bug.
 */
#ifndef TENBIN_UTIL_ALLOC_H
#define TENBIN_UTIL_ALLOC_H

#include <stddef.h>

/* New memory, never NULL; free with free(). Abort on OOM. */
void *xmalloc(size_t size);
/* New zeroed memory for n * size bytes, never NULL; overflow aborts. */
void *xcalloc(size_t n, size_t size);
/* Resize p (steals p); never NULL. */
void *xrealloc(void *p, size_t size);
/* New copy of s (NULL gives NULL); free with free(). */
char *xstrdup(const char *s);
/* New copy of the first n bytes of s, NUL-terminated. */
char *xstrndup(const char *s, size_t n);
/* Like xmalloc but returns NULL on failure. */
void *xmalloc_try(size_t size);

#endif
