/*
 * Content-defined segment boundaries (docs/SYNC.md "Segments").
 *
 * A large file is cut where its content says, not every 16 MiB, so an
 * insert or a delete moves only the boundaries next to it: every later
 * segment keeps its bytes, its SHA-256 and its fingerprints, and neither
 * side hashes the shifted rest of the file again.
 *
 * The cut rule is part of manifest format 2: a segment that starts at s
 * ends at the first e in (s + MIN, s + MAX] where the gear hash of the 64
 * bytes before e has its top CHUNK_BITS bits zero, else at s + MAX, else
 * at the end of the file.  The hash is started afresh 64 bytes before
 * s + MIN, so a segment's end depends only on the bytes from s: the same
 * bytes anywhere in any file are cut the same way.
 *
 * Pure functions, no state between calls: thread-safe.
 */
#ifndef TENBIN_SYNC_CHUNK_H
#define TENBIN_SYNC_CHUNK_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

/* At most 16 MiB, the unit of a batch and of the memory it holds; at
 * least 4 MiB, so per-segment work stays small beside the data. */
#define CHUNK_MIN ((uint64_t)4 << 20)
#define CHUNK_MAX ((uint64_t)16 << 20)
/* A candidate every 2^22 bytes on average: segments of ~7.8 MiB. */
#define CHUNK_BITS 22
/* Bytes the hash at a position depends on. */
#define CHUNK_WINDOW 64

/*
 * Feed n bytes at p to the hash *h; the number of bytes consumed up to
 * and including the first candidate (its cut is right after it), or 0
 * when there is none in them (then all were consumed).
 */
size_t chunk_scan(uint64_t *h, const uint8_t *p, size_t n);

/*
 * The end of the segment that starts at off of a file of size bytes
 * (off < size), reading it with pread through buf (buflen bytes, at
 * least 64 KiB).  0, or the errno of a failed read (-1 for a short one).
 */
int chunk_cut(int fd, uint64_t off, uint64_t size, uint8_t *buf,
              size_t buflen, uint64_t *end) WARN_UNUSED;

#endif
