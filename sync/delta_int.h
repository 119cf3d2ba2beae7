/*
 * Shared by delta.c and delta_inplace.c: writing librsync's delta
 * format (a delta is the magic, commands, and an END byte; each writer
 * appends to out and returns ERR_TOO_LARGE, e set and out unchanged by
 * that call, past out's cap), and reading exactly.
 */
#ifndef TENBIN_SYNC_DELTA_INT_H
#define TENBIN_SYNC_DELTA_INT_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "util/err.h"

int delta_put_magic(struct buf *out, struct err *e) WARN_UNUSED;
/* A COPY of len (< 2^32) bytes at pos of the basis. */
int delta_put_copy(struct buf *out, uint64_t pos, uint64_t len,
                   struct err *e) WARN_UNUSED;
/* A LITERAL of the n bytes at p. */
int delta_put_literal(struct buf *out, const void *p, size_t n,
                      struct err *e) WARN_UNUSED;
int delta_put_end(struct buf *out, struct err *e) WARN_UNUSED;
/* nb blocks of bl bytes (the last one last bytes) at pos of both the
 * basis and the new file, whose bytes are at data: a COPY for each run
 * of blocks equal in the basis (eq[k]), a LITERAL for each other run. */
int delta_put_runs(struct buf *out, const uint8_t *eq, size_t nb,
                   uint64_t bl, uint64_t pos, uint64_t last,
                   const uint8_t *data, struct err *e) WARN_UNUSED;

/* pread exactly n bytes at off (EINTR retried); ERR_IO naming the
 * offset when fd is shorter or the read fails. */
int delta_read_exact(int fd, void *p, size_t n, uint64_t off,
                     struct err *e) WARN_UNUSED;

#endif
