/*
 * Large buffers kept for reuse.
 *
 * A buffer of a MiB or more is its own mapping: freeing it unmaps it, and
 * the next one costs a page fault and a cleared page per 4 KiB on first
 * touch.  A process that moves data through such buffers one after
 * another (an agent's 16 MiB batches) spent more CPU on those faults than
 * on hashing.  With the cache enabled, freed large blocks are kept, up to
 * a bound, and handed out again; blocks idle for a while are given back,
 * but for a floor of the newest that an idle process may keep, so that
 * its next burst starts on memory it touched already.
 *
 * Disabled by default: then spare_alloc() is malloc() and spare_free() is
 * free().  Every block is malloc'd memory either way, so whatever came
 * from spare_alloc() may be passed to free() and any malloc'd pointer to
 * spare_free().  Thread-safe: one mutex, taken a few times per buffer.
 */
#ifndef TENBIN_UTIL_SPARE_H
#define TENBIN_UTIL_SPARE_H

#include <stddef.h>

/* Blocks smaller than this are never kept (malloc's own bins do well). */
#define SPARE_MIN ((size_t)1 << 20)

/* Keep at most max_bytes of freed blocks (0: keep none, free those kept). */
void spare_enable(size_t max_bytes);
/* A block of at least need bytes (new: free with spare_free() or free());
 * *got (may be NULL) is its usable size.  Aborts when out of memory, as
 * xmalloc() does. */
void *spare_alloc(size_t need, size_t *got);
/* Keep p for reuse when the cache has room, else free it.  NULL-safe. */
void spare_free(void *p);
/* Free the blocks kept for more than idle_ms, except the newest ones
 * that fit in keep_bytes in all; every block with (0, 0). */
void spare_trim(unsigned idle_ms, size_t keep_bytes);
/* Bytes of blocks kept now. */
size_t spare_bytes(void);

#endif
