/*
 * Fixed inputs that fuzz targets and make_seeds.c share: a seed made
 * against one of them is only useful when the target uses the same one.
 */
#ifndef TENBIN_FUZZ_FIXTURES_H
#define TENBIN_FUZZ_FIXTURES_H

#include <stddef.h>
#include <stdint.h>

/* The base version of fuzz_manifest_delta (seed deltas name its id). */
#define FX_H1 "1111111111111111111111111111111111111111111111111111111111111111"
#define FX_H2 "2222222222222222222222222222222222222222222222222222222222222222"
#define FX_FILE(p, size, sha)                                              \
  "{\"mode\":420,\"mtime_ns\":7,\"path\":\"" p "\",\"sha256\":\"" sha     \
  "\",\"size\":" #size ",\"type\":\"file\"}"
#define FX_DIR(p, mode) "{\"mode\":" #mode ",\"path\":\"" p "\",\"type\":\"dir\"}"
#define FX_LINK(p, t) "{\"path\":\"" p "\",\"target\":\"" t "\",\"type\":\"link\"}"
#define FX_DOC(entries) "{\"entries\":[" entries "],\"format\":2}"

static const char fx_base_manifest[] = FX_DOC(
    FX_DIR("a", 493) "," FX_FILE("a/f1", 3, FX_H1) ","
    FX_FILE("a/f2", 10, FX_H2) "," FX_LINK("a/l", "f1") ","
    FX_DIR("b", 448) "," FX_FILE("b/x", 0, FX_H1) ","
    FX_FILE("c", 4096, FX_H2));

/* The basis file of fuzz_wire: FX_BASIS_LEN bytes of xorshift32. */
#define FX_BASIS_LEN (64 * 1024)

static inline void
fx_basis(uint8_t *out)
{
  uint32_t x = 2463534242u;

  for (size_t i = 0; i < FX_BASIS_LEN; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    out[i] = (uint8_t)x;
  }
}

#endif
