/*
 * Test data for the sync tests: seeded xorshift64 bytes, the same on
 * every run and host, so that content-defined cut points (pinned in
 * test_sync_chunk) and segment layouts do not vary between runs.
 */
#ifndef TENBIN_TESTS_SEEDED_BYTES_H
#define TENBIN_TESTS_SEEDED_BYTES_H

#include <stddef.h>
#include <stdint.h>

static inline void
fill_random(uint8_t *p, size_t n, uint64_t seed)
{
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;

  for (size_t i = 0; i < n; i++) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    p[i] = (uint8_t)(s >> 24);
  }
}

#endif
