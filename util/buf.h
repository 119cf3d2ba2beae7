/*
 * A growable byte buffer with a hard cap (curl's dynbuf).
 *
 * Everything whose size a client or a remote site controls (request
 * bodies, adapter replies, log chunks) is accumulated in a struct buf, so
 * an oversized input becomes ERR_TOO_LARGE instead of unbounded memory.
 * The contents are always NUL-terminated (the NUL is not counted in len),
 * so text can be used as a C string directly.
 *
 *   struct buf b;
 *   buf_init(&b, 1 << 20);
 *   if (buf_add(&b, data, n) < 0) ... ERR_TOO_LARGE
 *   char *s = buf_take(&b, &len);   // caller now owns s, b is reset
 *   buf_release(&b);
 */
#ifndef TENBIN_UTIL_BUF_H
#define TENBIN_UTIL_BUF_H

#include <stddef.h>

#include "err.h"

struct buf {
  char *data;  /* NULL until the first add; NUL-terminated after */
  size_t len;  /* bytes used, not counting the terminating NUL */
  size_t cap;  /* bytes allocated */
  size_t max;  /* len may never exceed this */
};

/* Set up an empty buffer that may hold at most max bytes. */
void buf_init(struct buf *b, size_t max);
/* Free the contents (NULL-safe); b is empty and reusable after. */
void buf_release(struct buf *b);
/* Empty b but keep its allocation. */
void buf_reset(struct buf *b);
/* Make room for extra more bytes, so that appending them allocates
 * nothing; ERR_TOO_LARGE past max, b unchanged then. */
int buf_grow(struct buf *b, size_t extra) WARN_UNUSED;
/* Append n bytes (copies); ERR_TOO_LARGE past max, b unchanged then. */
int buf_add(struct buf *b, const void *data, size_t n) WARN_UNUSED;
/* Append a C string (copies). */
int buf_adds(struct buf *b, const char *s) WARN_UNUSED;
/* Append formatted text (copies). */
int buf_addf(struct buf *b, const char *fmt, ...) PRINTF_LIKE(2, 3)
    WARN_UNUSED;
/*
 * Hand the contents to the caller (new: free with free()); b is reset to
 * empty.  Never NULL: an empty buffer yields "".  *len_out may be NULL.
 */
char *buf_take(struct buf *b, size_t *len_out);
/* The contents as a C string (borrowed; "" when empty). */
const char *buf_str(const struct buf *b);

#endif
