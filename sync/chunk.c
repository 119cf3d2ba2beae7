/*
 * The gear hash (a shift and an add per byte) finds candidates at about
 * 1.5 GB/s on one core; only the part of a segment past its minimum
 * length is scanned.
 */
#include "chunk.h"

#include <errno.h>
#include <pthread.h>
#include <unistd.h>

static uint64_t gear[256];
static pthread_once_t gear_once = PTHREAD_ONCE_INIT;

/* The table is fixed by the format: splitmix64 from the seed "tenbin-1",
 * so it needs no 2 KiB literal and cannot be mistyped. */
static void
gear_init(void)
{
  uint64_t x = 0x74656e62696e2d31ull;

  for (int i = 0; i < 256; i++) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    gear[i] = z ^ (z >> 31);
  }
}

/* The top bits: each byte's contribution has shifted out of the 64-bit
 * hash after 64 more bytes, so they depend on the last 64 bytes only
 * (the low bits would depend on the last few). */
#define CHUNK_MASK (~(uint64_t)0 << (64 - CHUNK_BITS))

static void
gear_feed(uint64_t *h, const uint8_t *p, size_t n)
{
  uint64_t x = *h;

  for (size_t i = 0; i < n; i++)
    x = (x << 1) + gear[p[i]];
  *h = x;
}

static size_t
scan_one(uint64_t *h, const uint8_t *p, size_t n)
{
  uint64_t x = *h;

  for (size_t i = 0; i < n; i++) {
    x = (x << 1) + gear[p[i]];
    if ((x & CHUNK_MASK) == 0) {
      *h = x;
      return i + 1;
    }
  }
  *h = x;
  return 0;
}

/*
 * Each byte's step waits for the last one's, so one hash runs at about a
 * byte per two cycles.  Two halves of the buffer are hashed side by side
 * instead: the second half's hash starts CHUNK_WINDOW bytes before it and
 * is then exactly the hash of the whole stream there (older bytes have
 * shifted out), so the answer is the same as scan_one's.
 */
size_t
chunk_scan(uint64_t *h, const uint8_t *p, size_t n)
{
  size_t half = n / 2, hit_b = 0;
  uint64_t x = *h, y = 0, y_hit = 0;

  pthread_once(&gear_once, gear_init);
  if (n < 4 * CHUNK_WINDOW)
    return scan_one(h, p, n);
  gear_feed(&y, p + half - CHUNK_WINDOW, CHUNK_WINDOW);
  for (size_t i = 0; i < half; i++) {
    x = (x << 1) + gear[p[i]];
    y = (y << 1) + gear[p[half + i]];
    if (((x & CHUNK_MASK) == 0) | ((y & CHUNK_MASK) == 0)) {
      if ((x & CHUNK_MASK) == 0) {
        *h = x;
        return i + 1;
      }
      if (hit_b == 0) {
        hit_b = half + i + 1;
        y_hit = y;
      }
    }
  }
  if (hit_b != 0) {
    *h = y_hit;
    return hit_b;
  }
  /* The second half is one byte longer when n is odd. */
  *h = y;
  return n - 2 * half == 0 ? 0 : scan_one(h, p + 2 * half, 1) == 0
                                     ? 0 : n;
}

int
chunk_cut(int fd, uint64_t off, uint64_t size, uint8_t *buf, size_t buflen,
          uint64_t *end)
{
  uint64_t limit = size - off > CHUNK_MAX ? off + CHUNK_MAX : size;
  uint64_t at = off + CHUNK_MIN - CHUNK_WINDOW, h = 0;

  pthread_once(&gear_once, gear_init);
  if (size - off <= CHUNK_MIN) {
    *end = size;
    return 0;
  }
  /* The first CHUNK_WINDOW bytes only fill the hash: no cut before
   * off + CHUNK_MIN. */
  while (at < limit) {
    size_t want = limit - at < buflen ? (size_t)(limit - at) : buflen;
    size_t skip = 0, hit;
    ssize_t r = pread(fd, buf, want, (off_t)at);

    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return r < 0 ? errno : -1;
    if (at < off + CHUNK_MIN) {
      skip = (size_t)(off + CHUNK_MIN - at);
      if (skip > (size_t)r)
        skip = (size_t)r;
      gear_feed(&h, buf, skip);
    }
    hit = chunk_scan(&h, buf + skip, (size_t)r - skip);
    if (hit != 0) {
      *end = at + skip + hit;
      return 0;
    }
    at += (uint64_t)r;
  }
  *end = limit;
  return 0;
}
