/*
 * Frames of a batch (docs/SYNC.md "Batch wire format"): a 16-byte
 * little-endian header (kind, file, seg, len) and len payload bytes.
 *
 * Requests and answers are one HTTP body each; framing them ourselves
 * lets one round trip carry many files' signatures and deltas, which is
 * what makes small files cheap over a long link.
 */
#ifndef TENBIN_SYNC_WIRE_H
#define TENBIN_SYNC_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "util/err.h"

#define WIRE_HDR_LEN 16
/* A BLOCKS payload entry: XXH3-128 of a basis block, u64 its offset. */
#define WIRE_FP_ENTRY 24

enum wire_kind {
  WIRE_SIG = 1,
  WIRE_SIGREF = 2,
  WIRE_SEG = 3,
  WIRE_BLOCKS = 4,
  WIRE_SIGRANGE = 5,
  WIRE_DELTA = 16,
  WIRE_DATA = 17,
  WIRE_ERROR = 18,
};

struct wire_frame {
  uint32_t kind, file, seg, len;
  const uint8_t *payload; /* borrowed from the body */
};

void wire_put_le32(uint8_t *p, uint32_t v);
uint32_t wire_get_le32(const uint8_t *p);
void wire_put_le64(uint8_t *p, uint64_t v);
uint64_t wire_get_le64(const uint8_t *p);

/* Append one frame (header and payload copied) to b; ERR_TOO_LARGE past
 * b's cap, b unchanged then. */
int wire_put(struct buf *b, uint32_t kind, uint32_t file, uint32_t seg,
             const void *payload, uint32_t len) WARN_UNUSED;
/* Append a header only, for a payload the caller appends itself. */
int wire_put_header(struct buf *b, uint32_t kind, uint32_t file,
                    uint32_t seg, uint32_t len) WARN_UNUSED;
/*
 * Read the frame at *pos of body (len bytes) into f and advance *pos.
 * Returns 1 for a frame, 0 at the clean end, ERR_INVALID for a header or
 * payload that runs past the end (naming the offset).
 */
int wire_next(const void *body, size_t len, size_t *pos,
              struct wire_frame *f, struct err *e) WARN_UNUSED;

#endif
