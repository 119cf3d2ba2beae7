/*
 * Allocation policy (STYLE.md rule 7): small internal allocations abort on
 * out-of-memory, like redis' zmalloc, so callers need no NULL checks.
 * Anything sized by untrusted input goes through struct buf (buf.h), whose
 * cap turns into an error instead.
 *
 * alloc_fail_after() is a test hook: the Nth next allocation through
 * xmalloc_try() fails, so OOM paths that can recover are testable.
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
/* Like xmalloc but returns NULL on failure (or when the test hook fires). */
void *xmalloc_try(size_t size);
/* Test hook: make the nth next xmalloc_try() fail (0 disables). */
void alloc_fail_after(unsigned n);

#endif
