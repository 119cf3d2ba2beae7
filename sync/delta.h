/*
 * The block-delta engine: librsync signatures, deltas and patches over
 * file descriptors, one segment at a time.
 *
 * A large file is handled as independent segments (cut by content,
 * sync/chunk.h): the source computes each segment's delta against the
 * signature of the destination's whole old file, so segments can be
 * computed, sent, patched and verified in parallel and a cut transfer
 * resumes per segment.  A delta is computed with one signature block of
 * context on each side, so data never loses a match at a segment
 * boundary, whatever the boundary's offset.
 *
 * Every function is synchronous and thread-safe (no shared state; a
 * struct delta_sig belongs to one thread at a time) and meant for the
 * thread pool.  Memory is bounded: file data is streamed through fixed
 * buffers (DELTA_IO_BUF), and an output buffer never holds more than one
 * segment's delta or data (capped by the caller's struct buf).
 */
#ifndef TENBIN_SYNC_DELTA_H
#define TENBIN_SYNC_DELTA_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "util/err.h"

#define DELTA_IO_BUF ((size_t)1 << 20)

/* Block length for a basis file of this size: a power of two in
 * [2 KiB, 1 MiB] near sqrt(size) (librsync's rule). */
size_t delta_block_len(uint64_t size);

/*
 * Signature of the first size bytes of fd (read with pread, so the file
 * offset is untouched) appended to out, librsync header included.
 * ERR_TOO_LARGE when out's cap is reached.
 */
int delta_signature(int fd, uint64_t size, struct buf *out, struct err *e)
    WARN_UNUSED;
/* The same for the size bytes of fd at off, with the block length for a
 * file of that size (finer than the whole file's). */
int delta_signature_range(int fd, uint64_t off, uint64_t size,
                          struct buf *out, struct err *e) WARN_UNUSED;

/* A signature loaded and indexed for computing deltas. */
struct delta_sig;

/* Load len bytes of signature (copied) into *out (new: delta_sig_free).
 * ERR_INVALID for bytes that are not a librsync signature. */
int delta_sig_load(const void *sig, size_t len, struct delta_sig **out,
                   struct err *e) WARN_UNUSED;
void delta_sig_free(struct delta_sig *s);

/*
 * Append to out the librsync delta that turns the basis described by sig
 * into the len bytes of fd at off, with the XXH3-128 (canonical
 * big-endian bytes) of what it read: per MANIFEST_FP_BLOCK into fp (one
 * entry per block from off) when fp is not NULL, else of the whole range
 * into xxh.  ERR_IO when fd is shorter than off + len.
 */
int delta_compute(struct delta_sig *sig, int fd, uint64_t off,
                  uint64_t len, struct buf *out, uint8_t xxh[16],
                  uint8_t (*fp)[16], struct err *e) WARN_UNUSED;
/*
 * delta_compute for a segment (off is its start, where its fingerprint
 * blocks start) when the caller knows, from the destination's fingerprints,
 * that block i (from off) equals the basis' bytes at offset from[i]:
 * those become COPY commands without being read.  Every block with
 * from[i] == DELTA_READ is read, delta'd and checked against fp[i] (its
 * fingerprint when published): ERR_CONFLICT with *bad = i when it
 * differs.  out unchanged on error.
 */
#define DELTA_READ UINT64_MAX
int delta_compute_blocks(struct delta_sig *sig, int fd, uint64_t off,
                         uint64_t len, const uint64_t *from,
                         const uint8_t (*fp)[16], struct buf *out,
                         uint64_t *bad, struct err *e) WARN_UNUSED;
/* Add add to the basis position of every COPY of the delta at out[at..]
 * (one computed against the signature of a range that starts at add), so
 * it applies to the whole basis.  ERR_TOO_LARGE past out's cap. */
int delta_rebase(struct buf *out, size_t at, uint64_t add, struct err *e)
    WARN_UNUSED;
/* Append the len bytes of fd at off to out (literal), with their sums as
 * delta_compute's.  ERR_IO when fd is shorter. */
int delta_read(int fd, uint64_t off, uint64_t len, struct buf *out,
               uint8_t xxh[16], uint8_t (*fp)[16], struct err *e)
    WARN_UNUSED;

/*
 * The destination's functions sum what they write in the same pass:
 * SHA-256 into sha, and into fp the XXH3-128 (canonical bytes) of each
 * MANIFEST_FP_BLOCK of the range from its start (a segment's
 * fingerprints; fp has room for one entry per block).  A NULL output
 * skips that sum.
 *
 * Apply len bytes of delta with basis_fd (-1 when there is no basis: a
 * COPY is then an error) and write the result with pwrite at out_off of
 * out_fd; the result must be exactly expect_len bytes.  ERR_INVALID for
 * a corrupt delta or a wrong length; ERR_IO naming ENOSPC, EFBIG (a file
 * size limit) or another write error.
 */
int delta_patch(int basis_fd, const void *delta, size_t len, int out_fd,
                uint64_t out_off, uint64_t expect_len, uint8_t sha[32],
                uint8_t (*fp)[16], struct err *e) WARN_UNUSED;
/* pwrite len bytes of data at out_off of out_fd; errors as delta_patch. */
int delta_write(int out_fd, uint64_t out_off, const void *data, size_t len,
                uint8_t sha[32], uint8_t (*fp)[16], struct err *e)
    WARN_UNUSED;
/* Copy len bytes of in at in_off to out_off of out (a segment equal to
 * one of the old file's, wherever it sat there).  ERR_INVALID when in is
 * shorter or shrinks while read; write errors as delta_patch. */
int delta_copy(int in, uint64_t in_off, int out, uint64_t out_off,
               uint64_t len, uint8_t sha[32], uint8_t (*fp)[16],
               struct err *e) WARN_UNUSED;
/* Sums of len bytes of fd at off (re-verifying staged data). */
int delta_hash_range(int fd, uint64_t off, uint64_t len, uint8_t sha[32],
                     uint8_t (*fp)[16], struct err *e) WARN_UNUSED;

#endif
