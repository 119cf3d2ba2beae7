/*
 * Reading a range of a file without copying it: through a read-only
 * mapping, so that hashing or writing the bytes elsewhere reads the page
 * cache directly (pread's copy into a buffer was ~0.4 s of a core per
 * 2 GiB here, a third of what publishing a large file costs).
 *
 * A mapped file that shrinks under its reader raises SIGBUS on the pages
 * past its new end.  The bytes are handed to the caller's function under
 * a guard that turns that SIGBUS, on that thread, into ERR_IO for the
 * call; SIGBUS anywhere else keeps its meaning (the handler installed
 * before, or the default action).  Where the file cannot be mapped the
 * bytes go through pread and a buffer, with the same calls.
 *
 * The function may be abandoned at any instruction (when a page it reads
 * is gone): it must not allocate, lock, or leave shared state half
 * changed.  Hashing into a context the caller then drops, and write(2)
 * (which fails with EFAULT rather than raising SIGBUS) are fine.
 *
 * Thread-safe: the guard is per thread.
 */
#ifndef TENBIN_UTIL_MAPREAD_H
#define TENBIN_UTIL_MAPREAD_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

/* Bytes handed to fn per call: at most this, fewer at the range's end. */
#define MAPREAD_CHUNK ((size_t)1 << 20)

/*
 * Call fn(arg, p, n) on the bytes of [off, off+len) of fd, in order, in
 * chunks that start at off + k x MAPREAD_CHUNK.  0; fn's negative
 * return (the walk stops there; fn puts its own error in e);
 * ERR_CONFLICT when the file is shorter than off+len or shrank while it
 * was read (it changed under the reader); ERR_IO when a read fails.
 */
int mapread(int fd, uint64_t off, uint64_t len,
            int (*fn)(void *arg, const uint8_t *p, size_t n), void *arg,
            struct err *e) WARN_UNUSED;

#endif
