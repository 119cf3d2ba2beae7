/*
 * Batch frames (see wire.h).  Integers are written and read a byte at
 * a time, so the format is little-endian on any host and a header never
 * needs an aligned address.
 */
#include <string.h>

#include "sync/wire.h"

void
wire_put_le32(uint8_t *p, uint32_t v)
{
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

uint32_t
wire_get_le32(const uint8_t *p)
{
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

void
wire_put_le64(uint8_t *p, uint64_t v)
{
  wire_put_le32(p, (uint32_t)v);
  wire_put_le32(p + 4, (uint32_t)(v >> 32));
}

uint64_t
wire_get_le64(const uint8_t *p)
{
  return (uint64_t)wire_get_le32(p) | (uint64_t)wire_get_le32(p + 4) << 32;
}

int
wire_put_header(struct buf *b, uint32_t kind, uint32_t file, uint32_t seg,
                uint32_t len)
{
  uint8_t h[WIRE_HDR_LEN];

  wire_put_le32(h, kind);
  wire_put_le32(h + 4, file);
  wire_put_le32(h + 8, seg);
  wire_put_le32(h + 12, len);
  return buf_add(b, h, sizeof(h));
}

int
wire_put(struct buf *b, uint32_t kind, uint32_t file, uint32_t seg,
         const void *payload, uint32_t len)
{
  int rc;

  /* Check the whole frame first, so a frame is never half appended. */
  if ((size_t)len + WIRE_HDR_LEN > b->max - b->len)
    return ERR_TOO_LARGE;
  rc = wire_put_header(b, kind, file, seg, len);
  if (rc == 0 && len > 0)
    rc = buf_add(b, payload, len);
  return rc;
}

int
wire_next(const void *body, size_t len, size_t *pos, struct wire_frame *f,
          struct err *e)
{
  const uint8_t *p = body;
  size_t at = *pos;

  if (at == len)
    return 0;
  /* Compare against what is left, never at + n, which could wrap. */
  if (at > len || len - at < WIRE_HDR_LEN)
    return err_set(e, ERR_INVALID, "batch: frame header at offset %zu "
                   "runs past the end (%zu bytes)", at, len);
  p += at;
  f->kind = wire_get_le32(p);
  f->file = wire_get_le32(p + 4);
  f->seg = wire_get_le32(p + 8);
  f->len = wire_get_le32(p + 12);
  if (f->len > len - at - WIRE_HDR_LEN)
    return err_set(e, ERR_INVALID, "batch: frame at offset %zu claims %u "
                   "payload bytes, %zu are left", at, f->len,
                   len - at - WIRE_HDR_LEN);
  f->payload = p + WIRE_HDR_LEN;
  *pos = at + WIRE_HDR_LEN + f->len;
  return 1;
}
